package dataimage_test

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/dataimage"
	"github.com/metalforge/metalforge/internal/controller/patch"
	"github.com/metalforge/metalforge/internal/test/companiontest"
)

// TestErrorWrittenWhole: a status write that changes one field of status.error lands even when
// the other controller (the host's, or the DataImage's) has just removed the entry: the patch
// carries the whole entry, both of whose fields the CRD requires. A patch of the changed field
// alone would create an entry without the other, which the API server refuses (422).
func TestErrorWrittenWhole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := env.Namespace(t)
	for _, c := range []struct {
		name, why string
		change    func(*metal3.DataImageError)
	}{
		{"message", "a new message (the DataImage controller's setMessage)", func(e *metal3.DataImageError) { e.Message = "detaching: again" }},
		{"underway", "the message emptied, an attach under way (the host controller)", func(e *metal3.DataImageError) { e.Message = "" }},
		{"count", "a failure counted, same message", func(e *metal3.DataImageError) { e.Count++ }},
	} {
		di := &metal3.DataImage{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: c.name}, Spec: metal3.DataImageSpec{URL: "http://images.example/a.iso"}}
		if err := env.Client.Create(ctx, di); err != nil {
			t.Fatal(err)
		}
		di.Status.Error = &metal3.DataImageError{Count: 1, Message: "detaching: the BMC refused"}
		if err := env.Client.Status().Update(ctx, di); err != nil {
			t.Fatal(err)
		}
		before := di.DeepCopy()
		after := di.DeepCopy()
		c.change(after.Status.Error)
		// The other controller removes the entry (a success) after before was read.
		if err := env.Client.Status().Patch(ctx, di, client.RawPatch(types.MergePatchType, []byte(`{"status":{"error":null}}`))); err != nil {
			t.Fatal(err)
		}
		if _, err := patch.NewHelper(env.Client, dataimage.StatusBase(before, after), nil).PatchStatus(ctx, after); err != nil {
			t.Errorf("%s: %v", c.why, err)
			continue
		}
		got := &metal3.DataImage{}
		companiontest.Get(t, env.Client, ns, c.name, got)
		if got.Status.Error == nil || *got.Status.Error != *after.Status.Error {
			t.Errorf("%s: stored error %+v, want %+v", c.why, got.Status.Error, after.Status.Error)
		}
	}
}
