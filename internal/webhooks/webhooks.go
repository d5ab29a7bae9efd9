package webhooks

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/statustext"
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
	if err := ctrl.NewWebhookManagedBy(mgr, &metal3.DataImage{}).
		WithValidator(&DataImageValidator{}).Complete(); err != nil {
		return fmt.Errorf("registering the DataImage webhook: %w", err)
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &metal3.Provisioning{}).
		WithValidator(&ProvisioningValidator{}).Complete(); err != nil {
		return fmt.Errorf("registering the Provisioning webhook: %w", err)
	}
	return nil
}

// invalid turns a non-empty error list into the API's Invalid status (HTTP 422) with one cause
// per field error; the API server passes it on to the client. nil when errs is empty. Every
// value and detail goes through statustext.Redact first: the answer reaches the client, the
// API server's audit log and GitOps tools' status, and the values refused include image,
// firmware and event URLs with credentials in them (url.Parse's errors quote them too).
func invalid(kind, name string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(schema.GroupKind{Group: metal3.GroupVersion.Group, Kind: kind}, name, statustext.FieldErrors(errs))
}
