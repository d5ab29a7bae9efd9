package patch

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// PatchMetadata applies mutate (labels, annotations, finalizers, owner references) to obj and
// writes it as a merge patch with an optimistic lock: those are lists other controllers change
// too. obj keeps its in-memory status (the server's copy in the response is not taken), and the
// snapshot follows the new metadata, so a later PatchStatus diffs status only.
func (h *Helper) PatchMetadata(ctx context.Context, obj client.Object, mutate func()) error {
	if err := Metadata(ctx, h.client, obj, mutate, h.tracker); err != nil {
		return err
	}
	// Metadata found obj's ObjectMeta, so the snapshot (same type) has one too.
	after, _ := objectMeta(obj)
	snapshot, _ := objectMeta(h.before)
	after.DeepCopyInto(snapshot)
	return nil
}

// Metadata applies mutate to obj and writes the change as a merge patch with an optimistic lock
// (a conflict fails and the reconcile is retried on a fresh copy). Only obj's resourceVersion is
// taken from the response: the in-memory status and spec stay what the reconcile computed. The
// write is recorded in tracker when it is not nil. Nothing is sent when mutate changed nothing.
//
// mutate changes metadata only (labels, annotations, finalizers, owner references): only
// metadata is diffed and sent, and the object comes back as metadata only
// (PartialObjectMetadata). Diffing and decoding whole objects, as client.MergeFrom does, was
// most of what a host's finalizer cost the baremetal-operator in allocations.
func Metadata(ctx context.Context, c client.Client, obj client.Object, mutate func(), tracker *Tracker) error {
	meta, ok := objectMeta(obj)
	if !ok {
		return fmt.Errorf("patching metadata of %s %s: no ObjectMeta", kindOf(obj), client.ObjectKeyFromObject(obj))
	}
	before := meta.DeepCopy()
	mutate()
	if reflect.DeepEqual(before, meta) {
		return nil
	}
	data, err := metadataPatch(before, meta)
	if err != nil {
		return fmt.Errorf("patching metadata of %s %s: %w", kindOf(obj), client.ObjectKeyFromObject(obj), err)
	}
	gvk, err := apiutil.GVKForObject(obj, c.Scheme())
	if err != nil {
		return fmt.Errorf("patching metadata of %s %s: %w", kindOf(obj), client.ObjectKeyFromObject(obj), err)
	}
	sent := &metav1.PartialObjectMetadata{}
	sent.SetGroupVersionKind(gvk)
	sent.SetName(obj.GetName())
	sent.SetNamespace(obj.GetNamespace())
	if err := c.Patch(ctx, sent, client.RawPatch(types.MergePatchType, data)); err != nil {
		return fmt.Errorf("patching %s %s: %w", kindOf(obj), client.ObjectKeyFromObject(obj), err)
	}
	obj.SetResourceVersion(sent.GetResourceVersion())
	tracker.Record(obj)
	return nil
}

// metadataPatch is the JSON merge patch from before to after, with before's resourceVersion as
// the optimistic lock (what client.MergeFromWithOptimisticLock sends).
func metadataPatch(before, after *metav1.ObjectMeta) ([]byte, error) {
	b, err := json.Marshal(before)
	if err != nil {
		return nil, err
	}
	a, err := json.Marshal(after)
	if err != nil {
		return nil, err
	}
	diff, err := mergeDiff(b, a)
	if err != nil {
		return nil, err
	}
	diff["resourceVersion"] = before.ResourceVersion
	return json.Marshal(map[string]any{"metadata": diff})
}

// objectMeta is the address of obj's ObjectMeta field.
func objectMeta(obj client.Object) (*metav1.ObjectMeta, bool) {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return nil, false
	}
	f := v.Elem().FieldByName("ObjectMeta")
	if !f.IsValid() || !f.CanAddr() {
		return nil, false
	}
	m, ok := f.Addr().Interface().(*metav1.ObjectMeta)
	return m, ok
}
