package host

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/conditions"
	"github.com/metalforge/metalforge/internal/provisioner"
	"github.com/metalforge/metalforge/internal/provisioner/fixture"
)

func readySince(s *hostScope, reason string, at time.Time) {
	s.host.Status.Conditions = []metav1.Condition{{Type: metal3.ReadyCondition, Status: metav1.ConditionFalse, Reason: reason,
		LastTransitionTime: metav1.NewTime(at.Truncate(time.Second))}}
}

// TestWaitNewSecondBoundsClockSkew: a live update starts in the second after Ready's last
// transition, but a transition far ahead of this process's clock (written by a leader whose clock
// ran ahead) does not hold the start for the whole skew.
func TestWaitNewSecondBoundsClockSkew(t *testing.T) {
	s := unitScope(t, unitHost(metal3.StateProvisioned), fixture.New(fixture.Config{}))
	readySince(s, metal3.ErrorReason, s.now.Time)
	if out, wait := s.waitNewSecond(); !wait || out.after <= 0 || out.after > time.Second {
		t.Fatalf("in the second of Ready's transition: wait %v for %v, want up to a second", wait, out.after)
	}
	readySince(s, metal3.ErrorReason, s.now.Add(-2*time.Second))
	if out, wait := s.waitNewSecond(); wait {
		t.Fatalf("after Ready's transition second: waits %v", out.after)
	}
	readySince(s, metal3.ErrorReason, s.now.Add(time.Hour))
	if out, wait := s.waitNewSecond(); wait && out.after > 2*time.Second {
		t.Fatalf("a transition an hour ahead (clock skew) holds the start for %v", out.after)
	}
}

// abortReporter answers Service with a fixed result.
type abortReporter struct {
	*fixture.Fixture
	res provisioner.Result
}

func (a abortReporter) Service(context.Context, provisioner.Host, provisioner.ServiceData) (provisioner.Result, error) {
	return a.res, nil
}

// TestTakeBackAbortThatAppliedSomething: changes taken back while the provisioner ran them; it
// aborts after steps that applied something and reports them. The host records what was applied
// and says the live update was aborted after applying it, not complete, with the BIOS settings
// left staged on the BMC, if any; so does the reconcile that ends it again after the status write
// that ended it failed.
func TestTakeBackAbortThatAppliedSomething(t *testing.T) {
	applied := &provisioner.Serviced{Updates: []metal3.FirmwareUpdate{{Component: "bmc", URL: "http://fw/bmc-2.bin"}}}
	for name, tc := range map[string]struct {
		staged    []string
		eventType string
		note      []string
	}{
		"nothing staged": {nil, corev1.EventTypeNormal, []string{"Live update aborted after applying firmware update of bmc"}},
		"settings staged": {[]string{"ProcTurboMode"}, corev1.EventTypeWarning,
			[]string{"Live update aborted after applying firmware update of bmc", "BIOS settings ProcTurboMode and applies them at the server's next boot"}},
	} {
		t.Run(name, func(t *testing.T) {
			s := unitScope(t, unitHost(metal3.StateProvisioned), nil)
			s.prov = abortReporter{fixture.New(fixture.Config{}), provisioner.Result{Serviced: applied, StagedSettings: tc.staged}}
			s.host.Status.OperationalStatus = metal3.OperationalStatusServicing
			readySince(s, metal3.ServicingReason, s.now.Add(-time.Minute))
			s.in.firmware.specUpdates = []metal3.FirmwareUpdate{}
			s.finished = &finishedServicings{}
			before := s.host.DeepCopy()
			// The second reconcile ends the same run after a failed status write (the host read
			// servicing again), from the memory of the finished run, without the provisioner.
			again := unitScope(t, before, nil)
			again.in.firmware.specUpdates = []metal3.FirmwareUpdate{}
			again.finished = s.finished
			for i, s := range []*hostScope{s, again} {
				s.continueServicing()
				if st := s.host.Status; st.OperationalStatus != metal3.OperationalStatusOK {
					t.Fatalf("reconcile %d, after the abort: %s", i, describe(s.host))
				}
				if !s.fx.recordUpdates || len(s.fx.appliedUpdates) != 1 || s.fx.appliedUpdates[0].Component != "bmc" {
					t.Fatalf("reconcile %d, applied updates recorded: %v %+v", i, s.fx.recordUpdates, s.fx.appliedUpdates)
				}
				if len(s.fx.events) != 1 {
					t.Fatalf("reconcile %d, events: %+v", i, s.fx.events)
				}
				e := s.fx.events[0]
				if e.Reason != reasonServicingAborted || e.Type != tc.eventType {
					t.Fatalf("reconcile %d, event %s %s: %q, want %s %s", i, e.Type, e.Reason, e.Note, tc.eventType, reasonServicingAborted)
				}
				for _, want := range tc.note {
					if !strings.Contains(e.Note, want) {
						t.Errorf("reconcile %d, event note %q does not say %q", i, e.Note, want)
					}
				}
			}
		})
	}
}

// TestClearImageErrorKeepsTheRetryCount: the image's fix resumes a live update with the count of
// its failures before the image's error (a retry stays a retry); any other host's image error
// is simply cleared.
func TestClearImageErrorKeepsTheRetryCount(t *testing.T) {
	for name, tc := range map[string]struct {
		errType    metal3.ErrorType
		count      int
		wantStatus metal3.OperationalStatus
		wantCount  int
	}{
		"first attempt": {errType: metal3.ServicingError, count: 1, wantStatus: metal3.OperationalStatusServicing, wantCount: 0},
		"second retry":  {errType: metal3.ServicingError, count: 3, wantStatus: metal3.OperationalStatusServicing, wantCount: 2},
		"registering":   {errType: metal3.RegistrationError, count: 2, wantStatus: metal3.OperationalStatusOK, wantCount: 0},
	} {
		t.Run(name, func(t *testing.T) {
			h := &metal3.BareMetalHost{}
			h.Status.OperationalStatus, h.Status.ErrorType, h.Status.ErrorCount = metal3.OperationalStatusError, tc.errType, tc.count
			h.Status.ErrorMessage = imageErrorPrefix + `"h" could not be built (ImageBuildInvalid): no network data`
			s := &hostScope{host: h}
			s.clearImageError()
			if st := h.Status; st.OperationalStatus != tc.wantStatus || st.ErrorCount != tc.wantCount || st.ErrorType != "" {
				t.Fatalf("status %s count %d type %q, want %s count %d", st.OperationalStatus, st.ErrorCount, st.ErrorType, tc.wantStatus, tc.wantCount)
			}
		})
	}
}

// TestReadyDuringAnImageError: an image error during a running live update keeps Ready's
// Servicing reason and transition time (the attempt's time); after a failed live update Ready
// stays Error, and no running live update is claimed.
func TestReadyDuringAnImageError(t *testing.T) {
	started := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	for name, tc := range map[string]struct {
		before, want string
	}{
		"running":      {before: metal3.ServicingReason, want: metal3.ServicingReason},
		"after a fail": {before: metal3.ErrorReason, want: metal3.ErrorReason},
	} {
		t.Run(name, func(t *testing.T) {
			h := unitHost(metal3.StateProvisioned)
			h.Status.Conditions = []metav1.Condition{{Type: metal3.ReadyCondition, Status: metav1.ConditionFalse, Reason: tc.before, LastTransitionTime: started}}
			h.Status.OperationalStatus, h.Status.ErrorType = metal3.OperationalStatusError, metal3.ServicingError
			h.Status.ErrorMessage = imageErrorPrefix + `"h" could not be built (ImageBuildInvalid): no network data`
			setConditions(h, outcome{}, metav1.NewTime(started.Add(time.Minute)))
			ready := conditions.Get(h.Status.Conditions, metal3.ReadyCondition)
			if ready.Reason != tc.want || !ready.LastTransitionTime.Equal(&started) || !strings.Contains(ready.Message, "no network data") {
				t.Fatalf("Ready %s since %s: %q; want %s since %s", ready.Reason, ready.LastTransitionTime, ready.Message, tc.want, started)
			}
		})
	}
}

// TestImageErrorBesideAFailedLiveUpdate: an agent image failing while a failed live update waits
// for its retry keeps the live update's failure, count and backoff (the retry starts as any retry
// once the image is fine); the image's problem is what Progressing waits for.
func TestImageErrorBesideAFailedLiveUpdate(t *testing.T) {
	s := unitScope(t, unitHost(metal3.StateProvisioned), nil)
	st := &s.host.Status
	st.OperationalStatus, st.ErrorType, st.ErrorMessage, st.ErrorCount = metal3.OperationalStatusError, metal3.ServicingError, "step failed", 2
	out := s.imageFailed(imageErrorPrefix + `"host-0" could not be built (ImageBuildInvalid): no network data`)
	if st.ErrorType != metal3.ServicingError || st.ErrorMessage != "step failed" || st.ErrorCount != 2 || len(s.fx.events) != 0 {
		t.Fatalf("the failed live update changed: %s, events %+v", describe(s.host), s.fx.events)
	}
	if out.kind != kindWait || out.progressReason != reasonWaitingForImage || !strings.Contains(out.waitingFor, "no network data") {
		t.Fatalf("outcome %+v: want a wait for the image naming its error", out)
	}
}

// TestImageErrorMessagesCountOnce: while an image error is shown, the builder's next message
// replaces it (with its event) but is the same failure: the count does not grow.
func TestImageErrorMessagesCountOnce(t *testing.T) {
	s := unitScope(t, unitHost(metal3.StateProvisioned), nil)
	st := &s.host.Status
	st.OperationalStatus, st.ErrorCount = metal3.OperationalStatusServicing, 1 // a retry runs
	for i, msg := range []string{"no network data", "bad nmstate", "bad nmstate"} {
		s.fx = effects{}
		s.imageFailed(imageErrorPrefix + `"host-0" could not be built (ImageBuildInvalid): ` + msg)
		if st.ErrorType != metal3.ServicingError || st.ErrorCount != 2 || !strings.HasSuffix(st.ErrorMessage, msg) {
			t.Fatalf("message %d: %s", i, describe(s.host))
		}
		if want := min(1, 2-i); len(s.fx.events) != want {
			t.Fatalf("message %d: events %+v, want %d", i, s.fx.events, want)
		}
	}
	s.clearImageError()
	if st.OperationalStatus != metal3.OperationalStatusServicing || st.ErrorCount != 1 {
		t.Fatalf("after the fix: %s; want the retry running with its count 1", describe(s.host))
	}
}

// TestDeletionBackoffIgnoresFailedDeployments: the failed deployments of a host
// (provisioningFailCount) stretch the backoff of the cleaning between two attempts, not that of
// a deleted host's cleaning, which is given up after maxDeleteErrors failures.
func TestDeletionBackoffIgnoresFailedDeployments(t *testing.T) {
	for name, tc := range map[string]struct {
		deleted bool
		want    int
	}{
		"between two deployments": {want: 5},
		"deleted":                 {deleted: true, want: 1},
	} {
		t.Run(name, func(t *testing.T) {
			h := &metal3.BareMetalHost{Status: metal3.BareMetalHostStatus{ProvisioningFailCount: 4}}
			if tc.deleted {
				h.DeletionTimestamp = &metav1.Time{Time: time.Now()}
			}
			var got int
			cfg := Config{Backoff: func(n int) time.Duration { got = n; return time.Minute }}
			s := &hostScope{cfg: &cfg, host: h}
			s.fail(metal3.ProvisioningError, "cleaning failed")
			if got != tc.want {
				t.Errorf("backoff asked for %d failures, want %d", got, tc.want)
			}
		})
	}
}

// TestAbortCause: the abort's event says why the live update has no changes left: removed, judged
// invalid, or still pending but no longer allowed by the HostUpdatePolicy (they wait for the next
// preparation; "removed" sent the user looking for a change they had not made).
func TestAbortCause(t *testing.T) {
	for name, tc := range map[string]struct {
		policy updatePolicy
		fw     firmwareInputs
		want   string
	}{
		"removed":          {updatePolicy{settings: true}, firmwareInputs{}, "its changes were removed"},
		"invalid":          {updatePolicy{settings: true}, firmwareInputs{invalidSettings: true}, "no longer valid (see the Valid condition of HostFirmwareSettings)"},
		"policy withdrawn": {updatePolicy{}, firmwareInputs{settings: metal3.DesiredSettingsMap{"ProcTurboMode": intstr.FromString("Disabled")}}, "HostUpdatePolicy no longer allows"},
		"updates withdrawn": {updatePolicy{settings: true}, firmwareInputs{updates: []metal3.FirmwareUpdate{{Component: "bmc", URL: "http://fw/b.bin"}}},
			"HostUpdatePolicy no longer allows"},
	} {
		t.Run(name, func(t *testing.T) {
			s := unitScope(t, unitHost(metal3.StateProvisioned), nil)
			s.in.policy, s.in.firmware = tc.policy, tc.fw
			if got := s.abortCause(); !strings.Contains(got, tc.want) {
				t.Fatalf("cause %q, want it to say %q", got, tc.want)
			}
		})
	}
}
