package ironic

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/inventory"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

// hardwareFromInventory converts Ironic's inventory (GET /v1/nodes/{id}/inventory) into the host's
// hardware details, field for field as metal3 does, with two fixes: LLDP VLAN numbers (JSON
// numbers, which metal3 reads as int and so never finds), and the PXE flag, which out-of-band
// inspection leaves out of plugin data and is then taken from the boot MAC (or the inventory's PXE
// interface).
func hardwareFromInventory(data *nodes.InventoryData, bootMAC string) *metal3.HardwareDetails {
	inv := data.Inventory
	plugin, _ := data.PluginData.AsStandardData() // absent or foreign plugin data: no PXE/LLDP details
	return &metal3.HardwareDetails{
		SystemVendor: metal3.HardwareSystemVendor{
			Manufacturer: inv.SystemVendor.Manufacturer,
			ProductName:  inv.SystemVendor.ProductName,
			SerialNumber: inv.SystemVendor.SerialNumber,
		},
		Firmware: metal3.Firmware{BIOS: metal3.BIOS{
			Vendor:  inv.SystemVendor.Firmware.Vendor,
			Version: inv.SystemVendor.Firmware.Version,
			Date:    inv.SystemVendor.Firmware.BuildDate,
		}},
		RAMMebibytes: inv.Memory.PhysicalMb,
		NIC:          nicDetails(inv.Interfaces, inv.Boot.PXEInterface, plugin, bootMAC),
		Storage:      storageDetails(inv.Disks),
		CPU:          cpuDetails(inv.CPU),
		Hostname:     inv.Hostname,
	}
}

func cpuDetails(c inventory.CPUType) metal3.CPU {
	freq, _ := strconv.ParseFloat(strings.TrimSpace(c.Frequency), 64)
	flags := slices.Clone(c.Flags)
	slices.Sort(flags)
	return metal3.CPU{
		Arch:           c.Architecture,
		Model:          c.ModelName,
		ClockMegahertz: metal3.ClockSpeed(math.Round(freq)) * metal3.MegaHertz,
		Flags:          flags,
		Count:          c.Count,
	}
}

// nicDetails lists one NIC per interface and address family: an interface with both an IPv4 and an
// IPv6 address appears twice, one with neither once.
func nicDetails(ifaces []inventory.InterfaceType, pxeInterface string, plugin inventory.StandardPluginData, bootMAC string) []metal3.NIC {
	var nics []metal3.NIC
	for _, intf := range ifaces {
		pxe := plugin.AllInterfaces[intf.Name].PXEEnabled ||
			(bootMAC != "" && strings.EqualFold(intf.MACAddress, bootMAC)) ||
			(pxeInterface != "" && (strings.EqualFold(pxeInterface, intf.MACAddress) || pxeInterface == intf.Name))
		vlans, untagged := lldpVLANs(plugin.ParsedLLDP[intf.Name])
		base := metal3.NIC{
			Name:       intf.Name,
			Model:      strings.TrimSpace(intf.Vendor + " " + intf.Product),
			MAC:        intf.MACAddress,
			SpeedGbps:  intf.SpeedMbps / 1000,
			VLANs:      vlans,
			VLANID:     untagged,
			PXE:        pxe,
			LLDP:       lldp(plugin.ParsedLLDP[intf.Name]),
			PCIAddress: intf.PCIAddress,
		}
		if intf.IPV4Address != "" || intf.IPV6Address == "" {
			nic := base
			nic.IP = intf.IPV4Address
			nics = append(nics, nic)
		}
		if intf.IPV6Address != "" {
			nic := base
			nic.IP = intf.IPV6Address
			nics = append(nics, nic)
		}
	}
	return nics
}

func lldpVLANs(parsed map[string]any) ([]metal3.VLAN, metal3.VLANID) {
	if parsed == nil {
		return nil, 0
	}
	var vlans []metal3.VLAN
	if list, ok := parsed["switch_port_vlans"].([]any); ok {
		for _, item := range list {
			m, _ := item.(map[string]any)
			id, _ := number(m["id"])
			name, _ := m["name"].(string)
			vlans = append(vlans, metal3.VLAN{ID: metal3.VLANID(id), Name: name})
		}
	}
	untagged, _ := number(parsed["switch_port_untagged_vlan_id"])
	return vlans, metal3.VLANID(untagged)
}

func number(v any) (int, bool) {
	switch x := v.(type) {
	case float64:
		return int(x), true
	case int:
		return x, true
	}
	return 0, false
}

func lldp(parsed map[string]any) *metal3.LLDP {
	if parsed == nil {
		return nil
	}
	str := func(k string) string { s, _ := parsed[k].(string); return s }
	l := metal3.LLDP{SwitchID: str("switch_chassis_id"), PortID: str("switch_port_id"), SwitchSystemName: str("switch_system_name")}
	if l == (metal3.LLDP{}) {
		return nil
	}
	return &l
}

// storageDetails names each disk by its stable by-path name when it has one, keeping the kernel
// name as an alternate.
func storageDetails(disks []inventory.RootDiskType) []metal3.Storage {
	out := make([]metal3.Storage, 0, len(disks))
	for _, d := range disks {
		name, alternates := d.Name, []string{d.Name}
		if d.ByPath != "" {
			name = d.ByPath
			alternates = append(alternates, d.ByPath)
		}
		out = append(out, metal3.Storage{
			Name:               name,
			AlternateNames:     alternates,
			Rotational:         d.Rotational,
			Type:               diskType(d),
			SizeBytes:          metal3.Capacity(d.Size),
			Vendor:             d.Vendor,
			Model:              d.Model,
			SerialNumber:       d.Serial,
			WWN:                d.Wwn,
			WWNVendorExtension: d.WwnVendorExtension,
			WWNWithExtension:   d.WwnWithExtension,
			HCTL:               d.Hctl,
		})
	}
	return out
}

func diskType(d inventory.RootDiskType) metal3.DiskType {
	switch {
	case d.Rotational:
		return metal3.HDD
	case strings.HasPrefix(d.Name, "/dev/nvme"):
		return metal3.NVME
	}
	return metal3.SSD
}
