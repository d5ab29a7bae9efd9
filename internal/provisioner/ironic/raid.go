package ironic

import (
	"fmt"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/bmc"
)

const (
	raidNone     = "no-raid"
	raidSoftware = "agent"
)

// raidPlan is what preparing does for RAID: the raid_interface to use, the target_raid_config
// logical disks and the clean steps. An empty plan leaves RAID alone.
type raidPlan struct {
	iface   string
	logical []nodes.LogicalDisk
	steps   []nodes.CleanStep
}

// planRAID follows metal3: a target with software volumes uses the agent's software RAID (delete,
// erase metadata, create); hardware volumes use the BMC's RAID interface (delete, then create, so
// only the wanted volumes exist); a target with no volumes only deletes. A nil target changes
// nothing. The first volume is the root volume unless root device hints choose the disk.
func planRAID(access *bmc.Access, target *metal3.RAIDConfig, hints *metal3.RootDeviceHints) (raidPlan, error) {
	if target == nil {
		return raidPlan{}, nil
	}
	hw, sw := target.HardwareRAIDVolumes, target.SoftwareRAIDVolumes
	bmcIface := access.Interfaces.RAID
	switch {
	case len(hw) > 0 && len(sw) > 0:
		return raidPlan{}, fmt.Errorf("spec.raid: hardware and software RAID volumes cannot be combined")
	case len(sw) > 0:
		logical, err := softwareVolumes(sw)
		if err != nil {
			return raidPlan{}, err
		}
		setRoot(logical, hints)
		return raidPlan{iface: raidSoftware, logical: logical, steps: []nodes.CleanStep{
			{Interface: nodes.InterfaceRAID, Step: "delete_configuration"},
			{Interface: nodes.InterfaceDeploy, Step: "erase_devices_metadata"},
			{Interface: nodes.InterfaceRAID, Step: "create_configuration"},
		}}, nil
	case len(hw) > 0:
		if !access.SupportsRAID || bmcIface == raidNone {
			return raidPlan{}, fmt.Errorf("spec.raid.hardwareRAIDVolumes: BMC type %s cannot configure hardware RAID", access.Type)
		}
		logical, err := hardwareVolumes(hw)
		if err != nil {
			return raidPlan{}, err
		}
		setRoot(logical, hints)
		return raidPlan{iface: bmcIface, logical: logical, steps: []nodes.CleanStep{
			{Interface: nodes.InterfaceRAID, Step: "delete_configuration"},
			{Interface: nodes.InterfaceRAID, Step: "create_configuration"},
		}}, nil
	}
	// No volumes: remove what exists, where the BMC can.
	if !access.SupportsRAID || bmcIface == raidNone {
		return raidPlan{}, nil
	}
	return raidPlan{iface: bmcIface, steps: []nodes.CleanStep{{Interface: nodes.InterfaceRAID, Step: "delete_configuration"}}}, nil
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
			SizeGB:     v.SizeGibibytes,
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
		d := nodes.LogicalDisk{SizeGB: v.SizeGibibytes, RAIDLevel: nodes.RAIDLevel(v.Level), Controller: "software"}
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
