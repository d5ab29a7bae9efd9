package host

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

// TestWriteTrackerFinalized (unit): once a host's provisioner record is removed, every copy of
// that host counts as finalized, including after the finalizer patch records a newer version, and
// a new host under the same name does not.
func TestWriteTrackerFinalized(t *testing.T) {
	host := func(uid, rv string) *metal3.BareMetalHost {
		return &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "h", UID: types.UID(uid), ResourceVersion: rv}}
	}
	var w writeTracker
	w.record(host("a", "10"))
	if w.finalized(host("a", "10")) {
		t.Fatal("finalized before markFinalized")
	}
	w.markFinalized(host("a", "10"))
	w.record(host("a", "12")) // the finalizer patch
	if !w.finalized(host("a", "9")) || !w.finalized(host("a", "12")) {
		t.Fatal("a copy of the finalized host is not reported finalized after the next write")
	}
	if !w.stale(host("a", "11")) {
		t.Fatal("a copy older than the finalizer patch is not stale")
	}
	if w.finalized(host("b", "20")) {
		t.Fatal("a new host with the same name counts as finalized")
	}
	w.record(host("b", "20"))
	if w.finalized(host("b", "21")) {
		t.Fatal("recording a new host kept the old one's finalized mark")
	}
	w.forget(types.NamespacedName{Namespace: "ns", Name: "h"})
	if w.finalized(host("a", "12")) {
		t.Fatal("forget kept the finalized mark")
	}
}
