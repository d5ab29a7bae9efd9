package webhooks

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

// failurePolicy is Fail, unlike the cluster baremetal operator's Ignore: with Ignore, its webhook
// had no handler registered for years and every write silently passed.
// +kubebuilder:webhook:path=/validate-metal3-io-v1alpha1-provisioning,mutating=false,failurePolicy=fail,sideEffects=None,groups=metal3.io,resources=provisionings,verbs=create;update,versions=v1alpha1,name=provisioning.metal3.io,admissionReviewVersions=v1

// PlatformModes tells the webhook the cluster's platform and the provisioning network modes it
// supports (the cluster-baremetal-operator reads them from the Infrastructure object).
type PlatformModes func(ctx context.Context) (platform string, modes []metal3.ProvisioningNetwork, err error)

// ProvisioningValidator is the validating webhook of the cluster-scoped Provisioning.
type ProvisioningValidator struct {
	// Platform, when set, adds the platform's rule on the network mode (ValidateProvisioningOn).
	// The baremetal-operator leaves it nil: it does not know the platform.
	Platform PlatformModes
}

var _ admission.Validator[*metal3.Provisioning] = &ProvisioningValidator{}

// ValidateCreate rejects an invalid Provisioning, or one not named provisioning-configuration.
func (v *ProvisioningValidator) ValidateCreate(ctx context.Context, prov *metal3.Provisioning) (admission.Warnings, error) {
	errs, err := v.validate(ctx, prov)
	if err != nil {
		return nil, err
	}
	return provisioningWarnings(nil, prov), invalid("Provisioning", prov.Name, append(validateProvisioningName(prov), errs...))
}

// ValidateUpdate rejects an update that makes the Provisioning invalid.
func (v *ProvisioningValidator) ValidateUpdate(ctx context.Context, oldProv, newProv *metal3.Provisioning) (admission.Warnings, error) {
	if newProv.DeletionTimestamp != nil {
		return nil, nil // never block finalizer removal
	}
	now, err := v.validate(ctx, newProv)
	if err != nil {
		return nil, err
	}
	before, err := v.validate(ctx, oldProv)
	if err != nil {
		return nil, err
	}
	return provisioningWarnings(oldProv, newProv), invalid("Provisioning", newProv.Name, newErrors(now, before))
}

// ValidateDelete allows every delete.
func (*ProvisioningValidator) ValidateDelete(context.Context, *metal3.Provisioning) (admission.Warnings, error) {
	return nil, nil
}

func (v *ProvisioningValidator) validate(ctx context.Context, prov *metal3.Provisioning) (field.ErrorList, error) {
	if v.Platform == nil {
		return ValidateProvisioning(prov), nil
	}
	platform, modes, err := v.Platform(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the cluster's platform to validate Provisioning %s: %w", prov.Name, err)
	}
	return ValidateProvisioningOn(prov, platform, modes), nil
}

// provisioningWarnings: a Managed or Unmanaged network without provisioningInterface or
// provisioningMacAddresses is valid (the Ironic runner uses the interface that already holds the
// provisioning IP, and stacks run that way), but it starts only on a node where something else
// put that IP on an interface: said back when the update makes it so (nil oldProv on create).
func provisioningWarnings(oldProv, newProv *metal3.Provisioning) admission.Warnings {
	var warnings admission.Warnings
	noInterface := func(p *metal3.Provisioning) bool {
		mode := ProvisioningNetworkMode(&p.Spec)
		return (mode == metal3.ProvisioningNetworkManaged || mode == metal3.ProvisioningNetworkUnmanaged) &&
			p.Spec.ProvisioningInterface == "" && len(p.Spec.ProvisioningMacAddresses) == 0
	}
	if noInterface(newProv) && (oldProv == nil || !noInterface(oldProv)) {
		warnings = append(warnings, "spec.provisioningInterface: neither it nor spec.provisioningMacAddresses is set: "+
			"the metal3 pod starts only on a node where an interface already holds spec.provisioningIP")
	}
	exporter := func(p *metal3.Provisioning) bool {
		return p.Spec.PrometheusExporter != nil && p.Spec.PrometheusExporter.Enabled
	}
	if exporter(newProv) && (oldProv == nil || !exporter(oldProv)) {
		// Accepted for OpenShift's manifests; said at once rather than found missing later.
		warnings = append(warnings, "spec.prometheusExporter.enabled: this operator does not deploy the hardware sensor exporter; "+
			"the setting is kept and has no effect")
	}
	return warnings
}
