package e2e

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/bmcsim/fault"
)

// preparationRetried: an available host gets a firmware update the BMC fails. Preparing fails
// (preparation error, an Event), and Ironic leaves the node in maintenance with the fault "clean
// failure", which nothing in Ironic clears; once the BMC works again, the host's own retry after
// the error backoff clears it, cleans again and applies the update: the host ends available with
// the new version. (Until 647e62b the retry waited on that fault forever.)
func (s *suite) preparationRetried(t *testing.T, ns string) { //nolint:thelper // a test body run as a subtest: failures must point into it
	srv := s.Take(t)
	s.newHost(t, ns, "prep", srv, "", lean)
	s.waitState(t, ns, "prep", metal3.StateAvailable, stepTimeout)
	s.waitHFC(t, ns, "prep", "components read", func(hfc *metal3.HostFirmwareComponents) bool {
		return componentVersion(hfc, "bios") != ""
	})
	if err := s.Sim.Control.SetFaults(srv.Name, fault.Set{FailFirmwareUpdate: true}); err != nil {
		t.Fatal(err)
	}
	fw := ns + "/bios-3.3.0.bin"
	s.Images.Add("/firmware/"+fw, []byte("firmware the BMC fails, then accepts"))
	at := time.Now()
	s.setHFC(t, ns, "prep", metal3.FirmwareUpdate{Component: "bios", URL: s.Images.URL + "/firmware/" + fw})
	h := s.wait(t, ns, "prep", "preparation error", stepTimeout, func(h *metal3.BareMetalHost) bool {
		return h.Status.ErrorType == metal3.PreparationError
	})
	t.Logf("preparation error after %s: %s", time.Since(at).Round(time.Second), h.Status.ErrorMessage)
	if h.Status.Provisioning.State != metal3.StatePreparing || h.Status.OperationalStatus != metal3.OperationalStatusError || h.Status.ErrorMessage == "" {
		t.Errorf("after the failed update: %s/%s %q; want preparing, error, a message", h.Status.Provisioning.State, h.Status.OperationalStatus, h.Status.ErrorMessage)
	}
	s.waitEvent(t, ns, "prep", corev1.EventTypeWarning, "PreparationError", time.Minute)

	if err := s.Sim.Control.ClearFaults(srv.Name); err != nil {
		t.Fatal(err)
	}
	h = s.waitState(t, ns, "prep", metal3.StateAvailable, stepTimeout)
	if h.Status.ErrorCount != 0 {
		t.Errorf("errorCount %d after the successful retry, want 0", h.Status.ErrorCount)
	}
	if v := s.server(t, srv.Name).State.Firmware.BIOS; v != "3.3.0" {
		t.Errorf("bmcsim BIOS version %s after the retried preparation, want 3.3.0", v)
	}
	if n := s.node(t, h.Status.Provisioning.ID); n == nil || n.Maintenance {
		t.Errorf("Ironic node after the retried preparation: %+v, want it out of maintenance", n)
	}
}
