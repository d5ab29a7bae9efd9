package webhooks

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

func TestValidateDataImage(t *testing.T) {
	for name, tc := range map[string]struct {
		url    string
		want   []string
		detail string
	}{
		"https":                        {url: "https://images.example.com/config.iso"},
		"http":                         {url: "http://192.0.2.1:8080/config.iso"},
		"oci (admitted, as by metal3)": {url: "oci://quay.io/acme/config:1"},
		"missing":                      {want: []string{"spec.url: Required value"}},
		"ftp": {url: "ftp://images.example.com/config.iso", want: []string{"spec.url: Invalid value"},
			detail: `not a "ftp" URL`},
		"relative":     {url: "config.iso", want: []string{"spec.url: Invalid value"}, detail: "https://"},
		"no host":      {url: "https:///config.iso", want: []string{"spec.url: Invalid value"}, detail: "with a host"},
		"with a space": {url: "https://images.example.com/a b.iso"},
	} {
		t.Run(name, func(t *testing.T) {
			di := &metal3.DataImage{ObjectMeta: metav1.ObjectMeta{Name: "worker-0", Namespace: "metal3"}, Spec: metal3.DataImageSpec{URL: tc.url}}
			checkErrors(t, ValidateDataImage(di), tc.want, tc.detail)
		})
	}
}
