package patch

import (
	"strconv"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Tracker remembers the resourceVersion of each object's last write by this controller. The
// informer delivers our own writes a moment later; a reconcile that starts before (woken by a
// Secret event, say) would work from the old status, redo the steps it already recorded and write
// them again. With Stale such a reconcile returns at once instead: the event for our write is on
// its way and wakes the object again. resourceVersions are compared as numbers (etcd revisions);
// should one not parse, the check is skipped. A nil *Tracker records nothing and finds nothing
// stale. Safe for concurrent use.
type Tracker struct {
	mu      sync.Mutex
	entries map[types.NamespacedName]trackedObject
}

type trackedObject struct {
	uid types.UID
	rv  uint64
	// finalized: the object's external record is gone and its finalizer is being removed.
	finalized bool
}

// Record notes obj's resourceVersion as our last write to it.
func (t *Tracker) Record(obj client.Object) {
	if t == nil {
		return
	}
	v, err := strconv.ParseUint(obj.GetResourceVersion(), 10, 64)
	if err != nil {
		return
	}
	t.update(obj, func(e *trackedObject) { e.rv = v })
}

// update changes obj's entry, starting afresh when the entry is another object's (same name, a
// new UID).
func (t *Tracker) update(obj client.Object, change func(*trackedObject)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.entries == nil {
		t.entries = map[types.NamespacedName]trackedObject{}
	}
	key := client.ObjectKeyFromObject(obj)
	e := t.entries[key]
	if e.uid != obj.GetUID() {
		e = trackedObject{uid: obj.GetUID()}
	}
	change(&e)
	t.entries[key] = e
}

// Stale reports whether obj (a cached copy) is older than our last write to it.
func (t *Tracker) Stale(obj client.Object) bool {
	if t == nil {
		return false
	}
	v, err := strconv.ParseUint(obj.GetResourceVersion(), 10, 64)
	if err != nil {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	last, ok := t.entries[client.ObjectKeyFromObject(obj)]
	return ok && last.uid == obj.GetUID() && v < last.rv
}

// MarkFinalized records that what obj stands for outside the API server is gone and its finalizer
// is being removed. Until the informer reports the object gone (Forget), no copy of it may be
// worked on again: a cached copy from before still carries the finalizer and a state whose
// handler would create the external record again.
func (t *Tracker) MarkFinalized(obj client.Object) {
	if t == nil {
		return
	}
	t.update(obj, func(e *trackedObject) { e.finalized = true })
}

// Finalized reports whether MarkFinalized was called for this object (same UID).
func (t *Tracker) Finalized(obj client.Object) bool {
	if t == nil {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.entries[client.ObjectKeyFromObject(obj)]
	return ok && e.uid == obj.GetUID() && e.finalized
}

// Forget drops the entry of an object that is gone.
func (t *Tracker) Forget(key types.NamespacedName) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.entries, key)
}

// Len is how many objects the tracker remembers.
func (t *Tracker) Len() int {
	if t == nil {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.entries)
}
