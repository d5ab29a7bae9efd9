package webhooks

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

// +kubebuilder:webhook:path=/validate-metal3-io-v1alpha1-baremetalhost,mutating=false,failurePolicy=fail,sideEffects=None,groups=metal3.io,resources=baremetalhosts,verbs=create;update,versions=v1alpha1,name=baremetalhost.metal3.io,admissionReviewVersions=v1

// BareMetalHostValidator is the validating webhook of BareMetalHost.
type BareMetalHostValidator struct{}

var _ admission.Validator[*metal3.BareMetalHost] = &BareMetalHostValidator{}

// ValidateCreate rejects an invalid host.
func (*BareMetalHostValidator) ValidateCreate(_ context.Context, host *metal3.BareMetalHost) (admission.Warnings, error) {
	return annotationWarnings(nil, host), invalid("BareMetalHost", host.Name, ValidateBareMetalHost(host))
}

// ValidateUpdate rejects an update that makes the host invalid or breaks a transition rule.
func (*BareMetalHostValidator) ValidateUpdate(_ context.Context, oldHost, newHost *metal3.BareMetalHost) (admission.Warnings, error) {
	if newHost.DeletionTimestamp != nil {
		// Never block finalizer removal with the spec's errors; the transition rules still hold
		// (a BMC address changed during deprovisioning would clean another machine).
		return nil, invalid("BareMetalHost", newHost.Name, validateTransitions(oldHost, newHost))
	}
	return annotationWarnings(oldHost, newHost), invalid("BareMetalHost", newHost.Name, ValidateBareMetalHostUpdate(oldHost, newHost))
}

// ValidateDelete allows every delete.
func (*BareMetalHostValidator) ValidateDelete(context.Context, *metal3.BareMetalHost) (admission.Warnings, error) {
	return nil, nil
}
