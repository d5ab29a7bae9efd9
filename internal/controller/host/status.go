package host

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

// patchStatus writes the status once, as a merge patch against the snapshot, and only when
// something changed; lastUpdated moves only together with another change.
func (r *Reconciler) patchStatus(ctx context.Context, host, snapshot *metal3.BareMetalHost, s *hostScope) (bool, error) {
	before := snapshot.Status.DeepCopy()
	after := host.Status.DeepCopy()
	before.LastUpdated, after.LastUpdated = nil, nil
	if equality.Semantic.DeepEqual(before, after) {
		return false, nil
	}
	now := s.now
	host.Status.LastUpdated = &now
	var err error
	if snapshot.Status.LastUpdated == nil || !equality.Semantic.DeepEqual(snapshot.Status.HardwareDetails, host.Status.HardwareDetails) {
		// The first write must carry the fields the schema requires even when they are empty
		// (errorMessage, poweredOn...), which a merge patch from an empty status would leave out.
		// New hardware replaces the old whole (a merge patch would merge it into the stored one,
		// and the cached copy is compacted: see compactHost). Update is optimistic: a conflict
		// retries the reconcile on a fresh copy.
		err = r.Client.Status().Update(ctx, host)
	} else {
		err = r.Client.Status().Patch(ctx, host, client.MergeFrom(snapshot))
	}
	if err != nil {
		return false, fmt.Errorf("patching status of host %s/%s: %w", host.Namespace, host.Name, err)
	}
	r.written.record(host)
	return true, nil
}

// patchMetadata writes annotation and finalizer changes (optimistic lock: finalizers are a list
// other controllers may also change).
func (r *Reconciler) patchMetadata(ctx context.Context, host *metal3.BareMetalHost, mutate func(*metal3.BareMetalHost)) error {
	patch := client.MergeFromWithOptions(host.DeepCopy(), client.MergeFromWithOptimisticLock{})
	mutate(host)
	if err := r.Client.Patch(ctx, host, patch); err != nil {
		return fmt.Errorf("patching host %s/%s: %w", host.Namespace, host.Name, err)
	}
	r.written.record(host)
	return nil
}

// writeTracker remembers the resourceVersion of each host's last write by this operator. The
// informer delivers our own writes a moment later; a reconcile that starts before (woken by a
// Secret event, say) would work from the old status, redo the steps it already recorded and write
// them again. Such a reconcile returns at once instead: the event for our write is on its way and
// wakes the host again. resourceVersions are compared as numbers (etcd revisions); should one not
// parse, the check is skipped.
type writeTracker struct {
	mu sync.Mutex
	rv map[types.NamespacedName]writtenVersion
}

type writtenVersion struct {
	uid types.UID
	rv  uint64
	// finalized: the host's provisioner record is gone and its finalizer is being removed.
	finalized bool
}

func (w *writeTracker) record(host *metal3.BareMetalHost) {
	v, err := strconv.ParseUint(host.ResourceVersion, 10, 64)
	if err != nil {
		return
	}
	w.update(host, func(e *writtenVersion) { e.rv = v })
}

// update changes the host's entry, starting afresh when the entry is another host's (same name).
func (w *writeTracker) update(host *metal3.BareMetalHost, change func(*writtenVersion)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.rv == nil {
		w.rv = map[types.NamespacedName]writtenVersion{}
	}
	key := client.ObjectKeyFromObject(host)
	e := w.rv[key]
	if e.uid != host.UID {
		e = writtenVersion{uid: host.UID}
	}
	change(&e)
	w.rv[key] = e
}

// stale: the cached host is older than our last write.
func (w *writeTracker) stale(host *metal3.BareMetalHost) bool {
	v, err := strconv.ParseUint(host.ResourceVersion, 10, 64)
	if err != nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	last, ok := w.rv[client.ObjectKeyFromObject(host)]
	return ok && last.uid == host.UID && v < last.rv
}

// markFinalized records that the provisioner no longer has the host. Until the informer reports
// the host gone, no copy of it may be worked on again: a cached copy from before still carries the
// finalizer and a state (powering off before delete) whose guard would register the host with
// the provisioner again and leave an orphan node behind (seen at 500 hosts).
func (w *writeTracker) markFinalized(host *metal3.BareMetalHost) {
	w.update(host, func(e *writtenVersion) { e.finalized = true })
}

// finalized: this host's provisioner record was removed (markFinalized).
func (w *writeTracker) finalized(host *metal3.BareMetalHost) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	v, ok := w.rv[client.ObjectKeyFromObject(host)]
	return ok && v.uid == host.UID && v.finalized
}

func (w *writeTracker) forget(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.rv, key)
}
