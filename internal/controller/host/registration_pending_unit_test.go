package host

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner/fixture"
)

// TestDeferredRegistrationPolledWritesOnce: a deferred registration change is asked again at every
// reconcile while Ironic waits for the node's agent; the RegistrationPending condition it leaves
// is the same each time (its reason and time), so those reconciles write no status. Marked
// not-sent before each call and deferred after it, the reason went back and forth and the
// status was written at every poll.
func TestDeferredRegistrationPolledWritesOnce(t *testing.T) {
	fix := fixture.New(fixture.Config{})
	s := unitScope(t, unitHost(metal3.StateProvisioned), fix)
	registerIn(t, s, fix)
	fix.DeferRegistrationFor(s.host.Namespace, s.host.Name, true)
	var first metav1.Condition
	for i := range 3 {
		s.now = metav1.NewTime(s.now.Add(10 * time.Second))
		if _, done := s.registerOnce(); !done {
			t.Fatalf("poll %d: the deferred registration did not let the host go on", i)
		}
		c := condition(s.host, metal3.RegistrationPendingCondition)
		if c == nil || c.Reason != metal3.RegistrationDeferredReason {
			t.Fatalf("poll %d: RegistrationPending %+v, want Deferred", i, c)
		}
		if i == 0 {
			first = *c
		} else if *c != first {
			t.Fatalf("poll %d: the condition changed from %+v to %+v: a status write at every poll", i, first, *c)
		}
	}
}
