package webhooks

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

// +kubebuilder:webhook:path=/validate-metal3-io-v1alpha1-hostfirmwarecomponents,mutating=false,failurePolicy=fail,sideEffects=None,groups=metal3.io,resources=hostfirmwarecomponents,verbs=create;update,versions=v1alpha1,name=hostfirmwarecomponents.metal3.io,admissionReviewVersions=v1

// HostFirmwareComponentsValidator is the validating webhook of HostFirmwareComponents.
type HostFirmwareComponentsValidator struct{}

var _ admission.Validator[*metal3.HostFirmwareComponents] = &HostFirmwareComponentsValidator{}

// ValidateCreate rejects invalid firmware updates.
func (*HostFirmwareComponentsValidator) ValidateCreate(_ context.Context, hfc *metal3.HostFirmwareComponents) (admission.Warnings, error) {
	return nil, invalid("HostFirmwareComponents", hfc.Name, ValidateHostFirmwareComponents(hfc))
}

// ValidateUpdate rejects an update that introduces invalid firmware updates.
func (*HostFirmwareComponentsValidator) ValidateUpdate(_ context.Context, oldHFC, newHFC *metal3.HostFirmwareComponents) (admission.Warnings, error) {
	if newHFC.DeletionTimestamp != nil {
		return nil, nil // never block finalizer removal
	}
	return nil, invalid("HostFirmwareComponents", newHFC.Name, newErrors(ValidateHostFirmwareComponents(newHFC), ValidateHostFirmwareComponents(oldHFC)))
}

// ValidateDelete allows every delete.
func (*HostFirmwareComponentsValidator) ValidateDelete(context.Context, *metal3.HostFirmwareComponents) (admission.Warnings, error) {
	return nil, nil
}
