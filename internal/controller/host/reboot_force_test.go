package host

import (
	"slices"
	"testing"
	"time"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/events"
	"github.com/metalforge/metalforge/internal/provisioner/fixture"
)

// A forced reboot (reboot.metal3.io: {"force": true}) is metal3's way out for a host whose agent
// never came up: an inspection or a deployment waiting for it is stopped and started again, which
// boots the agent afresh (with the host's current preprovisioning image). Before, the annotation
// was removed as any reboot request at these moments and the host went on waiting.

const forcedReboot = `{"mode": "hard", "force": true}`

// waitingFor leaves a host in state with op running (the fixture's stand-in for an engine waiting
// for the agent) after one reconcile.
func waitingFor(t *testing.T, state metal3.ProvisioningState, op fixture.Op) (*hostScope, *fixture.Fixture) {
	t.Helper()
	fix := fixture.New(fixture.Config{})
	fix.SetLatency(op, time.Hour)
	h := unitHost(state)
	h.Spec.Image = &metal3.Image{URL: "http://images/a.qcow2", Checksum: "abc", ChecksumType: metal3.MD5}
	s := unitScope(t, h, fix)
	registerIn(t, s, fix)
	s.run()
	if s.state() != state || fix.Count("ns", "host-0", op) != 1 {
		t.Fatalf("state %q, %s started %d times: want %s under way once", s.state(), op, fix.Count("ns", "host-0", op), op)
	}
	return s, fix
}

// again is the next reconcile of s's host with annotations set.
func again(t *testing.T, s *hostScope, fix *fixture.Fixture, annotations map[string]string) *hostScope {
	t.Helper()
	for k := range s.fx.removeAnnotations {
		delete(s.host.Annotations, k)
	}
	for k, v := range annotations {
		s.host.Annotations[k] = v
	}
	s = unitScope(t, s.host, fix)
	s.run()
	return s
}

func reasons(evs []events.Event) []string {
	out := make([]string, 0, len(evs))
	for _, e := range evs {
		out = append(out, e.Reason)
	}
	return out
}

func TestForcedRebootRestartsAnInspectionWaitingForItsAgent(t *testing.T) {
	s, fix := waitingFor(t, metal3.StateInspecting, fixture.OpInspect)
	s = again(t, s, fix, map[string]string{metal3.RebootAnnotationPrefix: forcedReboot})
	if got := fix.Count("ns", "host-0", fixture.OpInspect); got != 2 {
		t.Fatalf("inspections started: %d, want 2 (the forced reboot starts it again)", got)
	}
	if s.state() != metal3.StateInspecting {
		t.Fatalf("state %q, want inspecting", s.state())
	}
	if !s.fx.removeAnnotations[metal3.RebootAnnotationPrefix] {
		t.Fatalf("the forced reboot annotation stays (removed %v): it would restart the inspection again", s.fx.removeAnnotations)
	}
	if !slices.Contains(reasons(s.fx.events), reasonRebootForced) {
		t.Fatalf("events %v: want %s", reasons(s.fx.events), reasonRebootForced)
	}
	// Once taken, the inspection goes on: the next reconcile does not start it a third time.
	s = again(t, s, fix, nil)
	if got := fix.Count("ns", "host-0", fixture.OpInspect); got != 2 || s.state() != metal3.StateInspecting {
		t.Fatalf("after the forced reboot was taken: %d inspections started, state %q; want 2, inspecting", got, s.state())
	}
}

func TestForcedRebootRestartsADeploymentWaitingForItsAgent(t *testing.T) {
	s, fix := waitingFor(t, metal3.StateProvisioning, fixture.OpProvision)
	s = again(t, s, fix, map[string]string{metal3.RebootAnnotationPrefix: forcedReboot})
	if got := fix.Count("ns", "host-0", fixture.OpProvision); got != 2 {
		t.Fatalf("deployments started: %d, want 2 (the forced reboot starts it again)", got)
	}
	if !s.fx.removeAnnotations[metal3.RebootAnnotationPrefix] {
		t.Fatalf("the forced reboot annotation stays (removed %v)", s.fx.removeAnnotations)
	}
	if !slices.Contains(reasons(s.fx.events), reasonRebootForced) {
		t.Fatalf("events %v: want %s", reasons(s.fx.events), reasonRebootForced)
	}
	fix.SetLatency(fixture.OpProvision, 0)
	s = again(t, s, fix, nil)
	if s.state() != metal3.StateProvisioned || fix.Count("ns", "host-0", fixture.OpProvision) != 2 {
		t.Fatalf("state %q after %d deployments: want provisioned by the second", s.state(), fix.Count("ns", "host-0", fixture.OpProvision))
	}
}

// TestRebootWithoutForceLeavesTheAgentWait: a plain reboot request, or a held one with force
// (kept until its owner removes it, it would restart the operation at every look), does not
// interrupt an operation waiting for its agent.
func TestRebootWithoutForceLeavesTheAgentWait(t *testing.T) {
	for name, annotations := range map[string]map[string]string{
		"one-shot, no force": {metal3.RebootAnnotationPrefix: `{"mode": "hard"}`},
		"held, force":        {metal3.RebootAnnotationPrefix + "/remediation": forcedReboot},
	} {
		t.Run(name, func(t *testing.T) {
			for _, w := range []struct {
				state metal3.ProvisioningState
				op    fixture.Op
			}{{metal3.StateInspecting, fixture.OpInspect}, {metal3.StateProvisioning, fixture.OpProvision}} {
				s, fix := waitingFor(t, w.state, w.op)
				s = again(t, s, fix, annotations)
				s = again(t, s, fix, nil)
				if got := fix.Count("ns", "host-0", w.op); got != 1 {
					t.Errorf("%s: %s started %d times, want once", w.state, w.op, got)
				}
				if slices.Contains(reasons(s.fx.events), reasonRebootForced) {
					t.Errorf("%s: event %s without a forced one-shot reboot", w.state, reasonRebootForced)
				}
			}
		})
	}
}
