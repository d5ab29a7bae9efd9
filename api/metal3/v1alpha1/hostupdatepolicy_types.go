package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// UpdatePolicy says when a kind of update may be applied.
// +kubebuilder:validation:Enum=onPreparing;onReboot
type UpdatePolicy string

const (
	// HostUpdatePolicyOnPreparing applies updates only while preparing (no live updates). An
	// empty value means the same.
	HostUpdatePolicyOnPreparing UpdatePolicy = "onPreparing"
	// HostUpdatePolicyOnReboot applies updates to a provisioned host when it is rebooted through
	// the reboot annotation (servicing).
	HostUpdatePolicyOnReboot UpdatePolicy = "onReboot"
)

// HostUpdatePolicySpec says which live updates a host accepts.
type HostUpdatePolicySpec struct {
	// FirmwareSettings is the policy for HostFirmwareSettings changes.
	// +optional
	FirmwareSettings UpdatePolicy `json:"firmwareSettings,omitempty"`

	// FirmwareUpdates is the policy for HostFirmwareComponents updates.
	// +optional
	FirmwareUpdates UpdatePolicy `json:"firmwareUpdates,omitempty"`
}

// HostUpdatePolicyStatus is empty: the policy has no controller.
type HostUpdatePolicyStatus struct{}

// HostUpdatePolicy opts the BareMetalHost of the same name in to live updates. Without one, or
// with empty fields, updates happen only while preparing. RBAC on this kind decides who may allow
// live updates.
// +kubebuilder:object:root=true
type HostUpdatePolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   HostUpdatePolicySpec   `json:"spec,omitempty"`
	Status HostUpdatePolicyStatus `json:"status,omitempty"`
}

// HostUpdatePolicyList is a list of HostUpdatePolicies.
// +kubebuilder:object:root=true
type HostUpdatePolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []HostUpdatePolicy `json:"items"`
}

func init() {
	register(&HostUpdatePolicy{}, &HostUpdatePolicyList{})
}
