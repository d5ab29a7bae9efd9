package ironic

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/bmcsim"
	"github.com/metalforge/metalforge/internal/provisioner"
)

// testHost is a host as the controller would pass it, for one simulated server.
func testHost(t *testing.T, h bmcsim.Host) provisioner.Host {
	t.Helper()
	return provisioner.Host{
		Namespace:      "itest",
		Name:           strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")),
		BMCAddress:     h.Addresses["redfish-virtualmedia+http"],
		BMCCredentials: provisioner.Credentials{Username: h.Username, Password: h.Password},
		BootMACAddress: h.BootMAC,
		BootMode:       metal3.UEFI,
	}
}

// drive calls op until it is done or failed, sleeping as it asks, like the controller does, and
// returns the last result. It fails the test on errors and on timeout.
func drive(t *testing.T, what string, timeout time.Duration, op func(ctx context.Context) (provisioner.Result, error)) provisioner.Result {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	deadline := start.Add(timeout)
	calls := 0
	for {
		calls++
		res, err := op(ctx)
		if err != nil {
			t.Fatalf("%s: call %d: %v", what, calls, err)
		}
		if !res.Busy {
			t.Logf("%s: %s after %d calls, %s", what, describe(res), calls, time.Since(start).Round(100*time.Millisecond))
			return res
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still working after %s (%d calls)", what, timeout, calls)
		}
		time.Sleep(res.RequeueAfter)
	}
}

func describe(res provisioner.Result) string {
	switch {
	case res.Failed():
		return "failed: " + res.ErrorMessage
	case res.Busy:
		return fmt.Sprintf("working (again in %s)", res.RequeueAfter)
	}
	return "done"
}

// mustDone drives op to Done.
func mustDone(t *testing.T, what string, timeout time.Duration, op func(ctx context.Context) (provisioner.Result, error)) {
	t.Helper()
	if res := drive(t, what, timeout, op); res.Failed() {
		t.Fatalf("%s: %s", what, res.ErrorMessage)
	}
}

// register drives Register to Done and returns the node ID.
func register(t *testing.T, p *Provisioner, host *provisioner.Host) {
	t.Helper()
	mustDone(t, "register", 4*time.Minute, func(ctx context.Context) (provisioner.Result, error) {
		res, id, err := p.Register(ctx, *host, provisioner.RegisterOptions{})
		if id != "" {
			host.NodeID = id
		}
		return res, err
	})
}

// registerActive registers the host and adopts its node as an active one (an externally
// provisioned host, nothing deployed): a node to service.
func registerActive(t *testing.T, p *Provisioner, host *provisioner.Host) {
	t.Helper()
	register(t, p, host)
	mustDone(t, "adopt", 2*time.Minute, func(ctx context.Context) (provisioner.Result, error) {
		return p.Adopt(ctx, *host, provisioner.ProvisionData{BootMode: metal3.UEFI}, false)
	})
}

// callsDelta reports the Ironic requests per operation made while fn ran.
func callsDelta(p *Provisioner, fn func()) map[string]int64 {
	before := p.Calls()
	fn()
	after := p.Calls()
	out := maps.Clone(after)
	for k, v := range before {
		out[k] -= v
		if out[k] == 0 {
			delete(out, k)
		}
	}
	return out
}

func isUnavailable(err error) bool { return errors.Is(err, provisioner.ErrUnavailable) }

// waitNode polls the host's node until cond holds.
func waitNode(t *testing.T, p *Provisioner, host provisioner.Host, what string, cond func(*nodes.Node) bool) *nodes.Node {
	t.Helper()
	deadline := time.Now().Add(4 * time.Minute)
	for {
		p.watch.Forget(host.NodeID)
		_, n, err := p.getNode(context.Background(), host)
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if cond(n) {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: node is %s, power %s (target %q)", what, n.ProvisionState, n.PowerState, n.TargetPowerState)
		}
		time.Sleep(300 * time.Millisecond)
	}
}
