package webhooks

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

// SetupWithManager registers every metal3.io validating webhook with the manager's webhook
// server, at the paths of the +kubebuilder:webhook markers (controller-runtime derives the same
// /validate-metal3-io-v1alpha1-<kind> paths from the types).
func SetupWithManager(mgr ctrl.Manager) error {
	if err := ctrl.NewWebhookManagedBy(mgr, &metal3.BareMetalHost{}).
		WithValidator(&BareMetalHostValidator{}).Complete(); err != nil {
		return fmt.Errorf("registering the BareMetalHost webhook: %w", err)
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &metal3.BMCEventSubscription{}).
		WithValidator(&BMCEventSubscriptionValidator{}).Complete(); err != nil {
		return fmt.Errorf("registering the BMCEventSubscription webhook: %w", err)
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &metal3.HostFirmwareComponents{}).
		WithValidator(&HostFirmwareComponentsValidator{}).Complete(); err != nil {
		return fmt.Errorf("registering the HostFirmwareComponents webhook: %w", err)
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &metal3.Provisioning{}).
		WithValidator(&ProvisioningValidator{}).Complete(); err != nil {
		return fmt.Errorf("registering the Provisioning webhook: %w", err)
	}
	return nil
}

// invalid turns a non-empty error list into the API's Invalid status (HTTP 422) with one cause
// per field error; the API server passes it on to the client. nil when errs is empty.
func invalid(kind, name string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(schema.GroupKind{Group: metal3.GroupVersion.Group, Kind: kind}, name, errs)
}
