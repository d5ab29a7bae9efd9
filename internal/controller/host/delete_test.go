package host

import (
	"context"
	"strings"
	"testing"
	"time"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner/fixture"
	"github.com/metalforge/metalforge/internal/test/builder"
)

const hold = time.Hour

// TestDeleteFromEveryState holds a host in each state (a fixture operation that takes an hour),
// deletes it, and checks it goes through the states metal3 goes through and disappears.
func TestDeleteFromEveryState(t *testing.T) {
	t.Parallel()
	cases := map[metal3.ProvisioningState]struct {
		build func(ns string) *metal3.BareMetalHost
		// holdOp keeps the host in the state until deletion; release lets it go afterwards.
		holdOp  fixture.Op
		release bool
		// then: what to do once the host is there (before deletion).
		then func(t *testing.T, ns string, h *metal3.BareMetalHost)
		// powerOffs, deprovisions and aborts the deletion must cause (a host that is off is not
		// powered off again; an operation waiting for the agent is aborted first, or the power
		// off waited for the provisioner's timeout).
		powerOffs, deprovisions, aborts int
		noSecret                        bool
	}{
		metal3.StateUnmanaged: {build: func(ns string) *metal3.BareMetalHost {
			h := newHost(ns, "h").Build()
			h.Spec.BMC = metal3.BMCDetails{}
			return h
		}, noSecret: true},
		metal3.StateRegistering:  {build: noImage, holdOp: fixture.OpRegister},
		metal3.StateInspecting:   {build: noImage, holdOp: fixture.OpInspect, aborts: 1},
		metal3.StatePreparing:    {build: withHints, holdOp: fixture.OpPrepare, aborts: 1},
		metal3.StateAvailable:    {build: noImage, powerOffs: 1},
		metal3.StateProvisioning: {build: withImage, holdOp: fixture.OpProvision, deprovisions: 1},
		metal3.StateProvisioned:  {build: withImage, deprovisions: 1},
		metal3.StateExternallyProvisioned: {build: func(ns string) *metal3.BareMetalHost {
			return newHost(ns, "h").WithExternallyProvisioned().Build()
		}, powerOffs: 1},
		metal3.StateDeprovisioning: {build: withImage, holdOp: fixture.OpDeprovision, release: true, deprovisions: 1,
			then: func(t *testing.T, ns string, h *metal3.BareMetalHost) {
				t.Helper()
				update(t, h, func(h *metal3.BareMetalHost) { h.Spec.Image = nil })
				waitState(t, ns, "h", metal3.StateDeprovisioning)
			}},
		metal3.StatePoweringOffBeforeDelete: {build: noImage, holdOp: fixture.OpPowerOff, release: true, powerOffs: 1,
			then: func(t *testing.T, ns string, _ *metal3.BareMetalHost) {
				t.Helper()
				deleteHost(t, ns, "h")
				waitState(t, ns, "h", metal3.StatePoweringOffBeforeDelete)
			}},
	}
	for state, tc := range cases {
		t.Run(string(state), func(t *testing.T) {
			t.Parallel()
			ns := env.Namespace(t)
			fix := fixture.New(fixture.Config{PollInterval: 50 * time.Millisecond})
			startOperator(t, ns, fix)
			h := tc.build(ns)
			if tc.holdOp != "" && tc.then == nil {
				fix.SetLatency(tc.holdOp, hold)
			}
			if tc.noSecret {
				create(t, h)
			} else {
				createHost(t, h)
			}
			target := state
			if tc.then != nil { // reached through another stable state first
				target = metal3.StateAvailable
				if h.Spec.Image != nil {
					target = metal3.StateProvisioned
				}
			}
			h = waitState(t, ns, "h", target)
			if tc.then != nil {
				if tc.holdOp != "" {
					fix.SetLatency(tc.holdOp, hold)
				}
				tc.then(t, ns, h)
			}
			if h := getHost(t, ns, "h"); h.DeletionTimestamp.IsZero() {
				deleteHost(t, ns, "h")
			}
			if tc.release {
				waitTransition(t, ns, "h", state)
				fix.SetLatency(tc.holdOp, 0)
			}
			waitGone(t, ns, "h")
			if _, ok := fix.Node(ns, "h"); ok {
				t.Fatal("node left in the provisioner")
			}
			if got := fix.Count(ns, "h", fixture.OpPowerOff); got != tc.powerOffs {
				t.Errorf("powered off %d times, want %d", got, tc.powerOffs)
			}
			if got := fix.Count(ns, "h", fixture.OpDeprovision); got != tc.deprovisions {
				t.Errorf("deprovisioned %d times, want %d", got, tc.deprovisions)
			}
			if got := fix.Count(ns, "h", fixture.OpAbort); got != tc.aborts {
				t.Errorf("aborted %d operations, want %d", got, tc.aborts)
			}
		})
	}
}

func noImage(ns string) *metal3.BareMetalHost {
	h := newHost(ns, "h").Build()
	h.Spec.Image = nil
	return h
}

func withImage(ns string) *metal3.BareMetalHost { return newHost(ns, "h").Build() }

func withHints(ns string) *metal3.BareMetalHost {
	h := noImage(ns)
	h.Spec.RootDeviceHints = &metal3.RootDeviceHints{DeviceName: "/dev/sda"}
	return h
}

// TestDeleteDetachedSkipsPowerOffAndDeprovisioning, and deleteAction delay blocks deletion until
// the annotation goes.
func TestDeleteDetached(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	startOperator(t, ns, fix)
	createHost(t, newHost(ns, "h").Build())
	waitState(t, ns, "h", metal3.StateProvisioned)
	annotate(t, ns, "h", metal3.DetachedAnnotation, "")
	waitHost(t, ns, "h", "provisioned and detached", func(h *metal3.BareMetalHost) bool {
		return h.Status.Provisioning.State == metal3.StateProvisioned && h.Status.OperationalStatus == metal3.OperationalStatusDetached
	})
	deleteHost(t, ns, "h")
	waitGone(t, ns, "h")
	if fix.Count(ns, "h", fixture.OpDeprovision) != 0 || fix.Count(ns, "h", fixture.OpPowerOff) != 0 {
		t.Fatal("a detached host was deprovisioned or powered off on deletion")
	}

	// An available host detached, deleted: the same.
	a := newHost(ns, "a").WithAnnotation(metal3.DetachedAnnotation, "").Build()
	a.Spec.Image = nil
	createHost(t, a)
	waitHost(t, ns, "a", "available and detached", func(h *metal3.BareMetalHost) bool {
		return h.Status.Provisioning.State == metal3.StateAvailable && h.Status.OperationalStatus == metal3.OperationalStatusDetached
	})
	deleteHost(t, ns, "a")
	waitGone(t, ns, "a")
	if fix.Count(ns, "a", fixture.OpPowerOff) != 0 {
		t.Fatal("a detached available host was powered off on deletion")
	}

	createHost(t, newHost(ns, "d").WithAnnotation(metal3.DetachedAnnotation, `{"deleteAction":"delay"}`).Build())
	waitHost(t, ns, "d", "detached", func(h *metal3.BareMetalHost) bool {
		return h.Status.OperationalStatus == metal3.OperationalStatusDetached
	})
	deleteHost(t, ns, "d")
	waitHost(t, ns, "d", "deletion delayed", func(h *metal3.BareMetalHost) bool {
		c := condition(h, metal3.ProgressingCondition)
		return c != nil && c.Message == "Waiting for the detached annotation (deleteAction: delay) to be removed before deletion"
	})
	if h := getHost(t, ns, "d"); h.Status.OperationalStatus != metal3.OperationalStatusDetached {
		t.Fatalf("delayed deletion moved the host: %s", describe(h))
	}
	unannotate(t, ns, "d", metal3.DetachedAnnotation)
	waitGone(t, ns, "d")
	if fix.Count(ns, "d", fixture.OpDeprovision) != 0 {
		t.Fatal("deprovisioned a host deleted while detached")
	}
}

// TestDelayedDeletionEndsWithDeprovisioning: a provisioned host detached with deleteAction delay
// (assisted-service's way), deleted, then its annotation removed: it is attached again and
// deprovisioned before it goes, as in metal3, not left running its old OS.
func TestDelayedDeletionEndsWithDeprovisioning(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	deletionDelayed(t, ns, fix, "z")
	unannotate(t, ns, "z", metal3.DetachedAnnotation)
	waitGone(t, ns, "z")
	if n := fix.Count(ns, "z", fixture.OpDeprovision); n != 1 {
		t.Fatalf("deprovisioned %d times after the annotation went, want 1", n)
	}
}

// deletionDelayed starts an operator, provisions host name, detaches it with deleteAction delay
// and deletes it: its deletion waits for the annotation to go.
func deletionDelayed(t *testing.T, ns string, fix *fixture.Fixture, name string) {
	t.Helper()
	startOperator(t, ns, fix)
	createHost(t, newHost(ns, name).Build())
	waitState(t, ns, name, metal3.StateProvisioned)
	annotate(t, ns, name, metal3.DetachedAnnotation, `{"deleteAction":"delay"}`)
	waitHost(t, ns, name, "detached", func(h *metal3.BareMetalHost) bool {
		return h.Status.OperationalStatus == metal3.OperationalStatusDetached
	})
	deleteHost(t, ns, name)
	waitHost(t, ns, name, "deletion delayed", func(h *metal3.BareMetalHost) bool {
		c := condition(h, metal3.ProgressingCondition)
		return c != nil && strings.Contains(c.Message, "deleteAction: delay")
	})
}

// TestDelayedDeletionOfAHostThatCannotAttach: the same, but the host's BMC refuses it (a dead
// BMC, a wrong password: hardware being retired): it is not held forever. Its failed attach shows
// an error (the host is no longer detached) and it goes the way of any host being deleted, whose
// failures past the limit let it go.
func TestDelayedDeletionOfAHostThatCannotAttach(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	deletionDelayed(t, ns, fix, "y")
	fix.FailNextFor(ns, "y", fixture.OpRegister, 100)
	unannotate(t, ns, "y", metal3.DetachedAnnotation)
	waitGone(t, ns, "y")
}

// TestSharedSecretReleasedByLastHost: the secret finalizer stays while another host uses it.
func TestSharedSecretReleasedByLastHost(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	startOperator(t, ns, fixture.New(fixture.Config{}))
	create(t, builder.BMCSecret(ns, "shared", "admin", "password"))
	for _, name := range []string{"a", "b"} {
		h := noImage(ns)
		h.Name = name
		h.Spec.BMC.CredentialsName = "shared"
		create(t, h)
		waitState(t, ns, name, metal3.StateAvailable)
	}
	deleteHost(t, ns, "a")
	waitGone(t, ns, "a")
	if s := getSecret(t, ns, "shared"); len(s.Finalizers) != 1 {
		t.Fatalf("secret released while host b uses it: %v", s.Finalizers)
	}
	deleteHost(t, ns, "b")
	waitGone(t, ns, "b")
	if s := getSecret(t, ns, "shared"); len(s.Finalizers) != 0 {
		t.Fatalf("secret not released by the last host: %v", s.Finalizers)
	}
}

// TestDeleteAfterNodeLostWithUnusableSecret: a host being deleted whose node the provisioner lost
// while it deprovisioned (Ironic lost its database), and whose credentials Secret no longer
// works, cannot be registered again to finish cleaning: it goes on to deleting and is gone,
// rather than ask the provisioner for the lost node again and again.
func TestDeleteAfterNodeLostWithUnusableSecret(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{PollInterval: 50 * time.Millisecond})
	startOperator(t, ns, fix)
	h := withImage(ns)
	createHost(t, h)
	waitState(t, ns, "h", metal3.StateProvisioned)
	fix.SetLatency(fixture.OpDeprovision, hold)
	deleteHost(t, ns, "h")
	waitState(t, ns, "h", metal3.StateDeprovisioning)
	secret := getSecret(t, ns, h.Spec.BMC.CredentialsName)
	delete(secret.Data, "password")
	if err := env.Client.Update(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	fix.Forget(ns, "h")
	waitGone(t, ns, "h")
}

// TestDeleteAfterCleaningGivenUpPowersOff: a deleted host whose cleaning fails more than three
// times goes on without it, and is still powered off before it leaves the provisioner (the
// failures of cleaning do not count as failures of the power off).
func TestDeleteAfterCleaningGivenUpPowersOff(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{PollInterval: 50 * time.Millisecond})
	startOperator(t, ns, fix)
	createHost(t, withImage(ns))
	waitState(t, ns, "h", metal3.StateProvisioned)
	fix.FailNext(fixture.OpDeprovision, maxDeleteErrors+10)
	deleteHost(t, ns, "h")
	waitGone(t, ns, "h")
	if got := fix.Count(ns, "h", fixture.OpDeprovision); got != maxDeleteErrors+1 {
		t.Errorf("cleaning tried %d times, want %d", got, maxDeleteErrors+1)
	}
	if got := fix.Count(ns, "h", fixture.OpPowerOff); got != 1 {
		t.Errorf("powered off %d times before deletion, want 1", got)
	}
}
