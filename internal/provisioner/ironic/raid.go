package ironic

import (
	"fmt"
	"reflect"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/bmc"
)

const (
	raidNone     = "no-raid"
	raidSoftware = "agent"
)

// raidPlan is what preparing does for RAID: the raid_interface to use, the target_raid_config
// logical disks (none with an interface set: target_raid_config is emptied, so it does not keep
// describing volumes the cleaning deletes) and the clean steps. An empty plan leaves RAID alone.
type raidPlan struct {
	iface   string
	logical []nodes.LogicalDisk
	steps   []nodes.CleanStep
}

// planRAID follows metal3 (BuildRAIDCleanSteps, CheckRAIDInterface): only a list that is set says
// something, and a list equal to the one last applied (actual: status.provisioning.raid) asks for
// nothing. Software volumes go through the agent's software RAID: delete, erase metadata, create;
// an empty software list removes the software RAID last applied the same way without the create
// (through the agent: the BMC's RAID interface would delete hardware volumes instead). Hardware
// volumes go through the BMC's RAID interface: delete, then create, so only the wanted volumes
// exist; an empty hardware list only deletes. A nil target, or one with neither list set
// (raid: {}), changes nothing. The first volume is the root volume unless root device hints
// choose the disk.
func planRAID(access *bmc.Access, target, actual *metal3.RAIDConfig, hints *metal3.RootDeviceHints) (raidPlan, error) {
	if target == nil {
		return raidPlan{}, nil
	}
	if actual == nil {
		actual = &metal3.RAIDConfig{}
	}
	hw, sw := target.HardwareRAIDVolumes, target.SoftwareRAIDVolumes
	bmcIface := access.Interfaces.RAID
	bmcRAID := access.SupportsRAID && bmcIface != raidNone
	deleteStep := nodes.CleanStep{Interface: nodes.InterfaceRAID, Step: "delete_configuration"}
	eraseStep := nodes.CleanStep{Interface: nodes.InterfaceDeploy, Step: "erase_devices_metadata"}
	createStep := nodes.CleanStep{Interface: nodes.InterfaceRAID, Step: "create_configuration"}
	switch {
	case len(hw) > 0 && len(sw) > 0:
		return raidPlan{}, fmt.Errorf("spec.raid: hardware and software RAID volumes cannot be combined")
	case len(sw) > 0:
		if reflect.DeepEqual(sw, actual.SoftwareRAIDVolumes) {
			return raidPlan{}, nil
		}
		logical, err := softwareVolumes(sw)
		if err != nil {
			return raidPlan{}, err
		}
		setRoot(logical, hints)
		return raidPlan{iface: raidSoftware, logical: logical, steps: []nodes.CleanStep{deleteStep, eraseStep, createStep}}, nil
	case len(hw) > 0:
		if !bmcRAID {
			return raidPlan{}, fmt.Errorf("spec.raid.hardwareRAIDVolumes: BMC type %s cannot configure hardware RAID", access.Type)
		}
		if reflect.DeepEqual(hw, actual.HardwareRAIDVolumes) {
			return raidPlan{}, nil
		}
		logical, err := hardwareVolumes(hw)
		if err != nil {
			return raidPlan{}, err
		}
		setRoot(logical, hints)
		return raidPlan{iface: bmcIface, logical: logical, steps: []nodes.CleanStep{deleteStep, createStep}}, nil
	case sw != nil && len(actual.SoftwareRAIDVolumes) > 0:
		return raidPlan{iface: raidSoftware, steps: []nodes.CleanStep{deleteStep, eraseStep}}, nil
	case hw != nil && bmcRAID && (actual.HardwareRAIDVolumes == nil || len(actual.HardwareRAIDVolumes) > 0):
		return raidPlan{iface: bmcIface, steps: []nodes.CleanStep{deleteStep}}, nil
	}
	return raidPlan{}, nil
}

// emptyRAIDConfig empties target_raid_config (Ironic validates only a non-empty one; gophercloud's
// RAIDConfigOpts always sends logical_disks, and an empty list fails that validation).
type emptyRAIDConfig struct{}

func (emptyRAIDConfig) ToRAIDConfigMap() (map[string]any, error) { return map[string]any{}, nil }

// targetRAIDConfig is what PUT /states/raid sends for the plan.
func (plan raidPlan) targetRAIDConfig() nodes.RAIDConfigOptsBuilder {
	if len(plan.logical) == 0 {
		return emptyRAIDConfig{}
	}
	return nodes.RAIDConfigOpts{LogicalDisks: plan.logical}
}

// sizeGB is a volume's size_gb: 0, like no size, uses the whole capacity ("MAX", which gophercloud
// sends for nil), as the API documents; sent as 0, a Redfish BMC would be asked for 0 bytes.
func sizeGB(size *int) *int {
	if size == nil || *size == 0 {
		return nil
	}
	return size
}

func hardwareVolumes(volumes []metal3.HardwareRAIDVolume) ([]nodes.LogicalDisk, error) {
	names := map[string]int{}
	out := make([]nodes.LogicalDisk, 0, len(volumes))
	for i, v := range volumes {
		if v.Name != "" {
			if j, dup := names[v.Name]; dup {
				return nil, fmt.Errorf("spec.raid.hardwareRAIDVolumes[%d].name: %q is also the name of volume %d", i, v.Name, j)
			}
			names[v.Name] = i
		}
		d := nodes.LogicalDisk{
			SizeGB:     sizeGB(v.SizeGibibytes),
			RAIDLevel:  nodes.RAIDLevel(v.Level),
			VolumeName: v.Name,
			Controller: v.Controller,
		}
		if v.Rotational != nil {
			d.DiskType = nodes.SSD
			if *v.Rotational {
				d.DiskType = nodes.HDD
			}
		}
		if v.NumberOfPhysicalDisks != nil {
			d.NumberOfPhysicalDisks = *v.NumberOfPhysicalDisks
		}
		for _, pd := range v.PhysicalDisks {
			d.PhysicalDisks = append(d.PhysicalDisks, pd)
		}
		out = append(out, d)
	}
	return out, nil
}

func softwareVolumes(volumes []metal3.SoftwareRAIDVolume) ([]nodes.LogicalDisk, error) {
	if volumes[0].Level != string(nodes.RAID1) {
		return nil, fmt.Errorf("spec.raid.softwareRAIDVolumes[0].level: the first software RAID volume must be RAID1, not %q", volumes[0].Level)
	}
	out := make([]nodes.LogicalDisk, 0, len(volumes))
	for _, v := range volumes {
		d := nodes.LogicalDisk{SizeGB: sizeGB(v.SizeGibibytes), RAIDLevel: nodes.RAIDLevel(v.Level), Controller: "software"}
		for i := range v.PhysicalDisks {
			d.PhysicalDisks = append(d.PhysicalDisks, rootDeviceHints(&v.PhysicalDisks[i]))
		}
		out = append(out, d)
	}
	return out, nil
}

func setRoot(logical []nodes.LogicalDisk, hints *metal3.RootDeviceHints) {
	if len(logical) > 0 && rootDeviceHints(hints) == nil {
		root := true
		logical[0].IsRootVolume = &root
	}
}
