package webhooks

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

var (
	hardwareRAIDLevels = []string{"0", "1", "2", "5", "6", "1+0", "5+0", "6+0"}
	softwareRAIDLevels = []string{"0", "1", "1+0"}
)

const (
	maxSoftwareRAIDVolumes     = 2
	minSoftwareRAIDMemberDisks = 2
)

// validateRAID checks the RAID layout. An empty hardwareRAIDVolumes list ([]) is valid: it asks
// for the hardware RAID configuration to be cleared.
func validateRAID(raid *metal3.RAIDConfig, path *field.Path) field.ErrorList {
	if raid == nil {
		return nil
	}
	var errs field.ErrorList
	hwPath, swPath := path.Child("hardwareRAIDVolumes"), path.Child("softwareRAIDVolumes")
	if len(raid.HardwareRAIDVolumes) > 0 && len(raid.SoftwareRAIDVolumes) > 0 {
		errs = append(errs, field.Forbidden(swPath, "cannot be set together with hardwareRAIDVolumes: use hardware or software RAID, not both"))
	}

	names := map[string]bool{}
	for i, v := range raid.HardwareRAIDVolumes {
		p := hwPath.Index(i)
		if !slices.Contains(hardwareRAIDLevels, v.Level) {
			errs = append(errs, field.NotSupported(p.Child("level"), v.Level, hardwareRAIDLevels))
		}
		if v.Name != "" && names[v.Name] {
			errs = append(errs, field.Duplicate(p.Child("name"), v.Name))
		}
		names[v.Name] = true
		if v.SizeGibibytes != nil && *v.SizeGibibytes < 0 {
			errs = append(errs, field.Invalid(p.Child("sizeGibibytes"), *v.SizeGibibytes, "must be 0 or more (0 uses the whole capacity)"))
		}
		if v.NumberOfPhysicalDisks != nil && *v.NumberOfPhysicalDisks < 1 {
			errs = append(errs, field.Invalid(p.Child("numberOfPhysicalDisks"), *v.NumberOfPhysicalDisks, "must be 1 or more"))
		}
		if len(v.PhysicalDisks) == 0 {
			continue
		}
		// Disk names are the controller's own, so they mean nothing without it.
		if v.Controller == "" {
			errs = append(errs, field.Required(p.Child("controller"), "required when physicalDisks is set: the RAID controller the disks belong to"))
		}
		if v.NumberOfPhysicalDisks != nil && *v.NumberOfPhysicalDisks != len(v.PhysicalDisks) {
			errs = append(errs, field.Invalid(p.Child("numberOfPhysicalDisks"), *v.NumberOfPhysicalDisks,
				fmt.Sprintf("must equal the number of physicalDisks (%d), or be left unset", len(v.PhysicalDisks))))
		}
	}

	if n := len(raid.SoftwareRAIDVolumes); n > maxSoftwareRAIDVolumes {
		errs = append(errs, field.TooMany(swPath, n, maxSoftwareRAIDVolumes))
	}
	rootVolumes := 0
	for i, v := range raid.SoftwareRAIDVolumes {
		p := swPath.Index(i)
		if !slices.Contains(softwareRAIDLevels, v.Level) {
			errs = append(errs, field.NotSupported(p.Child("level"), v.Level, softwareRAIDLevels))
		} else if i == 0 && v.Level != "1" {
			// The agent boots from the first device: only a mirror has a whole copy of it on
			// each disk (Ironic refuses anything else; the provisioner would only say so when
			// preparing).
			errs = append(errs, field.Invalid(p.Child("level"), v.Level, `the first software RAID volume must be RAID "1"`))
		}
		if v.SizeGibibytes != nil && *v.SizeGibibytes < 0 {
			errs = append(errs, field.Invalid(p.Child("sizeGibibytes"), *v.SizeGibibytes, "must be 0 or more (0 uses the whole capacity)"))
		}
		if n := len(v.PhysicalDisks); n > 0 && n < minSoftwareRAIDMemberDisks {
			errs = append(errs, field.Invalid(p.Child("physicalDisks"), n,
				fmt.Sprintf("must list at least %d disks when set (a RAID device needs two members), or be left unset", minSoftwareRAIDMemberDisks)))
		}
		for j, d := range v.PhysicalDisks {
			errs = append(errs, validateDeviceName(d.DeviceName, p.Child("physicalDisks").Index(j).Child("deviceName"))...)
		}
		if v.RootVolume {
			rootVolumes++
			if rootVolumes > 1 {
				errs = append(errs, field.Invalid(p.Child("rootVolume"), true, "only one software RAID volume can be the root volume"))
			}
		}
	}
	return errs
}

// validateDeviceName checks a root device hint's device name: a device node directly in /dev/
// or a link in /dev/disk/by-path/, the forms the agent can match exactly.
func validateDeviceName(name string, path *field.Path) field.ErrorList {
	if name == "" {
		return nil
	}
	rest, ok := strings.CutPrefix(name, "/dev/")
	if !ok {
		return field.ErrorList{field.Invalid(path, name, `must be a /dev/ path, e.g. "/dev/sda" or "/dev/disk/by-path/pci-0000:00:1f.2-ata-1"`)}
	}
	rest = strings.TrimPrefix(rest, "disk/by-path/")
	if rest == "" || strings.Contains(rest, "/") {
		return field.ErrorList{field.Invalid(path, name, `must be a device in /dev/ or a link in /dev/disk/by-path/, e.g. "/dev/sda" or "/dev/disk/by-path/pci-0000:00:1f.2-ata-1"`)}
	}
	return nil
}
