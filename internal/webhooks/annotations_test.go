package webhooks

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

func TestValidateHostAnnotations(t *testing.T) {
	const (
		hwDetails  = `{"systemVendor":{"manufacturer":"Dell Inc."},"ramMebibytes":65536,"nics":[{"name":"eno1","mac":"00:5a:91:3f:9a:bd","ip":"172.22.0.50","speedGbps":25,"pxe":true}],"cpu":{"arch":"x86_64","count":32},"hostname":"worker-0"}`
		annotation = "metadata.annotations"
	)
	tests := map[string]struct {
		annotations    map[string]string
		inspectionMode metal3.InspectionMode
		want           []string
		detail         string
	}{
		"unrelated annotations": {annotations: map[string]string{
			"example.com/owner": "{not json", metal3.PausedAnnotation: "metal3.io/capm3",
		}},
		"reboot requests": {annotations: map[string]string{
			"reboot.metal3.io":             "",
			"reboot.metal3.io/remediation": `{"mode":"hard"}`,
			"reboot.metal3.io/capm3":       `{"mode": "soft", "force": true}`,
			"reboot.metal3.io/no-mode":     `{"force": false}`,
		}},
		"reboot that is not JSON": {
			annotations: map[string]string{"reboot.metal3.io": "hard"},
			want:        []string{annotation + "[reboot.metal3.io]: Invalid value"}, detail: `{"mode": "hard"|"soft"`,
		},
		"reboot with an unknown mode": {
			annotations: map[string]string{"reboot.metal3.io/remediation": `{"mode":"cold"}`},
			want:        []string{annotation + "[reboot.metal3.io/remediation]: Invalid value"}, detail: `"hard" or "soft"`,
		},
		// metal3 accepts unknown fields (a warning says they are ignored: TestAnnotationWarnings).
		"reboot with an unknown field": {annotations: map[string]string{"reboot.metal3.io": `{"mode":"hard","delay":5}`}},
		"reboot with a mistyped field": {
			annotations: map[string]string{"reboot.metal3.io": `{"mode":"hard","force":"yes"}`},
			want:        []string{annotation + "[reboot.metal3.io]: Invalid value"},
		},
		"reboot with trailing data": {
			annotations: map[string]string{"reboot.metal3.io": `{"mode":"hard"}{}`},
			want:        []string{annotation + "[reboot.metal3.io]: Invalid value"}, detail: "after top-level value",
		},
		"reboot that is JSON null":             {annotations: map[string]string{"reboot.metal3.io": `null`}},
		"look-alike reboot key is not checked": {annotations: map[string]string{"reboot.metal3.io.example/x": "anything"}},

		"detach requests":       {annotations: map[string]string{metal3.DetachedAnnotation: ""}},
		"detach with arguments": {annotations: map[string]string{metal3.DetachedAnnotation: `{"deleteAction":"delay","force":true}`}},
		// metal3 does not check it and reads a value that is not a JSON object as the defaults;
		// assisted-service wrote its name there.
		"detach that is not JSON":       {annotations: map[string]string{metal3.DetachedAnnotation: "true"}},
		"detach naming who detached it": {annotations: map[string]string{metal3.DetachedAnnotation: "assisted-service-controller"}},
		"detach with an unknown delete action": {
			annotations: map[string]string{metal3.DetachedAnnotation: `{"deleteAction":"keep"}`},
			want:        []string{annotation + "[baremetalhost.metal3.io/detached]: Invalid value"}, detail: `"delay" or "delete"`,
		},
		"detach with an unknown field": {annotations: map[string]string{metal3.DetachedAnnotation: `{"deleteAction":"delay","now":true}`}},

		"inspection request": {annotations: map[string]string{metal3.InspectAnnotationPrefix: ""}},
		"inspect with an unknown value": {
			annotations: map[string]string{metal3.InspectAnnotationPrefix: "enabled"},
			want:        []string{annotation + "[inspect.metal3.io]: Unsupported value"}, detail: `"disabled"`,
		},

		"hardware details with inspection disabled by annotation": {annotations: map[string]string{
			metal3.InspectAnnotationPrefix: "disabled", metal3.HardwareDetailsAnnotation: hwDetails,
		}},
		"hardware details with inspection disabled by mode": {
			annotations:    map[string]string{metal3.HardwareDetailsAnnotation: hwDetails},
			inspectionMode: metal3.InspectionModeDisabled,
		},
		"hardware details while inspection is enabled": {
			annotations: map[string]string{metal3.HardwareDetailsAnnotation: hwDetails},
			want:        []string{annotation + "[inspect.metal3.io/hardwaredetails]: Forbidden"}, detail: "inspection is disabled",
		},
		"hardware details of the wrong shape": {
			annotations:    map[string]string{metal3.HardwareDetailsAnnotation: `{"ram":64}`},
			inspectionMode: metal3.InspectionModeDisabled,
			want:           []string{annotation + "[inspect.metal3.io/hardwaredetails]: Invalid value"}, detail: "ram",
		},
		"hardware details that are not JSON": {
			annotations:    map[string]string{metal3.HardwareDetailsAnnotation: `{"ramMebibytes":`},
			inspectionMode: metal3.InspectionModeDisabled,
			want:           []string{annotation + "[inspect.metal3.io/hardwaredetails]: Invalid value"},
		},

		"status of a host being serviced": {annotations: map[string]string{
			metal3.StatusAnnotation: `{"operationalStatus":"servicing","errorType":"","errorMessage":"","poweredOn":true,"errorCount":0,"provisioning":{"state":"provisioned","ID":"b5f1f6e2-1d1a-4a5e-9c1e-3c8f1a2b4c5d"}}`,
		}},
		"status with a servicing error": {annotations: map[string]string{
			metal3.StatusAnnotation: `{"operationalStatus":"error","errorType":"servicing error","errorMessage":"firmware update failed","provisioning":{"state":"provisioned","ID":""}}`,
		}},
		"status with a detach error": {annotations: map[string]string{
			metal3.StatusAnnotation: `{"operationalStatus":"error","errorType":"detach error","errorMessage":"x","provisioning":{"state":"provisioned","ID":""}}`,
		}},
		"status with an unknown operational status": {
			annotations: map[string]string{metal3.StatusAnnotation: `{"operationalStatus":"broken","provisioning":{"state":"available","ID":""}}`},
			want:        []string{annotation + "[baremetalhost.metal3.io/status]: Invalid value"}, detail: `"servicing"`,
		},
		"status with an unknown error type": {
			annotations: map[string]string{metal3.StatusAnnotation: `{"operationalStatus":"error","errorType":"disk error","provisioning":{"state":"available","ID":""}}`},
			want:        []string{annotation + "[baremetalhost.metal3.io/status]: Invalid value"}, detail: `"servicing error"`,
		},
		"status with an unknown field": {
			annotations: map[string]string{metal3.StatusAnnotation: `{"operationalStatus":"OK","mood":"good"}`},
			want:        []string{annotation + "[baremetalhost.metal3.io/status]: Invalid value"}, detail: "mood",
		},
		"several bad annotations are all reported": {
			annotations: map[string]string{
				"reboot.metal3.io": "now", metal3.DetachedAnnotation: `{"deleteAction":"keep"}`, metal3.InspectAnnotationPrefix: "please",
			},
			want: []string{
				annotation + "[reboot.metal3.io]: Invalid value",
				annotation + "[baremetalhost.metal3.io/detached]: Invalid value",
				annotation + "[inspect.metal3.io]: Unsupported value",
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			host := validHost()
			host.Annotations = tc.annotations
			host.Spec.InspectionMode = tc.inspectionMode
			checkErrors(t, validateHostAnnotations(host), tc.want, tc.detail)
		})
	}
}

// What metal3 accepts but the controller will not read as written is said back as a warning, once:
// only for a value the update adds or changes.
func TestAnnotationWarnings(t *testing.T) {
	host := func(annotations map[string]string) *metal3.BareMetalHost {
		return &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Annotations: annotations}}
	}
	tests := map[string]struct {
		old, new map[string]string
		want     []string // substrings, one per warning
	}{
		"valid values": {new: map[string]string{
			"reboot.metal3.io/x": `{"mode":"soft"}`, metal3.DetachedAnnotation: `{"deleteAction":"delay"}`, "reboot.metal3.io": "",
		}},
		"reboot with an unknown field": {
			new:  map[string]string{"reboot.metal3.io/remediation": `{"mode":"hard","forse":true}`},
			want: []string{`metadata.annotations[reboot.metal3.io/remediation]: json: unknown field "forse"`},
		},
		"detach that is not JSON": {
			new:  map[string]string{metal3.DetachedAnnotation: "assisted-service-controller"},
			want: []string{"metadata.annotations[baremetalhost.metal3.io/detached]: not a JSON object: the host controller reads"},
		},
		"unchanged value not warned again": {
			old: map[string]string{metal3.DetachedAnnotation: "assisted-service-controller"},
			new: map[string]string{metal3.DetachedAnnotation: "assisted-service-controller", "example.com/x": "y"},
		},
		"other annotations not read": {new: map[string]string{"example.com/owner": "{not json"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var oldHost *metal3.BareMetalHost
			if tc.old != nil {
				oldHost = host(tc.old)
			}
			got := annotationWarnings(oldHost, host(tc.new))
			if len(got) != len(tc.want) {
				t.Fatalf("warnings %q, want %d", got, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("warning %q does not contain %q", got[i], w)
				}
			}
		})
	}
}
