package ironic

import (
	"encoding/json"
	"strings"
	"testing"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/bmc"
)

// TestPlanRAID: metal3's meaning of spec.raid. Only a list that is set asks for something; an
// empty hardware list clears hardware RAID through the BMC, an empty software list removes the
// software RAID last applied through the agent (never through the BMC, which would delete
// hardware volumes), and a list equal to the one last applied asks for nothing. Until this
// table, raid: {} and softwareRAIDVolumes: [] deleted the BMC's volumes like hardwareRAIDVolumes: [].
func TestPlanRAID(t *testing.T) {
	redfish, _ := bmc.Parse("redfish-virtualmedia+http://127.0.0.1/redfish/v1/Systems/1")
	ipmi, _ := bmc.Parse("ipmi://127.0.0.1")
	two, size := 2, 50
	hwVols := []metal3.HardwareRAIDVolume{{Name: "root", Level: "1", NumberOfPhysicalDisks: &two, SizeGibibytes: &size}}
	swVols := []metal3.SoftwareRAIDVolume{{Level: "1", PhysicalDisks: []metal3.RootDeviceHints{{DeviceName: "/dev/sda"}, {DeviceName: "/dev/sdb"}}}}
	hw := &metal3.RAIDConfig{HardwareRAIDVolumes: hwVols}
	sw := &metal3.RAIDConfig{SoftwareRAIDVolumes: swVols}
	clearHW := &metal3.RAIDConfig{HardwareRAIDVolumes: []metal3.HardwareRAIDVolume{}}
	clearSW := &metal3.RAIDConfig{SoftwareRAIDVolumes: []metal3.SoftwareRAIDVolume{}}
	const (
		hwSteps     = "raid.delete_configuration raid.create_configuration"
		swSteps     = "raid.delete_configuration deploy.erase_devices_metadata raid.create_configuration"
		swClear     = "raid.delete_configuration deploy.erase_devices_metadata"
		deleteSteps = "raid.delete_configuration"
	)
	for name, tc := range map[string]struct {
		access         *bmc.Access
		target, actual *metal3.RAIDConfig
		iface, steps   string
		disks          int
		err            string
	}{
		"no target":                          {access: redfish},
		"raid: {} leaves RAID alone":         {access: redfish, target: &metal3.RAIDConfig{}},
		"raid: {} after hardware RAID":       {access: redfish, target: &metal3.RAIDConfig{}, actual: hw},
		"hardware volumes":                   {access: redfish, target: hw, iface: "redfish", steps: hwSteps, disks: 1},
		"hardware volumes already applied":   {access: redfish, target: hw, actual: hw},
		"hardware [] clears through the BMC": {access: redfish, target: clearHW, iface: "redfish", steps: deleteSteps},
		"hardware [] after hardware RAID":    {access: redfish, target: clearHW, actual: hw, iface: "redfish", steps: deleteSteps},
		"hardware [] already cleared":        {access: redfish, target: clearHW, actual: clearHW},
		"hardware [] on a BMC without RAID":  {access: ipmi, target: clearHW},
		"hardware volumes on IPMI":           {access: ipmi, target: hw, err: "hardwareRAIDVolumes"},
		"software volumes":                   {access: redfish, target: sw, iface: "agent", steps: swSteps, disks: 1},
		"software volumes on IPMI":           {access: ipmi, target: sw, iface: "agent", steps: swSteps, disks: 1},
		"software volumes already applied":   {access: redfish, target: sw, actual: sw},
		"software [] with none applied":      {access: redfish, target: clearSW},
		"software [] after hardware RAID":    {access: redfish, target: clearSW, actual: hw},
		"software [] removes software RAID":  {access: redfish, target: clearSW, actual: sw, iface: "agent", steps: swClear},
		"both [] after software RAID":        {access: redfish, target: &metal3.RAIDConfig{HardwareRAIDVolumes: []metal3.HardwareRAIDVolume{}, SoftwareRAIDVolumes: []metal3.SoftwareRAIDVolume{}}, actual: sw, iface: "agent", steps: swClear},
		"both []":                            {access: redfish, target: &metal3.RAIDConfig{HardwareRAIDVolumes: []metal3.HardwareRAIDVolume{}, SoftwareRAIDVolumes: []metal3.SoftwareRAIDVolume{}}, iface: "redfish", steps: deleteSteps},
		"both kinds":                         {access: redfish, target: &metal3.RAIDConfig{HardwareRAIDVolumes: hwVols, SoftwareRAIDVolumes: swVols}, err: "cannot be combined"},
		"software RAID0 first":               {access: redfish, target: &metal3.RAIDConfig{SoftwareRAIDVolumes: []metal3.SoftwareRAIDVolume{{Level: "0"}}}, err: "RAID1"},
		"duplicate volume names":             {access: redfish, target: &metal3.RAIDConfig{HardwareRAIDVolumes: []metal3.HardwareRAIDVolume{{Name: "a", Level: "1"}, {Name: "a", Level: "0"}}}, err: "also the name"},
	} {
		plan, err := planRAID(tc.access, tc.target, tc.actual, nil)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want one containing %q", name, err, tc.err)
			}
			continue
		}
		if err != nil || plan.iface != tc.iface || stepsString(plan.steps) != tc.steps || len(plan.logical) != tc.disks {
			t.Errorf("%s: interface %q, steps %q, %d disks, %v; want %q, %q, %d disks", name, plan.iface, stepsString(plan.steps),
				len(plan.logical), err, tc.iface, tc.steps, tc.disks)
		}
	}
}

// TestRAIDTargetConfig: what PUT /states/raid sends. The first volume is the root volume unless
// root device hints choose the disk; a size of 0 means the whole capacity ("MAX", as for no
// size: sent as 0, a Redfish BMC is asked for a 0-byte volume); a plan that only deletes empties
// target_raid_config with {} (a list of no disks fails Ironic's validation).
func TestRAIDTargetConfig(t *testing.T) {
	redfish, _ := bmc.Parse("redfish-virtualmedia+http://127.0.0.1/redfish/v1/Systems/1")
	two, size, zero := 2, 50, 0
	hw := &metal3.RAIDConfig{HardwareRAIDVolumes: []metal3.HardwareRAIDVolume{
		{Name: "root", Level: "1", NumberOfPhysicalDisks: &two, SizeGibibytes: &size},
		{Name: "data", Level: "0", SizeGibibytes: &zero, PhysicalDisks: []string{"d1"}},
	}}
	body := func(plan raidPlan) string {
		t.Helper()
		m, err := plan.targetRAIDConfig().ToRAIDConfigMap()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(m)
		return string(b)
	}
	plan, err := planRAID(redfish, hw, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"logical_disks":[{"is_root_volume":true,"number_of_physical_disks":2,"raid_level":"1","size_gb":50,"volume_name":"root"},` +
		`{"physical_disks":["d1"],"raid_level":"0","size_gb":"MAX","volume_name":"data"}]}`
	if got := body(plan); got != want {
		t.Errorf("target_raid_config %s\nwant %s", got, want)
	}
	if plan, _ := planRAID(redfish, hw, nil, &metal3.RootDeviceHints{DeviceName: "/dev/sdb"}); plan.logical[0].IsRootVolume != nil {
		t.Error("root volume set although root device hints choose the disk")
	}
	sw := &metal3.RAIDConfig{SoftwareRAIDVolumes: []metal3.SoftwareRAIDVolume{{Level: "1", SizeGibibytes: &zero,
		PhysicalDisks: []metal3.RootDeviceHints{{DeviceName: "/dev/sda"}, {DeviceName: "/dev/sdb"}}}}}
	plan, _ = planRAID(redfish, sw, nil, nil)
	if got := body(plan); !strings.Contains(got, `"size_gb":"MAX"`) || !strings.Contains(got, `"controller":"software"`) {
		t.Errorf("software target_raid_config %s, want size_gb MAX on the software controller", got)
	}
	plan, _ = planRAID(redfish, &metal3.RAIDConfig{HardwareRAIDVolumes: []metal3.HardwareRAIDVolume{}}, nil, nil)
	if got := body(plan); got != `{}` {
		t.Errorf("clearing hardware RAID sends %s, want {}", got)
	}
}
