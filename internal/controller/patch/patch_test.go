package patch

import (
	"context"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/test/builder"
)

// stored creates a host with a first status and returns it as read back.
func stored(t *testing.T) *metal3.BareMetalHost {
	t.Helper()
	ctx := context.Background()
	h := builder.BareMetalHost(env.Namespace(t), "h").Build()
	if err := env.Client.Create(ctx, h); err != nil {
		t.Fatal(err)
	}
	h.Status = metal3.BareMetalHostStatus{OperationalStatus: metal3.OperationalStatusOK, ErrorMessage: "", PoweredOn: false,
		Provisioning: metal3.ProvisionStatus{State: metal3.StateRegistering}}
	if err := env.Client.Status().Update(ctx, h); err != nil {
		t.Fatal(err)
	}
	return read(t, h)
}

func read(t *testing.T, h *metal3.BareMetalHost) *metal3.BareMetalHost {
	t.Helper()
	got := &metal3.BareMetalHost{}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(h), got); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestPatchStatusWritesOnlyChanges: nothing changed → no request (the resourceVersion stays); a
// change → one merge patch carrying only the changed fields, so a field another writer changed in
// between survives; the snapshot then moves on, so the same change is not written twice.
func TestPatchStatusWritesOnlyChanges(t *testing.T) {
	ctx := context.Background()
	h := stored(t)
	var tracker Tracker
	p := NewHelper(env.Client, h, &tracker)
	if wrote, err := p.PatchStatus(ctx, h); err != nil || wrote {
		t.Fatalf("unchanged status: wrote %v, err %v", wrote, err)
	}
	if rv := read(t, h).ResourceVersion; rv != h.ResourceVersion {
		t.Fatalf("unchanged status moved the resourceVersion %s → %s", h.ResourceVersion, rv)
	}

	// Another writer sets a field this reconcile does not touch.
	other := read(t, h)
	other.Status.ErrorCount = 7
	if err := env.Client.Status().Update(ctx, other); err != nil {
		t.Fatal(err)
	}

	h.Status.Provisioning.State = metal3.StateInspecting
	if wrote, err := p.PatchStatus(ctx, h); err != nil || !wrote {
		t.Fatalf("changed status: wrote %v, err %v", wrote, err)
	}
	got := read(t, h)
	if got.Status.Provisioning.State != metal3.StateInspecting || got.Status.ErrorCount != 7 {
		t.Fatalf("stored status %+v: want state inspecting and the other writer's errorCount 7", got.Status)
	}
	if tracker.Stale(got) || !tracker.Stale(other) {
		t.Error("tracker did not record the write")
	}
	if wrote, err := p.PatchStatus(ctx, h); err != nil || wrote {
		t.Fatalf("second call with nothing new: wrote %v, err %v", wrote, err)
	}
}

// TestPatchStatusIgnoredAndStamped: a change of an ignored field alone is not written; with a real
// change the stamp runs and its field is written too.
func TestPatchStatusIgnoredAndStamped(t *testing.T) {
	ctx := context.Background()
	h := stored(t)
	p := NewHelper(env.Client, h, nil)
	stamps := 0
	at := metav1.Date(2026, 1, 1, 0, 0, 0, 0, metav1.Now().Location())
	stamp := Stamping(func() { stamps++; h.Status.LastUpdated = &at })
	ignore := IgnoringFields("lastUpdated")

	h.Status.LastUpdated = &at
	if wrote, err := p.PatchStatus(ctx, h, ignore, stamp); err != nil || wrote || stamps != 0 {
		t.Fatalf("ignored field only: wrote %v, stamps %d, err %v", wrote, stamps, err)
	}
	h.Status.PoweredOn = true
	if wrote, err := p.PatchStatus(ctx, h, ignore, stamp); err != nil || !wrote || stamps != 1 {
		t.Fatalf("real change: wrote %v, stamps %d, err %v", wrote, stamps, err)
	}
	got := read(t, h)
	if !got.Status.PoweredOn || got.Status.LastUpdated == nil || !got.Status.LastUpdated.Equal(&at) {
		t.Fatalf("stored status %+v: want poweredOn and the stamped lastUpdated", got.Status)
	}
}

// TestPatchStatusReplacingConflicts: Replacing writes with an update, which fails on a copy older
// than the stored object instead of overwriting another writer's change.
func TestPatchStatusReplacingConflicts(t *testing.T) {
	ctx := context.Background()
	h := stored(t)
	p := NewHelper(env.Client, h, nil)
	other := read(t, h)
	other.Status.ErrorCount = 3
	if err := env.Client.Status().Update(ctx, other); err != nil {
		t.Fatal(err)
	}
	h.Status.PoweredOn = true
	if _, err := p.PatchStatus(ctx, h, Replacing(true)); err == nil {
		t.Fatal("replacing from a stale copy succeeded")
	}
	if read(t, h).Status.ErrorCount != 3 {
		t.Fatal("the other writer's change was lost")
	}
}

// TestPatchMetadataKeepsStatus: a metadata patch keeps the status the reconcile computed in memory
// (not the stored one from the response), and the later status patch carries the status only.
func TestPatchMetadataKeepsStatus(t *testing.T) {
	ctx := context.Background()
	h := stored(t)
	var tracker Tracker
	p := NewHelper(env.Client, h, &tracker)
	h.Status.Provisioning.State = metal3.StateAvailable
	if err := p.PatchMetadata(ctx, h, func() { h.Annotations = map[string]string{"a": "b"} }); err != nil {
		t.Fatal(err)
	}
	if h.Status.Provisioning.State != metal3.StateAvailable {
		t.Fatalf("in-memory status replaced by the stored one: %q", h.Status.Provisioning.State)
	}
	if got := read(t, h); got.Annotations["a"] != "b" || got.Status.Provisioning.State != metal3.StateRegistering {
		t.Fatalf("after the metadata patch: annotations %v, state %q", got.Annotations, got.Status.Provisioning.State)
	}
	if wrote, err := p.PatchStatus(ctx, h); err != nil || !wrote {
		t.Fatalf("status after metadata: wrote %v, err %v", wrote, err)
	}
	if got := read(t, h); got.Status.Provisioning.State != metal3.StateAvailable || got.Annotations["a"] != "b" {
		t.Fatalf("after the status patch: annotations %v, state %q", got.Annotations, got.Status.Provisioning.State)
	}
	// A metadata change that changes nothing sends nothing.
	rv := h.ResourceVersion
	if err := p.PatchMetadata(ctx, h, func() {}); err != nil || h.ResourceVersion != rv {
		t.Fatalf("no-op metadata patch: err %v, resourceVersion %s → %s", err, rv, h.ResourceVersion)
	}
	// The metadata patch is optimistic: from a stale copy it fails.
	stale := h.DeepCopy()
	stale.ResourceVersion = "1"
	if err := Metadata(ctx, env.Client, stale, func() { stale.Annotations["c"] = "d" }, nil); err == nil {
		t.Fatal("metadata patch from a stale copy succeeded")
	}
}

// TestMetadataFinalizers: a finalizer added and removed through Metadata reaches the stored
// object (the merge patch replaces the list, and an emptied list removes it), the response
// moves only the resourceVersion, and the tracker knows the write.
func TestMetadataFinalizers(t *testing.T) {
	ctx := context.Background()
	h := stored(t)
	h.Spec.Online = !h.Spec.Online // in memory only: Metadata sends metadata alone
	var tracker Tracker
	if err := Metadata(ctx, env.Client, h, func() { h.Finalizers = append(h.Finalizers, "metal3.io/a", "metal3.io/b") }, &tracker); err != nil {
		t.Fatal(err)
	}
	got := read(t, h)
	if !slices.Equal(got.Finalizers, []string{"metal3.io/a", "metal3.io/b"}) || got.Spec.Online == h.Spec.Online {
		t.Fatalf("stored finalizers %v, online %v (in memory %v): want both finalizers and the stored online", got.Finalizers, got.Spec.Online, h.Spec.Online)
	}
	if got.ResourceVersion != h.ResourceVersion || tracker.Stale(got) {
		t.Fatalf("resourceVersion in memory %s, stored %s, stale %v", h.ResourceVersion, got.ResourceVersion, tracker.Stale(got))
	}
	if err := Metadata(ctx, env.Client, h, func() { h.Finalizers = nil }, &tracker); err != nil {
		t.Fatal(err)
	}
	if got := read(t, h); len(got.Finalizers) != 0 || got.ResourceVersion != h.ResourceVersion {
		t.Fatalf("after removing them: finalizers %v, resourceVersion %s (in memory %s)", got.Finalizers, got.ResourceVersion, h.ResourceVersion)
	}
}
