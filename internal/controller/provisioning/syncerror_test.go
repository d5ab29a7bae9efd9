package provisioning

import (
	"fmt"
	"strings"
	"testing"

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
