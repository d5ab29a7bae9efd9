package ironic

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/bmcsim/fault"
	"github.com/metalforge/metalforge/internal/provisioner"
)

// A forced reboot (reboot.metal3.io with force, as metal3) is the way out for an agent that
// booted but can never answer (here it lost the answer that carried its token): Ironic would wait
// in inspect wait or deploy wait until its callback timeout. The wait is stopped and the operation
// starts again with a fresh boot of the agent, which answers, long before any callback timeout.
// The lost-agent abort is off (AgentLostAfter 0), so only the forced reboot can end the waits.

// forcedRebootHost registers a server for these tests; its faults are cleared at the end.
func forcedRebootHost(t *testing.T, e *testEnv) (*Provisioner, provisioner.Host, string) {
	t.Helper()
	cfg := e.ironic.config()
	cfg.AgentLostAfter = 0
	p := newTestProvisioner(t, cfg)
	srv := e.host(t)
	host := testHost(t, srv)
	host.AutomatedCleaningMode = metal3.CleaningModeDisabled // the deployment's own agent wait is the one under test
	register(t, p, &host)
	t.Cleanup(func() { _ = e.control.SetFaults(srv.Name, fault.Set{}) })
	return p, host, srv.Name
}

func TestForcedRebootRestartsAnInspection(t *testing.T) {
	e := integration(t)
	t.Parallel()
	p, host, server := forcedRebootHost(t, e)
	inspect := func(force bool) func(ctx context.Context) (provisioner.Result, error) {
		return func(ctx context.Context) (provisioner.Result, error) {
			res, _, err := p.Inspect(ctx, host, provisioner.InspectOptions{ForceReboot: force})
			return res, err
		}
	}
	stuckInAgentWait(t, e, p, host, server, nodes.InspectWait, inspect(false))
	forceOnce(t, "inspection", inspect(true))
	mustDone(t, "inspection after the forced reboot", 4*time.Minute, inspect(false))
	if _, hw, err := p.Inspect(context.Background(), host, provisioner.InspectOptions{}); err != nil || hw == nil {
		t.Fatalf("hardware details after the forced reboot: %v, %v; want the inventory the new agent sent", hw, err)
	}
	noCallbackTimeout(t, p, host)
}

// TestForcedRebootRestartsADeployment: the same for a deployment, on a host inspected just before
// (its agent heartbeat lately, so Ironic keeps the fast track open). The abort then leaves the
// server on (deploy failed) with the token, and Ironic would deploy again through the agent that
// could not answer: the provisioner powers it off first. Once Ironic's power sync sees it off, it
// erases last_error, the only record of the abort (an abort writes no history event, and this
// node's history has no error): erased here at that moment, the next call must still deploy
// again, not report "Image provisioning failed".
func TestForcedRebootRestartsADeployment(t *testing.T) {
	e := integration(t)
	t.Parallel()
	p, host, server := forcedRebootHost(t, e)
	mustDone(t, "inspection", 4*time.Minute, func(ctx context.Context) (provisioner.Result, error) {
		res, _, err := p.Inspect(ctx, host, provisioner.InspectOptions{})
		return res, err
	})
	// The inspection's agent still runs (fast track would deploy through it): off, so that the
	// deployment boots one that loses its token.
	mustDone(t, "power off after inspection", 2*time.Minute, func(ctx context.Context) (provisioner.Result, error) {
		return p.PowerOff(ctx, host, metal3.RebootModeHard, false)
	})
	data := e.diskImage("/disk.img")
	provision := func(force bool) func(ctx context.Context) (provisioner.Result, error) {
		return func(ctx context.Context) (provisioner.Result, error) {
			d := data
			d.ForceReboot = force
			return p.Provision(ctx, host, d, false)
		}
	}
	stuckInAgentWait(t, e, p, host, server, nodes.DeployWait, provision(false))
	forceOnce(t, "deployment", provision(true))
	if !poweredOffAfterAbort(t, p, host, provision(false)) {
		if n, err := e.ironic.ExecSQL(fmt.Sprintf(`UPDATE nodes SET last_error = NULL WHERE uuid = '%s'`, host.NodeID)); err != nil || n != 1 {
			t.Fatalf("erasing last_error as the power sync does: %d rows, %v", n, err)
		}
	}
	mustDone(t, "deployment after the forced reboot", 6*time.Minute, provision(false))
	n := waitNode(t, p, host, "active", func(n *nodes.Node) bool { return true })
	if n.ProvisionState != string(nodes.Active) {
		t.Fatalf("node after the deployment: %s, want active", n.ProvisionState)
	}
	noCallbackTimeout(t, p, host)
}

// noCallbackTimeout: no wait of the node ended by Ironic's callback timeout.
func noCallbackTimeout(t *testing.T, p *Provisioner, host provisioner.Host) {
	t.Helper()
	if events := historyOf(t, p, host.NodeID); slices.ContainsFunc(events, func(ev historyEvent) bool {
		return strings.Contains(ev.Event, "Timeout reached")
	}) {
		t.Errorf("a wait ended by Ironic's callback timeout, not the forced reboot: history %+v", events)
	}
}

// stuckInAgentWait drives op with the LoseAgentToken fault until the node waits in state for an
// agent that took its token and lost it, then clears the fault: the agent of that boot still can
// never answer (Ironic masks the token in every later lookup), the next boot's can.
func stuckInAgentWait(t *testing.T, e *testEnv, p *Provisioner, host provisioner.Host, server string, state nodes.ProvisionState,
	op func(ctx context.Context) (provisioner.Result, error)) {
	t.Helper()
	if err := e.control.SetFaults(server, fault.Set{LoseAgentToken: true}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		res, err := op(ctx)
		if err != nil || !res.Busy {
			t.Fatalf("%s while the agent loses its token: %s, %v; want it to wait", state, describe(res), err)
		}
		n := nodeInFull(t, p, host.NodeID)
		if _, token := n.DriverInternalInfo["agent_secret_token"]; token && n.ProvisionState == string(state) {
			if _, pre := n.DriverInternalInfo["agent_secret_token_pregenerated"]; pre {
				t.Fatal("Ironic pregenerated the token (in the boot image): the agent cannot lose it, the test proves nothing")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node never waited in %s with a token: %s", state, n.ProvisionState)
		}
		time.Sleep(300 * time.Millisecond)
	}
	if err := e.control.SetFaults(server, fault.Set{}); err != nil {
		t.Fatal(err)
	}
}

// forceOnce asks op with the forced reboot, as the host controller does once (it removes the
// one-shot annotation then), and checks that the engine stopped the wait.
func forceOnce(t *testing.T, what string, op func(ctx context.Context) (provisioner.Result, error)) {
	t.Helper()
	res, err := op(context.Background())
	if err != nil || !res.Busy || !res.ForcedReboot {
		t.Fatalf("forced reboot of the %s waiting for its agent: %s (forced %t), %v; want the wait stopped", what, describe(res), res.ForcedReboot, err)
	}
}

// poweredOffAfterAbort drives op (a provisioning) until the aborted deployment's server is off,
// and no further: the call after that deploys. The server must have been seen on in deploy failed
// (the case the provisioner's power off is for). A power off that ends between a look at the node
// and the call after it lets that call deploy: allowed once the power off was seen asked.
func poweredOffAfterAbort(t *testing.T, p *Provisioner, host provisioner.Host, op func(ctx context.Context) (provisioner.Result, error)) (deploying bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	seenOn, offAsked := false, false
	for {
		n := nodeInFull(t, p, host.NodeID)
		if n.ProvisionState != string(nodes.DeployFail) && n.ProvisionState != string(nodes.DeployWait) {
			if seenOn && offAsked {
				t.Log("the call that found the server off deployed at once: the erased last_error case is not reached in this run")
				return true
			}
			t.Fatalf("node %s after the abort, want deploy failed (or the abort under way) until its server is off", n.ProvisionState)
		}
		seenOn = seenOn || (n.ProvisionState == string(nodes.DeployFail) && n.PowerState == powerOn)
		offAsked = offAsked || (n.ProvisionState == string(nodes.DeployFail) && n.TargetPowerState == "power off")
		if n.ProvisionState == string(nodes.DeployFail) && n.PowerState == "power off" && n.TargetPowerState == "" {
			if !seenOn {
				t.Fatal("the abort left the server off: the test does not reach the case it is for")
			}
			return false
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server of the aborted deployment is still %s (target %q)", n.PowerState, n.TargetPowerState)
		}
		res, err := op(context.Background())
		if err != nil || !res.Busy {
			t.Fatalf("after the abort: %s, %v; want the server powered off first", describe(res), err)
		}
		time.Sleep(res.RequeueAfter)
	}
}
