package hostfirmwarecomponents

import (
	"errors"
	"testing"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

var reported = []metal3.FirmwareComponentStatus{{Component: "bios"}, {Component: "bmc"}, {Component: "nic:NIC.Slot.1"}}

func TestValidateUpdates(t *testing.T) {
	const img = "http://fw.example/bios-2.1.bin"
	u := func(component, url string) metal3.FirmwareUpdate {
		return metal3.FirmwareUpdate{Component: component, URL: url}
	}
	tests := map[string]struct {
		updates     []metal3.FirmwareUpdate
		reported    []metal3.FirmwareComponentStatus
		unsupported error  // the host cannot take updates at all
		want        string // "" for valid; the errors joined by newlines
	}{
		"bios, bmc and a nic": {updates: []metal3.FirmwareUpdate{u("bios", img), u("bmc", "https://fw.example/bmc.bin"), u("nic:NIC.Slot.1", img)}, reported: reported},
		"nothing":             {reported: reported},
		"unknown kind of component": {updates: []metal3.FirmwareUpdate{u("cpld", img)}, reported: reported,
			want: `spec.updates[0].component: "cpld" is not a firmware component; use bios, bmc or nic:<id>`},
		"nic without an id": {updates: []metal3.FirmwareUpdate{u("nic:", img)},
			want: `spec.updates[0].component: "nic:" is not a firmware component; use bios, bmc or nic:<id>`},
		"a nic the host does not have": {updates: []metal3.FirmwareUpdate{u("nic:NIC.Slot.9", img)}, reported: reported,
			want: `spec.updates[0].component: "nic:NIC.Slot.9" is not among the host's components (bios, bmc, nic:NIC.Slot.1)`},
		"any nic while nothing is reported": {updates: []metal3.FirmwareUpdate{u("nic:NIC.Slot.9", img)}},
		"a nic on a host that reports no nic (Ironic lists none)": {updates: []metal3.FirmwareUpdate{u("nic:NIC.Slot.1-1", img)},
			reported: []metal3.FirmwareComponentStatus{{Component: "bios"}, {Component: "bmc"}}},
		"the bmc of a host that reports none (no Manager firmware version)": {updates: []metal3.FirmwareUpdate{u("bmc", img)},
			reported: []metal3.FirmwareComponentStatus{{Component: "bios"}}},
		"twice the same component (flashed in order, as metal3 admits)": {updates: []metal3.FirmwareUpdate{u("bmc", img), u("bmc", img+".2")},
			reported: reported},
		"a host whose BMC has no firmware interface": {updates: []metal3.FirmwareUpdate{u("bios", img), u("gpu", "ftp://x/y")},
			unsupported: errors.New("no firmware interface"),
			want: "spec.updates[0].component: \"bios\" cannot be updated: no firmware interface\n" +
				"spec.updates[1].component: \"gpu\" is not a firmware component; use bios, bmc or nic:<id>\n" +
				`spec.updates[1].url: "ftp://x/y" is not an http, https or file URL`},
		"nothing listed on a host whose BMC has no firmware interface": {unsupported: errors.New("no firmware interface")},
		"no URL": {updates: []metal3.FirmwareUpdate{u("bmc", "")}, reported: reported,
			want: `spec.updates[0].url: missing: the URL of the firmware image`},
		"a file URL (Ironic's side)": {updates: []metal3.FirmwareUpdate{u("bmc", "file:///shared/html/fw/bmc.bin")}, reported: reported},
		"a file URL with a host": {updates: []metal3.FirmwareUpdate{u("bmc", "file://server/fw/bmc.bin")}, reported: reported,
			want: `spec.updates[0].url: "file://server/fw/bmc.bin" names no file on Ironic's host: write file:///<absolute path>, with no host but localhost`},
		"a file URL of the root": {updates: []metal3.FirmwareUpdate{u("bmc", "file:///")}, reported: reported,
			want: `spec.updates[0].url: "file:///" names no file on Ironic's host: write file:///<absolute path>, with no host but localhost`},
		"an http URL without a host": {updates: []metal3.FirmwareUpdate{u("bmc", "http:///fw/bmc.bin")}, reported: reported,
			want: `spec.updates[0].url: "http:///fw/bmc.bin" is not an http, https or file URL`},
		"an unparsable URL with a password holding a space": {updates: []metal3.FirmwareUpdate{u("bmc", "https://admin:pa ss@fw.example/bmc.bin")}, reported: reported,
			want: `spec.updates[0].url: not an http, https or file URL (not shown: it may hold credentials)`},
		"user information without a scheme": {updates: []metal3.FirmwareUpdate{u("bmc", "admin:s3cret@fw.example.com/bmc.bin")}, reported: reported,
			want: `spec.updates[0].url: not an http, https or file URL (not shown: it may hold credentials)`},
		"user information without a scheme, a token in the query": {updates: []metal3.FirmwareUpdate{u("bmc", "admin:s3cret@fw.example.com/bmc.bin?token=abc")}, reported: reported,
			want: `spec.updates[0].url: not an http, https or file URL (not shown: it may hold credentials)`},
		"user information after //": {updates: []metal3.FirmwareUpdate{u("bmc", "//admin:s3cret@fw.example.com/bmc.bin")}, reported: reported,
			want: `spec.updates[0].url: not an http, https or file URL (not shown: it may hold credentials)`},
		"an ftp URL with credentials (redacted when shown)": {updates: []metal3.FirmwareUpdate{u("bmc", "ftp://admin:s3cret@fw.example.com/bmc.bin")}, reported: reported,
			want: `spec.updates[0].url: "ftp://admin:s3cret@fw.example.com/bmc.bin" is not an http, https or file URL`},
		"a relative URL": {updates: []metal3.FirmwareUpdate{u("bios", "bios.bin")}, reported: reported,
			want: `spec.updates[0].url: "bios.bin" is not an http, https or file URL`},
		"both fields wrong": {updates: []metal3.FirmwareUpdate{u("gpu", "ftp://x/y")}, reported: reported,
			want: "spec.updates[0].component: \"gpu\" is not a firmware component; use bios, bmc or nic:<id>\n" +
				`spec.updates[0].url: "ftp://x/y" is not an http, https or file URL`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			errs := validateUpdates(tc.updates, tc.reported, tc.unsupported)
			got := ""
			if len(errs) > 0 {
				got = errors.Join(errs...).Error()
			}
			if got != tc.want {
				t.Fatalf("errors:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}
