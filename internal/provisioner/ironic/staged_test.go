package ironic

import (
	"slices"
	"testing"
)

func TestStagedBIOSSettings(t *testing.T) {
	for _, tc := range []struct {
		name string
		info map[string]any
		want []string
	}{
		{"no record", map[string]any{"agent_url": "http://agent"}, nil},
		{"sent, reboot pending", map[string]any{"redfish_bios_state": map[string]any{
			"reboot_requested": true, "requested_bios_attrs": map[string]any{"ProcTurboMode": "Disabled", "LogicalProc": "Disabled"}}},
			[]string{"LogicalProc", "ProcTurboMode"}},
		{"names at the top level (an older Ironic)", map[string]any{"redfish_bios_state": map[string]any{"reboot_requested": true},
			"requested_bios_attrs": map[string]any{"AssetTag": "rack-7"}}, []string{"AssetTag"}},
		{"no reboot asked: nothing sent", map[string]any{"redfish_bios_state": map[string]any{
			"reboot_requested": false, "requested_bios_attrs": map[string]any{"ProcTurboMode": "Disabled"}}}, nil},
		{"a factory reset (no settings)", map[string]any{"redfish_bios_state": map[string]any{"reboot_requested": true}}, nil},
		{"not the shape Ironic writes", map[string]any{"redfish_bios_state": "reboot_requested"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := stagedBIOSSettings(tc.info); !slices.Equal(got, tc.want) {
				t.Errorf("stagedBIOSSettings = %q, want %q", got, tc.want)
			}
		})
	}
}
