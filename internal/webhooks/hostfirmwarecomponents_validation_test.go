package webhooks

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

func TestValidateHostFirmwareComponents(t *testing.T) {
	const bios = "https://firmware.example.com/bios-2.19.1.exe"
	tests := map[string]struct {
		updates []metal3.FirmwareUpdate
		want    []string
		detail  string
	}{
		"no updates": {},
		"bmc, bios and NICs": {updates: []metal3.FirmwareUpdate{
			{Component: "bmc", URL: "https://firmware.example.com/idrac-7.00.exe"},
			{Component: "bios", URL: bios},
			{Component: "nic:NIC.Slot.1-1", URL: "http://firmware.example.com/nic.bin"},
			{Component: "nic:NIC.Integrated.1-1", URL: "http://firmware.example.com/nic2.bin"},
		}},
		"unknown component": {
			updates: []metal3.FirmwareUpdate{{Component: "cpld", URL: bios}},
			want:    []string{"spec.updates[0].component: Invalid value"}, detail: `"bmc", "bios" or "nic:<id>"`,
		},
		"component in upper case": {
			updates: []metal3.FirmwareUpdate{{Component: "BIOS", URL: bios}},
			want:    []string{"spec.updates[0].component: Invalid value"},
		},
		"NIC without id": {
			updates: []metal3.FirmwareUpdate{{Component: "nic:", URL: bios}},
			want:    []string{"spec.updates[0].component: Invalid value"},
		},
		"NIC id with a space": {
			updates: []metal3.FirmwareUpdate{{Component: "nic:NIC 1", URL: bios}},
			want:    []string{"spec.updates[0].component: Invalid value"},
		},
		"component listed twice (stepped upgrade, as metal3 admits)": {
			updates: []metal3.FirmwareUpdate{{Component: "bmc", URL: "https://firmware.example.com/idrac-6.10.exe"}, {Component: "bios", URL: bios},
				{Component: "bmc", URL: "https://firmware.example.com/idrac-7.00.exe"}},
		},
		"missing URL": {
			updates: []metal3.FirmwareUpdate{{Component: "bios"}},
			want:    []string{"spec.updates[0].url: Required value"},
		},
		"file URL on Ironic's host": {updates: []metal3.FirmwareUpdate{{Component: "bios", URL: "file:///shared/html/fw/bios.exe"}}},
		"file URL with another host": {
			updates: []metal3.FirmwareUpdate{{Component: "bios", URL: "file://fw.example/bios.exe"}},
			want:    []string{"spec.updates[0].url: Invalid value"}, detail: "file:///<absolute path>",
		},
		"file URL of no file": {
			updates: []metal3.FirmwareUpdate{{Component: "bios", URL: "file:///"}},
			want:    []string{"spec.updates[0].url: Invalid value"}, detail: "file:///<absolute path>",
		},
		"URL that is not a URL": {
			updates: []metal3.FirmwareUpdate{{Component: "bios", URL: "bios.exe"}},
			want:    []string{"spec.updates[0].url: Invalid value"}, detail: `http://, https:// or file://`,
		},
		"a file on Ironic's side": {
			updates: []metal3.FirmwareUpdate{{Component: "bios", URL: "file:///shared/html/firmware/bios.exe"}},
		},
		"URL with an unsupported scheme": {
			updates: []metal3.FirmwareUpdate{{Component: "bmc", URL: "oci://quay.io/firmware/bmc:7"}},
			want:    []string{"spec.updates[0].url: Invalid value"}, detail: `"bmc"`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			hfc := &metal3.HostFirmwareComponents{
				ObjectMeta: metav1.ObjectMeta{Name: "worker-0", Namespace: "metal3"},
				Spec:       metal3.HostFirmwareComponentsSpec{Updates: tc.updates},
			}
			checkErrors(t, ValidateHostFirmwareComponents(hfc), tc.want, tc.detail)
		})
	}
}
