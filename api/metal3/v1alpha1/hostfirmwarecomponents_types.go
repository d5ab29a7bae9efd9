package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// FirmwareUpdate asks for one firmware component to be flashed.
type FirmwareUpdate struct {
	// Component is "bmc", "bios" or "nic:<id>".
	Component string `json:"component"`
	// URL is where the firmware image is downloaded from.
	URL string `json:"url"`
}

// FirmwareComponentStatus is the firmware version of one component.
type FirmwareComponentStatus struct {
	Component          string      `json:"component"`
	InitialVersion     string      `json:"initialVersion"`
	CurrentVersion     string      `json:"currentVersion,omitempty"`
	LastVersionFlashed string      `json:"lastVersionFlashed,omitempty"`
	UpdatedAt          metav1.Time `json:"updatedAt,omitempty"`
}

// HostFirmwareComponentsSpec is the firmware updates to apply.
type HostFirmwareComponentsSpec struct {
	// Updates to apply while preparing, or on reboot of a provisioned host when its
	// HostUpdatePolicy allows.
	Updates []FirmwareUpdate `json:"updates"`
}

// HostFirmwareComponentsStatus is the firmware versions read from the host.
type HostFirmwareComponentsStatus struct {
	// Updates are the updates last applied.
	// +optional
	Updates []FirmwareUpdate `json:"updates"`

	// Components are the host's firmware components and their versions.
	Components []FirmwareComponentStatus `json:"components,omitempty"`

	// LastUpdated is when the versions were last read.
	// +optional
	LastUpdated *metav1.Time `json:"lastUpdated,omitempty"`

	// Conditions: ChangeDetected and Valid.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchMergeKey=type
	// +patchStrategy=merge
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// HostFirmwareComponents holds the firmware versions and requested updates of the BareMetalHost
// of the same name.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
type HostFirmwareComponents struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   HostFirmwareComponentsSpec   `json:"spec,omitempty"`
	Status HostFirmwareComponentsStatus `json:"status,omitempty"`
}

// HostFirmwareComponentsList is a list of HostFirmwareComponents.
// +kubebuilder:object:root=true
type HostFirmwareComponentsList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []HostFirmwareComponents `json:"items"`
}

func init() {
	register(&HostFirmwareComponents{}, &HostFirmwareComponentsList{})
}
