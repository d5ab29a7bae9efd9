package host

import (
	"time"

	"testing"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner/fixture"
)

// TestDeleteWithPendingDetach: a detached annotation without force on a host in a state it does not
// take effect in (provisioning) is no detach: deleting the host deprovisions it as any other,
// rather than delete its node in the middle of the deployment.
func TestDeleteWithPendingDetach(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{Latency: map[fixture.Op]time.Duration{fixture.OpProvision: hold}})
	op := startOperator(t, ns, fix)
	createHost(t, withImage(ns))
	waitState(t, ns, "h", metal3.StateProvisioning)
	rv := annotate(t, ns, "h", metal3.DetachedAnnotation, "")
	op.waitSeen(t, ns, "h", rv, 1)
	if h := getHost(t, ns, "h"); h.Status.OperationalStatus == metal3.OperationalStatusDetached {
		t.Fatalf("detached while provisioning without force: %s", describe(h))
	}
	deleteHost(t, ns, "h")
	waitGone(t, ns, "h")
	if got := fix.Count(ns, "h", fixture.OpDeprovision); got != 1 {
		t.Fatalf("deprovisioned %d times on deletion, want 1 (events: %v)", got, eventsFor(t, ns, "h", true))
	}
}

// TestDeleteRightAfterDetachAnnotationWithDelay: a host deleted with a detached annotation (delay)
// that takes effect in its state but was not carried out yet is detached first, then its deletion
// waits for the annotation, without deprovisioning; once the annotation goes it is attached again
// and deprovisioned, as in metal3.
func TestDeleteRightAfterDetachAnnotationWithDelay(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	startOperator(t, ns, fix)
	createHost(t, withImage(ns))
	waitState(t, ns, "h", metal3.StateProvisioned)
	// Paused while annotated and deleted: the operator sees both at once.
	annotate(t, ns, "h", metal3.PausedAnnotation, "test")
	annotate(t, ns, "h", metal3.DetachedAnnotation, `{"deleteAction":"delay"}`)
	deleteHost(t, ns, "h")
	unannotate(t, ns, "h", metal3.PausedAnnotation)
	waitHost(t, ns, "h", "detached, deletion delayed", func(h *metal3.BareMetalHost) bool {
		c := condition(h, metal3.ProgressingCondition)
		return h.Status.OperationalStatus == metal3.OperationalStatusDetached && c != nil &&
			c.Message == "Waiting for the detached annotation (deleteAction: delay) to be removed before deletion"
	})
	if _, ok := fix.Node(ns, "h"); ok {
		t.Fatal("the provisioner still has the node of a detached host")
	}
	if fix.Count(ns, "h", fixture.OpDeprovision) != 0 || fix.Count(ns, "h", fixture.OpPowerOff) != 0 {
		t.Fatal("a host whose deletion waits for its detached annotation was deprovisioned or powered off")
	}
	unannotate(t, ns, "h", metal3.DetachedAnnotation)
	waitGone(t, ns, "h")
	if n := fix.Count(ns, "h", fixture.OpDeprovision); n != 1 {
		t.Fatalf("deprovisioned %d times once the annotation went, want 1", n)
	}
}
