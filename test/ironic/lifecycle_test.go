// Package ironic_test drives real Ironic (hack/ironic-up.sh) against bmcsim, speaking only to
// Ironic's REST API, and checks the result on bmcsim's Redfish API: issue 5's "done when".
package ironic_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/ports"

	"github.com/metalforge/metalforge/internal/bmcsim"
	"github.com/metalforge/metalforge/internal/bmcsim/fault"
)

func TestIronicLifecycle(t *testing.T) {
	env := startIronic(t)
	client := ironicClient(t, env)
	sim := startBMCSim(t, env, 2)
	images := startImageServer(t)
	hosts := sim.Hosts()

	t.Run("group", func(t *testing.T) {
		t.Run("full lifecycle", func(t *testing.T) {
			t.Parallel()
			fullLifecycle(t, client, sim, hosts[0], env, images)
		})
		t.Run("agent crash mid-deploy", func(t *testing.T) {
			t.Parallel()
			crashMidDeploy(t, client, sim, hosts[1], env, images)
		})
	})
}

func createNode(t *testing.T, client *gophercloud.ServiceClient, h bmcsim.Host, deployImage map[string]any) string {
	t.Helper()
	addr, system := splitBMC(t, h.Addresses["redfish-virtualmedia+http"])
	info := map[string]any{
		"redfish_address":   addr,
		"redfish_system_id": system,
		"redfish_username":  h.Username,
		"redfish_password":  h.Password,
	}
	for k, v := range deployImage {
		info[k] = v
	}
	n, err := nodes.Create(context.Background(), client, nodes.CreateOpts{
		Name:                h.Name,
		Driver:              "redfish",
		BootInterface:       "redfish-virtual-media",
		DeployInterface:     "direct",
		InspectInterface:    "agent",
		ManagementInterface: "redfish",
		PowerInterface:      "redfish",
		BIOSInterface:       "redfish",
		FirmwareInterface:   "redfish",
		RAIDInterface:       "redfish",
		VendorInterface:     "redfish",
		DriverInfo:          info,
		Properties:          map[string]any{"capabilities": "boot_mode:uefi"},
	}).Extract()
	if err != nil {
		t.Fatalf("creating node %s: %v", h.Name, err)
	}
	if n.ProvisionState != "enroll" {
		t.Fatalf("new node in %q, want enroll", n.ProvisionState)
	}
	return n.UUID
}

// whileBusy calls fn until it succeeds, retrying for up to 30 s while Ironic answers 409: a node
// that just reached a stable state can still be locked by a heartbeat, a periodic task or the end
// of its previous transition ("node locked, please retry"), which is a retry, not a failure.
func whileBusy(t *testing.T, what string, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := fn()
		if err == nil {
			return
		}
		if !gophercloud.ResponseCodeIs(err, 409) || time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(time.Second)
	}
}

func provision(t *testing.T, client *gophercloud.ServiceClient, id string, opts nodes.ProvisionStateOpts) {
	t.Helper()
	whileBusy(t, fmt.Sprintf("provision %s %q", id, opts.Target), func() error {
		return nodes.ChangeProvisionState(context.Background(), client, id, opts).ExtractErr()
	})
}

// update patches the node, retrying while it is locked.
func update(t *testing.T, client *gophercloud.ServiceClient, id string, ops nodes.UpdateOpts) {
	t.Helper()
	whileBusy(t, "updating node "+id, func() error {
		_, err := nodes.Update(context.Background(), client, id, ops).Extract()
		return err
	})
}

// waitState polls the node until it reaches want; any failure state other than want ends the wait.
func waitState(t *testing.T, client *gophercloud.ServiceClient, id, want string, timeout time.Duration) *nodes.Node {
	t.Helper()
	start := time.Now()
	var last string
	for {
		n, err := nodes.Get(context.Background(), client, id).Extract()
		if err != nil {
			t.Fatalf("getting node %s: %v", id, err)
		}
		if n.ProvisionState != last {
			t.Logf("node %s: %s (target %q) after %s", n.Name, n.ProvisionState, n.TargetProvisionState, time.Since(start).Round(time.Second))
			last = n.ProvisionState
		}
		if n.ProvisionState == want && n.TargetProvisionState == "" {
			return n
		}
		if n.ProvisionState != want && (strings.HasSuffix(n.ProvisionState, "failed") || n.ProvisionState == "error") {
			t.Fatalf("node %s went to %q waiting for %q: last_error: %s", n.Name, n.ProvisionState, want, n.LastError)
		}
		if time.Since(start) > timeout {
			t.Fatalf("node %s still in %q (target %q) after %s waiting for %q; last_error: %s", n.Name, n.ProvisionState, n.TargetProvisionState, timeout, want, n.LastError)
		}
		time.Sleep(time.Second)
	}
}

func fullLifecycle(t *testing.T, client *gophercloud.ServiceClient, sim *bmcsim.Sim, h bmcsim.Host, env ironicEnv, images *imageServer) { //nolint:thelper // a test body run as a subtest: failures must point into it
	ctx := context.Background()
	rf := redfish{base: sim.BaseURL(), user: h.Username, pass: h.Password}
	srv := sim.Fleet.ByName(h.Name)
	prof := sim.Fleet.Config().Profile

	// The prebuilt deploy ISO: Ironic passes it through unchanged; the agent finds ipa-api-url in it.
	id := createNode(t, client, h, map[string]any{"deploy_iso": env["DEPLOY_ISO_URL"]})

	provision(t, client, id, nodes.ProvisionStateOpts{Target: nodes.TargetManage})
	waitState(t, client, id, "manageable", 2*time.Minute)

	// Agent inspection: the inventory Ironic stores must be the simulated hardware.
	provision(t, client, id, nodes.ProvisionStateOpts{Target: nodes.TargetInspect})
	waitState(t, client, id, "manageable", 3*time.Minute)
	data, err := nodes.GetInventory(ctx, client, id).Extract()
	if err != nil {
		t.Fatalf("GET inventory: %v", err)
	}
	inv := data.Inventory
	if want := prof.CPU.Sockets * prof.CPU.CoresPerSocket * prof.CPU.ThreadsPerCore; inv.CPU.Count != want {
		t.Errorf("inventory cpu.count = %d, want %d", inv.CPU.Count, want)
	}
	if want := prof.Memory.DIMMs * prof.Memory.DIMMGiB * 1024; inv.Memory.PhysicalMb != want {
		t.Errorf("inventory memory.physical_mb = %d, want %d", inv.Memory.PhysicalMb, want)
	}
	if len(inv.Disks) != len(prof.Disks) {
		t.Errorf("inventory has %d disks, want %d", len(inv.Disks), len(prof.Disks))
	} else if want := int64(prof.Disks[0].SizeGiB) << 30; inv.Disks[0].Size != want {
		t.Errorf("inventory disk 0 size = %d, want %d", inv.Disks[0].Size, want)
	}
	var macs []string
	for _, i := range inv.Interfaces {
		macs = append(macs, strings.ToLower(i.MACAddress))
	}
	wantMACs := srv.MACAddresses()
	for i := range wantMACs {
		wantMACs[i] = strings.ToLower(wantMACs[i])
	}
	slices.Sort(macs)
	slices.Sort(wantMACs)
	if !slices.Equal(macs, wantMACs) {
		t.Errorf("inventory MACs %v, want %v", macs, wantMACs)
	}

	// Manual cleaning: one BIOS setting and one RAID volume, both out of band through Redfish, with
	// the agent booted (the redfish steps require the ramdisk).
	biosBefore := rf.get(t, h.SystemPath+"/Bios")["Attributes"].(map[string]any)
	if biosBefore["ProcTurboMode"] != "Enabled" {
		t.Fatalf("ProcTurboMode starts as %v, want Enabled", biosBefore["ProcTurboMode"])
	}
	volumesBefore := countVolumes(t, rf, h.SystemPath)
	whileBusy(t, "setting target_raid_config", func() error {
		return nodes.SetRAIDConfig(ctx, client, id, nodes.RAIDConfigOpts{
			LogicalDisks: []nodes.LogicalDisk{{SizeGB: ptr(50), RAIDLevel: nodes.RAID1, IsRootVolume: ptr(true)}},
		}).ExtractErr()
	})
	provision(t, client, id, nodes.ProvisionStateOpts{Target: nodes.TargetClean, CleanSteps: []nodes.CleanStep{
		{Interface: nodes.InterfaceBIOS, Step: "apply_configuration", Args: map[string]any{
			"settings": []map[string]any{{"name": "ProcTurboMode", "value": "Disabled"}}}},
		{Interface: nodes.InterfaceRAID, Step: "create_configuration", Args: map[string]any{}},
	}})
	waitState(t, client, id, "manageable", 5*time.Minute)
	if got := rf.get(t, h.SystemPath+"/Bios")["Attributes"].(map[string]any)["ProcTurboMode"]; got != "Disabled" {
		t.Errorf("after cleaning, bmcsim's ProcTurboMode = %v, want Disabled", got)
	}
	if got := countVolumes(t, rf, h.SystemPath); got != volumesBefore+1 {
		t.Errorf("after cleaning, bmcsim has %d volumes, want %d", got, volumesBefore+1)
	}

	// provide runs automated cleaning (the agent's erase steps). Not at once: a stale
	// continue_node_clean cast from the redfish BIOS/RAID periodic task can resume the next
	// cleaning before its steps exist (docs/ironic-notes.md); the operator waits 5 s too.
	time.Sleep(5 * time.Second)
	provision(t, client, id, nodes.ProvisionStateOpts{Target: nodes.TargetProvide})
	waitState(t, client, id, "available", 5*time.Minute)

	// Deploy a raw disk image with its checksum; the agent verifies it.
	imageURL := images.URL + "/disk.img"
	update(t, client, id, nodes.UpdateOpts{
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/instance_info/image_source", Value: imageURL},
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/instance_info/image_os_hash_algo", Value: "sha256"},
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/instance_info/image_os_hash_value", Value: images.diskSHA256},
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/instance_info/image_disk_format", Value: "raw"},
	})
	provision(t, client, id, nodes.ProvisionStateOpts{Target: nodes.TargetActive})
	waitState(t, client, id, "active", 5*time.Minute)
	st := srv.Snapshot()
	if st.DiskImage != imageURL {
		t.Errorf("bmcsim disk image %q, want %q", st.DiskImage, imageURL)
	}
	if ps := rf.get(t, h.SystemPath)["PowerState"]; ps != "On" {
		t.Errorf("deployed server power %v, want On", ps)
	}

	// Servicing on the active node: a BIOS setting, a BIOS and a NIC firmware update. A NIC
	// update staged for the next boot reports Starting, which Ironic waits on for 30 s and then
	// reboots the node (reported Running, it was waited on to complete for ever).
	provision(t, client, id, nodes.ProvisionStateOpts{Target: nodes.TargetService, ServiceSteps: []nodes.ServiceStep{
		{Interface: nodes.InterfaceBIOS, Step: "apply_configuration", Args: map[string]any{
			"settings": []map[string]any{{"name": "ProcVirtualization", "value": "Disabled"}}}},
		{Interface: nodes.InterfaceFirmware, Step: "update", Args: map[string]any{
			"settings": []map[string]any{
				{"component": "bios", "url": images.URL + "/firmware/bios-2.1.0.bin"},
				{"component": "nic:NIC.Slot.1", "url": images.URL + "/firmware/nic-21.0.0.bin"},
			}}},
	}})
	waitState(t, client, id, "active", 8*time.Minute)
	if got := rf.get(t, h.SystemPath+"/Bios")["Attributes"].(map[string]any)["ProcVirtualization"]; got != "Disabled" {
		t.Errorf("after servicing, bmcsim's ProcVirtualization = %v, want Disabled", got)
	}
	if got := rf.get(t, h.SystemPath)["BiosVersion"]; got != "2.1.0" {
		t.Errorf("after servicing, bmcsim's BiosVersion = %v, want 2.1.0", got)
	}
	fw, err := nodes.ListFirmware(ctx, client, id).Extract()
	if err != nil {
		t.Fatalf("listing firmware: %v", err)
	}
	// Ironic 39 lists the NIC by its serial number (nic:<serial>); its update step takes the
	// adapter's Redfish id all the same.
	for component, want := range map[string]string{"bios": "2.1.0", "nic:": "21.0.0"} {
		i := slices.IndexFunc(fw, func(c nodes.FirmwareComponent) bool {
			return c.Component == component || component == "nic:" && strings.HasPrefix(c.Component, component)
		})
		if i < 0 {
			t.Errorf("Ironic lists no %s firmware component: %+v", component, fw)
		} else if got := fw[i].CurrentVersion; got != want {
			t.Errorf("Ironic's %s firmware current_version = %q, want %s", component, got, want)
		}
	}

	// Undeploy (automated cleaning again), then delete the node.
	provision(t, client, id, nodes.ProvisionStateOpts{Target: nodes.TargetDeleted})
	waitState(t, client, id, "available", 5*time.Minute)
	whileBusy(t, "deleting node", func() error { return nodes.Delete(ctx, client, id).ExtractErr() })
	if _, err := nodes.Get(ctx, client, id).Extract(); !gophercloud.ResponseCodeIs(err, 404) {
		t.Errorf("node still there after delete: %v", err)
	}
}

// crashMidDeploy boots the agent from the ISO Ironic builds itself (kernel + ramdisk mode), then
// makes it crash in the middle of write_image: Ironic must report deploy failed with a last_error.
func crashMidDeploy(t *testing.T, client *gophercloud.ServiceClient, sim *bmcsim.Sim, h bmcsim.Host, env ironicEnv, images *imageServer) { //nolint:thelper // a test body run as a subtest: failures must point into it
	ctx := context.Background()
	id := createNode(t, client, h, map[string]any{
		"deploy_kernel":  env["DEPLOY_KERNEL_URL"],
		"deploy_ramdisk": env["DEPLOY_RAMDISK_URL"],
	})
	// Without inspection Ironic has no port, and the agent's lookup by MAC finds nothing: create the
	// boot NIC's port as the operator does from bootMACAddress.
	if _, err := ports.Create(ctx, client, ports.CreateOpts{NodeUUID: id, Address: h.BootMAC, PXEEnabled: ptr(true)}).Extract(); err != nil {
		t.Fatalf("creating port: %v", err)
	}
	provision(t, client, id, nodes.ProvisionStateOpts{Target: nodes.TargetManage})
	waitState(t, client, id, "manageable", 2*time.Minute)
	provision(t, client, id, nodes.ProvisionStateOpts{Target: nodes.TargetProvide})
	waitState(t, client, id, "available", 5*time.Minute)

	if err := controlOf(sim).SetFaults(h.Name, fault.Set{FailDeploy: true}); err != nil {
		t.Fatal(err)
	}
	update(t, client, id, nodes.UpdateOpts{
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/instance_info/image_source", Value: images.URL + "/disk.img"},
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/instance_info/image_os_hash_algo", Value: "sha256"},
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/instance_info/image_os_hash_value", Value: images.diskSHA256},
	})
	provision(t, client, id, nodes.ProvisionStateOpts{Target: nodes.TargetActive})
	start := time.Now()
	for {
		n, err := nodes.Get(ctx, client, id).Extract()
		if err != nil {
			t.Fatal(err)
		}
		if n.ProvisionState == "deploy failed" {
			// Read again while the failure handler is still at work (it holds the node's lock).
			if reason := failureReason(t, client, n); reason != "" || n.Reservation == "" {
				if reason == "" {
					t.Errorf("deploy failed with no reason in last_error or in the node's history")
				}
				t.Logf("deploy failed after %s: %s", time.Since(start).Round(time.Second), reason)
				break
			}
		}
		if n.ProvisionState == "active" {
			t.Fatalf("node became active although its agent crashed")
		}
		if time.Since(start) > 4*time.Minute {
			t.Fatalf("node %q (locked by %q) after %s, want deploy failed with a reason", n.ProvisionState, n.Reservation, time.Since(start))
		}
		time.Sleep(2 * time.Second)
	}
	if img := sim.Fleet.ByName(h.Name).Snapshot().DiskImage; img != "" {
		t.Errorf("crashed deploy left disk image %q, want none", img)
	}
	if err := controlOf(sim).ClearFaults(h.Name); err != nil {
		t.Fatal(err)
	}
}

func countVolumes(t *testing.T, rf redfish, system string) int {
	t.Helper()
	n := 0
	for _, st := range members(rf.get(t, system+"/Storage")) {
		storage := rf.get(t, st)
		vols, ok := storage["Volumes"].(map[string]any)
		if !ok {
			continue
		}
		n += len(members(rf.get(t, fmt.Sprint(vols["@odata.id"]))))
	}
	return n
}

func ptr[T any](v T) *T { return &v }

// failureReason is why Ironic failed node n. last_error says it, but not at every moment: Ironic
// saves the failed state before it powers the node off, and the power action erases last_error
// until the failure handler writes it back after it; later the power state sync erases it again
// ("Clearing last_error … after confirmed power state match", node history being on). The newest
// ERROR event of the node's history (API 1.78) keeps it.
func failureReason(t *testing.T, client *gophercloud.ServiceClient, n *nodes.Node) string {
	t.Helper()
	if n.LastError != "" {
		return n.LastError
	}
	var body struct {
		History []struct {
			Severity string `json:"severity"`
			Event    string `json:"event"`
		} `json:"history"`
	}
	url := client.ServiceURL("nodes", n.UUID, "history") + "?detail=true&sort_key=created_at&sort_dir=desc&limit=20"
	if _, err := client.Get(context.Background(), url, &body, &gophercloud.RequestOpts{OkCodes: []int{200}}); err != nil {
		t.Fatalf("reading the history of node %s: %v", n.UUID, err)
	}
	for _, e := range body.History {
		if strings.EqualFold(e.Severity, "ERROR") && e.Event != "" {
			return e.Event
		}
	}
	return ""
}
