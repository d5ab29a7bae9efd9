package webhooks

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

// failurePolicy is Fail, unlike the cluster baremetal operator's Ignore: with Ignore, its webhook
// had no handler registered for years and every write silently passed.
// +kubebuilder:webhook:path=/validate-metal3-io-v1alpha1-provisioning,mutating=false,failurePolicy=fail,sideEffects=None,groups=metal3.io,resources=provisionings,verbs=create;update,versions=v1alpha1,name=provisioning.metal3.io,admissionReviewVersions=v1

// ProvisioningValidator is the validating webhook of the cluster-scoped Provisioning.
type ProvisioningValidator struct{}

var _ admission.Validator[*metal3.Provisioning] = &ProvisioningValidator{}

// ValidateCreate rejects an invalid Provisioning, or one not named provisioning-configuration.
func (*ProvisioningValidator) ValidateCreate(_ context.Context, prov *metal3.Provisioning) (admission.Warnings, error) {
	return nil, invalid("Provisioning", prov.Name, ValidateProvisioningCreate(prov))
}

// ValidateUpdate rejects an update that makes the Provisioning invalid.
func (*ProvisioningValidator) ValidateUpdate(_ context.Context, oldProv, newProv *metal3.Provisioning) (admission.Warnings, error) {
	if newProv.DeletionTimestamp != nil {
		return nil, nil // never block finalizer removal
	}
	return nil, invalid("Provisioning", newProv.Name, newErrors(ValidateProvisioning(newProv), ValidateProvisioning(oldProv)))
}

// ValidateDelete allows every delete.
func (*ProvisioningValidator) ValidateDelete(context.Context, *metal3.Provisioning) (admission.Warnings, error) {
	return nil, nil
}
