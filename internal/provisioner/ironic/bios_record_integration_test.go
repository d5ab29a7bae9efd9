package ironic

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	"k8s.io/apimachinery/pkg/util/intstr"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/bmcsim"
	"github.com/metalforge/metalforge/internal/provisioner"
)

// Ironic's record of an unfinished BIOS step (staged.go) outside servicing: the provisioner drops
// it before the automated cleaning of a deprovision or a provide, and before a preparation's manual
// cleaning, whose waits and BIOS step the record would otherwise take for its own.

// failedPreparationAtTheReboot registers a node (manageable) and drives a preparation that
// changes ProcTurboMode to its failure at the reboot (failAtTheReboot), which leaves Ironic's
// record of the BIOS step and the setting staged on the BMC.
func failedPreparationAtTheReboot(t *testing.T, e *testEnv, p *Provisioner) (bmcsim.Host, provisioner.Host) {
	t.Helper()
	srv := e.host(t)
	if power := e.server(t, srv.Name).State.Power; power != "Off" {
		t.Fatalf("server %s is %q at the start: the reboot's power on would not boot it, nor meet the fault", srv.Name, power)
	}
	host := testHost(t, srv)
	register(t, p, &host)
	// A change of the server's value: one it has already (a server an earlier test serviced, handed
	// out again) needs no reboot, and the preparation ends without meeting the fault.
	value := "Disabled"
	if e.server(t, srv.Name).State.BIOS["ProcTurboMode"] == value {
		value = "Enabled"
	}
	turbo := provisioner.PrepareData{FirmwareSettings: metal3.DesiredSettingsMap{"ProcTurboMode": intstr.FromString(value)}}
	failAtTheReboot(t, e, srv, "prepare", func(ctx context.Context) (provisioner.Result, error) {
		return p.Prepare(ctx, host, turbo, false)
	})
	if rec := recordOf(t, p, host.NodeID); len(rec) == 0 {
		t.Fatal("Ironic holds no record after the failed preparation: the test proves nothing (has Ironic's bug been fixed?)")
	}
	return srv, host
}

// TestPreparationAfterAFailedRebootSendsItsSettings: the host retries its preparation with another
// setting. Without the check cleaning first, the retry's BIOS step would run as the record's check
// and send nothing.
func TestPreparationAfterAFailedRebootSendsItsSettings(t *testing.T) {
	e := integration(t)
	t.Parallel()
	p := e.provisioner(t)
	srv, host := failedPreparationAtTheReboot(t, e, p)
	cstates := provisioner.PrepareData{FirmwareSettings: metal3.DesiredSettingsMap{"ProcCStates": intstr.FromString("Disabled")}}
	mustDone(t, "prepare again with another setting", 5*time.Minute, func(ctx context.Context) (provisioner.Result, error) {
		return p.Prepare(ctx, host, cstates, true)
	})
	if v := e.server(t, srv.Name).State.BIOS["ProcCStates"]; v != "Disabled" {
		t.Errorf("bmcsim ProcCStates %v after the preparation, want Disabled (its BIOS step sent)", v)
	}
	if rec := recordOf(t, p, host.NodeID); len(rec) > 0 {
		t.Errorf("Ironic still holds a record after the preparation: %v", rec)
	}
}

// TestProvisionAfterAFailedPreparationDropsTheRecord: the user takes the setting back and
// provisions; the provide's automated cleaning (and the deployment) must not meet the record.
func TestProvisionAfterAFailedPreparationDropsTheRecord(t *testing.T) {
	e := integration(t)
	t.Parallel()
	p := e.provisioner(t)
	_, host := failedPreparationAtTheReboot(t, e, p)
	mustDone(t, "prepare with nothing to do", 2*time.Minute, func(ctx context.Context) (provisioner.Result, error) {
		return p.Prepare(ctx, host, provisioner.PrepareData{}, true)
	})
	data := e.diskImage("/disk.img")
	mustDone(t, "provision", 8*time.Minute, func(ctx context.Context) (provisioner.Result, error) {
		return p.Provision(ctx, host, data, false)
	})
	if rec := recordOf(t, p, host.NodeID); len(rec) > 0 {
		t.Errorf("Ironic still holds the record of the failed preparation after provisioning: %v", rec)
	}
	if events := historyOf(t, p, host.NodeID); !slices.ContainsFunc(events, func(ev historyEvent) bool {
		return strings.Contains(ev.Event, "Automated Cleaning completed")
	}) {
		t.Errorf("no automated cleaning in the node's history: %q", events)
	}
}

// TestDeprovisionDropsTheStaleBIOSRecord: a live update whose reboot failed, taken back, leaves
// Ironic's record of the BIOS step; undeployed as it is, the node would carry it through the
// automated cleaning and the next deployment, whose waits the BIOS periodic task ends as soon as
// the recorded setting shows applied (seen on Ironic 39 with a 15 s erase and a 25 s agent boot:
// erase_devices skipped after 1 s, the deployment moved past the step that waits for the agent
// before the agent was up). Deprovisioning drops it first with the check servicing (which passes
// when a boot has applied the setting since, and fails otherwise; the undeploy follows either way).
func TestDeprovisionDropsTheStaleBIOSRecord(t *testing.T) {
	e := integration(t)
	t.Parallel()
	p := e.provisioner(t)
	_, host, _ := failedAtTheReboot(t, e, p)
	abortNamingTurbo(t, p, host)
	if rec := recordOf(t, p, host.NodeID); len(rec) == 0 {
		t.Fatal("Ironic holds no record after the abort: the test proves nothing (has Ironic's bug been fixed?)")
	}
	mustDone(t, "deprovision", 8*time.Minute, func(ctx context.Context) (provisioner.Result, error) {
		return p.Deprovision(ctx, host, false)
	})
	if rec := recordOf(t, p, host.NodeID); len(rec) > 0 {
		t.Errorf("Ironic still holds the record of the aborted BIOS step after deprovisioning: %v", rec)
	}
	if n := waitNode(t, p, host, "the node", func(*nodes.Node) bool { return true }); n.ProvisionState != string(nodes.Available) || n.Maintenance {
		t.Errorf("node after deprovisioning: %s, maintenance %t; want available, not in maintenance", n.ProvisionState, n.Maintenance)
	}
}

// recordOf returns the BIOS settings Ironic's record on the node names (recordedBIOSSettings).
func recordOf(t *testing.T, p *Provisioner, id string) map[string]any {
	t.Helper()
	return recordedBIOSSettings(nodeInFull(t, p, id).DriverInternalInfo)
}

// nodeInFull reads the node with its driver_internal_info (which the watcher's node lacks).
func nodeInFull(t *testing.T, p *Provisioner, id string) *nodes.Node {
	t.Helper()
	ctx := context.Background()
	s, err := p.session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n, err := p.fetchNode(ctx, s, id)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
