package patch

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	jsonpatch "github.com/evanphx/json-patch/v5"
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

// PatchMetadata applies mutate (labels, annotations, finalizers, owner references) to obj and
// writes it as a merge patch with an optimistic lock: those are lists other controllers change
// too. obj keeps its in-memory status (the server's copy in the response is not taken), and the
// snapshot follows the new metadata, so a later PatchStatus diffs status only.
func (h *Helper) PatchMetadata(ctx context.Context, obj client.Object, mutate func()) error {
	if err := Metadata(ctx, h.client, obj, mutate, h.tracker); err != nil {
		return err
	}
	meta := obj.DeepCopyObject().(client.Object)
	copyMetadata(h.before, meta)
	return nil
}

// Metadata applies mutate to obj and writes the change as a merge patch with an optimistic lock
// (a conflict fails and the reconcile is retried on a fresh copy). Only obj's resourceVersion is
// taken from the response: the in-memory status and spec stay what the reconcile computed. The
// write is recorded in tracker when it is not nil. Nothing is sent when mutate changed nothing.
func Metadata(ctx context.Context, c client.Client, obj client.Object, mutate func(), tracker *Tracker) error {
	before := obj.DeepCopyObject().(client.Object)
	mutate()
	if reflect.DeepEqual(before, obj) {
		return nil
	}
	patch := client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})
	sent := obj.DeepCopyObject().(client.Object)
	if err := c.Patch(ctx, sent, patch); err != nil {
		return fmt.Errorf("patching %s %s: %w", kindOf(obj), client.ObjectKeyFromObject(obj), err)
	}
	obj.SetResourceVersion(sent.GetResourceVersion())
	tracker.Record(obj)
	return nil
}

// statusDiff is the JSON merge patch from before's status to after's: the fields that changed,
// with null for the removed ones.
func statusDiff(before, after client.Object) (map[string]any, error) {
	b, err := statusJSON(before)
	if err != nil {
		return nil, err
	}
	a, err := statusJSON(after)
	if err != nil {
		return nil, err
	}
	raw, err := jsonpatch.CreateMergePatch(b, a)
	if err != nil {
		return nil, fmt.Errorf("diffing status of %s: %w", client.ObjectKeyFromObject(after), err)
	}
	diff := map[string]any{}
	if err := json.Unmarshal(raw, &diff); err != nil {
		return nil, fmt.Errorf("decoding status diff: %w", err)
	}
	return diff, nil
}

// statusJSON is the object's status as JSON ({} when it has none).
func statusJSON(obj client.Object) ([]byte, error) {
	v := reflect.ValueOf(obj)
	for v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	f := v.FieldByName("Status")
	if !f.IsValid() {
		return []byte("{}"), nil
	}
	data, err := json.Marshal(f.Interface())
	if err != nil {
		return nil, fmt.Errorf("encoding status of %s: %w", client.ObjectKeyFromObject(obj), err)
	}
	return data, nil
}

// copyMetadata sets dst's metadata to src's (same concrete type), leaving the rest of dst alone.
func copyMetadata(dst, src client.Object) {
	d, s := reflect.ValueOf(dst).Elem(), reflect.ValueOf(src).Elem()
	if f := d.FieldByName("ObjectMeta"); f.IsValid() && f.CanSet() {
		f.Set(s.FieldByName("ObjectMeta"))
	}
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
