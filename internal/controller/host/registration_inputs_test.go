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

// What the spec and the preprovisioning network data decide of a registration reaches the
// provisioner even when the reconcile that saw the change could not register, when the change is
// a Secret's (no new generation), and after the provisioner lost a provisioned host's node.

const (
	netDataV1 = `{"links":[{"id":"eth0","type":"phy"}]}`
	netDataV2 = `{"links":[{"id":"eth1","type":"phy"}]}`
)

func networkDataSecret(ns, name, data string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{"networkData": []byte(data)}}
}

// waitRegistered waits until the fixture's last registration of the host satisfies cond.
func waitRegistered(t *testing.T, fix *fixture.Fixture, ns, name, what string, cond func(disablePowerOff bool, networkData string) bool) {
	t.Helper()
	poll.Until(t, "the last registration of "+name+" to have "+what, func() (bool, string) {
		h, ok := fix.LastRegistration(ns, name)
		return ok && cond(h.DisablePowerOff, h.PreprovisioningNetworkData), "disablePowerOff " + boolString(h.DisablePowerOff) + ", network data " + h.PreprovisioningNetworkData
	})
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// TestSpecChangeRegisteredAfterFailedRegistration: a spec change whose registration could not run
// (the provisioner unavailable) is registered once it can, although the status recorded the new
// generation meanwhile.
func TestSpecChangeRegisteredAfterFailedRegistration(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	startOperator(t, ns, fix)
	createHost(t, noImage(ns))
	waitState(t, ns, "h", metal3.StateAvailable)
	waitRegistered(t, fix, ns, "h", "power off enabled", func(off bool, _ string) bool { return !off })

	fix.SetUnavailable(true)
	update(t, &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h"}}, func(h *metal3.BareMetalHost) {
		h.Spec.DisablePowerOff = true
	})
	waitHost(t, ns, "h", "the new generation recorded while the provisioner is unavailable", func(h *metal3.BareMetalHost) bool {
		ready, progressing := condition(h, metal3.ReadyCondition), condition(h, metal3.ProgressingCondition)
		return ready != nil && ready.ObservedGeneration == h.Generation && progressing != nil && progressing.Reason == reasonProvisionerUnavailable
	})
	fix.SetUnavailable(false)
	waitRegistered(t, fix, ns, "h", "power off disabled", func(off bool, _ string) bool { return off })
}

// TestNetworkDataSecretEditRegistered: without an image builder the preprovisioning network data
// goes to the provisioner at registration; an edit of its Secret (no spec change) is sent too.
func TestNetworkDataSecretEditRegistered(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	startOperator(t, ns, fix)
	create(t, networkDataSecret(ns, "net", netDataV1))
	h := noImage(ns)
	h.Spec.PreprovisioningNetworkDataName = "net"
	createHost(t, h)
	waitState(t, ns, "h", metal3.StateAvailable)
	waitRegistered(t, fix, ns, "h", "the first network data", func(_ bool, data string) bool { return data == netDataV1 })

	editNetworkData(t, ns)
	waitRegistered(t, fix, ns, "h", "the edited network data", func(_ bool, data string) bool { return data == netDataV2 })
}

// TestLostNodeOfProvisionedHostKeepsNetworkData: a provisioned host whose node the provisioner lost
// (Ironic's database) is enrolled again with its preprovisioning network data: the agent that
// cleans it later boots with its static network.
func TestLostNodeOfProvisionedHostKeepsNetworkData(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	startOperator(t, ns, fix)
	provisionedWithNetworkData(t, ns)
	first, _ := fix.Node(ns, "h")

	fix.Forget(ns, "h")
	poll.Until(t, "a new node for the host", func() (bool, string) {
		n, ok := fix.Node(ns, "h")
		return ok && n.ID != first.ID && n.Provisioned, n.ID
	})
	if reg, _ := fix.LastRegistration(ns, "h"); reg.PreprovisioningNetworkData != netDataV1 {
		t.Fatalf("node enrolled again with network data %q, want %q", reg.PreprovisioningNetworkData, netDataV1)
	}
}

// TestNetworkDataSecretEditAfterRestart: a new operator process has no record of the host's last
// registration, and a Secret edit moves no generation: the edit must still reach the provisioner
// (it was sent only by a process that had registered the host itself; now the new process
// confirms the network data first, and the edit differs from what it confirmed).
func TestNetworkDataSecretEditAfterRestart(t *testing.T) {
	t.Parallel()
	ns, fix := provisionedWithNetworkDataThenStopped(t)

	second := startOperator(t, ns, fix)
	// The new process has read the host (and with it the Secret's first listing) before the edit.
	second.waitSeen(t, ns, "h", getHost(t, ns, "h").ResourceVersion, 1)
	editNetworkData(t, ns)
	waitRegistered(t, fix, ns, "h", "the edited network data", func(_ bool, data string) bool { return data == netDataV2 })
}

// TestNetworkDataSecretEditedWhileStopped: a Secret edited while no operator ran reaches the
// provisioner: the new process registers a host whose network data the provisioner keeps once,
// and only such hosts (a host without network data is not registered at the restart).
func TestNetworkDataSecretEditedWhileStopped(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	first := startOperator(t, ns, fix)
	provisionedWithNetworkData(t, ns)
	createHost(t, newHost(ns, "plain").Build())
	waitState(t, ns, "plain", metal3.StateProvisioned)
	first.stop()

	editNetworkData(t, ns)
	plainCalls := fix.RegisterCalls(ns, "plain")
	second := startOperator(t, ns, fix)
	waitRegistered(t, fix, ns, "h", "the network data edited while no operator ran", func(_ bool, data string) bool { return data == netDataV2 })
	second.waitSeen(t, ns, "plain", getHost(t, ns, "plain").ResourceVersion, 1)
	if n := fix.RegisterCalls(ns, "plain"); n != plainCalls {
		t.Fatalf("the host without network data registered %d times at the restart, with nothing changed", n-plainCalls)
	}
	// Once confirmed, later reconciles (woken here by an annotation) do not register it again.
	calls := fix.RegisterCalls(ns, "h")
	update(t, &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h"}}, func(h *metal3.BareMetalHost) {
		metav1.SetMetaDataAnnotation(&h.ObjectMeta, "example.com/touched", "1")
	})
	second.waitSeen(t, ns, "h", getHost(t, ns, "h").ResourceVersion, 1)
	if n := fix.RegisterCalls(ns, "h"); n != calls {
		t.Fatalf("%d more registrations of the host with network data once it was confirmed", n-calls)
	}
}

// TestNetworkDataConfirmationWhileProvisionerDown: the confirmation a new process asks of a host's
// network data carries no change known to be owed: while the provisioner cannot answer, the host
// gets no RegistrationPending (which would cost every such host two status writes and say a
// change waits), and the confirmation is asked once the provisioner answers.
func TestNetworkDataConfirmationWhileProvisionerDown(t *testing.T) {
	t.Parallel()
	ns, fix := provisionedWithNetworkDataThenStopped(t)

	fix.SetUnavailable(true)
	calls := fix.RegisterCalls(ns, "h")
	startOperator(t, ns, fix)
	h := waitHost(t, ns, "h", "the provisioner shown unavailable", func(h *metal3.BareMetalHost) bool {
		c := condition(h, metal3.ProgressingCondition)
		return c != nil && c.Reason == reasonProvisionerUnavailable
	})
	if c := condition(h, metal3.RegistrationPendingCondition); c != nil {
		t.Fatalf("RegistrationPending %s %q for a confirmation with nothing changed", c.Reason, c.Message)
	}
	fix.SetUnavailable(false)
	poll.Until(t, "the network data confirmed once the provisioner answers", func() (bool, string) {
		n := fix.RegisterCalls(ns, "h")
		return n > calls, fmt.Sprint(n - calls)
	})
}

// TestUnsentSpecChangeSurvivesRestart: a spec change whose registration could not run (the
// provisioner unavailable) is recorded as not sent (RegistrationPending, NotSent) once the status
// records the new generation, and a new operator process sends it.
func TestUnsentSpecChangeSurvivesRestart(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	first := startOperator(t, ns, fix)
	createHost(t, noImage(ns))
	waitState(t, ns, "h", metal3.StateAvailable)

	fix.SetUnavailable(true)
	update(t, &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h"}}, func(h *metal3.BareMetalHost) {
		h.Spec.DisablePowerOff = true
	})
	waitHost(t, ns, "h", "the unsent change recorded with the new generation", func(h *metal3.BareMetalHost) bool {
		ready, pending := condition(h, metal3.ReadyCondition), condition(h, metal3.RegistrationPendingCondition)
		return ready != nil && ready.ObservedGeneration == h.Generation && pending != nil && pending.Reason == metal3.RegistrationNotSentReason
	})
	first.stop()
	fix.SetUnavailable(false)
	startOperator(t, ns, fix)
	waitRegistered(t, fix, ns, "h", "power off disabled", func(off bool, _ string) bool { return off })
	waitHost(t, ns, "h", "the pending registration cleared", func(h *metal3.BareMetalHost) bool {
		return condition(h, metal3.RegistrationPendingCondition) == nil
	})
}

// provisionedWithNetworkData creates host "h" with an image and its preprovisioning network data
// in Secret "net" (netDataV1), and waits for it to be provisioned.
func provisionedWithNetworkData(t *testing.T, ns string) {
	t.Helper()
	create(t, networkDataSecret(ns, "net", netDataV1))
	h := withImage(ns)
	h.Spec.PreprovisioningNetworkDataName = "net"
	createHost(t, h)
	waitState(t, ns, "h", metal3.StateProvisioned)
}

// provisionedWithNetworkDataThenStopped is provisionedWithNetworkData by an operator process that
// then stops: the next process starts without the registration memory.
func provisionedWithNetworkDataThenStopped(t *testing.T) (string, *fixture.Fixture) {
	t.Helper()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	first := startOperator(t, ns, fix)
	provisionedWithNetworkData(t, ns)
	first.stop()
	return ns, fix
}

// editNetworkData changes Secret "net" to netDataV2 (no change of the host's generation).
func editNetworkData(t *testing.T, ns string) {
	t.Helper()
	update(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "net"}}, func(s *corev1.Secret) {
		s.Data["networkData"] = []byte(netDataV2)
	})
}
