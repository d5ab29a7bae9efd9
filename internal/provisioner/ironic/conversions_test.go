package ironic

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	"k8s.io/apimachinery/pkg/util/intstr"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/bmc"
	"github.com/metalforge/metalforge/internal/provisioner"
)

// agentInventory is GET /v1/nodes/{id}/inventory after agent inspection, in IPA's format.
const agentInventory = `{
 "inventory": {
  "bmc_address": "192.0.2.10",
  "cpu": {"model_name": "Sim Xeon 8000", "frequency": "2999.6", "count": 32, "architecture": "x86_64", "flags": ["vmx", "aes", "sse4_2"]},
  "memory": {"total": 34359738368, "physical_mb": 32768},
  "disks": [
   {"name": "/dev/sda", "model": "Sim SSD 100", "size": 107374182400, "rotational": false, "wwn": "0x5000", "serial": "SSD0", "vendor": "SimDisk", "hctl": "0:0:0:0", "by_path": "/dev/disk/by-path/pci-0000:00:1f.2-ata-1"},
   {"name": "/dev/sdb", "model": "Sim HDD", "size": 2000000000000, "rotational": true, "serial": "HDD1", "vendor": "SimDisk"},
   {"name": "/dev/nvme0n1", "model": "Sim NVMe", "size": 500000000000, "rotational": false}
  ],
  "interfaces": [
   {"name": "eno1", "mac_address": "52:54:00:00:00:00", "ipv4_address": "192.0.2.20", "ipv6_address": "2001:db8::20", "speed_mbps": 10000, "vendor": "0x8086", "product": "0x1572", "pci_address": "0000:3b:00.0"},
   {"name": "eno2", "mac_address": "52:54:00:00:00:01", "speed_mbps": 25000, "vendor": "0x8086", "product": "0x1572"}
  ],
  "system_vendor": {"product_name": "SimServer 1000", "serial_number": "SN123", "manufacturer": "Metalforge",
                    "firmware": {"vendor": "SimBIOS", "version": "1.0.0", "build_date": "2024-01-01"}},
  "boot": {"current_boot_mode": "uefi", "pxe_interface": "52:54:00:00:00:00"},
  "hostname": "host-0"
 },
 "plugin_data": {
  "all_interfaces": {"eno1": {"name": "eno1", "mac_address": "52:54:00:00:00:00", "pxe_enabled": true},
                     "eno2": {"name": "eno2", "mac_address": "52:54:00:00:00:01", "pxe_enabled": false}},
  "parsed_lldp": {"eno1": {"switch_chassis_id": "sw-1", "switch_port_id": "Ethernet1/1", "switch_system_name": "tor-a",
                           "switch_port_vlans": [{"id": 100, "name": "prov"}, {"id": 200, "name": "data"}],
                           "switch_port_untagged_vlan_id": 100}}
 }
}`

// redfishInventory is the inventory after out-of-band (redfish) inspection: no plugin data, no
// firmware, no hostname.
const redfishInventory = `{
 "inventory": {
  "cpu": {"count": 32, "model_name": "Sim Xeon 8000", "frequency": 3000, "architecture": "x86_64"},
  "memory": {"physical_mb": 32768},
  "disks": [{"name": "Disk0", "size": 107374182400}],
  "interfaces": [{"mac_address": "52:54:00:00:00:00"}, {"mac_address": "52:54:00:00:00:01"}],
  "system_vendor": {"product_name": "SimServer 1000", "serial_number": "SN123", "manufacturer": "Metalforge"},
  "boot": {"current_boot_mode": "uefi"}
 },
 "plugin_data": {}
}`

func inventoryData(t *testing.T, raw string) *nodes.InventoryData {
	t.Helper()
	var data nodes.InventoryData
	if err := json.Unmarshal([]byte(raw), &data); err != nil {
		t.Fatal(err)
	}
	data.Inventory.Compat()
	return &data
}

func TestHardwareFromAgentInventory(t *testing.T) {
	hw := hardwareFromInventory(inventoryData(t, agentInventory), "52:54:00:00:00:00")
	want := &metal3.HardwareDetails{
		SystemVendor: metal3.HardwareSystemVendor{Manufacturer: "Metalforge", ProductName: "SimServer 1000", SerialNumber: "SN123"},
		Firmware:     metal3.Firmware{BIOS: metal3.BIOS{Vendor: "SimBIOS", Version: "1.0.0", Date: "2024-01-01"}},
		RAMMebibytes: 32768,
		CPU:          metal3.CPU{Arch: "x86_64", Model: "Sim Xeon 8000", ClockMegahertz: 3000, Flags: []string{"aes", "sse4_2", "vmx"}, Count: 32},
		Hostname:     "host-0",
		Storage: []metal3.Storage{
			{Name: "/dev/disk/by-path/pci-0000:00:1f.2-ata-1", AlternateNames: []string{"/dev/sda", "/dev/disk/by-path/pci-0000:00:1f.2-ata-1"},
				Type: metal3.SSD, SizeBytes: 107374182400, Vendor: "SimDisk", Model: "Sim SSD 100", SerialNumber: "SSD0", WWN: "0x5000", HCTL: "0:0:0:0"},
			{Name: "/dev/sdb", AlternateNames: []string{"/dev/sdb"}, Rotational: true, Type: metal3.HDD, SizeBytes: 2000000000000,
				Vendor: "SimDisk", Model: "Sim HDD", SerialNumber: "HDD1"},
			{Name: "/dev/nvme0n1", AlternateNames: []string{"/dev/nvme0n1"}, Type: metal3.NVME, SizeBytes: 500000000000, Model: "Sim NVMe"},
		},
	}
	lldp := &metal3.LLDP{SwitchID: "sw-1", PortID: "Ethernet1/1", SwitchSystemName: "tor-a"}
	vlans := []metal3.VLAN{{ID: 100, Name: "prov"}, {ID: 200, Name: "data"}}
	eno1 := metal3.NIC{Name: "eno1", Model: "0x8086 0x1572", MAC: "52:54:00:00:00:00", SpeedGbps: 10, PXE: true,
		LLDP: lldp, VLANs: vlans, VLANID: 100, PCIAddress: "0000:3b:00.0"}
	v4, v6 := eno1, eno1
	v4.IP, v6.IP = "192.0.2.20", "2001:db8::20"
	want.NIC = []metal3.NIC{v4, v6, {Name: "eno2", Model: "0x8086 0x1572", MAC: "52:54:00:00:00:01", SpeedGbps: 25}}
	if !reflect.DeepEqual(hw, want) {
		g, _ := json.MarshalIndent(hw, "", " ")
		w, _ := json.MarshalIndent(want, "", " ")
		t.Errorf("hardware details:\n%s\nwant:\n%s", g, w)
	}
}

func TestHardwareFromRedfishInventory(t *testing.T) {
	hw := hardwareFromInventory(inventoryData(t, redfishInventory), "52:54:00:00:00:01")
	if hw.CPU.Count != 32 || hw.CPU.ClockMegahertz != 3000 || hw.RAMMebibytes != 32768 || hw.Hostname != "" {
		t.Errorf("details %+v", hw)
	}
	if len(hw.Storage) != 1 || hw.Storage[0].Name != "Disk0" || hw.Storage[0].Type != metal3.SSD {
		t.Errorf("storage %+v", hw.Storage)
	}
	// No plugin data: the boot MAC is the PXE NIC.
	if len(hw.NIC) != 2 || hw.NIC[0].PXE || !hw.NIC[1].PXE {
		t.Errorf("NICs %+v, want the second (boot MAC) marked PXE", hw.NIC)
	}
}

func TestConfigDrive(t *testing.T) {
	host := provisioner.Host{Namespace: "ns", Name: "h1"}
	cd, err := configDrive(host, provisioner.HostConfig{
		UserData:    "#cloud-config\nusers: []\n",
		NetworkData: "links:\n- id: eno1\n  type: phy\n",
		MetaData:    "local-hostname: custom\nrole: worker\n",
	}, "uuid-1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(cd)
	var got map[string]any
	_ = json.Unmarshal(body, &got)
	want := map[string]any{
		"user_data":    "#cloud-config\nusers: []\n",
		"network_data": map[string]any{"links": []any{map[string]any{"id": "eno1", "type": "phy"}}},
		"meta_data": map[string]any{
			"uuid": "uuid-1", "metal3-namespace": "ns", "metal3-name": "h1", "local-hostname": "custom",
			"local_hostname": "h1", "name": "h1", "role": "worker",
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("config drive %s", body)
	}
	// The host's UID, not the node's UUID, as metal3 (CAPM3 matches Nodes to hosts by it).
	withUID := host
	withUID.UID = "bmh-uid"
	if cd, err := configDrive(withUID, provisioner.HostConfig{}, "node-uuid"); err != nil || cd.MetaData["uuid"] != "bmh-uid" {
		t.Errorf("meta_data.uuid %v (%v), want the host's UID", cd.MetaData["uuid"], err)
	}

	empty, err := configDrive(host, provisioner.HostConfig{}, "u")
	if err != nil || empty.UserData != nil || empty.NetworkData != nil || empty.MetaData["name"] != "h1" {
		t.Errorf("empty host config: %+v, %v; want only default meta data", empty, err)
	}
	for field, hc := range map[string]provisioner.HostConfig{
		"spec.networkData": {NetworkData: "[not: a map"},
		"spec.metaData":    {MetaData: "- a list"},
	} {
		if _, err := configDrive(host, hc, "u"); err == nil || !strings.HasPrefix(err.Error(), field) {
			t.Errorf("bad %s: error %v, want one naming the field", field, err)
		}
	}
}

func TestPlanDeploy(t *testing.T) {
	raw, live := "raw", "live-iso"
	cfg := DefaultConfig()
	tests := map[string]struct {
		data      provisioner.ProvisionData
		iface     any
		info      map[string]any // non-nil image keys
		steps     int
		liveISO   bool
		wantError string
	}{
		"disk image with sha256": {
			data:  provisioner.ProvisionData{Image: &metal3.Image{URL: "http://i/disk.img", Checksum: "abc", ChecksumType: metal3.SHA256, DiskFormat: &raw}},
			iface: nil,
			info:  map[string]any{"image_source": "http://i/disk.img", "image_os_hash_algo": "sha256", "image_os_hash_value": "abc", "image_disk_format": "raw"},
		},
		"checksum without type": {
			data: provisioner.ProvisionData{Image: &metal3.Image{URL: "http://i/disk.img", Checksum: "http://i/disk.img.sha256sum"}},
			info: map[string]any{"image_source": "http://i/disk.img", "image_checksum": "http://i/disk.img.sha256sum"},
		},
		"auto checksum": {
			data: provisioner.ProvisionData{Image: &metal3.Image{URL: "http://i/d", Checksum: "abc", ChecksumType: metal3.AutoChecksum}},
			info: map[string]any{"image_source": "http://i/d", "image_checksum": "abc"},
		},
		"live ISO": {
			data:    provisioner.ProvisionData{Image: &metal3.Image{URL: "http://i/live.iso", DiskFormat: &live}},
			iface:   "ramdisk",
			info:    map[string]any{"boot_iso": "http://i/live.iso"},
			liveISO: true,
		},
		"custom deploy": {
			data:  provisioner.ProvisionData{CustomDeploy: &metal3.CustomDeploy{Method: "install_coreos"}},
			iface: "custom-agent",
			info:  map[string]any{},
			steps: 1,
		},
		"custom deploy start_assisted_install (seed 001: the assisted agent, no image)": {
			data:  provisioner.ProvisionData{CustomDeploy: &metal3.CustomDeploy{Method: "start_assisted_install"}},
			iface: "custom-agent",
			info:  map[string]any{},
			steps: 1,
		},
		"custom deploy with an image": {
			data:  provisioner.ProvisionData{CustomDeploy: &metal3.CustomDeploy{Method: "m"}, Image: &metal3.Image{URL: "http://i/x"}},
			iface: "custom-agent",
			info:  map[string]any{"image_source": "http://i/x"},
			steps: 1,
		},
		"no checksum":     {data: provisioner.ProvisionData{Image: &metal3.Image{URL: "http://i/d"}}, wantError: "spec.image.checksum"},
		"nothing to do":   {data: provisioner.ProvisionData{}, wantError: "nothing to provision"},
		"live ISO no URL": {data: provisioner.ProvisionData{Image: &metal3.Image{DiskFormat: &live}}, wantError: "spec.image.url"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			plan, err := planDeploy(cfg, tc.data)
			if tc.wantError != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantError) {
					t.Fatalf("error %v, want %q", err, tc.wantError)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]any{}
			for _, k := range imageKeys {
				if v := plan.instanceInfo[k]; v != nil {
					got[k] = v
				}
			}
			if !reflect.DeepEqual(got, tc.info) || plan.deployInterface != tc.iface || len(plan.steps) != tc.steps || plan.liveISO != tc.liveISO {
				t.Errorf("plan: info %v iface %v steps %v live %t", got, plan.deployInterface, plan.steps, plan.liveISO)
			}

			// Applied to an empty node, the plan makes the node match it; applied again, nothing.
			n := &nodes.Node{InstanceInfo: map[string]any{"boot_iso": "http://old"}, DriverInfo: map[string]any{}, DeployInterface: "direct"}
			if plan.matches(n) {
				t.Error("plan matches a node set up for something else")
			}
			var pt patch
			plan.apply(&pt, n)
			applyPatch(t, n, pt)
			if !plan.matches(n) {
				t.Errorf("node after the patch %v does not match the plan", pt.paths())
			}
			var again patch
			plan.apply(&again, n)
			if len(again) != 0 {
				t.Errorf("second patch not empty: %v", again.paths())
			}
		})
	}
}

// applyPatch applies a patch to a node's fields the way Ironic does, for the fields plans touch.
// TestDeployedPlanSurvivesIronicRewrites: a deployment is recognised by the fingerprint the deploy
// wrote into extra, whatever Ironic wrote into instance_info since (the target of a redirect, the
// disk format it found); another request is not taken for it. A node without a fingerprint is
// compared by its image keys.
func TestDeployedPlanSurvivesIronicRewrites(t *testing.T) {
	raw := "raw"
	image := func(url string) deployPlan {
		plan, err := planDeploy(DefaultConfig(), provisioner.ProvisionData{Image: &metal3.Image{URL: url, Checksum: "abc", ChecksumType: metal3.SHA256}})
		if err != nil {
			t.Fatal(err)
		}
		return plan
	}
	plan := image("http://images.example/disk.img")
	n := &nodes.Node{InstanceInfo: map[string]any{}, DriverInfo: map[string]any{}, Extra: map[string]any{}}
	var pt patch
	plan.apply(&pt, n)
	pt.setKeys("extra", n.Extra, map[string]any{extraDeployed: plan.fingerprint()})
	applyPatch(t, n, pt)
	// What Ironic's direct deploy writes before the agent calls back.
	n.InstanceInfo["image_source"] = "https://mirror.example/disk.img"
	n.InstanceInfo["image_disk_format"] = raw
	if !plan.matches(n) {
		t.Error("the deployment Ironic rewrote is not recognised as the one asked for")
	}
	if image("http://images.example/other.img").matches(n) {
		t.Error("another image is taken for the deployment")
	}
	n.Extra[extraDeployed] = "v0:" + plan.fingerprint()
	if plan.matches(n) {
		t.Error("with a fingerprint of another version, a node whose image keys differ matches")
	}
	delete(n.Extra, extraDeployed)
	if plan.matches(n) {
		t.Error("without a fingerprint, a node whose image keys differ matches")
	}
}

func applyPatch(t *testing.T, n *nodes.Node, pt patch) {
	t.Helper()
	for _, op := range pt {
		parts := strings.SplitN(strings.TrimPrefix(op.Path, "/"), "/", 2)
		var m map[string]any
		switch parts[0] {
		case "instance_info":
			m = n.InstanceInfo
		case "driver_info":
			m = n.DriverInfo
		case "properties":
			if n.Properties == nil {
				n.Properties = map[string]any{}
			}
			m = n.Properties
		case "extra":
			if n.Extra == nil {
				n.Extra = map[string]any{}
			}
			m = n.Extra
		case "deploy_interface":
			if op.Op == nodes.RemoveOp {
				n.DeployInterface = "direct"
			} else {
				n.DeployInterface = op.Value.(string)
			}
			continue
		default:
			t.Fatalf("unexpected path %s", op.Path)
		}
		if op.Op == nodes.RemoveOp {
			delete(m, parts[1])
		} else {
			m[parts[1]] = normalize(op.Value)
		}
	}
}

// TestTypeBIOSSteps: each BIOS value is sent in the JSON type of its registry attribute, whatever
// form it was written in; the firmware step and the steps given are left alone.
func TestTypeBIOSSteps(t *testing.T) {
	types := map[string]string{"PowerOnDelaySeconds": "Integer", "ProcCores": "Enumeration", "AssetTag": "String",
		"SerialConsole": "Boolean", "ProcTurboMode": "Enumeration", "Untyped": ""}
	tests := map[string]struct {
		value intstr.IntOrString
		name  string
		want  string // the JSON of the value sent
	}{
		"integer written as a number":  {intstr.FromInt32(30), "PowerOnDelaySeconds", `30`},
		"integer written as a string":  {intstr.FromString("30"), "PowerOnDelaySeconds", `30`},
		"integer that does not parse":  {intstr.FromString("soon"), "PowerOnDelaySeconds", `"soon"`},
		"enumeration of numbers":       {intstr.FromInt32(4), "ProcCores", `"4"`},
		"enumeration as a string":      {intstr.FromString("Disabled"), "ProcTurboMode", `"Disabled"`},
		"string written as a number":   {intstr.FromInt32(1234), "AssetTag", `"1234"`},
		"boolean":                      {intstr.FromString("true"), "SerialConsole", `true`},
		"boolean false":                {intstr.FromString("false"), "SerialConsole", `false`},
		"boolean as status shows it":   {intstr.FromString("True"), "SerialConsole", `true`},
		"boolean that does not parse":  {intstr.FromString("yes"), "SerialConsole", `"yes"`},
		"no type: as written (number)": {intstr.FromInt32(7), "Untyped", `7`},
		"not in the registry":          {intstr.FromString("x"), "Missing", `"x"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			bios, _ := biosStep(metal3.DesiredSettingsMap{tc.name: tc.value})
			fw, _ := firmwareStep([]metal3.FirmwareUpdate{{Component: "bios", URL: "http://f/bios-2.0.bin"}})
			steps := []nodes.CleanStep{bios, fw}
			before, _ := json.Marshal(steps)
			typed := typeBIOSSteps(steps, types)
			want := `[{"interface":"bios","step":"apply_configuration","args":{"settings":[{"name":"` + tc.name + `","value":` + tc.want + `}]}},` +
				`{"interface":"firmware","step":"update","args":{"settings":[{"component":"bios","url":"http://f/bios-2.0.bin"}]}}]`
			if b, _ := json.Marshal(typed); string(b) != want {
				t.Errorf("typed steps\n%s\nwant\n%s", b, want)
			}
			if after, _ := json.Marshal(steps); string(after) != string(before) {
				t.Errorf("the steps given were changed: %s", after)
			}
		})
	}
}

func TestSteps(t *testing.T) {
	bios, ok := biosStep(metal3.DesiredSettingsMap{"ProcTurboMode": intstr.FromString("Disabled"), "PowerOnDelaySeconds": intstr.FromInt32(30)})
	wantBIOS := `{"interface":"bios","step":"apply_configuration","args":{"settings":[{"name":"PowerOnDelaySeconds","value":30},{"name":"ProcTurboMode","value":"Disabled"}]}}`
	if b, _ := json.Marshal(bios); !ok || string(b) != wantBIOS {
		t.Errorf("bios step %s", b)
	}
	if _, ok := biosStep(nil); ok {
		t.Error("bios step without settings")
	}
	fw, ok := firmwareStep([]metal3.FirmwareUpdate{{Component: "bios", URL: "http://f/bios-2.0.bin"}, {Component: "bmc", URL: "http://f/bmc.bin"}})
	wantFW := `{"interface":"firmware","step":"update","args":{"settings":[{"component":"bios","url":"http://f/bios-2.0.bin"},{"component":"bmc","url":"http://f/bmc.bin"}]}}`
	if b, _ := json.Marshal(fw); !ok || string(b) != wantFW {
		t.Errorf("firmware step %s", b)
	}
	custom := customDeploySteps(&metal3.CustomDeploy{Method: "install_coreos"})
	wantCustom := `[{"interface":"deploy","step":"install_coreos","args":{},"priority":80}]`
	if b, _ := json.Marshal(custom); string(b) != wantCustom {
		t.Errorf("custom deploy steps %s", b)
	}
	if customDeploySteps(nil) != nil || customDeploySteps(&metal3.CustomDeploy{}) != nil {
		t.Error("custom deploy steps without a method")
	}
	// Computed twice: map iteration order must not change it.
	if first := fingerprint(bios); first != fingerprint(bios) || first == fingerprint(fw) {
		t.Error("fingerprints are not stable or not distinct")
	}
}

// Hints taken out of the spec are removed from the node; hints kept are not written again.
func TestRootDevicePropertyRemoved(t *testing.T) {
	have := map[string]any{"root_device": map[string]any{"name": "s== /dev/sdb"}}
	var removed patch
	removed.setKeys("properties", have, map[string]any{"root_device": rootDeviceProperty(nil)})
	if len(removed) != 1 || removed[0].Op != nodes.RemoveOp || removed[0].Path != "/properties/root_device" {
		t.Errorf("without hints: %+v, want the removal of /properties/root_device", removed)
	}
	var same patch
	same.setKeys("properties", have, map[string]any{"root_device": rootDeviceProperty(&metal3.RootDeviceHints{DeviceName: "/dev/sdb"})})
	if len(same) != 0 {
		t.Errorf("same hints: %+v, want no change", same)
	}
	var none patch
	none.setKeys("properties", map[string]any{}, map[string]any{"root_device": rootDeviceProperty(nil)})
	if len(none) != 0 {
		t.Errorf("no hints on either side: %+v, want no change", none)
	}
}

func TestRootDeviceHints(t *testing.T) {
	yes := true
	got := rootDeviceHints(&metal3.RootDeviceHints{
		DeviceName: "/dev/sda", HCTL: "0:0:0:0", Model: "SSD", Vendor: "Sim", SerialNumber: "S1",
		MinSizeGigabytes: 100, WWN: "0x1", WWNWithExtension: "0x1e", WWNVendorExtension: "0xe", Rotational: &yes,
	})
	want := map[string]any{
		"name": "s== /dev/sda", "hctl": "s== 0:0:0:0", "model": "<in> SSD", "vendor": "<in> Sim", "serial": "s== S1",
		"size": ">= 100", "wwn": "s== 0x1", "wwn_with_extension": "s== 0x1e", "wwn_vendor_extension": "s== 0xe", "rotational": true,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("hints %v", got)
	}
	if h := rootDeviceHints(&metal3.RootDeviceHints{DeviceName: "/dev/disk/by-path/pci-0"}); h["by_path"] != "s== /dev/disk/by-path/pci-0" {
		t.Errorf("by-path hint %v", h)
	}
	if rootDeviceHints(nil) != nil || rootDeviceHints(&metal3.RootDeviceHints{}) != nil {
		t.Error("empty hints must be nil")
	}
}

func stepsString(steps []nodes.CleanStep) string { return strings.Join(stepNames(steps), " ") }

func TestDeployImage(t *testing.T) {
	vmedia, _ := bmc.Parse("redfish-virtualmedia+http://127.0.0.1/redfish/v1/Systems/1")
	ipxe, _ := bmc.Parse("redfish+http://127.0.0.1/redfish/v1/Systems/1")
	cfg := Config{DeployKernelURL: "http://k", DeployRamdiskURL: "http://r", DeployISOURL: "http://iso"}
	set := func(info map[string]any) map[string]any {
		out := map[string]any{}
		for k, v := range info {
			if v != nil {
				out[k] = v
			}
		}
		return out
	}
	tests := map[string]struct {
		cfg    Config
		access *bmc.Access
		ppi    *provisioner.PreprovisioningImage
		want   map[string]any
		ok     bool
	}{
		"vmedia takes the ISO":          {cfg: cfg, access: vmedia, want: map[string]any{keyDeployISO: "http://iso"}, ok: true},
		"iPXE takes kernel and ramdisk": {cfg: cfg, access: ipxe, want: map[string]any{keyDeployKernel: "http://k", keyDeployRamdisk: "http://r"}, ok: true},
		"PPI ISO": {cfg: cfg, access: vmedia, ppi: &provisioner.PreprovisioningImage{ImageURL: "http://ppi.iso", Format: metal3.ImageFormatISO},
			want: map[string]any{keyDeployISO: "http://ppi.iso"}, ok: true},
		"PPI initrd with params": {cfg: cfg, access: ipxe, ppi: &provisioner.PreprovisioningImage{ImageURL: "http://ppi.initrd", Format: metal3.ImageFormatInitRD, ExtraKernelParams: "console=ttyS0"},
			want: map[string]any{keyDeployKernel: "http://k", keyDeployRamdisk: "http://ppi.initrd", keyKernelParams: "%default% console=ttyS0"}, ok: true},
		"PPI ISO on iPXE falls back": {cfg: cfg, access: ipxe, ppi: &provisioner.PreprovisioningImage{ImageURL: "http://ppi.iso", Format: metal3.ImageFormatISO},
			want: map[string]any{keyDeployKernel: "http://k", keyDeployRamdisk: "http://r"}, ok: true},
		"builder, no PPI yet": {cfg: Config{PreprovisioningImageBuilder: true, DeployKernelURL: "http://k"}, access: vmedia, want: map[string]any{}, ok: false},
		"nothing configured":  {cfg: Config{}, access: vmedia, want: map[string]any{}, ok: false},
	}
	for name, tc := range tests {
		info, ok := deployImage(tc.cfg, tc.access, tc.ppi)
		if ok != tc.ok || !reflect.DeepEqual(set(info), tc.want) || len(info) != 4 {
			t.Errorf("%s: %v %t, want %v %t (with every key present)", name, info, ok, tc.want, tc.ok)
		}
	}
}

// TestPreprovisioningImageFormats: with a builder, an ISO first where the BMC boots one, else only
// the initrd; without a builder, no image at all.
func TestPreprovisioningImageFormats(t *testing.T) {
	iso, initrd := metal3.ImageFormatISO, metal3.ImageFormatInitRD
	tests := map[string]struct {
		builder bool
		address string
		want    []metal3.ImageFormat
		wantErr string
	}{
		"virtual media":            {builder: true, address: "redfish-virtualmedia+http://127.0.0.1/redfish/v1/Systems/1", want: []metal3.ImageFormat{iso, initrd}},
		"iDRAC virtual media":      {builder: true, address: "idrac-virtualmedia://127.0.0.1/redfish/v1/Systems/1", want: []metal3.ImageFormat{iso, initrd}},
		"redfish (iPXE)":           {builder: true, address: "redfish+http://127.0.0.1/redfish/v1/Systems/1", want: []metal3.ImageFormat{initrd}},
		"IPMI":                     {builder: true, address: "ipmi://127.0.0.1", want: []metal3.ImageFormat{initrd}},
		"no builder":               {builder: false, address: "redfish-virtualmedia+http://127.0.0.1/redfish/v1/Systems/1"},
		"bad address with builder": {builder: true, address: "nope://x", wantErr: "spec.bmc.address"},
	}
	for name, tc := range tests {
		p := &Provisioner{cfg: Config{PreprovisioningImageBuilder: tc.builder}}
		got, err := p.PreprovisioningImageFormats(provisioner.Host{BMCAddress: tc.address})
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: error %v, want one naming %s", name, err, tc.wantErr)
			}
		case err != nil || !reflect.DeepEqual(got, tc.want):
			t.Errorf("%s: %v, %v; want %v", name, got, err, tc.want)
		}
	}
}

func TestCapabilities(t *testing.T) {
	tests := map[string]struct {
		existing any
		mode     metal3.BootMode
		want     string
	}{
		"none":               {nil, metal3.UEFI, "boot_mode:uefi"},
		"default":            {"", "", "boot_mode:uefi"},
		"legacy":             {"boot_mode:uefi", metal3.Legacy, "boot_mode:bios"},
		"secure boot":        {"cpu_vt:true,boot_mode:bios", metal3.UEFISecureBoot, "cpu_vt:true,boot_mode:uefi,secure_boot:true"},
		"keeps other values": {"cpu_vt:true,secure_boot:true", metal3.UEFI, "cpu_vt:true,boot_mode:uefi"},
	}
	for name, tc := range tests {
		if got := capabilities(tc.existing, tc.mode); got != tc.want {
			t.Errorf("%s: %q, want %q", name, got, tc.want)
		}
	}
}

func TestPatch(t *testing.T) {
	var pt patch
	pt.setKeys("driver_info", map[string]any{"deploy_iso": "http://old", "deploy_kernel": "http://k", "same": float64(3)},
		map[string]any{"deploy_iso": "http://new", "deploy_kernel": nil, "deploy_ramdisk": nil, "same": 3, "a/b~c": "x"})
	pt.setField("automated_clean", false, func() *bool { b := true; return &b }())
	pt.setField("deploy_interface", nil, "")
	got := strings.Join(pt.paths(), "; ")
	want := "add /driver_info/a~1b~0c; add /driver_info/deploy_iso; remove /driver_info/deploy_kernel; replace /automated_clean"
	if got != want {
		t.Errorf("patch %q, want %q", got, want)
	}
}

func TestSanitize(t *testing.T) {
	tests := map[string]struct{ in, want string }{
		"request id": {"Failed (req-0f8a6f3c-1111-2222-3333-444455556666) to deploy", "Failed to deploy"},
		"redfish body": {`HTTP GET http://bmc/redfish/v1/Systems/1 returned code 500. Base.1.18.InternalError: oops Extended information: [{'@odata.type': '#Message.v1_2_0.Message', 'Message': 'a [b]', 'MessageArgs': []}]. Retrying.`,
			"HTTP GET http://bmc/redfish/v1/Systems/1 returned code 500. Base.1.18.InternalError: oops. Retrying."},
		"whitespace": {"a\n  b\tc", "a b c"},
		"a failed step named, not quoted": {"Node n failed step {'args': {'settings': [{'name': 'ProcTurboMode', 'value': 'Disabled'}, {'name': \"Owner's tag\", 'value': 'a}b'}]}, 'interface': 'bios', 'step': 'apply_configuration', 'abortable': False, 'priority': 0}: Redfish exception occurred.",
			"Node n failed step bios.apply_configuration: Redfish exception occurred."},
		"a step dict without a name kept": {"Node n failed step {'args': {}}: oops", "Node n failed step {'args': {}}: oops"},
		"a cut step dict kept":            {"Node n failed step {'args': {'settings': [", "Node n failed step {'args': {'settings': ["},
		"image URL with credentials": {"Validation of image href https://user:tok3n@mirror/os.img failed, reason: 401",
			"Validation of image href https://***@mirror/os.img failed, reason: 401"},
	}
	for name, tc := range tests {
		if got := sanitize(tc.in); got != tc.want {
			t.Errorf("%s: %q, want %q", name, got, tc.want)
		}
	}
	if got := sanitize("user root password hunter22 rejected", "hunter22"); strings.Contains(got, "hunter22") {
		t.Errorf("secret kept: %q", got)
	}
	// Ironic quotes every setting asked before the reason: the reason must still fit.
	var settings []string
	for i := range 12 {
		settings = append(settings, fmt.Sprintf("{'name': 'Setting%d', 'value': 'Enabled'}", i))
	}
	why := "Error: HTTP POST http://bmc/redfish/v1/Systems/s/Actions/ComputerSystem.Reset returned code 500. "
	many := sanitize("Servicing failed: Node n failed step {'args': {'settings': [" + strings.Join(settings, ", ") + "]}, 'interface': 'bios', 'step': 'apply_configuration', 'abortable': False, 'priority': 0}: Redfish exception occurred. " + why)
	if !strings.Contains(many, strings.TrimSpace(why)) {
		t.Errorf("the reason was cut from a step with many settings: %q", many)
	}
	long := sanitize(strings.Repeat("é", 1000))
	if len(long) > errorMessageLimit || !strings.HasSuffix(long, "…") {
		t.Errorf("long message not capped: %d bytes", len(long))
	}
	err := scrub(fmt.Errorf("enrolling: %w: bad value hunter22", provisioner.ErrUnavailable), "hunter22")
	if strings.Contains(err.Error(), "hunter22") || !errors.Is(err, provisioner.ErrUnavailable) {
		t.Errorf("scrubbed error %q: want no secret, still ErrUnavailable", err)
	}
	if got := bmcProblem("Error: HTTP GET x returned code 403. Forbidden"); !strings.Contains(got, "HTTP 403") {
		t.Errorf("403: %q", got)
	}
	if got := bmcProblem("Failed to connect: Connection refused"); !strings.HasPrefix(got, "BMC access could not be verified: Failed to connect") {
		t.Errorf("connection failure: %q", got)
	}
}

func TestBusyCount(t *testing.T) {
	list := []nodes.Node{
		{ProvisionState: "cleaning", BootInterface: "ipxe"},
		{ProvisionState: "wait call-back", BootInterface: "ipxe"},
		{ProvisionState: "inspect wait", BootInterface: "redfish-virtual-media"}, // virtual media: not counted
		{ProvisionState: "active", BootInterface: "ipxe"},
		{ProvisionState: "deleting", BootInterface: "pxe"},
		{ProvisionState: "available", BootInterface: "ipxe"},
	}
	if got := busyCount(list); got != 3 {
		t.Errorf("busy nodes %d, want 3", got)
	}
}

// TestOCIPullSecret: an oci:// image's registry credentials go to instance_info image_pull_secret,
// outside the plan's fingerprint; a plan without them removes one a node has; an http image never
// gets them.
func TestOCIPullSecret(t *testing.T) {
	oci := &metal3.Image{URL: "oci://registry.example/os:1"}
	with, err := planDeploy(Config{}, provisioner.ProvisionData{Image: oci, ImagePullSecret: "robot:pw"})
	if err != nil {
		t.Fatal(err)
	}
	without, err := planDeploy(Config{}, provisioner.ProvisionData{Image: oci})
	if err != nil {
		t.Fatal(err)
	}
	if with.fingerprint() != without.fingerprint() {
		t.Error("the credentials changed the plan's fingerprint")
	}
	var pt patch
	with.apply(&pt, &nodes.Node{InstanceInfo: map[string]any{}})
	if !slices.ContainsFunc(pt, func(op nodes.UpdateOperation) bool {
		return op.Path == "/instance_info/image_pull_secret" && op.Op == nodes.AddOp && op.Value == "robot:pw"
	}) {
		t.Errorf("patch %+v has no image_pull_secret", pt)
	}
	pt = nil
	without.apply(&pt, &nodes.Node{InstanceInfo: map[string]any{"image_pull_secret": "******"}})
	if !slices.ContainsFunc(pt, func(op nodes.UpdateOperation) bool {
		return op.Path == "/instance_info/image_pull_secret" && op.Op == nodes.RemoveOp
	}) {
		t.Errorf("patch %+v does not remove the old image_pull_secret", pt)
	}
	http, err := planDeploy(Config{}, provisioner.ProvisionData{Image: &metal3.Image{URL: "http://i/os.img", Checksum: "abc"}, ImagePullSecret: "robot:pw"})
	if err != nil || http.pullSecret != nil {
		t.Errorf("an http image got the pull secret %v (%v)", http.pullSecret, err)
	}
}
