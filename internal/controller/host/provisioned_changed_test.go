package host

import (
	"testing"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

// TestProvisionedChanged: metal3's rule for deprovisioning a provisioned host when its spec
// changes, case by case.
func TestProvisionedChanged(t *testing.T) {
	img := func(url string) *metal3.Image { return &metal3.Image{URL: url} }
	cd := func(method string) *metal3.CustomDeploy { return &metal3.CustomDeploy{Method: method} }
	status := func(url string, method *metal3.CustomDeploy) metal3.ProvisionStatus {
		return metal3.ProvisionStatus{Image: metal3.Image{URL: url}, CustomDeploy: method}
	}
	for name, tc := range map[string]struct {
		image  *metal3.Image
		deploy *metal3.CustomDeploy
		st     metal3.ProvisionStatus
		want   bool
	}{
		"same image":                                 {image: img("a"), st: status("a", nil), want: false},
		"new image":                                  {image: img("b"), st: status("a", nil), want: true},
		"image removed":                              {st: status("a", nil), want: true},
		"image emptied":                              {image: img(""), st: status("a", nil), want: true},
		"image added where none was provisioned":     {image: img("a"), st: status("", nil), want: false},
		"same custom deploy":                         {deploy: cd("x"), st: status("", cd("x")), want: false},
		"new custom deploy":                          {deploy: cd("y"), st: status("", cd("x")), want: true},
		"custom deploy removed":                      {image: img("a"), st: status("a", cd("x")), want: true},
		"image added to a custom deploy":             {image: img("a"), deploy: cd("x"), st: status("", cd("x")), want: false},
		"custom deploy added to the image":           {image: img("a"), deploy: cd("x"), st: status("a", nil), want: false},
		"custom deploy, its provisioned image gone":  {deploy: cd("x"), st: status("a", cd("x")), want: true},
		"custom deploy, its provisioned image moved": {image: img("b"), deploy: cd("x"), st: status("a", cd("x")), want: true},
		"nothing left":                               {st: status("", cd("x")), want: true},
	} {
		spec := metal3.BareMetalHostSpec{Image: tc.image, CustomDeploy: tc.deploy}
		if got := provisionedChanged(spec, tc.st); got != tc.want {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
	}
}
