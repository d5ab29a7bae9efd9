package provisioning

import (
	"strings"
	"testing"

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
