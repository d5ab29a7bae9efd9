package ironic

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/util/intstr"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/bmcsim/fault"
	"github.com/metalforge/metalforge/internal/provisioner"
)

// TestRegisterWrongCredentialsThenFixed: wrong credentials fail registration with a message naming
// the BMC problem (never the password); the right ones, passed as changed, register.
func TestRegisterWrongCredentialsThenFixed(t *testing.T) {
	e := integration(t)
	t.Parallel()
	p := e.provisioner(t)
	srv := e.host(t)
	host := testHost(t, srv)
	good := host.BMCCredentials
	host.BMCCredentials.Password = "wrong-password-1234"

	res := drive(t, "register with a wrong password", 3*time.Minute, func(ctx context.Context) (provisioner.Result, error) {
		res, id, err := p.Register(ctx, host, provisioner.RegisterOptions{})
		host.NodeID = id
		return res, err
	})
	if !res.Failed() {
		t.Fatalf("registration with a wrong password: %s, want failed", describe(res))
	}
	if strings.Contains(res.ErrorMessage, "wrong-password-1234") || !strings.Contains(res.ErrorMessage, "credentials") {
		t.Errorf("error message %q: want it to name the credentials and not contain the password", res.ErrorMessage)
	}
	// The same call again reports the same failure (stable message), without retrying.
	res2, _, err := p.Register(context.Background(), host, provisioner.RegisterOptions{})
	if err != nil || res2.ErrorMessage != res.ErrorMessage {
		t.Errorf("second call: %s, %v; want the same failure", describe(res2), err)
	}
	// While the host shows the error, every call (polls included) asks for a restart: the
	// provisioner checks the BMC again once, then reports the failure again, instead of asking
	// Ironic to verify the same rejected password on every poll.
	res3 := drive(t, "register again with RestartOnFailure", 2*time.Minute, func(ctx context.Context) (provisioner.Result, error) {
		res, _, err := p.Register(ctx, host, provisioner.RegisterOptions{RestartOnFailure: true})
		return res, err
	})
	if !res3.Failed() || !strings.Contains(res3.ErrorMessage, "credentials") {
		t.Errorf("restarted registration with the same wrong password: %s, want it to fail again", describe(res3))
	}

	// The right password, without CredentialsChanged: the host controller says so only once, and
	// that call may find the node busy; the provisioner knows it wrote other credentials.
	host.BMCCredentials = good
	mustDone(t, "register with the right password", 3*time.Minute, func(ctx context.Context) (provisioner.Result, error) {
		res, id, err := p.Register(ctx, host, provisioner.RegisterOptions{RestartOnFailure: true})
		host.NodeID = id
		return res, err
	})
}

// TestLifecycle drives one host through register → inspect (agent) → prepare (RAID + BIOS) →
// provision a disk image → power off/on → reboot → service (BIOS) → deprovision with cleaning,
// checking bmcsim at each step, and logs the Ironic calls each operation made.
func TestLifecycle(t *testing.T) {
	e := integration(t)
	t.Parallel()
	p := e.provisioner(t)
	srv := e.host(t)
	host := testHost(t, srv)
	calls := map[string]map[string]int64{}
	step := func(name string, fn func()) { calls[name] = callsDelta(p, fn) }
	defer func() {
		for name, c := range calls {
			t.Logf("Ironic calls for %s: %v", name, c)
		}
	}()

	step("register", func() { register(t, p, &host) })

	var hw *metal3.HardwareDetails
	step("inspect", func() {
		mustDone(t, "inspect", 3*time.Minute, func(ctx context.Context) (provisioner.Result, error) {
			res, details, err := p.Inspect(ctx, host, provisioner.InspectOptions{})
			hw = details
			return res, err
		})
	})
	checkHardware(t, hw, srv.BootMAC)

	two, size := 2, 50
	data := provisioner.PrepareData{
		TargetRAIDConfig: &metal3.RAIDConfig{HardwareRAIDVolumes: []metal3.HardwareRAIDVolume{
			{Name: "root", Level: "1", NumberOfPhysicalDisks: &two, SizeGibibytes: &size},
		}},
		FirmwareSettings: metal3.DesiredSettingsMap{"ProcTurboMode": intstr.FromString("Disabled")},
	}
	step("prepare", func() {
		mustDone(t, "prepare", 8*time.Minute, func(ctx context.Context) (provisioner.Result, error) {
			return p.Prepare(ctx, host, data, false)
		})
	})
	st := e.server(t, srv.Name)
	if len(st.State.Volumes) != 1 || st.State.Volumes[0].RAIDType != "RAID1" {
		t.Errorf("bmcsim volumes after prepare: %+v, want one RAID1 volume", st.State.Volumes)
	}
	if got := st.State.BIOS["ProcTurboMode"]; got != "Disabled" {
		t.Errorf("bmcsim BIOS ProcTurboMode after prepare: %v, want Disabled", got)
	}
	// Preparing again with the same data does not clean again.
	if c := callsDelta(p, func() {
		res, err := p.Prepare(context.Background(), host, data, false)
		if err != nil || res.Busy || res.Failed() {
			t.Errorf("prepare again: %s, %v; want done", describe(res), err)
		}
	}); c["prepare"] > 1 {
		t.Errorf("prepare again made %d Ironic calls, want at most 1 (the node GET)", c["prepare"])
	}

	image := e.images.URL + "/disk.img"
	raw := "raw"
	pdata := provisioner.ProvisionData{
		Image:      &metal3.Image{URL: image, Checksum: e.images.SHA256("/disk.img"), ChecksumType: metal3.SHA256, DiskFormat: &raw},
		BootMode:   metal3.UEFI,
		HostConfig: provisioner.HostConfig{UserData: "#cloud-config\n", NetworkData: `{"links": [], "networks": []}`},
	}
	step("provision", func() {
		mustDone(t, "provision", 8*time.Minute, func(ctx context.Context) (provisioner.Result, error) {
			return p.Provision(ctx, host, pdata, false)
		})
	})
	st = e.server(t, srv.Name)
	if st.State.DiskImage != image || st.State.Power != "On" {
		t.Errorf("bmcsim after provision: disk image %q, power %s; want %q, On", st.State.DiskImage, st.State.Power, image)
	}

	step("power off", func() {
		mustDone(t, "power off", 3*time.Minute, func(ctx context.Context) (provisioner.Result, error) {
			return p.PowerOff(ctx, host, metal3.RebootModeHard, false)
		})
	})
	if on, known, err := p.PowerState(context.Background(), host); err != nil || !known || on {
		t.Errorf("power state after power off: on=%t known=%t err=%v", on, known, err)
	}
	if st := e.server(t, srv.Name); st.State.Power != "Off" {
		t.Errorf("bmcsim power after power off: %s", st.State.Power)
	}
	step("power on", func() {
		mustDone(t, "power on", 3*time.Minute, func(ctx context.Context) (provisioner.Result, error) {
			return p.PowerOn(ctx, host, false)
		})
	})
	if st := e.server(t, srv.Name); st.State.Power != "On" || st.State.Booted != "Hdd" {
		t.Errorf("bmcsim after power on: power %s booted %q, want On from Hdd", st.State.Power, st.State.Booted)
	}
	step("soft power off", func() {
		mustDone(t, "soft power off", 3*time.Minute, func(ctx context.Context) (provisioner.Result, error) {
			return p.PowerOff(ctx, host, metal3.RebootModeSoft, false)
		})
	})
	mustDone(t, "power on again", 3*time.Minute, func(ctx context.Context) (provisioner.Result, error) {
		return p.PowerOn(ctx, host, false)
	})
	step("reboot", func() {
		res, err := p.Reboot(context.Background(), host, metal3.RebootModeHard)
		if err != nil || !res.Busy {
			t.Fatalf("reboot: %s, %v", describe(res), err)
		}
		waitNode(t, p, host, "the reboot to finish", func(n *nodes.Node) bool {
			return n.TargetPowerState == "" && n.PowerState == powerOn
		})
	})

	// Values written in another form than their attribute's type (a String as a number, an
	// Integer and a Boolean as strings) reach the BMC in the registry's types: bmcsim, like a
	// real BMC, refuses a value of the wrong JSON type, and Ironic cannot check a number's length.
	sdata := provisioner.ServiceData{
		FirmwareSettings: metal3.DesiredSettingsMap{"ProcCStates": intstr.FromString("Disabled"), "AssetTag": intstr.FromInt32(1234),
			"PowerOnDelaySeconds": intstr.FromString("30"), "SerialConsole": intstr.FromString("true")},
		FirmwareUpdates: []metal3.FirmwareUpdate{{Component: "bios", URL: e.images.URL + "/bios-2.1.0.bin"}},
	}
	step("service", func() {
		mustDone(t, "service", 8*time.Minute, func(ctx context.Context) (provisioner.Result, error) {
			return p.Service(ctx, host, sdata)
		})
	})
	st = e.server(t, srv.Name)
	for name, want := range map[string]any{"ProcCStates": "Disabled", "AssetTag": "1234", "PowerOnDelaySeconds": float64(30), "SerialConsole": true} {
		if got := st.State.BIOS[name]; got != want {
			t.Errorf("bmcsim BIOS %s after servicing: %#v, want %#v", name, got, want)
		}
	}
	if st.State.DiskImage != image || st.State.Power != "On" {
		t.Errorf("bmcsim after servicing: disk image %q, power %s; want the image kept and On", st.State.DiskImage, st.State.Power)
	}
	settings, schema, err := p.FirmwareSettings(context.Background(), host, true)
	if err != nil || settings["ProcCStates"] != "Disabled" || schema["ProcCStates"].AttributeType != "Enumeration" {
		t.Errorf("firmware settings: ProcCStates=%q schema %+v err %v", settings["ProcCStates"], schema["ProcCStates"], err)
	}
	components, err := p.FirmwareComponents(context.Background(), host)
	bios := ""
	for _, c := range components {
		if c.Component == "bios" {
			bios = c.CurrentVersion
		}
	}
	if err != nil || len(components) < 2 || bios != "2.1.0" {
		t.Errorf("firmware components: %+v, %v; want bios (at 2.1.0 after the update) and bmc", components, err)
	}

	step("deprovision", func() {
		mustDone(t, "deprovision", 8*time.Minute, func(ctx context.Context) (provisioner.Result, error) {
			return p.Deprovision(ctx, host, false)
		})
	})
	// Cleaning ran the agent; Ironic powers the server off after it, or, with fast track
	// (IRONIC_FAST_TRACK=true, metal3's default), keeps the agent running for the next deployment.
	// Either way the instance must no longer run.
	if st := e.server(t, srv.Name); st.State.Power != "Off" && (st.State.Power != "On" || st.State.Booted != "Cd") {
		t.Errorf("bmcsim after deprovisioning: power %s booted %q, want Off, or On running the agent from Cd (fast track)", st.State.Power, st.State.Booted)
	}
	step("delete", func() {
		mustDone(t, "delete", 3*time.Minute, func(ctx context.Context) (provisioner.Result, error) {
			return p.Delete(ctx, host)
		})
	})
	if _, _, err := p.getNode(context.Background(), host); !errors.Is(err, provisioner.ErrNeedsRegistration) {
		t.Errorf("node after delete: %v, want ErrNeedsRegistration", err)
	}
}

// checkHardware compares inspected details with bmcsim's default profile.
func checkHardware(t *testing.T, hw *metal3.HardwareDetails, bootMAC string) {
	t.Helper()
	if hw == nil {
		t.Fatal("no hardware details")
	}
	if hw.CPU.Count != 32 || hw.CPU.Arch != "x86_64" || hw.CPU.Model != "Sim Xeon 8000" || hw.CPU.ClockMegahertz != 3000 {
		t.Errorf("CPU %+v, want 32 x86_64 Sim Xeon 8000 at 3000 MHz", hw.CPU)
	}
	if hw.RAMMebibytes != 32*1024 {
		t.Errorf("RAM %d MiB, want 32768", hw.RAMMebibytes)
	}
	if hw.SystemVendor.Manufacturer != "Metalforge" || hw.SystemVendor.SerialNumber == "" {
		t.Errorf("system vendor %+v", hw.SystemVendor)
	}
	if len(hw.Storage) != 2 || hw.Storage[0].SizeBytes != 100*metal3.GibiByte {
		t.Errorf("storage %+v, want two 100 GiB disks", hw.Storage)
	}
	pxe := 0
	for _, nic := range hw.NIC {
		if nic.PXE {
			pxe++
			if !strings.EqualFold(nic.MAC, bootMAC) {
				t.Errorf("PXE NIC %s, want the boot MAC %s", nic.MAC, bootMAC)
			}
		}
	}
	if len(hw.NIC) != 2 || pxe != 1 {
		t.Errorf("NICs %+v, want 2 with the boot NIC marked PXE", hw.NIC)
	}
}

// diskImage is a disk image served by the test image server, with its real checksum.
func (e *testEnv) diskImage(path string) provisioner.ProvisionData {
	raw := "raw"
	return provisioner.ProvisionData{
		Image:    &metal3.Image{URL: e.images.URL + path, Checksum: e.images.SHA256(path), ChecksumType: metal3.SHA256, DiskFormat: &raw},
		BootMode: metal3.UEFI,
	}
}

// TestFastInspectionNoCleaning: out-of-band (redfish) inspection, then a disk image deployed and
// taken away again with automated cleaning disabled (no agent boots for deprovisioning).
func TestFastInspectionNoCleaning(t *testing.T) {
	e := integration(t)
	t.Parallel()
	p := e.provisioner(t)
	srv := e.host(t)
	host := testHost(t, srv)
	host.InspectionMode = metal3.InspectionModeFast
	host.AutomatedCleaningMode = metal3.CleaningModeDisabled
	register(t, p, &host)

	var hw *metal3.HardwareDetails
	mustDone(t, "fast inspection", 3*time.Minute, func(ctx context.Context) (provisioner.Result, error) {
		res, details, err := p.Inspect(ctx, host, provisioner.InspectOptions{})
		hw = details
		return res, err
	})
	if hw == nil || hw.CPU.Count != 32 || hw.RAMMebibytes != 32768 || len(hw.NIC) != 2 || len(hw.Storage) == 0 {
		t.Errorf("out-of-band hardware details: %+v", hw)
	}
	if st := e.server(t, srv.Name); st.State.Booted == "Cd" {
		t.Errorf("fast inspection booted the agent (booted %q)", st.State.Booted)
	}

	data := e.diskImage("/disk.img")
	mustDone(t, "provision", 8*time.Minute, func(ctx context.Context) (provisioner.Result, error) {
		return p.Provision(ctx, host, data, false)
	})
	c := callsDelta(p, func() {
		mustDone(t, "deprovision without cleaning", 3*time.Minute, func(ctx context.Context) (provisioner.Result, error) {
			return p.Deprovision(ctx, host, false)
		})
	})
	t.Logf("Ironic calls for deprovision without cleaning: %v", c)
	if n := waitNode(t, p, host, "available", func(n *nodes.Node) bool { return true }); n.AutomatedClean == nil || *n.AutomatedClean {
		t.Errorf("automated_clean %v, want false", n.AutomatedClean)
	}
	mustDone(t, "delete", 3*time.Minute, func(ctx context.Context) (provisioner.Result, error) { return p.Delete(ctx, host) })
}

// TestRedirectedImage: an image URL that redirects is deployed once and ends active. Ironic
// replaces image_source with the redirect's target while deploying; the deployment is still the
// one asked for (with API 1.110 it was aborted as a change of image, deployed again, and so on for
// ever).
func TestRedirectedImage(t *testing.T) {
	e := integration(t)
	t.Parallel()
	p := e.provisioner(t)
	srv := e.host(t)
	host := testHost(t, srv)
	host.AutomatedCleaningMode = metal3.CleaningModeDisabled
	register(t, p, &host)
	data := e.diskImage("/redirected/disk.img")
	data.Image.URL = e.images.URL + "/moved/redirected/disk.img"
	mustDone(t, "provision", 8*time.Minute, func(ctx context.Context) (provisioner.Result, error) {
		return p.Provision(ctx, host, data, false)
	})
	n := waitNode(t, p, host, "active", func(n *nodes.Node) bool { return true })
	if n.InstanceInfo["image_source"] != e.images.URL+"/redirected/disk.img" {
		t.Logf("image_source %v: Ironic did not rewrite it (the test shows nothing then)", n.InstanceInfo["image_source"])
	}
	if got := e.images.Downloads("/redirected/disk.img"); got != 1 {
		t.Errorf("the image was downloaded %d times, want 1 (one deployment)", got)
	}
	mustDone(t, "delete", 3*time.Minute, func(ctx context.Context) (provisioner.Result, error) { return p.Delete(ctx, host) })
}

// TestLiveISO boots a live ISO through the ramdisk deploy interface: no agent, no disk write.
func TestLiveISO(t *testing.T) {
	e := integration(t)
	t.Parallel()
	p := e.provisioner(t)
	srv := e.host(t)
	host := testHost(t, srv)
	register(t, p, &host)
	live := "live-iso"
	data := provisioner.ProvisionData{Image: &metal3.Image{URL: e.images.URL + "/live.iso", DiskFormat: &live}, BootMode: metal3.UEFI}
	mustDone(t, "provision a live ISO", 8*time.Minute, func(ctx context.Context) (provisioner.Result, error) {
		return p.Provision(ctx, host, data, false)
	})
	n := waitNode(t, p, host, "active", func(n *nodes.Node) bool { return true })
	if n.DeployInterface != deployRamdisk || n.InstanceInfo["boot_iso"] != data.Image.URL {
		t.Errorf("node deploy_interface %q boot_iso %v, want ramdisk and the ISO", n.DeployInterface, n.InstanceInfo["boot_iso"])
	}
	st := e.server(t, srv.Name)
	if st.State.Booted != "Cd" || st.State.Power != "On" || st.State.DiskImage != "" {
		t.Errorf("bmcsim after live ISO: booted %q (%s), power %s, disk %q; want the CD, on, no disk image",
			st.State.Booted, st.State.BootedImage, st.State.Power, st.State.DiskImage)
	}
	mustDone(t, "deprovision", 8*time.Minute, func(ctx context.Context) (provisioner.Result, error) {
		return p.Deprovision(ctx, host, false)
	})
	mustDone(t, "delete", 3*time.Minute, func(ctx context.Context) (provisioner.Result, error) { return p.Delete(ctx, host) })
}

// TestCustomDeploy runs a custom deploy method (the agent's install_coreos) as the deploy step.
func TestCustomDeploy(t *testing.T) {
	e := integration(t)
	t.Parallel()
	p := e.provisioner(t)
	srv := e.host(t)
	host := testHost(t, srv)
	register(t, p, &host)
	data := provisioner.ProvisionData{
		CustomDeploy: &metal3.CustomDeploy{Method: "install_coreos"},
		BootMode:     metal3.UEFI,
		HostConfig:   provisioner.HostConfig{UserData: `{"ignition": {"version": "3.2.0"}}`},
	}
	mustDone(t, "custom deploy", 8*time.Minute, func(ctx context.Context) (provisioner.Result, error) {
		return p.Provision(ctx, host, data, false)
	})
	n := waitNode(t, p, host, "active", func(n *nodes.Node) bool { return true })
	if n.DeployInterface != deployCustomAgent || n.ProvisionState != string(nodes.Active) {
		t.Errorf("node %s with deploy_interface %q, want active with custom-agent", n.ProvisionState, n.DeployInterface)
	}
	mustDone(t, "deprovision", 8*time.Minute, func(ctx context.Context) (provisioner.Result, error) {
		return p.Deprovision(ctx, host, false)
	})
	mustDone(t, "delete", 3*time.Minute, func(ctx context.Context) (provisioner.Result, error) { return p.Delete(ctx, host) })
}

// TestDetach removes a powered-on node from Ironic without touching the server, then registers the
// host again.
func TestDetach(t *testing.T) {
	e := integration(t)
	t.Parallel()
	p := e.provisioner(t)
	srv := e.host(t)
	host := testHost(t, srv)
	register(t, p, &host)
	mustDone(t, "power on", 3*time.Minute, func(ctx context.Context) (provisioner.Result, error) { return p.PowerOn(ctx, host, false) })
	before := e.server(t, srv.Name)
	if !remembered(p, host.NodeID) {
		t.Error("registration left nothing in the node's memory (credentials fingerprint, boot port)")
	}

	mustDone(t, "detach", 3*time.Minute, func(ctx context.Context) (provisioner.Result, error) { return p.Detach(ctx, host) })
	if _, _, err := p.getNode(context.Background(), host); !errors.Is(err, provisioner.ErrNeedsRegistration) {
		t.Errorf("node after detach: %v, want ErrNeedsRegistration", err)
	}
	if remembered(p, host.NodeID) {
		t.Error("the provisioner still remembers the detached node")
	}
	after := e.server(t, srv.Name)
	if after.State.Power != "On" || after.State.Booted != before.State.Booted {
		t.Errorf("bmcsim after detach: power %s booted %q, want it untouched (On, %q)", after.State.Power, after.State.Booted, before.State.Booted)
	}
	old := host.NodeID
	host.DisablePowerOff = true
	register(t, p, &host)
	if host.NodeID == old || host.NodeID == "" {
		t.Errorf("node ID after re-registration: %q (was %q), want a new node", host.NodeID, old)
	}
	if n := waitNode(t, p, host, "registered", func(*nodes.Node) bool { return true }); !n.DisablePowerOff {
		t.Error("disable_power_off not set on the node")
	}
	if res, err := p.PowerOff(context.Background(), host, metal3.RebootModeHard, false); err != nil || !res.Failed() {
		t.Errorf("power off with disablePowerOff: %s, %v; want refused", describe(res), err)
	}
	// What the host controller asks instead (the reboot annotation): asked once, followed to done.
	if res, err := p.Reboot(context.Background(), host, metal3.RebootModeSoft); err != nil || !res.Busy {
		t.Fatalf("reboot with disablePowerOff: %s, %v; want asked (busy)", describe(res), err)
	}
	mustDone(t, "reboot with disablePowerOff", 3*time.Minute, func(ctx context.Context) (provisioner.Result, error) {
		return p.Reboot(ctx, host, metal3.RebootModeSoft)
	})
	if n := waitNode(t, p, host, "rebooted", func(*nodes.Node) bool { return true }); n.PowerState != powerOn || n.LastError != "" {
		t.Errorf("node after the reboot: power %q, last error %q", n.PowerState, n.LastError)
	}
	if st := e.server(t, srv.Name); st.State.Power != "On" {
		t.Errorf("bmcsim power after the reboot: %s, want On", st.State.Power)
	}
	// A stale node ID: the node is found by name and re-linked.
	stale := host
	stale.NodeID = "7b6a8f1e-0000-4000-8000-000000000000"
	if res, id, err := p.Register(context.Background(), stale, provisioner.RegisterOptions{}); err != nil || res.Busy || res.Failed() || id != host.NodeID {
		t.Errorf("register with a stale node ID: %s, %q, %v; want done with %s", describe(res), id, err, host.NodeID)
	}
	// Capacity is a list of nodes; virtual media nodes never count.
	if ok, err := p.HasCapacity(context.Background(), provisioner.Host{BMCAddress: "ipmi://192.0.2.1"}); err != nil || !ok {
		t.Errorf("HasCapacity: %t, %v", ok, err)
	}
	mustDone(t, "delete", 3*time.Minute, func(ctx context.Context) (provisioner.Result, error) { return p.Delete(ctx, host) })
}

// TestRecovery uses an Ironic of its own: with a provisioned host, Ironic loses its database; the
// provisioner reports ErrNeedsRegistration, registers the host again and adopts it, and the node
// ends active without a new deploy (the image is not downloaded again, the server keeps running
// its disk). Then Ironic stops: calls return ErrUnavailable until it is back.
func TestRecovery(t *testing.T) {
	e := integration(t)
	t.Parallel()
	ironic := e.secondIronic(t)
	p := newTestProvisioner(t, ironic.config())
	srv := e.host(t)
	host := testHost(t, srv)
	register(t, p, &host)
	data := e.diskImage("/recovery/disk.img") // counted alone: the other tests use /disk.img
	mustDone(t, "provision", 8*time.Minute, func(ctx context.Context) (provisioner.Result, error) {
		return p.Provision(ctx, host, data, false)
	})
	downloads := e.images.Downloads("/recovery/disk.img")
	before := e.server(t, srv.Name)
	if before.State.DiskImage != data.Image.URL || before.State.Booted != "Hdd" {
		t.Fatalf("bmcsim after provisioning: disk %q booted %q", before.State.DiskImage, before.State.Booted)
	}

	endpoint := ironic.Endpoint()
	if err := ironic.Restart(true); err != nil {
		t.Fatalf("restarting Ironic with an empty database: %v", err)
	}
	if ironic.Endpoint() != endpoint {
		t.Fatalf("Ironic moved from %s to %s", endpoint, ironic.Endpoint())
	}
	_, err := p.Adopt(context.Background(), host, data, false)
	if !errors.Is(err, provisioner.ErrNeedsRegistration) {
		t.Fatalf("adopt after the database loss: %v, want ErrNeedsRegistration", err)
	}
	host.State = metal3.StateProvisioned
	old := host.NodeID
	c := callsDelta(p, func() {
		register(t, p, &host)
		mustDone(t, "adopt", 3*time.Minute, func(ctx context.Context) (provisioner.Result, error) {
			return p.Adopt(ctx, host, data, false)
		})
	})
	t.Logf("Ironic calls for re-registration and adoption: %v", c)
	if host.NodeID == old {
		t.Errorf("node ID %s unchanged after the database loss", old)
	}
	n := waitNode(t, p, host, "active", func(n *nodes.Node) bool { return true })
	if n.ProvisionState != string(nodes.Active) || n.InstanceInfo["image_source"] != data.Image.URL {
		t.Errorf("adopted node: %s with image %v", n.ProvisionState, n.InstanceInfo["image_source"])
	}
	after := e.server(t, srv.Name)
	if got := e.images.Downloads("/recovery/disk.img"); got != downloads {
		t.Errorf("the image was downloaded %d more times during adoption, want 0 (no new deploy)", got-downloads)
	}
	if after.State.DiskImage != before.State.DiskImage || after.State.Booted != "Hdd" || after.State.Power != "On" {
		t.Errorf("bmcsim after adoption: disk %q booted %q power %s; want the same disk, running from it",
			after.State.DiskImage, after.State.Booted, after.State.Power)
	}
	// Steady state: Adopt and PowerState together read the node once. The clock stands still an
	// hour ahead, so that every earlier read is too old and the one Adopt sends is fresh for
	// PowerState however slowly Ironic answers on a loaded machine.
	later := time.Now().Add(time.Hour)
	p.now = func() time.Time { return later }
	if c := callsDelta(p, func() {
		if res, err := p.Adopt(context.Background(), host, data, false); err != nil || res.Busy || res.Failed() {
			t.Errorf("adopt of an active node: %s, %v", describe(res), err)
		}
		if on, known, err := p.PowerState(context.Background(), host); err != nil || !known || !on {
			t.Errorf("power state: %t %t %v", on, known, err)
		}
	}); c["adopt"]+c["power"] != 1 {
		t.Errorf("steady state made %v Ironic calls, want 1", c)
	}
	p.now = time.Now

	// Ironic down: the host waits.
	if err := ironic.Stop(); err != nil {
		t.Fatal(err)
	}
	p.watch.Forget(host.NodeID)
	if _, err := p.Adopt(context.Background(), host, data, false); !isUnavailable(err) {
		t.Errorf("adopt with Ironic stopped: %v, want ErrUnavailable", err)
	}
	if _, _, err := p.PowerState(context.Background(), host); !isUnavailable(err) {
		t.Errorf("power state with Ironic stopped: %v, want ErrUnavailable", err)
	}
	if err := ironic.Resume(); err != nil {
		t.Fatalf("starting Ironic again: %v", err)
	}
	mustDone(t, "adopt after Ironic is back", 3*time.Minute, func(ctx context.Context) (provisioner.Result, error) {
		return p.Adopt(ctx, host, data, false)
	})
}

// TestAdoptExternallyProvisioned adopts a host Ironic never deployed and that has no image: the node
// goes active and the server is not touched.
func TestAdoptExternallyProvisioned(t *testing.T) {
	e := integration(t)
	t.Parallel()
	p := e.provisioner(t)
	srv := e.host(t)
	host := testHost(t, srv)
	host.State = metal3.StateExternallyProvisioned
	register(t, p, &host)
	before := e.server(t, srv.Name)
	mustDone(t, "adopt", 2*time.Minute, func(ctx context.Context) (provisioner.Result, error) {
		return p.Adopt(ctx, host, provisioner.ProvisionData{BootMode: metal3.UEFI}, false)
	})
	if n := waitNode(t, p, host, "active", func(*nodes.Node) bool { return true }); n.ProvisionState != string(nodes.Active) {
		t.Errorf("node %s after adoption, want active", n.ProvisionState)
	}
	after := e.server(t, srv.Name)
	if after.State.Booted != before.State.Booted || after.State.DiskImage != before.State.DiskImage {
		t.Errorf("bmcsim changed by adoption: booted %q→%q disk %q→%q", before.State.Booted, after.State.Booted,
			before.State.DiskImage, after.State.DiskImage)
	}
	mustDone(t, "detach", 3*time.Minute, func(ctx context.Context) (provisioner.Result, error) { return p.Detach(ctx, host) })
}

// TestLostAgentToken: the agent loses the lookup answer that carries its token, as when Ironic is
// killed between storing the token and answering (fault campaign, finding 4). Ironic refuses it
// another token, so it can never heartbeat, and Ironic alone would wait for clean_callback_timeout
// (300 s here, 30 minutes by default) and then fail the clean. The provisioner aborts the clean
// wait once the agent has been silent for AgentLostAfter, and deprovisioning ends through a fresh
// boot of the agent.
func TestLostAgentToken(t *testing.T) {
	e := integration(t)
	t.Parallel()
	cfg := e.ironic.config()
	cfg.AgentLostAfter = 15 * time.Second
	p := newTestProvisioner(t, cfg)
	srv := e.host(t)
	host := testHost(t, srv)
	register(t, p, &host)
	data := e.diskImage("/disk.img")
	mustDone(t, "provision", 8*time.Minute, func(ctx context.Context) (provisioner.Result, error) {
		return p.Provision(ctx, host, data, false)
	})

	if err := e.control.SetFaults(srv.Name, fault.Set{LoseAgentToken: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.control.SetFaults(srv.Name, fault.Set{}) })
	aborts := testutil.ToFloat64(lostAgentAborts.WithLabelValues(string(nodes.CleanWait)))

	// Deprovision until the node waits in clean wait with a token stored that its agent never got.
	ctx := context.Background()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		res, err := p.Deprovision(ctx, host, false)
		if err != nil || !res.Busy {
			t.Fatalf("deprovisioning while the agent has no token: %s, %v; want it to wait", describe(res), err)
		}
		s, err := p.session(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n, err := p.fetchNode(ctx, s, host.NodeID)
		if err != nil {
			t.Fatal(err)
		}
		if _, token := n.DriverInternalInfo["agent_secret_token"]; token && n.ProvisionState == string(nodes.CleanWait) {
			if _, pre := n.DriverInternalInfo["agent_secret_token_pregenerated"]; pre {
				t.Fatal("Ironic pregenerated the token (in the boot image): the agent cannot lose it, the test proves nothing")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node never waited in clean wait with a token: %s", n.ProvisionState)
		}
		time.Sleep(300 * time.Millisecond)
	}
	// The next boot of the agent gets its token.
	if err := e.control.SetFaults(srv.Name, fault.Set{}); err != nil {
		t.Fatal(err)
	}
	mustDone(t, "deprovision after the lost token", 5*time.Minute, func(ctx context.Context) (provisioner.Result, error) {
		return p.Deprovision(ctx, host, false)
	})
	if got := testutil.ToFloat64(lostAgentAborts.WithLabelValues(string(nodes.CleanWait))) - aborts; got != 1 {
		t.Errorf("lost-agent aborts of clean wait: %v, want 1 (otherwise Ironic's callback timeout ended the wait)", got)
	}
	n := waitNode(t, p, host, "available", func(n *nodes.Node) bool { return true })
	if n.ProvisionState != string(nodes.Available) {
		t.Errorf("node after deprovisioning: %s, want available", n.ProvisionState)
	}
}

// TestStalledNodeDeletedAndRegisteredAgain: a node Ironic left in a working state with no
// conductor (a lost conductor thread; a restarted conductor fails only periodic_max_workers such
// nodes per state) is deleted once it has been so for StalledNodeAfter, and the host's next
// registration enrolls a new node that deprovisioning then cleans to available. The database is
// edited while Ironic runs to put the registered node in "cleaning" untouched for 11 minutes; with
// a reservation (a conductor at work) nothing is deleted.
func TestStalledNodeDeletedAndRegisteredAgain(t *testing.T) {
	e := integration(t)
	t.Parallel()
	srv := e.host(t)
	host := testHost(t, srv)
	register(t, e.provisioner(t), &host)
	stalled := host.NodeID
	stall := func(reservation string) {
		t.Helper()
		n, err := e.ironic.ExecSQL(fmt.Sprintf(`UPDATE nodes SET provision_state = 'cleaning', target_provision_state = 'available',
			reservation = %s, provision_updated_at = datetime('now', '-11 minutes') WHERE uuid = '%s'`, reservation, stalled))
		if err != nil || n != 1 {
			t.Fatalf("putting node %s in cleaning: %d rows, %v", stalled, n, err)
		}
	}
	deletions := testutil.ToFloat64(stalledNodeDeletions.WithLabelValues(string(nodes.Cleaning)))

	// Held by a conductor: the host waits, the node stays. (A new provisioner: no cached read.)
	stall("'some-conductor'")
	p := e.provisioner(t)
	res, err := p.Deprovision(context.Background(), host, false)
	if err != nil || !res.Busy {
		t.Fatalf("deprovisioning a node a conductor holds in cleaning: %s, %v; want it to wait", describe(res), err)
	}
	s, err := p.session(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.fetchNode(context.Background(), s, stalled); err != nil {
		t.Fatalf("the held node: %v; want it kept", err)
	}

	// Nobody holds it: deleted, and the host must register again.
	stall("NULL")
	p = e.provisioner(t)
	_, err = p.Deprovision(context.Background(), host, false)
	if !errors.Is(err, provisioner.ErrNeedsRegistration) || !strings.Contains(err.Error(), `"cleaning"`) {
		t.Fatalf("deprovisioning a node stalled in cleaning: %v; want ErrNeedsRegistration naming the state", err)
	}
	if _, err := p.fetchNode(context.Background(), s, stalled); !notFound(err) {
		t.Fatalf("reading the stalled node after the deletion: %v; want 404", err)
	}
	if got := testutil.ToFloat64(stalledNodeDeletions.WithLabelValues(string(nodes.Cleaning))) - deletions; got != 1 {
		t.Errorf("stalled node deletions in cleaning: %v, want 1", got)
	}

	register(t, p, &host)
	if host.NodeID == stalled || host.NodeID == "" {
		t.Fatalf("node after registering again: %q, want a new one (the stalled one was %s)", host.NodeID, stalled)
	}
	mustDone(t, "deprovision on the new node", 5*time.Minute, func(ctx context.Context) (provisioner.Result, error) {
		return p.Deprovision(ctx, host, false)
	})
	if n := waitNode(t, p, host, "available", func(*nodes.Node) bool { return true }); n.ProvisionState != string(nodes.Available) {
		t.Errorf("the new node after deprovisioning: %s, want available", n.ProvisionState)
	}
}

// TestDeletionAbortsAnInspectionWaitingForItsAgent: a host deleted while Ironic's inspection waits
// for an agent that will not answer (its token lost) is stopped, powered off and removed at once:
// the power off alone waits for as long as the node is in inspect wait (the provisioner does not
// change the power of a node whose provision state is changing), until Ironic's 30 min callback
// timeout.
func TestDeletionAbortsAnInspectionWaitingForItsAgent(t *testing.T) {
	p, host := inspectionWaitingForLostAgent(t)
	waitNode(t, p, host, "the server on", func(n *nodes.Node) bool { return n.PowerState == powerOn })
	if res, err := p.PowerOff(context.Background(), host, metal3.RebootModeHard, true); err != nil || !res.Busy {
		t.Fatalf("a power off in inspect wait: %s, %v; want busy (the provisioner waits for the state change)", describe(res), err)
	}
	mustDone(t, "the inspection stopped", 3*time.Minute, func(ctx context.Context) (provisioner.Result, error) {
		return p.StopForDeletion(ctx, host)
	})
	mustDone(t, "powered off", 3*time.Minute, func(ctx context.Context) (provisioner.Result, error) {
		return p.PowerOff(ctx, host, metal3.RebootModeHard, true)
	})
	if on, known, err := p.PowerState(context.Background(), host); err != nil || !known || on {
		t.Fatalf("power after the stop: on=%v known=%v %v", on, known, err)
	}
	mustDone(t, "delete", 3*time.Minute, func(ctx context.Context) (provisioner.Result, error) { return p.Delete(ctx, host) })
}

// inspectionWaitingForLostAgent registers a host and starts its inspection with an agent that
// lost its token (it looks itself up for ever): the node stays in inspect wait.
func inspectionWaitingForLostAgent(t *testing.T) (*Provisioner, provisioner.Host) {
	t.Helper()
	e := integration(t)
	t.Parallel()
	p := e.provisioner(t)
	srv := e.host(t)
	host := testHost(t, srv)
	register(t, p, &host)
	if err := e.control.SetFaults(srv.Name, fault.Set{LoseAgentToken: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.control.SetFaults(srv.Name, fault.Set{}) })
	res, _, err := p.Inspect(context.Background(), host, provisioner.InspectOptions{})
	if err != nil || !res.Busy {
		t.Fatalf("starting the inspection: %s, %v", describe(res), err)
	}
	waitNode(t, p, host, "inspect wait", func(n *nodes.Node) bool { return state(n) == nodes.InspectWait })
	return p, host
}

// TestInspectionSkippedWhileWaiting: inspection disabled while the node waits for an agent that
// never reports (it lost its token: it looks itself up for ever): the inspection is aborted and
// the node made manageable again, where preparing starts; before, the host waited for Ironic's
// inspection timeout and retried the inspection for ever.
func TestInspectionSkippedWhileWaiting(t *testing.T) {
	p, host := inspectionWaitingForLostAgent(t)
	mustDone(t, "inspection skipped", 3*time.Minute, func(ctx context.Context) (provisioner.Result, error) {
		res, hw, err := p.Inspect(ctx, host, provisioner.InspectOptions{Skip: true})
		if hw != nil {
			t.Errorf("a skipped inspection returned hardware details %+v", hw)
		}
		return res, err
	})
	if n := waitNode(t, p, host, "manageable", func(n *nodes.Node) bool { return true }); state(n) != nodes.Manageable {
		t.Fatalf("node %q after the skip, want manageable", n.ProvisionState)
	}
	mustDone(t, "delete", 3*time.Minute, func(ctx context.Context) (provisioner.Result, error) { return p.Delete(ctx, host) })
}
