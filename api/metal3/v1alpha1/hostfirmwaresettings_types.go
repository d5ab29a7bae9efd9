package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// SettingsMap is firmware settings as read from a host, by name.
type SettingsMap map[string]string

// DesiredSettingsMap is firmware settings to apply, by name; values are strings or integers.
type DesiredSettingsMap map[string]intstr.IntOrString

// SchemaReference names a FirmwareSchema.
type SchemaReference struct {
	// Namespace of the FirmwareSchema.
	Namespace string `json:"namespace"`
	// Name of the FirmwareSchema.
	Name string `json:"name"`
}

// HostFirmwareSettingsSpec is the firmware settings to apply.
type HostFirmwareSettingsSpec struct {
	// Settings to apply, by name. Applied while preparing, or on reboot of a provisioned host when
	// its HostUpdatePolicy allows. Integers must fit 32 bits (the API type's): a larger one would be
	// stored and then fail to decode in every client, breaking all lists of HostFirmwareSettings.
	// +kubebuilder:validation:MaxProperties=1024
	// +kubebuilder:validation:XValidation:rule="self.all(k, type(self[k]) == string || (self[k] >= -2147483648 && self[k] <= 2147483647))",message="integer values must be between -2147483648 and 2147483647; write a larger number as a string"
	Settings DesiredSettingsMap `json:"settings"`
}

// HostFirmwareSettingsStatus is the firmware settings read from the host.
type HostFirmwareSettingsStatus struct {
	// FirmwareSchema names the schema the settings are checked against.
	FirmwareSchema *SchemaReference `json:"schema,omitempty"`

	// Settings are the current settings, by name.
	Settings SettingsMap `json:"settings"`

	// LastUpdated is when the settings were last read.
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

// HostFirmwareSettings holds the desired and current BIOS settings of the BareMetalHost of the
// same name.
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=hfs
// +kubebuilder:subresource:status
type HostFirmwareSettings struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   HostFirmwareSettingsSpec   `json:"spec,omitempty"`
	Status HostFirmwareSettingsStatus `json:"status,omitempty"`
}

// HostFirmwareSettingsList is a list of HostFirmwareSettings.
// +kubebuilder:object:root=true
type HostFirmwareSettingsList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []HostFirmwareSettings `json:"items"`
}

func init() {
	register(&HostFirmwareSettings{}, &HostFirmwareSettingsList{})
}
