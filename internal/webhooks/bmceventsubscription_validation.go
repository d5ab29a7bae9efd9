package webhooks

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

// ValidateBMCEventSubscription returns what is wrong with a new subscription.
func ValidateBMCEventSubscription(sub *metal3.BMCEventSubscription) field.ErrorList {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	if sub.Spec.HostName == "" {
		errs = append(errs, field.Required(spec.Child("hostName"), "the name of the BareMetalHost, in the subscription's namespace, whose BMC sends the events"))
	}
	destPath := spec.Child("destination")
	if sub.Spec.Destination == "" {
		errs = append(errs, field.Required(destPath, "the http:// or https:// URL the BMC sends events to"))
	} else if u, err := parseURL(sub.Spec.Destination, "http", "https"); err != nil {
		errs = append(errs, field.Invalid(destPath, sub.Spec.Destination, err.Error()))
	} else if u.Path == "" {
		// As in metal3, which refuses a host-only destination such as "https://host".
		errs = append(errs, field.Invalid(destPath, sub.Spec.Destination, "must have a path: add a trailing slash to a host-only URL, e.g. \"https://events.example.com/\""))
	}
	// Empty means the subscription's namespace, as for a host's Secret references. (metal3 wants
	// the namespace written out because its controller reads ref.Namespace as is; ours must
	// resolve an empty one to the subscription's.)
	if ref := sub.Spec.HTTPHeadersRef; ref != nil && ref.Namespace != "" && ref.Namespace != sub.Namespace {
		errs = append(errs, field.Invalid(spec.Child("httpHeadersRef", "namespace"), ref.Namespace, fmt.Sprintf(
			"cross-namespace Secret references are not allowed: leave it empty or set it to the subscription's namespace %q", sub.Namespace)))
	}
	return errs
}

// ValidateBMCEventSubscriptionUpdate returns what is wrong with an update: the subscription on
// the BMC cannot be changed, so neither can the spec.
func ValidateBMCEventSubscriptionUpdate(oldSub, newSub *metal3.BMCEventSubscription) field.ErrorList {
	if equality.Semantic.DeepEqual(oldSub.Spec, newSub.Spec) {
		return nil
	}
	return field.ErrorList{field.Forbidden(field.NewPath("spec"), "cannot be changed after creation: delete the subscription and create a new one")}
}
