package patch

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func object(uid, rv string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "o", UID: types.UID(uid), ResourceVersion: rv}}
}

// TestTrackerStale: a copy older than our last write is stale; the same or a newer one is not; an
// object of the same name with another UID starts afresh; an unparsable version is never stale.
func TestTrackerStale(t *testing.T) {
	var w Tracker
	if w.Stale(object("a", "5")) {
		t.Fatal("stale before any write")
	}
	w.Record(object("a", "10"))
	for rv, want := range map[string]bool{"9": true, "10": false, "11": false, "x": false} {
		if got := w.Stale(object("a", rv)); got != want {
			t.Errorf("Stale(rv %s) = %v, want %v", rv, got, want)
		}
	}
	if w.Stale(object("b", "3")) {
		t.Error("another object under the same name is stale")
	}
	w.Forget(types.NamespacedName{Namespace: "ns", Name: "o"})
	if w.Stale(object("a", "9")) {
		t.Error("stale after Forget")
	}
	var none *Tracker
	none.Record(object("a", "1"))
	if none.Stale(object("a", "0")) || none.Finalized(object("a", "0")) {
		t.Error("a nil tracker remembers")
	}
}

// TestTrackerFinalized: once MarkFinalized, every copy of that object counts as finalized,
// including after the finalizer patch records a newer version; a new object under the same name
// does not.
func TestTrackerFinalized(t *testing.T) {
	var w Tracker
	w.Record(object("a", "10"))
	if w.Finalized(object("a", "10")) {
		t.Fatal("finalized before MarkFinalized")
	}
	w.MarkFinalized(object("a", "10"))
	w.Record(object("a", "12")) // the finalizer patch
	if !w.Finalized(object("a", "9")) || !w.Finalized(object("a", "12")) {
		t.Fatal("a copy of the finalized object is not reported finalized after the next write")
	}
	if !w.Stale(object("a", "11")) {
		t.Fatal("a copy older than the finalizer patch is not stale")
	}
	if w.Finalized(object("b", "20")) {
		t.Fatal("a new object with the same name counts as finalized")
	}
	w.Record(object("b", "20"))
	if w.Finalized(object("b", "21")) {
		t.Fatal("recording a new object kept the old one's finalized mark")
	}
	w.Forget(types.NamespacedName{Namespace: "ns", Name: "o"})
	if w.Finalized(object("a", "12")) {
		t.Fatal("Forget kept the finalized mark")
	}
}
