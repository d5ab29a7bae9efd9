package ironic

import (
	"reflect"
	"slices"
	"testing"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
)

func TestStagedBIOSSettings(t *testing.T) {
	turboOff := map[string]any{"redfish_bios_state": map[string]any{
		"reboot_requested": true, "requested_bios_attrs": map[string]any{"ProcTurboMode": "Disabled", "LogicalProc": "Disabled"}}}
	// Values of every JSON type, as the step sends them in their attribute's type.
	typed := map[string]any{"redfish_bios_state": map[string]any{"reboot_requested": true, "requested_bios_attrs": map[string]any{
		"PowerOnDelaySeconds": float64(30), "SerialConsole": true, "AssetTag": "1234"}}}
	for _, tc := range []struct {
		name   string
		info   map[string]any
		cached map[string]string
		want   []string
	}{
		{"no record", map[string]any{"agent_url": "http://agent"}, nil, nil},
		{"sent, reboot pending, Ironic shows the old values", turboOff,
			map[string]string{"ProcTurboMode": "Enabled", "LogicalProc": "Enabled"}, []string{"LogicalProc", "ProcTurboMode"}},
		{"the BIOS could not be read: every setting named", turboOff, nil, []string{"LogicalProc", "ProcTurboMode"}},
		{"a boot applied one since, and Ironic read it", turboOff,
			map[string]string{"ProcTurboMode": "Disabled", "LogicalProc": "Enabled"}, []string{"LogicalProc"}},
		{"a boot applied all of them: the record is stale", turboOff,
			map[string]string{"ProcTurboMode": "Disabled", "LogicalProc": "Disabled"}, nil},
		{"numbers and booleans as Ironic stores them (Python str)", typed,
			map[string]string{"PowerOnDelaySeconds": "30", "SerialConsole": "True", "AssetTag": "1234"}, nil},
		{"numbers and booleans not applied", typed,
			map[string]string{"PowerOnDelaySeconds": "0", "SerialConsole": "False", "AssetTag": "1234"}, []string{"PowerOnDelaySeconds", "SerialConsole"}},
		{"names at the top level (an older Ironic)", map[string]any{"redfish_bios_state": map[string]any{"reboot_requested": true},
			"requested_bios_attrs": map[string]any{"AssetTag": "rack-7"}}, map[string]string{"AssetTag": ""}, []string{"AssetTag"}},
		{"no reboot asked: nothing sent", map[string]any{"redfish_bios_state": map[string]any{
			"reboot_requested": false, "requested_bios_attrs": map[string]any{"ProcTurboMode": "Disabled"}}}, nil, nil},
		{"a factory reset (no settings)", map[string]any{"redfish_bios_state": map[string]any{"reboot_requested": true}}, nil, nil},
		{"not the shape Ironic writes", map[string]any{"redfish_bios_state": "reboot_requested"}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := stagedBIOSSettings(tc.info, tc.cached); !slices.Equal(got, tc.want) {
				t.Errorf("stagedBIOSSettings = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestStaleRecordCheck(t *testing.T) {
	record := map[string]any{"redfish_bios_state": map[string]any{"reboot_requested": true,
		"requested_bios_attrs": map[string]any{"SerialConsole": true, "ProcTurboMode": "Disabled", "PowerOnDelaySeconds": float64(30)}}}
	st, ok := staleRecordCheck(record)
	if !ok || !isBIOSApply(st) {
		t.Fatalf("staleRecordCheck = %+v, %v; want a bios.apply_configuration", st, ok)
	}
	// The recorded settings, sorted, in the types Ironic sent them in (typeBIOSSteps keeps them).
	want := []map[string]any{{"name": "PowerOnDelaySeconds", "value": float64(30)},
		{"name": "ProcTurboMode", "value": "Disabled"}, {"name": "SerialConsole", "value": true}}
	got, _ := typeBIOSSteps([]nodes.CleanStep{st}, map[string]string{"PowerOnDelaySeconds": "Integer", "SerialConsole": "Boolean"})[0].Args["settings"].([]map[string]any)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("settings %v, want %v", got, want)
	}
	for name, info := range map[string]map[string]any{
		"no record":                    {"agent_url": "http://agent"},
		"a factory reset's (no names)": {"redfish_bios_state": map[string]any{"reboot_requested": true}},
		"no reboot asked":              {"redfish_bios_state": map[string]any{"reboot_requested": false, "requested_bios_attrs": map[string]any{"A": "B"}}},
	} {
		if st, ok := staleRecordCheck(info); ok {
			t.Errorf("%s: staleRecordCheck = %+v, want none", name, st)
		}
	}
}

func TestStaleRecordAction(t *testing.T) {
	record := map[string]any{"redfish_bios_state": map[string]any{"reboot_requested": true,
		"requested_bios_attrs": map[string]any{"ProcTurboMode": "Disabled"}}}
	check, _ := staleRecordCheck(record)
	checkFP := recordCheckPrefix + fingerprint("stale BIOS record", check)
	node := func(state nodes.ProvisionState) *nodes.Node {
		return &nodes.Node{ProvisionState: string(state)}
	}
	for _, tc := range []struct {
		name     string
		n        *nodes.Node
		info     map[string]any
		ranCheck bool // the check was the last operation Ironic accepted on the node
		want     staleRecordAct
	}{
		{"no record", node(nodes.Active), map[string]any{}, false, noRecord},
		{"active, a record: check first", node(nodes.Active), record, false, checkRecord},
		{"the request failed and left a record: check first", node(nodes.ServiceFail), record, false, checkRecord},
		{"active again after the check, the record still there (a later request's): check", node(nodes.Active), record, true, checkRecord},
		{"the check servicing failed and left the record: the request, not another check", node(nodes.ServiceFail), record, true, recordCheckFailed},
		{"manageable, a record: check first", node(nodes.Manageable), record, false, checkRecord},
		{"manageable, the check's start refused: check again", node(nodes.Manageable), record, false, checkRecord},
		{"the check cleaning failed and left the record: the request", node(nodes.CleanFail), record, true, recordCheckFailed},
		{"manageable again after that failure: the request", node(nodes.Manageable), record, true, recordCheckFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			step, fp, act := staleRecordAction(tc.n, tc.info, func(fp string) bool { return tc.ranCheck && fp == checkFP })
			if act != tc.want {
				t.Fatalf("staleRecordAction = %d, want %d", act, tc.want)
			}
			if act == checkRecord && (fp != checkFP || !isBIOSApply(step)) {
				t.Errorf("the check: step %+v, fingerprint %q; want bios.apply_configuration under %q", step, fp, checkFP)
			}
		})
	}
}
