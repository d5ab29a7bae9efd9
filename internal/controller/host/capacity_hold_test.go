package host

import (
	"maps"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner/fixture"
	"github.com/metalforge/metalforge/internal/test/apicount"
)

// A host held back by provisioner capacity on its way out of a state runs that state's handler at
// every DelayedRequeue: what the handler changes for the move must happen once, when the move is
// made, not at every look (a count growing, a status written again and again).

// inspectionDisabled: the host goes from registering to preparing.
func inspectionDisabled(h *metal3.BareMetalHost) *metal3.BareMetalHost {
	h.Spec.InspectionMode = metal3.InspectionModeDisabled
	return h
}

// startCounted starts the operator with its API writes counted.
func startCounted(t *testing.T, ns string, fix *fixture.Fixture, tune ...func(*Config)) (*operator, *apicount.Writes) {
	t.Helper()
	counter := &apicount.Writes{}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(counter.Wrap)
	return startOperatorWith(t, cfg, ns, fix, tune...), counter
}

// writes counts the operator's API writes but Events.
func writes(counter *apicount.Writes) map[string]int {
	all := counter.All()
	delete(all, "events create")
	delete(all, "events patch")
	return all
}

// assertHeld waits for the held host's next reconciles and checks that they wrote nothing (the
// other hosts of these tests are busy and quiet meanwhile). An unchanged rewrite leaves the
// resourceVersion alone: the requests are counted.
func assertHeld(t *testing.T, op *operator, counter *apicount.Writes, ns, name string) *metal3.BareMetalHost {
	t.Helper()
	held := waitHost(t, ns, name, "held back (operationalStatus delayed)", func(h *metal3.BareMetalHost) bool {
		return h.Status.OperationalStatus == metal3.OperationalStatusDelayed
	})
	before := writes(counter)
	op.waitSeen(t, ns, name, held.ResourceVersion, 5)
	h := getHost(t, ns, name)
	if after := writes(counter); h.ResourceVersion != held.ResourceVersion || !maps.Equal(before, after) {
		t.Fatalf("the held host was written again (resourceVersion %s → %s, writes %v → %v): %s, provisioningFailCount %d",
			held.ResourceVersion, h.ResourceVersion, before, after, describe(h), h.Status.ProvisioningFailCount)
	}
	return held
}

// TestFailedDeployHeldByCapacityCountsOnce: a failed deployment waiting for the capacity to clean
// up counts as one failed attempt, however long it waits.
func TestFailedDeployHeldByCapacityCountsOnce(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{Latency: map[fixture.Op]time.Duration{fixture.OpInspect: hold}})
	// A long backoff: the failure is retried when the test changes the spec, not before.
	op, counter := startCounted(t, ns, fix, func(c *Config) { c.Backoff = func(int) time.Duration { return time.Hour } })

	b := noImage(ns)
	b.Name = "b" // inspects for as long as the test runs: the busy host that fills the capacity
	b.Spec.BMC.CredentialsName = "bmc-b"
	createHost(t, b)
	fix.FailNextFor(ns, "a", fixture.OpProvision, 1)
	a := inspectionDisabled(newHost(ns, "a").Build())
	createHost(t, a)
	waitHost(t, ns, "a", "its deployment failed", func(h *metal3.BareMetalHost) bool {
		return h.Status.Provisioning.State == metal3.StateProvisioning && h.Status.ErrorType == metal3.ProvisioningError
	})
	waitState(t, ns, "b", metal3.StateInspecting)
	fix.SetCapacity(1)
	update(t, &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a"}}, func(h *metal3.BareMetalHost) {
		h.Spec.Description = "retry now" // a spec change retries a failure at once
	})

	held := assertHeld(t, op, counter, ns, "a")
	if held.Status.ProvisioningFailCount != 0 || held.Status.Provisioning.State != metal3.StateProvisioning {
		t.Fatalf("held before cleaning up the failed attempt: %s, provisioningFailCount %d", describe(held), held.Status.ProvisioningFailCount)
	}

	fix.SetCapacity(0)
	waitTransition(t, ns, "a", metal3.StateDeprovisioning)
	waitState(t, ns, "a", metal3.StateProvisioned)
	if got := fix.Count(ns, "a", fixture.OpProvision); got != 2 {
		t.Errorf("deployed %d times, want 2 (the failure and its retry)", got)
	}
}

// TestInspectedHostHeldByCapacityWritesOnce: an inspected host waiting for the capacity to prepare
// writes its status once (delayed), not its hardware at every look, and records the hardware
// when it moves on.
func TestInspectedHostHeldByCapacityWritesOnce(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{Latency: map[fixture.Op]time.Duration{fixture.OpInspect: hold, fixture.OpProvision: hold}})
	op, counter := startCounted(t, ns, fix)

	b := inspectionDisabled(newHost(ns, "b").Build()) // deploys for as long as the test runs
	createHost(t, b)
	a := noImage(ns)
	a.Name = "a"
	a.Spec.BMC.CredentialsName = "bmc-a"
	createHost(t, a)
	waitState(t, ns, "b", metal3.StateProvisioning)
	waitState(t, ns, "a", metal3.StateInspecting)
	fix.SetCapacity(1)
	fix.SetLatency(fixture.OpInspect, 0) // a's inspection ends; b's deployment keeps the capacity

	held := assertHeld(t, op, counter, ns, "a")
	if held.Status.Provisioning.State != metal3.StateInspecting {
		t.Fatalf("held in the wrong state: %s", describe(held))
	}

	fix.SetCapacity(0)
	h := waitState(t, ns, "a", metal3.StateAvailable)
	if h.Status.HardwareDetails == nil || h.Status.HardwareDetails.CPU.Arch == "" {
		t.Fatalf("no hardware recorded after inspection: %+v", h.Status.HardwareDetails)
	}
	if hd, err := getHardwareData(ns, "a"); err != nil || hd.Spec.HardwareDetails == nil {
		t.Fatalf("no HardwareData after inspection: %v", err)
	}
}
