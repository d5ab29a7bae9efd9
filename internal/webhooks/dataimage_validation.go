package webhooks

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

// dataImageURLSchemes are the schemes metal3's DataImage webhook admits. The DataImage controller
// attaches only http(s) images and says so in status.error for an oci:// one: refusing it here
// would break manifests metal3 admits.
var dataImageURLSchemes = []string{"http", "https", "oci"}

// ValidateDataImage returns what is wrong with a DataImage's spec: its URL, as metal3's webhook
// checks it (an absolute URL of an allowed scheme), with a host.
func ValidateDataImage(di *metal3.DataImage) field.ErrorList {
	p := field.NewPath("spec", "url")
	if di.Spec.URL == "" {
		return field.ErrorList{field.Required(p, "the "+quoteSchemes(dataImageURLSchemes)+" URL of an ISO image")}
	}
	if _, err := parseURL(di.Spec.URL, dataImageURLSchemes...); err != nil {
		return field.ErrorList{field.Invalid(p, di.Spec.URL, err.Error())}
	}
	return nil
}
