package provisioning

import (
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metalforge/metalforge/internal/controller/provisioning/clusteroperator"
)

// TestSyncErrorState: failed writes show as SyncError, unless the reconcile had decided a Degraded
// state of its own (an invalid configuration), which keeps its reason and its message, the refusal
// added.
func TestSyncErrorState(t *testing.T) {
	const refusal = `applying the stack: updating Secret ns/x: field is immutable`
	for name, tc := range map[string]struct {
		decided      clusteroperator.State
		reason, says string
	}{
		"deploying": {decided: clusteroperator.State{Reason: clusteroperator.ReasonSyncing}, reason: clusteroperator.ReasonSyncError, says: refusal},
		"complete":  {decided: clusteroperator.State{Reason: clusteroperator.ReasonDeployComplete}, reason: clusteroperator.ReasonSyncError, says: refusal},
		"invalid":   {decided: clusteroperator.State{Reason: clusteroperator.ReasonInvalidConfiguration, Message: "spec.provisioningIP: Required value"}, reason: clusteroperator.ReasonInvalidConfiguration, says: "spec.provisioningIP: Required value; " + refusal},
		"timed out": {decided: clusteroperator.State{Reason: clusteroperator.ReasonDeployTimedOut}, reason: clusteroperator.ReasonDeployTimedOut, says: "metal3 deployment rollout taking too long; " + refusal},
	} {
		t.Run(name, func(t *testing.T) {
			got := syncErrorState(tc.decided, refusal, "")
			if got.Reason != tc.reason || got.Message != tc.says || !strings.Contains(got.Message, "immutable") {
				t.Fatalf("got %s %q, want %s %q", got.Reason, got.Message, tc.reason, tc.says)
			}
		})
	}
}

// TestSyncFailuresReport: a refusal is reported once while the writes keep failing, a different
// refusal is news, and a successful write forgets both the clock and what was said.
func TestSyncFailuresReport(t *testing.T) {
	var s syncFailures
	steps := []struct {
		message string
		success bool
		news    bool
	}{
		{message: "a", news: true},
		{message: "a", news: false},
		{message: "b", news: true},
		{success: true},
		{message: "b", news: true},
	}
	for i, step := range steps {
		if step.success {
			s.succeeded()
			if !s.since.IsZero() {
				t.Fatalf("step %d: the clock survived a success", i)
			}
			continue
		}
		if got := s.report(step.message); got != step.news {
			t.Errorf("step %d: report(%q) = %v, want %v", i, step.message, got, step.news)
		}
	}
}

// TestCacheLag: the errors a cache behind the API server causes are told apart from refusals,
// through the operator's wrapping.
func TestCacheLag(t *testing.T) {
	secrets := schema.GroupResource{Resource: "secrets"}
	for name, tc := range map[string]struct {
		err  error
		want bool
	}{
		"not found":      {err: apierrors.NewNotFound(secrets, "x"), want: true},
		"already exists": {err: apierrors.NewAlreadyExists(secrets, "x"), want: true},
		"conflict":       {err: apierrors.NewConflict(secrets, "x", fmt.Errorf("modified")), want: true},
		"immutable":      {err: apierrors.NewInvalid(schema.GroupKind{Kind: "Secret"}, "x", nil), want: false},
		"forbidden":      {err: apierrors.NewForbidden(secrets, "x", fmt.Errorf("no")), want: false},
	} {
		t.Run(name, func(t *testing.T) {
			if got := cacheLag(fmt.Errorf("updating Secret ns/x: %w", tc.err)); got != tc.want {
				t.Errorf("cacheLag = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestSyncFailuresReportable: a refusal may be reported; failures of a cache behind only once
// they alone have lasted past the grace, a refusal between them starting their clock again.
func TestSyncFailuresReportable(t *testing.T) {
	var s syncFailures
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	steps := []struct {
		at   time.Duration
		lag  bool
		want bool
	}{
		{at: 0, lag: true, want: false},
		{at: syncErrorGrace - time.Second, lag: true, want: false},
		{at: syncErrorGrace, lag: true, want: true}, // a conflict for ever is reported
		{at: syncErrorGrace + time.Second, lag: false, want: true},
		{at: syncErrorGrace + 2*time.Second, lag: true, want: false}, // the refusal's clean-up
		{at: 2*syncErrorGrace + 2*time.Second, lag: true, want: true},
	}
	for i, step := range steps {
		if got := s.reportable(t0.Add(step.at), step.lag); got != step.want {
			t.Errorf("step %d (at %s, lag %v): reportable %v, want %v", i, step.at, step.lag, got, step.want)
		}
	}
}
