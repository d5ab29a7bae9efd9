// Package webhook holds the special-resource-operator's admission webhooks (served by
// cmd/special-resource-operator with --webhook-port): SpecialResources are refused when
// validation.Spec finds a problem or dependsOn makes a cycle, naming the field, and
// PreflightValidations when their kernel is not a kernel version. The controller reports the
// same problems as an Errored condition for objects admitted while no webhook ran.
//
// The webhook configuration is config/sro/webhook/manifests.yaml, written by hand rather than
// generated from markers: `make generate` puts every marker of the module into the
// baremetal-operator's configuration, and this operator is deployed on its own.
package webhook

import (
	"context"
	"fmt"
	"regexp"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/sro/validation"
	"github.com/metalforge/metalforge/internal/statustext"
)

// SetupWithManager registers both webhooks with the manager's webhook server.
func SetupWithManager(mgr ctrl.Manager) error {
	if err := ctrl.NewWebhookManagedBy(mgr, &sro.SpecialResource{}).
		WithValidator(&SpecialResourceValidator{Reader: mgr.GetAPIReader()}).Complete(); err != nil {
		return fmt.Errorf("registering the SpecialResource webhook: %w", err)
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &sro.PreflightValidation{}).
		WithValidator(&PreflightValidationValidator{}).Complete(); err != nil {
		return fmt.Errorf("registering the PreflightValidation webhook: %w", err)
	}
	return nil
}

// SpecialResourceValidator validates SpecialResources.
type SpecialResourceValidator struct {
	// Reader lists SpecialResources to follow dependsOn (directly: the webhook must see what
	// was just created).
	Reader client.Reader
}

var _ admission.Validator[*sro.SpecialResource] = &SpecialResourceValidator{}

// ValidateCreate refuses an invalid SpecialResource.
func (v *SpecialResourceValidator) ValidateCreate(ctx context.Context, sr *sro.SpecialResource) (admission.Warnings, error) {
	errs, err := v.errors(ctx, sr)
	if err != nil {
		return nil, err
	}
	return nil, invalid("SpecialResource", sr.Name, errs)
}

// ValidateUpdate refuses an update that adds a problem. Problems the old object already had are
// let through, so that an object admitted while no webhook ran can still get its finalizer and
// be deleted (the controller reports them).
func (v *SpecialResourceValidator) ValidateUpdate(ctx context.Context, oldSR, newSR *sro.SpecialResource) (admission.Warnings, error) {
	if newSR.DeletionTimestamp != nil {
		return nil, nil
	}
	errs, err := v.errors(ctx, newSR)
	if err != nil {
		return nil, err
	}
	oldErrs, err := v.errors(ctx, oldSR)
	if err != nil {
		return nil, err
	}
	return nil, invalid("SpecialResource", newSR.Name, added(errs, oldErrs))
}

// ValidateDelete allows every delete.
func (*SpecialResourceValidator) ValidateDelete(context.Context, *sro.SpecialResource) (admission.Warnings, error) {
	return nil, nil
}

func (v *SpecialResourceValidator) errors(ctx context.Context, sr *sro.SpecialResource) (field.ErrorList, error) {
	errs := validation.Spec(sr)
	if len(sr.Spec.DependsOn) == 0 {
		return errs, nil
	}
	var all sro.SpecialResourceList
	if err := v.Reader.List(ctx, &all); err != nil {
		return nil, fmt.Errorf("listing SpecialResources to check dependsOn: %w", err)
	}
	byName := map[string]*sro.SpecialResource{}
	for i := range all.Items {
		byName[all.Items[i].Name] = &all.Items[i]
	}
	if ferr := validation.Cycle(sr, func(n string) (*sro.SpecialResource, bool) { s, ok := byName[n]; return s, ok }); ferr != nil {
		errs = append(errs, ferr)
	}
	return errs, nil
}

// PreflightValidationValidator validates PreflightValidations.
type PreflightValidationValidator struct{}

var _ admission.Validator[*sro.PreflightValidation] = &PreflightValidationValidator{}

// kernelVersion is what a kernel release looks like: starts with a digit, no blanks or slashes.
var kernelVersion = regexp.MustCompile(`^[0-9][0-9A-Za-z._+~-]*$`)

// ValidateCreate refuses a kernelVersion that is not a kernel release.
func (*PreflightValidationValidator) ValidateCreate(_ context.Context, pv *sro.PreflightValidation) (admission.Warnings, error) {
	return nil, invalid("PreflightValidation", pv.Name, validateKernel(pv))
}

// ValidateUpdate refuses a kernelVersion that is not a kernel release.
func (*PreflightValidationValidator) ValidateUpdate(_ context.Context, _, pv *sro.PreflightValidation) (admission.Warnings, error) {
	if pv.DeletionTimestamp != nil {
		return nil, nil
	}
	return nil, invalid("PreflightValidation", pv.Name, validateKernel(pv))
}

// ValidateDelete allows every delete.
func (*PreflightValidationValidator) ValidateDelete(context.Context, *sro.PreflightValidation) (admission.Warnings, error) {
	return nil, nil
}

func validateKernel(pv *sro.PreflightValidation) field.ErrorList {
	if k := pv.Spec.KernelVersion; !kernelVersion.MatchString(k) {
		return field.ErrorList{field.Invalid(field.NewPath("spec", "kernelVersion"), k,
			"want a kernel release as nodes report it, such as 5.14.0-284.30.1.el9_2.x86_64")}
	}
	return nil
}

// added are the errors of errs that old does not have (same field and type).
func added(errs, old field.ErrorList) field.ErrorList {
	seen := map[string]bool{}
	for _, e := range old {
		seen[e.Field+"\x00"+string(e.Type)] = true
	}
	var out field.ErrorList
	for _, e := range errs {
		if !seen[e.Field+"\x00"+string(e.Type)] {
			out = append(out, e)
		}
	}
	return out
}

// invalid turns a non-empty error list into the API's Invalid status (HTTP 422) with one cause
// per field; nil when errs is empty. Values and details are redacted (statustext) as the metal3
// webhooks' are: git URIs and image references may carry credentials.
func invalid(kind, name string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(schema.GroupKind{Group: sro.GroupVersion.Group, Kind: kind}, name, statustext.FieldErrors(errs))
}
