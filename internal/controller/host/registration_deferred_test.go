package host

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner/fixture"
	"github.com/metalforge/metalforge/internal/test/poll"
)

// TestDeferredRegistrationIsNotRecorded: a registration the provisioner defers (its engine waits
// for the agent and applies the change later) lets the host go on, but records nothing: rotated
// credentials are not taken for good (no event), and Register is asked again until it takes the
// change, which is then recorded.
func TestDeferredRegistrationIsNotRecorded(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	startOperator(t, ns, fix)
	createHost(t, withImage(ns))
	old := waitState(t, ns, "h", metal3.StateProvisioned).Status.GoodCredentials

	fix.DeferRegistrationFor(ns, "h", true)
	calls := fix.RegisterCalls(ns, "h")
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bmc-h"}}
	rotated := update(t, secret, func(s *corev1.Secret) { s.Data["password"] = []byte("rotated") })
	poll.Until(t, "Register asked again and again", func() (bool, string) {
		n := fix.RegisterCalls(ns, "h")
		return n >= calls+4, fmt.Sprintf("%d calls since the rotation", n-calls)
	})
	h := getHost(t, ns, "h")
	if got := h.Status.GoodCredentials; got.Version != old.Version {
		t.Fatalf("goodCredentials %s after a deferred registration, want the old %s", got.Version, old.Version)
	}
	if h.Status.OperationalStatus != metal3.OperationalStatusOK || h.Status.ErrorType != "" {
		t.Fatalf("the host did not go on: %s", describe(h))
	}
	if n := len(hostEvents(t, ns, "h", reasonCredentialsUpdated)); n != 0 {
		t.Fatalf("%d %s events for a deferred registration", n, reasonCredentialsUpdated)
	}

	fix.DeferRegistrationFor(ns, "h", false)
	waitHost(t, ns, "h", "the rotated credentials recorded", func(h *metal3.BareMetalHost) bool {
		return h.Status.GoodCredentials.Version == rotated
	})
	waitEvent(t, ns, "h", reasonCredentialsUpdated)
}

// TestDeferredRegistrationSurvivesRestart: a network data edit (no new generation) that the
// provisioner deferred is sent by a new operator process too: the status records that it waits
// (RegistrationPending), where the first process only had memory, and a new one registered a
// host again only for a spec change.
func TestDeferredRegistrationSurvivesRestart(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	op := startOperator(t, ns, fix)
	provisionedWithNetworkData(t, ns)

	fix.DeferRegistrationFor(ns, "h", true)
	editNetworkData(t, ns)
	waitHost(t, ns, "h", "the deferred registration recorded in the status", func(h *metal3.BareMetalHost) bool {
		c := condition(h, metal3.RegistrationPendingCondition)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == metal3.RegistrationDeferredReason
	})
	op.stop()

	fix.DeferRegistrationFor(ns, "h", false)
	calls := fix.RegisterCalls(ns, "h")
	startOperator(t, ns, fix)
	poll.Until(t, "the new operator to register the edited network data", func() (bool, string) {
		n := fix.RegisterCalls(ns, "h")
		reg, _ := fix.LastRegistration(ns, "h")
		return n > calls && reg.PreprovisioningNetworkData == netDataV2, fmt.Sprintf("%d calls since the restart", n-calls)
	})
	waitHost(t, ns, "h", "the pending registration cleared", func(h *metal3.BareMetalHost) bool {
		return condition(h, metal3.RegistrationPendingCondition) == nil && h.Status.OperationalStatus == metal3.OperationalStatusOK
	})
}
