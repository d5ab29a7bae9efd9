package v1alpha1

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Small helpers that metal3 clients rely on. Anything that decides what a host does next belongs
// to the state machine, not here.

// GetConditions returns the host's conditions.
func (host *BareMetalHost) GetConditions() []metav1.Condition {
	return host.Status.Conditions
}

// SetConditions replaces the host's conditions.
func (host *BareMetalHost) SetConditions(conditions []metav1.Condition) {
	host.Status.Conditions = conditions
}

// HasBMCDetails reports whether the host has an address or credentials for its BMC; a host
// without either stays unmanaged.
func (host *BareMetalHost) HasBMCDetails() bool {
	return host.Spec.BMC.Address != "" || host.Spec.BMC.CredentialsName != ""
}

// CredentialsKey is the name of the host's BMC credentials Secret (always in the host's
// namespace).
func (host *BareMetalHost) CredentialsKey() types.NamespacedName {
	return types.NamespacedName{Namespace: host.Namespace, Name: host.Spec.BMC.CredentialsName}
}

// BootMode returns spec.bootMode, or DefaultBootMode when it is empty (objects stored before the
// schema default existed).
func (host *BareMetalHost) BootMode() BootMode {
	if host.Spec.BootMode == "" {
		return DefaultBootMode
	}
	return host.Spec.BootMode
}

// OperationalStatus returns status.operationalStatus.
func (host *BareMetalHost) OperationalStatus() OperationalStatus {
	return host.Status.OperationalStatus
}

// InspectionDisabled reports whether inspection is disabled, by spec.inspectionMode or by the
// legacy inspect annotation.
func (host *BareMetalHost) InspectionDisabled() bool {
	if host.Spec.InspectionMode == InspectionModeDisabled {
		return true
	}
	return host.Annotations[InspectAnnotationPrefix] == InspectAnnotationValueDisabled
}

// WasProvisioned reports whether an image or custom deploy was put on the host by us (not
// externally).
func (host *BareMetalHost) WasProvisioned() bool {
	if host.Spec.ExternallyProvisioned {
		return false
	}
	return host.Status.Provisioning.Image.URL != "" || host.Status.Provisioning.CustomDeploy != nil
}

// OperationMetricForState returns the history entry recorded for a state, or nil for states
// without one.
func (host *BareMetalHost) OperationMetricForState(state ProvisioningState) *OperationMetric {
	history := &host.Status.OperationHistory
	switch state {
	case StateRegistering:
		return &history.Register
	case StateInspecting:
		return &history.Inspect
	case StateProvisioning:
		return &history.Provision
	case StateDeprovisioning:
		return &history.Deprovision
	default:
		return nil
	}
}

// Match reports whether the status refers to exactly this version of the Secret.
func (cs CredentialsStatus) Match(secret corev1.Secret) bool {
	return cs.Reference != nil &&
		cs.Reference.Name == secret.Name &&
		cs.Reference.Namespace == secret.Namespace &&
		cs.Version == secret.ResourceVersion
}

// Duration is how long the operation took; 0 while it has not started or not finished.
func (om OperationMetric) Duration() time.Duration {
	if om.Start.IsZero() || om.End.IsZero() {
		return 0
	}
	return om.End.Sub(om.Start.Time)
}
