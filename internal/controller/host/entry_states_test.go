package host

import (
	"context"
	"strings"
	"testing"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner/fixture"
	"github.com/metalforge/metalforge/internal/test/poll"
)

// entryCase is a host the operator first sees in a state that a running operator does not hold a
// host in long enough to act on it: the legacy states "match profile" and "ready" (written by
// older operators, or restored after a move), a host deleted before it was ever reconciled, a host
// deleted in a busy state while detached. The test writes finalizer, status and deletion while
// no operator runs, as an older operator or a move would have left them, then starts one.
type entryCase struct {
	name    string
	state   metal3.ProvisioningState
	deleted bool
	// detached: the host has the detached annotation; in a busy state (which a detach without
	// force does not take effect in) its status says detached too, as a forced detach left it.
	detached bool
	noSecret bool
	// path is the start of the state change the operator must announce, e.g. "ready → available".
	path string
}

// TestEntryStates takes the edges of the state table that start in such states.
func TestEntryStates(t *testing.T) {
	t.Parallel()
	detachedDelete := func(st metal3.ProvisioningState) entryCase {
		return entryCase{name: "detached-" + strings.ReplaceAll(string(st), " ", "-"), state: st, deleted: true,
			detached: true, path: string(st) + " → deleting"}
	}
	cases := []entryCase{
		{name: "match-profile", state: metal3.StateMatchProfile, path: "match profile → preparing"},
		{name: "ready", state: metal3.StateReady, path: "ready → available"},
		{name: "never-reconciled", state: metal3.StateNone, deleted: true, path: "(none) → deleting"},
		{name: "deleted-match-profile", state: metal3.StateMatchProfile, deleted: true, path: "match profile → powering off before delete → deleting"},
		{name: "deleted-ready", state: metal3.StateReady, deleted: true, path: "ready → powering off before delete → deleting"},
		// Deprovisioning a host the provisioner never knew, whose credentials are gone: nothing
		// can be cleaned, so it is deleted at once.
		{name: "deprovisioning-unregistered", state: metal3.StateDeprovisioning, deleted: true, noSecret: true, path: "deprovisioning → deleting"},
		detachedDelete(metal3.StateInspecting),
		detachedDelete(metal3.StateMatchProfile),
		detachedDelete(metal3.StateReady),
		detachedDelete(metal3.StatePreparing),
		detachedDelete(metal3.StateProvisioning),
		detachedDelete(metal3.StateExternallyProvisioned),
	}
	ns := env.Namespace(t)
	ctx := context.Background()
	for _, tc := range cases {
		b := newHost(ns, tc.name).WithFinalizer(metal3.BareMetalHostFinalizer)
		if tc.detached {
			b = b.WithAnnotation(metal3.DetachedAnnotation, "")
		}
		h := b.Build()
		h.Spec.Image = nil
		if tc.noSecret {
			create(t, h)
		} else {
			createHost(t, h)
		}
		if tc.state != metal3.StateNone {
			h.Status = metal3.BareMetalHostStatus{
				OperationalStatus: metal3.OperationalStatusOK,
				Provisioning:      metal3.ProvisionStatus{State: tc.state},
			}
			if tc.detached && !stateOf(tc.state).detachable.is() {
				h.Status.OperationalStatus = metal3.OperationalStatusDetached
			}
			if err := env.Client.Status().Update(ctx, h); err != nil {
				t.Fatalf("writing the status of %s: %v", tc.name, err)
			}
		}
		if tc.deleted {
			deleteHost(t, ns, tc.name)
		}
	}

	fix := fixture.New(fixture.Config{})
	startOperator(t, ns, fix)
	for _, tc := range cases {
		poll.Until(t, tc.name+": an event for "+tc.path, func() (bool, string) {
			got := eventsFor(t, ns, tc.name, true)
			for _, e := range got {
				if strings.Contains(e, "State changed: "+tc.path) {
					return true, ""
				}
			}
			return false, strings.Join(got, "; ")
		})
		if tc.deleted {
			waitGone(t, ns, tc.name)
			if tc.detached && (fix.Count(ns, tc.name, fixture.OpPowerOff) != 0 || fix.Count(ns, tc.name, fixture.OpDeprovision) != 0) {
				t.Errorf("%s: a detached host was powered off or deprovisioned on deletion", tc.name)
			}
		} else {
			waitState(t, ns, tc.name, metal3.StateAvailable)
		}
	}
}
