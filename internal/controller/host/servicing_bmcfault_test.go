package host

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner/fixture"
)

// TestServicingRetriesBMCFailuresPastTheLimit: a live update that failed because the BMC failed
// (the provisioner says Transient: a server error or no answer) is retried past ServicingRetries,
// each retry after the growing backoff, until it succeeds; the retries past the limit say why.
// Fault campaign seed 32: four BMC 500s in a row left a host waiting for its user.
func TestServicingRetriesBMCFailuresPastTheLimit(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	fix.SetServicingFailuresTransient(true)
	startWithFirmware(t, ns, fix, func(c *Config) { c.ServicingRetries = 1 })
	provisionedWithFirmware(t, ns, "h", &metal3.HostUpdatePolicySpec{FirmwareSettings: onReboot})

	turboLiveUpdateFailing(t, ns, fix, 3)
	h := servicedOK(t, ns, "h", fix, 4)
	if biosValue(t, fix, ns, "h", "ProcTurboMode") != "Disabled" || h.Status.ErrorType != "" || h.Status.ErrorCount != 0 {
		t.Fatalf("after three BMC failures and their retries: %s, ProcTurboMode %s", describe(h), biosValue(t, fix, ns, "h", "ProcTurboMode"))
	}
	notes := eventsFor(t, ns, "h", true)
	for _, want := range []string{
		"ServicingStarted: Live update started again (retry 1 of 1) after: fixture: injected service failure",
		"ServicingStarted: Live update started again (retry 2, past the limit of 1: the BMC failed) after: fixture: injected service failure",
		"ServicingStarted: Live update started again (retry 3, past the limit of 1: the BMC failed) after: fixture: injected service failure",
	} {
		if !slices.Contains(notes, want) {
			t.Errorf("no event %q in %q", want, notes)
		}
	}
	if n := countReason(eventsFor(t, ns, "h"), "ServicingError"); n != 3 {
		t.Errorf("%d ServicingError events, want 3 (each failure once)", n)
	}
}

// TestServicingRetriesZeroKeepsABMCFailure: with ServicingRetries 0 (never retried by itself) a
// BMC's failure is not retried either: the host waits for its changes to change.
func TestServicingRetriesZeroKeepsABMCFailure(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	fix.SetServicingFailuresTransient(true)
	op := startWithFirmware(t, ns, fix, func(c *Config) { c.ServicingRetries = 0 })
	provisionedWithFirmware(t, ns, "h", &metal3.HostUpdatePolicySpec{FirmwareSettings: onReboot})

	turboLiveUpdateFailing(t, ns, fix, 1)
	waitHost(t, ns, "h", "servicing error", func(h *metal3.BareMetalHost) bool {
		return h.Status.ErrorType == metal3.ServicingError && h.Status.ErrorCount == 1
	})
	// Looked at again after its backoff would be over, nothing more happens.
	op.waitSeen(t, ns, "h", annotate(t, ns, "h", "touch", "1"), 2)
	if n := fix.Count(ns, "h", fixture.OpService); n != 1 {
		t.Fatalf("serviced %d times, want 1: no retry with --servicing-retries 0", n)
	}
	if h := getHost(t, ns, "h"); h.Status.ErrorType != metal3.ServicingError || h.Status.OperationalStatus != metal3.OperationalStatusError {
		t.Fatalf("after the BMC failure with no retries: %s", describe(h))
	}
}

// TestServicingBackoffOutlivesAnOperatorRestart: a failed live update's backoff is recalled from
// the status by a new operator (the memory of retry times is lost with the process): it is not
// retried at once, as it was, which let a BMC that keeps failing reboot its server once per
// operator restart now that such failures are retried past the limit. A spec change, made while no
// operator runs, still retries at once.
func TestServicingBackoffOutlivesAnOperatorRestart(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	fix.SetServicingFailuresTransient(true)
	hourBackoff := func(c *Config) {
		c.ServicingRetries = 1
		c.Backoff = func(int) time.Duration { return time.Hour }
	}
	first := startWithFirmware(t, ns, fix, hourBackoff)
	provisionedWithFirmware(t, ns, "h", &metal3.HostUpdatePolicySpec{FirmwareSettings: onReboot})
	turboLiveUpdateFailing(t, ns, fix, 2)
	h := waitHost(t, ns, "h", "servicing error", func(h *metal3.BareMetalHost) bool {
		return h.Status.ErrorType == metal3.ServicingError && h.Status.ErrorCount == 1
	})
	first.stop()
	// A retry starts in a second after the failure's (waitNewSecond): past it, a wrong retry by
	// the new operator would come with its first reconciles.
	time.Sleep(time.Until(condition(h, metal3.ReadyCondition).LastTransitionTime.Add(2 * time.Second)))

	second := startWithFirmware(t, ns, fix, hourBackoff)
	// Looked at twice (a retry writes its status first, then starts): nothing happens.
	second.waitSeen(t, ns, "h", annotate(t, ns, "h", "touch", "1"), 1)
	second.waitSeen(t, ns, "h", annotate(t, ns, "h", "touch", "2"), 1)
	if n := fix.Count(ns, "h", fixture.OpService); n != 1 {
		t.Fatalf("serviced %d times, want 1: the new operator retried during the failure's backoff", n)
	}
	if h := getHost(t, ns, "h"); h.Status.ErrorType != metal3.ServicingError || h.Status.ErrorCount != 1 {
		t.Fatalf("after the restart: %s", describe(h))
	}

	// A spec change made while no operator runs retries the failure at once.
	second.stop()
	update(t, &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h"}}, func(h *metal3.BareMetalHost) {
		h.Spec.Description = "retry now" // a spec change retries a failure at once
	})
	startWithFirmware(t, ns, fix, hourBackoff)
	waitHost(t, ns, "h", "retried after the spec change, and failed again", func(h *metal3.BareMetalHost) bool {
		return h.Status.ErrorType == metal3.ServicingError && h.Status.ErrorCount == 2
	})
	if n := fix.Count(ns, "h", fixture.OpService); n != 2 {
		t.Fatalf("serviced %d times, want 2: one retry for the spec change", n)
	}
}
