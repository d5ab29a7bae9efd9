package webhooks

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

// +kubebuilder:webhook:path=/validate-metal3-io-v1alpha1-bmceventsubscription,mutating=false,failurePolicy=fail,sideEffects=None,groups=metal3.io,resources=bmceventsubscriptions,verbs=create;update,versions=v1alpha1,name=bmceventsubscription.metal3.io,admissionReviewVersions=v1

// BMCEventSubscriptionValidator is the validating webhook of BMCEventSubscription.
type BMCEventSubscriptionValidator struct{}

var _ admission.Validator[*metal3.BMCEventSubscription] = &BMCEventSubscriptionValidator{}

// ValidateCreate rejects an invalid subscription.
func (*BMCEventSubscriptionValidator) ValidateCreate(_ context.Context, sub *metal3.BMCEventSubscription) (admission.Warnings, error) {
	return nil, invalid("BMCEventSubscription", sub.Name, ValidateBMCEventSubscription(sub))
}

// ValidateUpdate rejects any change of the spec.
func (*BMCEventSubscriptionValidator) ValidateUpdate(_ context.Context, oldSub, newSub *metal3.BMCEventSubscription) (admission.Warnings, error) {
	return nil, invalid("BMCEventSubscription", newSub.Name, ValidateBMCEventSubscriptionUpdate(oldSub, newSub))
}

// ValidateDelete allows every delete.
func (*BMCEventSubscriptionValidator) ValidateDelete(context.Context, *metal3.BMCEventSubscription) (admission.Warnings, error) {
	return nil, nil
}
