package patch

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Helper writes what one reconcile changed on one object. It holds a snapshot of the object taken
// right after it was read (and its finalizer ensured); the reconcile then edits the object in
// memory, and the helper writes the difference once, at the end.
type Helper struct {
	client  client.Client
	before  client.Object
	tracker *Tracker
}

// NewHelper snapshots obj. Writes are recorded in tracker when it is not nil.
func NewHelper(c client.Client, obj client.Object, tracker *Tracker) *Helper {
	return &Helper{client: c, before: obj.DeepCopyObject().(client.Object), tracker: tracker}
}

// StatusOption tunes PatchStatus.
type StatusOption func(*statusOptions)

type statusOptions struct {
	ignore  []string
	stamp   func()
	replace bool
}

// IgnoringFields names top-level status fields (JSON names) whose change alone is no reason to
// write, such as a lastUpdated time: they are written together with another change, never alone.
func IgnoringFields(fields ...string) StatusOption {
	return func(o *statusOptions) { o.ignore = append(o.ignore, fields...) }
}

// Stamping calls stamp when the status is about to be written (to move a lastUpdated time, say).
func Stamping(stamp func()) StatusOption { return func(o *statusOptions) { o.stamp = stamp } }

// Replacing writes the whole status with an update (optimistic: a conflict fails the write)
// instead of a merge patch, when replace is true. For a first write that must carry fields the
// schema requires even when empty, or a field that must replace the stored one whole where a merge
// patch would merge into it.
func Replacing(replace bool) StatusOption { return func(o *statusOptions) { o.replace = replace } }

// StatusChanged reports whether obj's status differs from the snapshot's, leaving out the ignored
// fields.
func (h *Helper) StatusChanged(obj client.Object, opts ...StatusOption) (bool, error) {
	o := statusOptions{}
	for _, opt := range opts {
		opt(&o)
	}
	switch compareStatus(h.before, obj, o.ignore) {
	case statusSame:
		return false, nil
	case statusDiffers:
		return true, nil
	}
	diff, err := statusDiff(h.before, obj)
	if err != nil {
		return false, err
	}
	for _, f := range o.ignore {
		delete(diff, f)
	}
	return len(diff) > 0, nil
}

// PatchStatus writes obj's status when it differs from the snapshot: a JSON merge patch holding
// only the status fields that changed (so two controllers writing different fields do not undo
// each other), or an update with Replacing. It reports whether it wrote. On success the snapshot
// moves to the written object, so a second call in the same reconcile writes only what changed
// since.
func (h *Helper) PatchStatus(ctx context.Context, obj client.Object, opts ...StatusOption) (bool, error) {
	o := statusOptions{}
	for _, opt := range opts {
		opt(&o)
	}
	changed, err := h.StatusChanged(obj, IgnoringFields(o.ignore...))
	if err != nil || !changed {
		return false, err
	}
	if o.stamp != nil {
		o.stamp()
	}
	if o.replace {
		err = h.client.Status().Update(ctx, obj)
	} else {
		var diff map[string]any
		if diff, err = statusDiff(h.before, obj); err != nil {
			return false, err
		}
		var data []byte
		if data, err = json.Marshal(map[string]any{"status": diff}); err != nil {
			return false, fmt.Errorf("encoding status patch: %w", err)
		}
		err = h.client.Status().Patch(ctx, obj, client.RawPatch(types.MergePatchType, data))
	}
	if err != nil {
		return false, fmt.Errorf("writing status of %s %s: %w", kindOf(obj), client.ObjectKeyFromObject(obj), err)
	}
	h.tracker.Record(obj)
	h.before = obj.DeepCopyObject().(client.Object)
	return true, nil
}

func kindOf(obj client.Object) string {
	if k := obj.GetObjectKind().GroupVersionKind().Kind; k != "" {
		return k
	}
	t := reflect.TypeOf(obj)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Name()
}

// Snapshot is the object as last read or written: what PatchStatus diffs against. Callers must
// not change it.
func (h *Helper) Snapshot() client.Object { return h.before }
