package host

import (
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

	// The credentials lose their password, and a spec change makes the host register again.
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bmc-h"}}
	update(t, secret, func(s *corev1.Secret) { delete(s.Data, "password") })
	update(t, &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h"}}, func(h *metal3.BareMetalHost) {
		h.Spec.BMC.DisableCertificateVerification = true
	})
	h := waitHost(t, ns, "h", "registration error shown", func(h *metal3.BareMetalHost) bool {
		return h.Status.ErrorType == metal3.ProvisionedRegistrationError
	})
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
