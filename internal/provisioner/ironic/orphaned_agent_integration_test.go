package ironic

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/metalforge/metalforge/internal/bmcsim/fault"
	"github.com/metalforge/metalforge/internal/provisioner"
)

// TestCleaningAfterAFailureWithTheAgentUp (fault campaign, finding 8): right after inspection the
// server still runs its agent (fast track). A provide whose cleaning fails before its first step
// (here the BMC refuses its credentials) leaves the server on, and Ironic wipes the agent's token,
// not the agent, which goes on heartbeating with a token Ironic refuses. Ironic alone would take
// the fast track into the next cleaning and wait for that agent until clean_callback_timeout
// (300 s here, 30 minutes by default) and fail it. The provisioner powers the server off before
// the retry's cleaning, which then boots a fresh agent and ends available.
func TestCleaningAfterAFailureWithTheAgentUp(t *testing.T) {
	e := integration(t)
	t.Parallel()
	p := e.provisioner(t)
	srv := e.host(t)
	host := testHost(t, srv)
	register(t, p, &host)
	mustDone(t, "inspection", 3*time.Minute, func(ctx context.Context) (provisioner.Result, error) {
		res, _, err := p.Inspect(ctx, host, provisioner.InspectOptions{})
		return res, err
	})

	if err := e.control.SetFaults(srv.Name, fault.Set{WrongCredentials: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.control.SetFaults(srv.Name, fault.Set{}) })
	data := e.diskImage("/disk.img")
	res := drive(t, "provisioning while the BMC refuses its credentials", 3*time.Minute, func(ctx context.Context) (provisioner.Result, error) {
		return p.Provision(ctx, host, data, false)
	})
	if !res.Failed() || !strings.Contains(res.ErrorMessage, "401") {
		t.Fatalf("provisioning while the BMC refuses its credentials: %s; want the cleaning's failure (401)", describe(res))
	}
	if err := e.control.SetFaults(srv.Name, fault.Set{}); err != nil {
		t.Fatal(err)
	}
	n := nodeInFull(t, p, host.NodeID)
	if !orphanedAgent(n) {
		t.Fatalf("after the failure the node is not what finding 8 met (on, no token, no power change since the agent's heartbeat): %s, power %s, %v",
			n.ProvisionState, n.PowerState, n.DriverInternalInfo)
	}

	powerOffs := testutil.ToFloat64(orphanedAgentPowerOffs)
	aborts := testutil.ToFloat64(lostAgentAborts.WithLabelValues(string(nodes.CleanWait)))
	// The host's retry after its error backoff, as the host controller makes it (restartOnFailure).
	mustDone(t, "deprovisioning after the failure", 6*time.Minute, func(ctx context.Context) (provisioner.Result, error) {
		return p.Deprovision(ctx, host, true)
	})
	n = waitNode(t, p, host, "available", func(n *nodes.Node) bool { return true })
	if n.ProvisionState != string(nodes.Available) {
		t.Errorf("node after deprovisioning: %s, want available", n.ProvisionState)
	}
	if got := testutil.ToFloat64(orphanedAgentPowerOffs) - powerOffs; got != 1 {
		t.Errorf("orphaned-agent power offs: %v, want 1", got)
	}
	// Without the power off the cleaning waits for that agent until the wait is aborted as lost
	// (AgentLostAfter, 5 minutes) or Ironic's callback timeout ends it.
	if got := testutil.ToFloat64(lostAgentAborts.WithLabelValues(string(nodes.CleanWait))) - aborts; got != 0 {
		t.Errorf("clean waits aborted for an agent that could not answer: %v, want 0", got)
	}
	if events := historyOf(t, p, host.NodeID); slices.ContainsFunc(events, func(ev historyEvent) bool {
		return strings.Contains(ev.Event, "Timeout reached")
	}) {
		t.Errorf("the retry's cleaning waited for Ironic's callback timeout: history %+v", events)
	}
}
