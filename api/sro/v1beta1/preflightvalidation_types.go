package v1beta1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// PreflightValidationSpec names the kernel of an upcoming upgrade.
type PreflightValidationSpec struct {
	// KernelVersion the nodes will run after the upgrade (as status.nodeInfo.kernelVersion will
	// report it). Every SpecialResource is checked for an image for it, and built when it has a
	// source.
	// +kubebuilder:validation:MinLength=1
	KernelVersion string `json:"kernelVersion"`
	// ClusterVersion the cluster will run after the upgrade (e.g. 4.15.2), for templates that use
	// ClusterVersion or ClusterVersionMajorMinor: a kernel first seen during the upgrade is
	// rendered with the upgrade's version. Unset, such a SpecialResource is not verified
	// (Unknown, naming this field): the current version would check another image.
	// +optional
	ClusterVersion string `json:"clusterVersion,omitempty"`
}

// VerificationStatus is the result of a SpecialResource's preflight check.
// +kubebuilder:validation:Enum=True;False;Error;Unknown
type VerificationStatus string

const (
	// VerificationTrue: the image for the kernel exists (or was just built).
	VerificationTrue VerificationStatus = "True"
	// VerificationFalse: no image yet (building, or no source to build it from).
	VerificationFalse VerificationStatus = "False"
	// VerificationError: the check failed (bad template, failed build, registry error).
	VerificationError VerificationStatus = "Error"
	// VerificationUnknown: not checked yet.
	VerificationUnknown VerificationStatus = "Unknown"
)

// SpecialResourceVerification is one SpecialResource's preflight result.
type SpecialResourceVerification struct {
	// Name of the SpecialResource.
	Name string `json:"name"`
	// VerificationStatus is True when the SpecialResource can serve the kernel.
	VerificationStatus VerificationStatus `json:"verificationStatus"`
	// StatusReason says why.
	// +optional
	StatusReason string `json:"statusReason,omitempty"`
	// Image is the driver image for the kernel.
	// +optional
	Image string `json:"image,omitempty"`
	// LastTransitionTime is when verificationStatus last changed.
	LastTransitionTime metav1.Time `json:"lastTransitionTime"`
}

// PreflightValidationStatus holds the result per SpecialResource.
type PreflightValidationStatus struct {
	// SRStatuses has one entry per SpecialResource (the special-resource-operator's name).
	// +optional
	// +listType=map
	// +listMapKey=name
	SRStatuses []SpecialResourceVerification `json:"srStatuses,omitempty"`
	// ObservedGeneration is the generation this status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready is True when every SpecialResource can serve the kernel.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Reasons of the PreflightValidation Ready condition.
const (
	// ReasonVerified: every SpecialResource has an image for the kernel.
	ReasonVerified = "Verified"
	// ReasonVerifying: some SpecialResource has no image yet (a build is running, or none can
	// be made); see status.srStatuses.
	ReasonVerifying = "Verifying"
)

// PreflightValidation checks, before an upgrade, that every SpecialResource has or can build a
// driver image for the upgrade's kernel. While one exists and not every SpecialResource passes,
// the operator's ClusterOperator reports Upgradeable=False. Delete it once the upgrade is done.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=pv
// +kubebuilder:printcolumn:name="Kernel",type=string,JSONPath=`.spec.kernelVersion`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type PreflightValidation struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PreflightValidationSpec   `json:"spec,omitempty"`
	Status PreflightValidationStatus `json:"status,omitempty"`
}

// PreflightValidationList is a list of PreflightValidations.
// +kubebuilder:object:root=true
type PreflightValidationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PreflightValidation `json:"items"`
}

func init() { register(&PreflightValidation{}, &PreflightValidationList{}) }
