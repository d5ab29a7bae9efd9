package webhooks

import (
	"testing"

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
		"reboot with an unknown field": {
			annotations: map[string]string{"reboot.metal3.io": `{"mode":"hard","delay":5}`},
			want:        []string{annotation + "[reboot.metal3.io]: Invalid value"}, detail: "delay",
		},
		"reboot with a mistyped field": {
			annotations: map[string]string{"reboot.metal3.io": `{"mode":"hard","force":"yes"}`},
			want:        []string{annotation + "[reboot.metal3.io]: Invalid value"},
		},
		"reboot with trailing data": {
			annotations: map[string]string{"reboot.metal3.io": `{"mode":"hard"}{}`},
			want:        []string{annotation + "[reboot.metal3.io]: Invalid value"}, detail: "after the JSON object",
		},
		"reboot that is JSON null": {
			annotations: map[string]string{"reboot.metal3.io": `null`},
			want:        []string{annotation + "[reboot.metal3.io]: Invalid value"}, detail: "not a JSON object",
		},
		"look-alike reboot key is not checked": {annotations: map[string]string{"reboot.metal3.io.example/x": "anything"}},

		"detach requests":       {annotations: map[string]string{metal3.DetachedAnnotation: ""}},
		"detach with arguments": {annotations: map[string]string{metal3.DetachedAnnotation: `{"deleteAction":"delay","force":true}`}},
		"detach that is not JSON": {
			annotations: map[string]string{metal3.DetachedAnnotation: "true"},
			want:        []string{annotation + "[baremetalhost.metal3.io/detached]: Invalid value"}, detail: `"delay"|"delete"`,
		},
		"detach with an unknown delete action": {
			annotations: map[string]string{metal3.DetachedAnnotation: `{"deleteAction":"keep"}`},
			want:        []string{annotation + "[baremetalhost.metal3.io/detached]: Invalid value"}, detail: `"delay" or "delete"`,
		},
		"detach with an unknown field": {
			annotations: map[string]string{metal3.DetachedAnnotation: `{"deleteAction":"delay","now":true}`},
			want:        []string{annotation + "[baremetalhost.metal3.io/detached]: Invalid value"},
		},

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
				"reboot.metal3.io": "now", metal3.DetachedAnnotation: "yes", metal3.InspectAnnotationPrefix: "please",
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
