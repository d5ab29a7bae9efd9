package host

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/patch"
)

// patchStatus writes the status once, through the patch helper (a merge patch of what changed
// since the snapshot), and only when something changed; lastUpdated moves only together with
// another change.
func (r *Reconciler) patchStatus(ctx context.Context, host *metal3.BareMetalHost, p *patch.Helper, now metav1.Time) (bool, error) {
	before := p.Snapshot().(*metal3.BareMetalHost)
	// The first write must carry the fields the schema requires even when they are empty
	// (errorMessage, poweredOn...), which a merge patch from an empty status would leave out.
	// New hardware replaces the old whole (a merge patch would merge it into the stored one, and
	// the cached copy is compacted: see compactHost). Replacing is optimistic: a conflict retries
	// the reconcile on a fresh copy.
	replace := before.Status.LastUpdated == nil ||
		!equality.Semantic.DeepEqual(before.Status.HardwareDetails, host.Status.HardwareDetails)
	return p.PatchStatus(ctx, host,
		patch.IgnoringFields("lastUpdated"),
		patch.Stamping(func() { host.Status.LastUpdated = &now }),
		patch.Replacing(replace))
}

// now is the controller's clock, truncated to seconds as the API server stores times.
func (r *Reconciler) now() metav1.Time { return apiTime(r.clock()) }

// apiTime is t truncated to seconds, as the API server stores times.
func apiTime(t time.Time) metav1.Time { return metav1.NewTime(t.Truncate(time.Second)) }

// clock is the controller's clock.
func (r *Reconciler) clock() time.Time {
	if r.Config.Now != nil {
		return r.Config.Now()
	}
	return time.Now()
}

// patchMetadata writes annotation and finalizer changes (optimistic lock: finalizers are a list
// other controllers may also change).
func (r *Reconciler) patchMetadata(ctx context.Context, host *metal3.BareMetalHost, mutate func(*metal3.BareMetalHost)) error {
	return patch.Metadata(ctx, r.Client, host, func() { mutate(host) }, &r.written)
}
