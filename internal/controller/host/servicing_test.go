package host

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/conditions"
	"github.com/metalforge/metalforge/internal/provisioner/fixture"
	"github.com/metalforge/metalforge/internal/test/companiontest"
	"github.com/metalforge/metalforge/internal/test/poll"
)

const newBIOS = "http://fw.example/bios-2.20.0.bin"

// TestLiveUpdatePolicies: a provisioned host with pending changes is serviced on reboot only for
// the kinds its HostUpdatePolicy sets to onReboot; without a policy, or onPreparing, the reboot is
// a plain reboot and the changes stay pending.
func TestLiveUpdatePolicies(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{Latency: map[fixture.Op]time.Duration{fixture.OpService: 300 * time.Millisecond}})
	startWithFirmware(t, ns, fix)
	cases := []struct {
		name                      string
		policy                    *metal3.HostUpdatePolicySpec
		wantSettings, wantUpdates bool
		wantServiced              bool
	}{
		{name: "no-policy"},
		{name: "on-preparing", policy: &metal3.HostUpdatePolicySpec{FirmwareSettings: onPreparing, FirmwareUpdates: onPreparing}},
		{name: "settings", policy: &metal3.HostUpdatePolicySpec{FirmwareSettings: onReboot}, wantSettings: true, wantServiced: true},
		{name: "updates", policy: &metal3.HostUpdatePolicySpec{FirmwareUpdates: onReboot}, wantUpdates: true, wantServiced: true},
		{name: "both", policy: &metal3.HostUpdatePolicySpec{FirmwareSettings: onReboot, FirmwareUpdates: onReboot},
			wantSettings: true, wantUpdates: true, wantServiced: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			name := tc.name
			provisionedWithFirmware(t, ns, name, tc.policy)
			setSettings(t, ns, name, map[string]string{"ProcTurboMode": "Disabled"})
			setUpdates(t, ns, name, metal3.FirmwareUpdate{Component: "bios", URL: newBIOS})
			offs := fix.Count(ns, name, fixture.OpPowerOff)
			reboot(t, ns, name)
			if tc.wantServiced {
				waitHost(t, ns, name, "servicing", func(h *metal3.BareMetalHost) bool {
					return h.Status.OperationalStatus == metal3.OperationalStatusServicing
				})
				h := servicedOK(t, ns, name, fix, 1)
				if c := condition(h, metal3.ReadyCondition); c == nil || c.Status != metav1.ConditionTrue {
					t.Errorf("Ready after servicing: %+v", c)
				}
				waitEvent(t, ns, name, reasonServicingComplete)
			} else {
				waitHost(t, ns, name, "rebooted without servicing", func(h *metal3.BareMetalHost) bool {
					_, rebooting := h.Annotations[metal3.RebootAnnotationPrefix]
					return !rebooting && h.Status.PoweredOn && fix.Count(ns, name, fixture.OpPowerOff) == offs+1
				})
				if n := fix.Count(ns, name, fixture.OpService); n != 0 {
					t.Errorf("serviced %d times without a policy allowing it", n)
				}
			}
			if got := biosValue(t, fix, ns, name, "ProcTurboMode"); (got == "Disabled") != tc.wantSettings {
				t.Errorf("ProcTurboMode %s (settings applied: want %v)", got, tc.wantSettings)
			}
			if got := firmwareVersion(t, fix, ns, name, "bios"); (got == "2.20.0") != tc.wantUpdates {
				t.Errorf("bios version %s (update applied: want %v)", got, tc.wantUpdates)
			}
			hfs := waitHFS(t, ns, name, "status follows the host", func(hfs *metal3.HostFirmwareSettings) bool {
				return (hfs.Status.Settings["ProcTurboMode"] == "Disabled") == tc.wantSettings
			})
			if c := companiontest.Condition(hfs.Status.Conditions, metal3.FirmwareSettingsChangeDetected); (c.Status == metav1.ConditionTrue) == tc.wantSettings {
				t.Errorf("HostFirmwareSettings ChangeDetected %s after servicing (settings applied: %v)", c.Status, tc.wantSettings)
			}
			hfc := waitHFC(t, ns, name, "status follows the host", func(hfc *metal3.HostFirmwareComponents) bool {
				changed := companiontest.Condition(hfc.Status.Conditions, metal3.HostFirmwareComponentsChangeDetected).Status == metav1.ConditionTrue
				return (len(hfc.Status.Updates) == 1) == tc.wantUpdates && (hfc.Status.Components[0].CurrentVersion == "2.20.0") == tc.wantUpdates &&
					changed != tc.wantUpdates
			})
			if tc.wantUpdates && hfc.Status.Updates[0].URL != newBIOS {
				t.Errorf("HostFirmwareComponents after the update: %+v", hfc.Status)
			}
			if tc.policy != nil {
				policy := &metal3.HostUpdatePolicy{}
				poll.Until(t, "the policy owned by its host", func() (bool, string) {
					if err := env.Client.Get(t.Context(), objectKey(ns, name), policy); err != nil {
						return false, err.Error()
					}
					return len(policy.OwnerReferences) == 1 && policy.OwnerReferences[0].Name == name, fmt.Sprint(policy.OwnerReferences)
				})
			}
		})
	}
}

// TestServicingFailureRetryAndAbort: a failed live update is servicing error with the provisioner's
// message, reported once, and started again by itself after the error backoff, up to
// ServicingRetries times; then it waits: changing the pending changes starts it again, removing
// them aborts it and the host returns to OK.
func TestServicingFailureRetryAndAbort(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	op := startWithFirmware(t, ns, fix, func(c *Config) { c.ServicingRetries = 1 })
	provisionedWithFirmware(t, ns, "h", &metal3.HostUpdatePolicySpec{FirmwareSettings: onReboot})

	// One failure: reported, then retried, and the retry applies the change.
	failures := testutil.ToFloat64(metricServicingFailures)
	turboLiveUpdateFailing(t, ns, fix, 1)
	h := servicedOK(t, ns, "h", fix, 2)
	if biosValue(t, fix, ns, "h", "ProcTurboMode") != "Disabled" || h.Status.ErrorType != "" || h.Status.ErrorCount != 0 {
		t.Fatalf("after the retried live update: %s, ProcTurboMode %s", describe(h), biosValue(t, fix, ns, "h", "ProcTurboMode"))
	}
	poll.Until(t, "the failure counted (other tests run alongside)", func() (bool, string) {
		got := testutil.ToFloat64(metricServicingFailures)
		return got >= failures+1, fmt.Sprintf("%v, want at least %v", got, failures+1)
	})
	poll.Until(t, "the events of the failure and its retry", func() (bool, string) {
		notes := eventsFor(t, ns, "h", true)
		return slices.Contains(notes, "ServicingError: fixture: injected service failure") &&
			slices.Contains(notes, "ServicingStarted: Live update started again (retry 1 of 1) after: fixture: injected service failure"), fmt.Sprint(notes)
	})

	// Failing more often than the retries allow: the error stays, and nothing more happens.
	fix.FailNextFor(ns, "h", fixture.OpService, 2)
	setSettings(t, ns, "h", map[string]string{"ProcTurboMode": "Disabled", "LogicalProc": "Disabled"})
	reboot(t, ns, "h")
	h = waitHost(t, ns, "h", "servicing error after its retry", func(h *metal3.BareMetalHost) bool {
		return h.Status.ErrorType == metal3.ServicingError && h.Status.ErrorCount == 2
	})
	if h.Status.OperationalStatus != metal3.OperationalStatusError || h.Status.ErrorMessage != "fixture: injected service failure" ||
		h.Status.Provisioning.State != metal3.StateProvisioned {
		t.Fatalf("after the failed retry: %s", describe(h))
	}
	if c := condition(h, metal3.ReadyCondition); c == nil || c.Reason != metal3.ErrorReason || c.Message != h.Status.ErrorMessage {
		t.Fatalf("Ready after the failed retry: %+v", c)
	}
	// Looked at again (a new resourceVersion), nothing more happens: no retry, no new event.
	op.waitSeen(t, ns, "h", annotate(t, ns, "h", "touch", "1"), 2)
	if n := fix.Count(ns, "h", fixture.OpService); n != 4 {
		t.Fatalf("serviced %d times, want 4: two attempts, then no retry until the changes change", n)
	}
	h = getHost(t, ns, "h")
	if c := condition(h, metal3.ProgressingCondition); h.Status.ErrorCount != 2 || countReason(eventsFor(t, ns, "h"), "ServicingError") != 3 ||
		c == nil || !strings.Contains(c.Message, "changes to be changed or removed (it failed 2 times)") {
		t.Fatalf("the failure after its retry: %s, Progressing %+v, events %v", describe(h), c, eventsFor(t, ns, "h", true))
	}

	// The user changes the request: it starts again, with retries of its own.
	setSettings(t, ns, "h", map[string]string{"ProcTurboMode": "Disabled", "LogicalProc": "Disabled", "ProcVirtualization": "Disabled"})
	servicedOK(t, ns, "h", fix, 5)
	if biosValue(t, fix, ns, "h", "LogicalProc") != "Disabled" || biosValue(t, fix, ns, "h", "ProcVirtualization") != "Disabled" {
		t.Fatal("the changed request was not applied")
	}

	// Abort: failures past the retries, then the user removes the pending change.
	fix.FailNextFor(ns, "h", fixture.OpService, 2)
	setSettings(t, ns, "h", map[string]string{"ProcTurboMode": "Disabled", "LogicalProc": "Disabled", "ProcVirtualization": "Disabled", "AssetTag": "rack-7"})
	reboot(t, ns, "h")
	waitHost(t, ns, "h", "servicing error again", func(h *metal3.BareMetalHost) bool {
		return h.Status.ErrorType == metal3.ServicingError && h.Status.ErrorCount == 2
	})
	setSettings(t, ns, "h", map[string]string{"ProcTurboMode": "Disabled", "LogicalProc": "Disabled", "ProcVirtualization": "Disabled"})
	h = waitHost(t, ns, "h", "aborted and OK", func(h *metal3.BareMetalHost) bool {
		return h.Status.OperationalStatus == metal3.OperationalStatusOK && h.Status.ErrorType == "" && h.Status.PoweredOn
	})
	if n, _ := fix.Node(ns, "h"); n.Busy != "" || biosValue(t, fix, ns, "h", "AssetTag") == "rack-7" {
		t.Fatalf("after the abort: node %+v, AssetTag %q", n, biosValue(t, fix, ns, "h", "AssetTag"))
	}
	if h.Status.ErrorMessage != "" || fix.Count(ns, "h", fixture.OpService) != 7 {
		t.Fatalf("after the abort: %s, serviced %d times", describe(h), fix.Count(ns, "h", fixture.OpService))
	}
	waitEvent(t, ns, "h", reasonServicingAborted)
	if aborted := hostEvents(t, ns, "h", reasonServicingAborted); len(aborted) != 1 || aborted[0].Type != corev1.EventTypeNormal {
		t.Errorf("the abort's events: %+v; want one Normal (nothing was staged)", aborted)
	}
	for _, e := range eventsFor(t, ns, "h", true) {
		if strings.Contains(e, "started again: nothing") {
			t.Errorf("the abort was reported as a live update started again: %q", e)
		}
	}
}

// TestServicingRetryWaitsForItsBackoff: a failed live update is started again only once its
// error backoff is over, however often the host is looked at before (the provisioner's watch
// wakes a failed host early by itself); a changed request is not a retry and starts at once.
func TestServicingRetryWaitsForItsBackoff(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	op := startWithFirmware(t, ns, fix, func(c *Config) {
		c.ServicingRetries = 1
		c.Backoff = func(int) time.Duration { return time.Hour }
	})
	provisionedWithFirmware(t, ns, "h", &metal3.HostUpdatePolicySpec{FirmwareSettings: onReboot})

	turboLiveUpdateFailing(t, ns, fix, 1)
	waitHost(t, ns, "h", "servicing error", func(h *metal3.BareMetalHost) bool {
		return h.Status.ErrorType == metal3.ServicingError && h.Status.ErrorCount == 1
	})
	for i := range 3 {
		op.waitSeen(t, ns, "h", annotate(t, ns, "h", "touch", fmt.Sprint(i)), 1)
	}
	h := getHost(t, ns, "h")
	if n := fix.Count(ns, "h", fixture.OpService); n != 1 {
		t.Fatalf("serviced %d times within the backoff, want 1 (no retry before it is over)", n)
	}
	if c := condition(h, metal3.ProgressingCondition); h.Status.ErrorType != metal3.ServicingError || c == nil ||
		!strings.Contains(c.Message, "a retry after servicing error") {
		t.Fatalf("within the backoff: %s, Progressing %+v", describe(h), c)
	}

	// The user changes the request: started at once, backoff or not.
	setSettings(t, ns, "h", map[string]string{"ProcTurboMode": "Disabled", "LogicalProc": "Disabled"})
	servicedOK(t, ns, "h", fix, 2)
	if biosValue(t, fix, ns, "h", "LogicalProc") != "Disabled" {
		t.Fatal("the changed request was not applied")
	}
}

// TestServicingAbortWarnsOfStagedSettings: a live update failed after its BIOS settings were sent
// to the BMC (a reboot the BMC refused); the user takes the change back. The abort cannot take the
// settings back off the BMC, whose next boot applies them: the host says so in a Warning naming
// them, instead of the usual Normal "aborted".
func TestServicingAbortWarnsOfStagedSettings(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	fix.SetServicingFailuresStage(true)
	startWithFirmware(t, ns, fix, func(c *Config) { c.ServicingRetries = 0 })
	provisionedWithFirmware(t, ns, "h", &metal3.HostUpdatePolicySpec{FirmwareSettings: onReboot})

	turboLiveUpdateFailing(t, ns, fix, 1)
	waitHost(t, ns, "h", "servicing error", func(h *metal3.BareMetalHost) bool {
		return h.Status.ErrorType == metal3.ServicingError
	})
	setSettings(t, ns, "h", map[string]string{})
	h := waitHost(t, ns, "h", "aborted and OK", func(h *metal3.BareMetalHost) bool {
		return h.Status.OperationalStatus == metal3.OperationalStatusOK && h.Status.ErrorType == ""
	})
	if h.Status.Provisioning.State != metal3.StateProvisioned || h.Status.ErrorMessage != "" {
		t.Fatalf("after the abort: %s", describe(h))
	}
	var aborted []corev1.Event
	poll.Until(t, "the abort's event", func() (bool, string) {
		aborted = hostEvents(t, ns, "h", reasonServicingAborted)
		return len(aborted) > 0, fmt.Sprint(eventsFor(t, ns, "h", true))
	})
	if e := aborted[0]; len(aborted) != 1 || e.Type != corev1.EventTypeWarning ||
		!strings.Contains(e.Message, "BIOS settings ProcTurboMode and applies them at the server's next boot") {
		t.Fatalf("the abort's events: %+v; want one Warning naming ProcTurboMode, staged for the next boot", aborted)
	}
	if v := biosValue(t, fix, ns, "h", "ProcTurboMode"); v != "Enabled" {
		t.Fatalf("ProcTurboMode %q after the abort, want Enabled (the fixture applies nothing of a failed live update)", v)
	}
}

// TestServicingAbortedByAnInvalidEdit: a live update that failed is aborted when an edit makes the
// HostFirmwareSettings invalid (as metal3 does: nothing valid is pending), and the abort's event
// says the changes are no longer valid, not that they were removed.
func TestServicingAbortedByAnInvalidEdit(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	startWithFirmware(t, ns, fix, func(c *Config) { c.ServicingRetries = 0 })
	provisionedWithFirmware(t, ns, "h", &metal3.HostUpdatePolicySpec{FirmwareSettings: onReboot})

	turboLiveUpdateFailing(t, ns, fix, 1)
	waitHost(t, ns, "h", "servicing error", func(h *metal3.BareMetalHost) bool {
		return h.Status.ErrorType == metal3.ServicingError
	})
	hfs := setSettings(t, ns, "h", map[string]string{"ProcTurboMode": "Disabled", "NoSuchSetting": "1"})
	if c := companiontest.Condition(hfs.Status.Conditions, metal3.FirmwareSettingsValid); c.Status != metav1.ConditionFalse {
		t.Fatalf("Valid %s: want False for an unknown setting", c.Status)
	}
	waitHost(t, ns, "h", "aborted and OK", func(h *metal3.BareMetalHost) bool {
		return h.Status.OperationalStatus == metal3.OperationalStatusOK && h.Status.ErrorType == ""
	})
	var aborted []corev1.Event
	poll.Until(t, "the abort's event", func() (bool, string) {
		aborted = hostEvents(t, ns, "h", reasonServicingAborted)
		return len(aborted) > 0, fmt.Sprint(eventsFor(t, ns, "h", true))
	})
	if e := aborted[0]; len(aborted) != 1 || !strings.Contains(e.Message, "its changes are no longer valid (see the Valid condition of HostFirmwareSettings)") {
		t.Fatalf("the abort's events: %+v; want one saying the changes are no longer valid", aborted)
	}
}

// TestServicingWaitsForDetachedAndPausedHosts: a detached or paused host is not serviced until it
// is attached or unpaused; then it is.
func TestServicingWaitsForDetachedAndPausedHosts(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	op := startWithFirmware(t, ns, fix)
	policy := &metal3.HostUpdatePolicySpec{FirmwareSettings: onReboot}
	for name, annotation := range map[string]string{"detached": metal3.DetachedAnnotation, "paused": metal3.PausedAnnotation} {
		provisionedWithFirmware(t, ns, name, policy)
		setSettings(t, ns, name, map[string]string{"ProcTurboMode": "Disabled"})
		annotate(t, ns, name, annotation, "")
		if annotation == metal3.DetachedAnnotation {
			waitHost(t, ns, name, "detached", func(h *metal3.BareMetalHost) bool {
				return h.Status.OperationalStatus == metal3.OperationalStatusDetached
			})
		}
		op.waitSeen(t, ns, name, reboot(t, ns, name), 1)
		op.waitSeen(t, ns, name, annotate(t, ns, name, "touch", "1"), 1)
		if n := fix.Count(ns, name, fixture.OpService); n != 0 {
			t.Fatalf("%s host serviced %d times", name, n)
		}
		unannotate(t, ns, name, annotation)
		servicedOK(t, ns, name, fix, 1)
		if biosValue(t, fix, ns, name, "ProcTurboMode") != "Disabled" {
			t.Fatalf("%s host: the change was not applied once it was back", name)
		}
	}
}

// TestDeletingAServicingHost: a host deleted in the middle of a live update is deprovisioned and
// goes, as any provisioned host.
func TestDeletingAServicingHost(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{Latency: map[fixture.Op]time.Duration{fixture.OpService: time.Hour}})
	startWithFirmware(t, ns, fix)
	provisionedWithFirmware(t, ns, "h", &metal3.HostUpdatePolicySpec{FirmwareSettings: onReboot})
	setSettings(t, ns, "h", map[string]string{"ProcTurboMode": "Disabled"})
	reboot(t, ns, "h")
	waitHost(t, ns, "h", "servicing", func(h *metal3.BareMetalHost) bool {
		n, _ := fix.Node(ns, "h")
		return h.Status.OperationalStatus == metal3.OperationalStatusServicing && n.Busy == fixture.OpService
	})
	deleteHost(t, ns, "h")
	waitGone(t, ns, "h")
	if _, ok := fix.Node(ns, "h"); ok || fix.Count(ns, "h", fixture.OpDeprovision) != 1 {
		t.Fatalf("after deletion: node still there or not deprovisioned (%d)", fix.Count(ns, "h", fixture.OpDeprovision))
	}
}

// TestServicingSurvivesRestart: an operator stopped in the middle of a live update is replaced; the
// new one follows the same servicing to its end (no second one) and records what it applied.
func TestServicingSurvivesRestart(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{Latency: map[fixture.Op]time.Duration{fixture.OpService: time.Hour}})
	first := startWithFirmware(t, ns, fix)
	provisionedWithFirmware(t, ns, "h", &metal3.HostUpdatePolicySpec{FirmwareSettings: onReboot, FirmwareUpdates: onReboot})
	setSettings(t, ns, "h", map[string]string{"ProcTurboMode": "Disabled"})
	setUpdates(t, ns, "h", metal3.FirmwareUpdate{Component: "bios", URL: newBIOS})
	reboot(t, ns, "h")
	waitHost(t, ns, "h", "servicing in the fixture", func(h *metal3.BareMetalHost) bool {
		n, _ := fix.Node(ns, "h")
		return h.Status.OperationalStatus == metal3.OperationalStatusServicing && n.Busy == fixture.OpService
	})
	waitEvent(t, ns, "h", reasonServicingStarted) // sent before the operator stops
	first.stop()
	fix.SetLatency(fixture.OpService, 0)
	startWithFirmware(t, ns, fix)
	servicedOK(t, ns, "h", fix, 1)
	if biosValue(t, fix, ns, "h", "ProcTurboMode") != "Disabled" || firmwareVersion(t, fix, ns, "h", "bios") != "2.20.0" {
		t.Fatal("the live update's changes are not on the host")
	}
	waitHFC(t, ns, "h", "the update recorded", func(hfc *metal3.HostFirmwareComponents) bool {
		return len(hfc.Status.Updates) == 1 && hfc.Status.Updates[0].URL == newBIOS
	})
	if n := countReason(eventsFor(t, ns, "h"), reasonServicingStarted); n != 1 {
		t.Fatalf("%d ServicingStarted events, want 1", n)
	}
}

// TestServicingUnsupported: a provisioner that cannot service leaves the host provisioned: the
// reboot is a plain reboot, the LiveUpdates condition says why, with one event however often.
func TestServicingUnsupported(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	fix.SetServicingUnsupported(true)
	startWithFirmware(t, ns, fix)
	provisionedWithFirmware(t, ns, "h", &metal3.HostUpdatePolicySpec{FirmwareSettings: onReboot})
	setSettings(t, ns, "h", map[string]string{"ProcTurboMode": "Disabled"})
	for i := range 2 {
		offs := fix.Count(ns, "h", fixture.OpPowerOff)
		reboot(t, ns, "h")
		h := waitHost(t, ns, "h", fmt.Sprintf("reboot %d done", i+1), func(h *metal3.BareMetalHost) bool {
			_, rebooting := h.Annotations[metal3.RebootAnnotationPrefix]
			return !rebooting && h.Status.PoweredOn && fix.Count(ns, "h", fixture.OpPowerOff) == offs+1 &&
				fix.Count(ns, "h", fixture.OpPowerOn) == offs+1 && condition(h, metal3.LiveUpdatesCondition) != nil
		})
		if h.Status.OperationalStatus != metal3.OperationalStatusOK || h.Status.Provisioning.State != metal3.StateProvisioned {
			t.Fatalf("after the reboot: %s", describe(h))
		}
		c := condition(h, metal3.LiveUpdatesCondition)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != metal3.ServicingUnsupportedReason {
			t.Fatalf("LiveUpdates condition: %+v", c)
		}
	}
	if n := countReason(eventsFor(t, ns, "h"), reasonLiveUpdatesUnsupported); n != 1 || fix.Count(ns, "h", fixture.OpService) != 0 {
		t.Fatalf("%d LiveUpdatesUnsupported events (want 1), %d servicings", n, fix.Count(ns, "h", fixture.OpService))
	}
	// Once the provisioner can service, the next reboot applies the change and the condition goes.
	fix.SetServicingUnsupported(false)
	reboot(t, ns, "h")
	h := servicedOK(t, ns, "h", fix, 1)
	if c := condition(h, metal3.LiveUpdatesCondition); c != nil {
		t.Fatalf("LiveUpdates condition after a servicing: %+v", c)
	}
}

// TestPreparingAppliesFirmwareChanges: changes written before the host is prepared (the
// HostFirmwareSettings created by the user with the host) wait for their controller's verdict and
// are applied while preparing; applied updates are recorded.
func TestPreparingAppliesFirmwareChanges(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	// Manual cleaning takes more than a second, as on real hardware: an available host compares
	// when its firmware objects changed with when it became available at the second (the API's
	// precision), and a change judged in the second a zero-time preparation ended would look new.
	fix := fixture.New(fixture.Config{Latency: map[fixture.Op]time.Duration{fixture.OpPrepare: 1100 * time.Millisecond}})
	startWithFirmware(t, ns, fix)
	create(t, &metal3.HostFirmwareSettings{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h"},
		Spec: metal3.HostFirmwareSettingsSpec{Settings: metal3.DesiredSettingsMap{"ProcTurboMode": intstrS("Disabled")}}})
	create(t, &metal3.HostFirmwareComponents{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h"},
		Spec: metal3.HostFirmwareComponentsSpec{Updates: []metal3.FirmwareUpdate{{Component: "bmc", URL: "http://fw.example/bmc-8.1.bin"}}}})
	createHost(t, newHost(ns, "h").Build())
	waitState(t, ns, "h", metal3.StateProvisioned)
	if biosValue(t, fix, ns, "h", "ProcTurboMode") != "Disabled" || firmwareVersion(t, fix, ns, "h", "bmc") != "8.1" || fix.Count(ns, "h", fixture.OpPrepare) != 1 {
		t.Fatalf("after preparing: ProcTurboMode %s, bmc %s, prepared %d times", biosValue(t, fix, ns, "h", "ProcTurboMode"),
			firmwareVersion(t, fix, ns, "h", "bmc"), fix.Count(ns, "h", fixture.OpPrepare))
	}
	waitHFC(t, ns, "h", "the update recorded", func(hfc *metal3.HostFirmwareComponents) bool { return len(hfc.Status.Updates) == 1 })
	waitHFS(t, ns, "h", "no change left", func(hfs *metal3.HostFirmwareSettings) bool {
		return judged(hfs.Status.Conditions, hfs.Generation) && hfs.Status.Settings["ProcTurboMode"] == "Disabled" &&
			companiontest.Condition(hfs.Status.Conditions, metal3.FirmwareSettingsChangeDetected).Status == metav1.ConditionFalse
	})
}

// TestAvailableHostPreparesForFirmwareChanges: a firmware change made while the host is available
// takes it back through preparing (as metal3), once per change: a change applied is not prepared
// for again while its controller has not read the host back; the host then provisions.
func TestAvailableHostPreparesForFirmwareChanges(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	availableWithFirmware(t, ns, fix)
	waitHFC(t, ns, "h", "filled in", func(hfc *metal3.HostFirmwareComponents) bool { return len(hfc.Status.Components) > 0 })
	prepared := fix.Count(ns, "h", fixture.OpPrepare)

	setSettings(t, ns, "h", map[string]string{"ProcTurboMode": "Disabled"})
	waitHFS(t, ns, "h", "the setting applied and read back", func(hfs *metal3.HostFirmwareSettings) bool {
		return hfs.Status.Settings["ProcTurboMode"] == "Disabled" &&
			companiontest.Condition(hfs.Status.Conditions, metal3.FirmwareSettingsChangeDetected).Status == metav1.ConditionFalse
	})
	waitState(t, ns, "h", metal3.StateAvailable)
	if n := fix.Count(ns, "h", fixture.OpPrepare) - prepared; n != 1 || biosValue(t, fix, ns, "h", "ProcTurboMode") != "Disabled" {
		t.Fatalf("prepared %d times for the setting (want 1), ProcTurboMode %s", n, biosValue(t, fix, ns, "h", "ProcTurboMode"))
	}

	setUpdates(t, ns, "h", metal3.FirmwareUpdate{Component: "bmc", URL: "http://fw.example/bmc-8.1.bin"})
	waitHFC(t, ns, "h", "the update recorded", func(hfc *metal3.HostFirmwareComponents) bool { return len(hfc.Status.Updates) == 1 })
	h := waitState(t, ns, "h", metal3.StateAvailable)
	if n := fix.Count(ns, "h", fixture.OpPrepare) - prepared; n != 2 || firmwareVersion(t, fix, ns, "h", "bmc") != "8.1" {
		t.Fatalf("prepared %d times for the two changes (want 2), bmc %s", n, firmwareVersion(t, fix, ns, "h", "bmc"))
	}

	update(t, h, func(h *metal3.BareMetalHost) {
		h.Spec.Image = &metal3.Image{URL: testImage, Checksum: "d41d8cd98f00b204e9800998ecf8427e", ChecksumType: metal3.MD5}
	})
	waitState(t, ns, "h", metal3.StateProvisioned)
	if n := fix.Count(ns, "h", fixture.OpPrepare) - prepared; n != 2 {
		t.Fatalf("prepared %d times in all, want 2", n)
	}
}

func countReason(list []string, reason string) int {
	return len(slices.DeleteFunc(slices.Clone(list), func(r string) bool { return r != reason }))
}

// TestServicingAfterAnOutOfBandChange: a setting applied by a live update and then changed back on
// the BMC (behind the operator's back) is applied again by the next live update; a live update that
// ends never starts another from changes its controller has not read back yet.
func TestServicingAfterAnOutOfBandChange(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	startWithFirmware(t, ns, fix)
	provisionedWithFirmware(t, ns, "h", &metal3.HostUpdatePolicySpec{FirmwareSettings: onReboot})
	setSettings(t, ns, "h", map[string]string{"ProcTurboMode": "Disabled"})
	durations := servicingDurations(t)
	reboot(t, ns, "h")
	servicedOK(t, ns, "h", fix, 1)
	poll.Until(t, "the live update's duration counted (other tests run alongside)", func() (bool, string) {
		got := servicingDurations(t)
		return got >= durations+1, fmt.Sprintf("%d, want at least %d", got, durations+1)
	})
	waitHFS(t, ns, "h", "the value read back", func(hfs *metal3.HostFirmwareSettings) bool {
		return hfs.Status.Settings["ProcTurboMode"] == "Disabled"
	})
	fix.SetBIOS(ns, "h", "ProcTurboMode", "Enabled")
	waitHFS(t, ns, "h", "the change behind the operator's back read", func(hfs *metal3.HostFirmwareSettings) bool {
		return hfs.Status.Settings["ProcTurboMode"] == "Enabled" &&
			companiontest.Condition(hfs.Status.Conditions, metal3.FirmwareSettingsChangeDetected).Status == metav1.ConditionTrue
	})
	// The host dates a servicing by its Ready condition, in whole seconds: the next one must start
	// in a later second than the first ended for the two to be told apart (with Ironic, a
	// servicing takes tens of seconds; the fixture's takes none).
	time.Sleep(time.Second)
	reboot(t, ns, "h")
	servicedOK(t, ns, "h", fix, 2)
	if biosValue(t, fix, ns, "h", "ProcTurboMode") != "Disabled" {
		t.Fatal("the second live update did not apply the setting again")
	}
	if n := countReason(eventsFor(t, ns, "h"), reasonServicingStarted); n != 2 {
		t.Fatalf("%d ServicingStarted events, want 2", n)
	}
}

// TestLiveUpdateOfANumberLikeString: a String setting whose values look like numbers ("0042" to
// "42") is a change, found by the settings controller and applied by the live update: the values
// are compared by the setting's type from its FirmwareSchema, not as the integers they resemble.
func TestLiveUpdateOfANumberLikeString(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	startWithFirmware(t, ns, fix)
	provisionedWithFirmware(t, ns, "h", &metal3.HostUpdatePolicySpec{FirmwareSettings: onReboot})
	fix.SetBIOS(ns, "h", "AssetTag", "0042")
	waitHFS(t, ns, "h", "the asset tag read", func(hfs *metal3.HostFirmwareSettings) bool {
		return hfs.Status.Settings["AssetTag"] == "0042"
	})
	setSettings(t, ns, "h", map[string]string{"AssetTag": "42"})
	waitHFS(t, ns, "h", "the change detected", func(hfs *metal3.HostFirmwareSettings) bool {
		return judged(hfs.Status.Conditions, hfs.Generation) &&
			companiontest.Condition(hfs.Status.Conditions, metal3.FirmwareSettingsChangeDetected).Status == metav1.ConditionTrue
	})
	reboot(t, ns, "h")
	servicedOK(t, ns, "h", fix, 1)
	if got := biosValue(t, fix, ns, "h", "AssetTag"); got != "42" {
		t.Fatalf("AssetTag %q after the live update, want 42", got)
	}
}

// TestServicingBootsTheAgentImage: with --build-preprov-image, a live update waits for the host's
// PreprovisioningImage (made again: a provisioned host has none) and hands it to the provisioner,
// which boots the agent from it; a failed live update keeps it for the retry; the image goes again
// once the host is back to OK.
func TestServicingBootsTheAgentImage(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := imageFixture()
	firmware := firmwareControllers(fix)
	startManager(t, env.Config, ns, fix, func(mgr ctrl.Manager) error {
		if err := builtInImageController(mgr); err != nil {
			return err
		}
		return firmware(mgr)
	}, withImages, func(c *Config) { c.ServicingRetries = 0 }) // the failure waits for the changed request
	h := newHost(ns, "h").WithBMC(testVMediaBMC, "bmc-h").Build()
	createHost(t, h)
	waitState(t, ns, "h", metal3.StateProvisioned)
	waitImageGone(t, ns, "h")
	waitHFS(t, ns, "h", "filled in", func(hfs *metal3.HostFirmwareSettings) bool { return len(hfs.Status.Settings) > 0 })
	create(t, &metal3.HostUpdatePolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h"},
		Spec: metal3.HostUpdatePolicySpec{FirmwareSettings: onReboot}})

	turboLiveUpdateFailing(t, ns, fix, 1)
	waitHost(t, ns, "h", "servicing error", func(h *metal3.BareMetalHost) bool { return h.Status.ErrorType == metal3.ServicingError })
	waitImage(t, ns, "h", "kept while the live update failed", func(*metal3.PreprovisioningImage) bool { return true })
	setSettings(t, ns, "h", map[string]string{"ProcTurboMode": "Disabled", "LogicalProc": "Disabled"})
	servicedOK(t, ns, "h", fix, 2)
	if node, _ := fix.Node(ns, "h"); node.AgentImage.ImageURL != testISOURL {
		t.Fatalf("the live update booted %+v, want the host's image", node.AgentImage)
	}
	if biosValue(t, fix, ns, "h", "LogicalProc") != "Disabled" {
		t.Fatal("the retried live update was not applied")
	}
	waitImageGone(t, ns, "h")
}

// servicingDurations is how many live updates the duration histogram counted.
func servicingDurations(t *testing.T) uint64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "metal3_operation_service_duration_seconds" && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	t.Fatal("metal3_operation_service_duration_seconds is not registered")
	return 0
}

// TestServicingWithABrokenImage: with --build-preprov-image, a live update whose agent image
// cannot be built is a servicing error with the builder's message, recorded once: the image is
// kept, the host stays off and no new live update starts behind it. The image fixed, the live
// update goes on; a second one whose image fails is aborted by taking the change back.
func TestServicingWithABrokenImage(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := imageFixture()
	op := startManager(t, env.Config, ns, fix, firmwareControllers(fix), withImages)
	good := provisionedWithImage(t, ns, "h")
	broken := failedBuild("no network data")
	wantErr := `PreprovisioningImage "h" could not be built (ImageBuildInvalid): no network data`

	setSettings(t, ns, "h", map[string]string{"ProcTurboMode": "Disabled"})
	reboot(t, ns, "h")
	waitImage(t, ns, "h", "made again for the live update", func(*metal3.PreprovisioningImage) bool { return true })
	buildImage(t, ns, "h", broken)
	h := waitHost(t, ns, "h", "the image's error", func(h *metal3.BareMetalHost) bool { return h.Status.ErrorMessage == wantErr })
	if h.Status.ErrorType != metal3.ServicingError || h.Status.OperationalStatus != metal3.OperationalStatusError || h.Status.PoweredOn {
		t.Fatalf("live update with a broken image: %s", describe(h))
	}
	op.waitSeen(t, ns, "h", h.ResourceVersion, 3) // looked at again: nothing more happens
	if h2 := getHost(t, ns, "h"); h2.ResourceVersion != h.ResourceVersion || h2.Status.ErrorCount != 1 {
		t.Fatalf("the host moved on from the image error: %s", describe(h2))
	}
	events := eventsFor(t, ns, "h")
	if countReason(events, reasonServicingStarted) != 1 || countReason(events, "ServicingError") != 1 || fix.Count(ns, "h", fixture.OpService) != 0 {
		t.Fatalf("events %v, %d servicings; want one start and one error, nothing serviced", events, fix.Count(ns, "h", fixture.OpService))
	}
	getImage(t, ns, "h") // kept for the fix

	buildImage(t, ns, "h", good)
	servicedOK(t, ns, "h", fix, 1)
	if biosValue(t, fix, ns, "h", "ProcTurboMode") != "Disabled" {
		t.Fatal("the live update was not applied once its image was fixed")
	}
	waitImageGone(t, ns, "h")

	// Abort: the image fails again; the user takes the change back.
	setSettings(t, ns, "h", map[string]string{"ProcTurboMode": "Disabled", "LogicalProc": "Disabled"})
	reboot(t, ns, "h")
	waitImage(t, ns, "h", "made again for the second live update", func(*metal3.PreprovisioningImage) bool { return true })
	buildImage(t, ns, "h", broken)
	waitHost(t, ns, "h", "the image's error again", func(h *metal3.BareMetalHost) bool { return h.Status.ErrorMessage == wantErr })
	setSettings(t, ns, "h", map[string]string{"ProcTurboMode": "Disabled"})
	h = waitHost(t, ns, "h", "aborted, OK and on", func(h *metal3.BareMetalHost) bool {
		return h.Status.OperationalStatus == metal3.OperationalStatusOK && h.Status.ErrorType == "" && h.Status.PoweredOn
	})
	if fix.Count(ns, "h", fixture.OpService) != 1 || biosValue(t, fix, ns, "h", "LogicalProc") == "Disabled" {
		t.Fatalf("after the abort: %s, %d servicings", describe(h), fix.Count(ns, "h", fixture.OpService))
	}
	waitImageGone(t, ns, "h")
}

// provisionedWithImage takes a host on a virtual-media BMC to provisioned through its agent image
// (built by the test), with its HostFirmwareSettings filled in and a HostUpdatePolicy for BIOS
// settings on reboot; it returns the good build for the live update's image.
func provisionedWithImage(t *testing.T, ns, name string) func(*metal3.PreprovisioningImage) {
	t.Helper()
	h := newHost(ns, name).WithBMC(testVMediaBMC, "bmc-"+name).Build()
	h.Spec.Architecture = "x86_64" // what the fixture inspects, whatever this machine is
	createHost(t, h)
	good := built(testISOURL, metal3.ImageFormatISO, "x86_64", "", "")
	waitImage(t, ns, name, "created", func(*metal3.PreprovisioningImage) bool { return true })
	buildImage(t, ns, name, good)
	waitState(t, ns, name, metal3.StateProvisioned)
	waitImageGone(t, ns, name)
	waitHFS(t, ns, name, "filled in", func(hfs *metal3.HostFirmwareSettings) bool { return len(hfs.Status.Settings) > 0 })
	create(t, &metal3.HostUpdatePolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: metal3.HostUpdatePolicySpec{FirmwareSettings: onReboot}})
	return good
}

// TestServicingImageBrokenMidRun: the agent image failing while the provisioner's run goes on
// shows as a servicing error, and its fix resumes the same attempt: the run that was going on is
// followed to its end and not started a second time (the Ready condition keeps the attempt's
// time, which the provisioner recognises its run by).
func TestServicingImageBrokenMidRun(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := imageFixture()
	op := startManager(t, env.Config, ns, fix, firmwareControllers(fix), withImages)
	good := provisionedWithImage(t, ns, "h")

	fix.SetLatency(fixture.OpService, time.Hour)
	setSettings(t, ns, "h", map[string]string{"ProcTurboMode": "Disabled"})
	reboot(t, ns, "h")
	waitImage(t, ns, "h", "made again for the live update", func(*metal3.PreprovisioningImage) bool { return true })
	buildImage(t, ns, "h", good)
	poll.Until(t, "the provisioner's run to start", func() (bool, string) {
		n := fix.Count(ns, "h", fixture.OpService)
		return n == 1, fmt.Sprintf("%d runs", n)
	})
	started := conditions.Get(getHost(t, ns, "h").Status.Conditions, metal3.ReadyCondition).LastTransitionTime

	buildImage(t, ns, "h", failedBuild("no network data"))
	waitHost(t, ns, "h", "the image's error", func(h *metal3.BareMetalHost) bool {
		return h.Status.ErrorType == metal3.ServicingError && strings.Contains(h.Status.ErrorMessage, "no network data")
	})
	time.Sleep(1100 * time.Millisecond) // a new second: a moved attempt time would show
	buildImage(t, ns, "h", good)
	h := waitHost(t, ns, "h", "the live update resumed", func(h *metal3.BareMetalHost) bool {
		return h.Status.OperationalStatus == metal3.OperationalStatusServicing && h.Status.ErrorType == ""
	})
	if at := conditions.Get(h.Status.Conditions, metal3.ReadyCondition).LastTransitionTime; !at.Equal(&started) {
		t.Errorf("the attempt's time moved from %s to %s", started, at)
	}
	fix.SetLatency(fixture.OpService, 0)
	h = servicedOK(t, ns, "h", fix, 1)
	op.waitSeen(t, ns, "h", h.ResourceVersion, 3)
	if n := fix.Count(ns, "h", fixture.OpService); n != 1 || biosValue(t, fix, ns, "h", "ProcTurboMode") != "Disabled" {
		t.Fatalf("%d runs, ProcTurboMode %s; want the one run, applied", n, biosValue(t, fix, ns, "h", "ProcTurboMode"))
	}
}
