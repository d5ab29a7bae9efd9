package host

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner/fixture"
	"github.com/metalforge/metalforge/internal/test/poll"
)

// TestRegistrationInputErrorDuringLiveUpdate: a registration that fails on bad BMC input while a
// live update runs shows its error but keeps the host servicing; once the input is fixed the live
// update goes on and completes (its end recorded), instead of the host turning OK while the
// provisioner still services it.
func TestRegistrationInputErrorDuringLiveUpdate(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{Latency: map[fixture.Op]time.Duration{fixture.OpService: hold}})
	startWithFirmware(t, ns, fix)
	provisionedWithFirmware(t, ns, "h", &metal3.HostUpdatePolicySpec{FirmwareSettings: onReboot})
	setSettings(t, ns, "h", map[string]string{"ProcTurboMode": "Disabled"})
	reboot(t, ns, "h")
	poll.Until(t, "the live update running in the provisioner", func() (bool, string) {
		n, _ := fix.Node(ns, "h")
		return n.Busy == fixture.OpService, string(n.Busy)
	})

	h, secret := breakRegistration(t, ns)
	if h.Status.OperationalStatus != metal3.OperationalStatusServicing {
		t.Fatalf("the live update is no longer recognisable: %s", describe(h))
	}
	if c := condition(h, metal3.ManageableCondition); c == nil || c.Reason != metal3.RegistrationFailedReason {
		t.Errorf("Manageable while registration fails: %+v", c)
	}
	if c := condition(h, metal3.ReadyCondition); c == nil || c.Reason != metal3.ServicingReason {
		t.Errorf("Ready while registration fails during a live update: %+v", c)
	}

	update(t, secret, func(s *corev1.Secret) { s.Data["password"] = []byte("password") })
	waitHost(t, ns, "h", "registered again, still servicing", func(h *metal3.BareMetalHost) bool {
		return h.Status.ErrorType == "" && h.Status.OperationalStatus == metal3.OperationalStatusServicing
	})
	fix.SetLatency(fixture.OpService, 0)
	servicedOK(t, ns, "h", fix, 1)
	waitEvent(t, ns, "h", reasonServicingComplete)
}

// TestRegistrationErrorKeepsAFailedLiveUpdate: a live update that used all its retries fails for
// good; a registration that fails then (bad BMC input) and the one that works again after it
// leave its servicing error whole: operationalStatus error, its type, message and count, and the
// Ready condition's reason and time (the attempt's time the provisioner is told). Turned back to
// servicing, the failed live update was started again once the input was fixed, its retry cap
// skipped. The registration's failure is shown in Manageable, and announced once.
func TestRegistrationErrorKeepsAFailedLiveUpdate(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	op := startWithFirmware(t, ns, fix, func(c *Config) { c.ServicingRetries = 0 })
	provisionedWithFirmware(t, ns, "h", &metal3.HostUpdatePolicySpec{FirmwareSettings: onReboot})
	turboLiveUpdateFailing(t, ns, fix, 1)
	failed := waitHost(t, ns, "h", "servicing error", func(h *metal3.BareMetalHost) bool {
		return h.Status.ErrorType == metal3.ServicingError
	})
	services := fix.Count(ns, "h", fixture.OpService)
	readyBefore := *condition(failed, metal3.ReadyCondition)
	kept := func(h *metal3.BareMetalHost, when string) {
		t.Helper()
		st := h.Status
		if st.ErrorType != metal3.ServicingError || st.ErrorMessage != failed.Status.ErrorMessage ||
			st.ErrorCount != failed.Status.ErrorCount || st.OperationalStatus != metal3.OperationalStatusError {
			t.Fatalf("%s: the servicing error changed: %s", when, describe(h))
		}
		if r := condition(h, metal3.ReadyCondition); r.Reason != readyBefore.Reason || !r.LastTransitionTime.Equal(&readyBefore.LastTransitionTime) {
			t.Fatalf("%s: Ready %s since %s, want %s since %s", when, r.Reason, r.LastTransitionTime, readyBefore.Reason, readyBefore.LastTransitionTime)
		}
		if n := fix.Count(ns, "h", fixture.OpService); n != services {
			t.Fatalf("%s: the failed live update was started again (%d services, want %d)", when, n, services)
		}
	}

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bmc-h"}}
	update(t, secret, func(s *corev1.Secret) { delete(s.Data, "password") })
	// A spec change makes the host register again (a Secret without its password has no version
	// to compare).
	rv := update(t, &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h"}}, func(h *metal3.BareMetalHost) {
		h.Spec.BMC.DisableCertificateVerification = true
	})
	waitEvent(t, ns, "h", errorReason(metal3.ProvisionedRegistrationError))
	h := waitHost(t, ns, "h", "the registration's failure in Manageable", func(h *metal3.BareMetalHost) bool {
		c := condition(h, metal3.ManageableCondition)
		return c != nil && c.Reason == metal3.RegistrationFailedReason && strings.Contains(c.Message, "password")
	})
	kept(h, "registration failing")
	op.waitSeen(t, ns, "h", rv, 5)
	kept(getHost(t, ns, "h"), "registration failing")

	fixed := update(t, secret, func(s *corev1.Secret) { s.Data["password"] = []byte("password") })
	h = waitHost(t, ns, "h", "registered again", func(h *metal3.BareMetalHost) bool {
		c := condition(h, metal3.ManageableCondition)
		return h.Status.GoodCredentials.Version == fixed && c != nil && c.Reason == metal3.ManageableReason
	})
	kept(h, "registered again")
	op.waitSeen(t, ns, "h", fixed, 5)
	kept(getHost(t, ns, "h"), "registered again")
}

// TestRegistrationErrorKeepsALiveUpdateRetryCount: a live update retried after a failure runs
// with the count that stops its retries; a registration failing and working again meanwhile
// neither adds to that count nor resets it.
func TestRegistrationErrorKeepsALiveUpdateRetryCount(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{Latency: map[fixture.Op]time.Duration{fixture.OpService: hold}})
	startWithFirmware(t, ns, fix)
	provisionedWithFirmware(t, ns, "h", &metal3.HostUpdatePolicySpec{FirmwareSettings: onReboot})
	turboLiveUpdateFailing(t, ns, fix, 1)
	waitHost(t, ns, "h", "the retry running", func(h *metal3.BareMetalHost) bool {
		n, _ := fix.Node(ns, "h")
		return h.Status.OperationalStatus == metal3.OperationalStatusServicing && h.Status.ErrorCount == 1 && n.Busy == fixture.OpService
	})

	h, secret := breakRegistration(t, ns)
	if h.Status.OperationalStatus != metal3.OperationalStatusServicing || h.Status.ErrorCount != 1 {
		t.Fatalf("the registration error changed the live update: %s", describe(h))
	}
	update(t, secret, func(s *corev1.Secret) { s.Data["password"] = []byte("password") })
	h = waitHost(t, ns, "h", "registered again", func(h *metal3.BareMetalHost) bool {
		return h.Status.ErrorType == ""
	})
	if h.Status.OperationalStatus != metal3.OperationalStatusServicing || h.Status.ErrorCount != 1 {
		t.Fatalf("the registration reset the live update's retry count: %s", describe(h))
	}
	fix.SetLatency(fixture.OpService, 0)
	servicedOK(t, ns, "h", fix, 2)
}

// TestBadInputBesideAFailedLiveUpdateAnnouncedOnce: bad BMC input is level triggered: beside a
// servicing error, where the status keeps the servicing error, the Manageable condition showing
// the same failure keeps the next reconciles from announcing it again.
func TestBadInputBesideAFailedLiveUpdateAnnouncedOnce(t *testing.T) {
	s := unitScope(t, unitHost(metal3.StateProvisioned), nil)
	st := &s.host.Status
	st.OperationalStatus, st.ErrorType, st.ErrorMessage, st.ErrorCount = metal3.OperationalStatusError, metal3.ServicingError, "step failed", 4
	s.in.bmcErr = errors.New(`spec.bmc.credentialsName: secret "bmc" has no password`)
	for i := range 3 {
		s.fx = effects{}
		out, done := s.register()
		if done || out.registrationFailure == "" {
			t.Fatalf("reconcile %d: the registration's failure not shown (done %v, %+v)", i, done, out)
		}
		if st.ErrorType != metal3.ServicingError || st.ErrorCount != 4 || st.OperationalStatus != metal3.OperationalStatusError {
			t.Fatalf("reconcile %d: the servicing error changed: %s", i, describe(s.host))
		}
		if want := max(0, 1-i); len(s.fx.events) != want {
			t.Fatalf("reconcile %d: events %+v, want %d", i, s.fx.events, want)
		}
		setConditions(s.host, out, s.now)
		if c := condition(s.host, metal3.ManageableCondition); c.Reason != metal3.RegistrationFailedReason || c.Message != s.in.bmcErr.Error() {
			t.Fatalf("reconcile %d: Manageable %+v", i, c)
		}
	}
}

// breakRegistration makes host h's next registration fail on bad input: its credentials Secret
// loses its password and a spec change makes the host register again. It returns the host once
// the registration error shows, and the Secret (to mend it).
func breakRegistration(t *testing.T, ns string) (*metal3.BareMetalHost, *corev1.Secret) {
	t.Helper()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bmc-h"}}
	update(t, secret, func(s *corev1.Secret) { delete(s.Data, "password") })
	update(t, &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h"}}, func(h *metal3.BareMetalHost) {
		h.Spec.BMC.DisableCertificateVerification = true
	})
	h := waitHost(t, ns, "h", "registration error shown", func(h *metal3.BareMetalHost) bool {
		return h.Status.ErrorType == metal3.ProvisionedRegistrationError
	})
	return h, secret
}
