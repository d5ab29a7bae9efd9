package webhooks

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

// +kubebuilder:webhook:path=/validate-metal3-io-v1alpha1-dataimage,mutating=false,failurePolicy=fail,sideEffects=None,groups=metal3.io,resources=dataimages,verbs=create;update,versions=v1alpha1,name=dataimage.metal3.io,admissionReviewVersions=v1

// DataImageValidator is the validating webhook of DataImage (metal3 has one since 2025): a URL
// edited to something unusable is refused at once, rather than accepted and reported in status
// while the host keeps the image it has.
type DataImageValidator struct{}

var _ admission.Validator[*metal3.DataImage] = &DataImageValidator{}

// ValidateCreate rejects a DataImage whose URL cannot be used.
func (*DataImageValidator) ValidateCreate(_ context.Context, di *metal3.DataImage) (admission.Warnings, error) {
	return nil, invalid("DataImage", di.Name, ValidateDataImage(di))
}

// ValidateUpdate rejects an update that makes the URL unusable (an object admitted before the
// webhook existed may keep its own problem, and its finalizer can always be removed).
func (*DataImageValidator) ValidateUpdate(_ context.Context, oldDI, newDI *metal3.DataImage) (admission.Warnings, error) {
	if newDI.DeletionTimestamp != nil {
		return nil, nil
	}
	return nil, invalid("DataImage", newDI.Name, newErrors(ValidateDataImage(newDI), ValidateDataImage(oldDI)))
}

// ValidateDelete allows every delete.
func (*DataImageValidator) ValidateDelete(context.Context, *metal3.DataImage) (admission.Warnings, error) {
	return nil, nil
}
