package imagecustomization

import (
	"context"
	"errors"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

// sweepOrphans discards, once the cache is synced at start, the stored images whose
// PreprovisioningImage no longer exists: an object deleted while the controller was down after
// someone removed its finalizer is never reconciled again, so nothing else would stop serving
// its image. The store is read before the list, so an image committed meanwhile (its object is
// in the cache, as it was reconciled) is not in the snapshot and cannot be discarded by mistake.
func (r *Reconciler) sweepOrphans(ctx context.Context, mgr ctrl.Manager) error {
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return nil // stopping
	}
	stored := r.Builder.Stored()
	var ppis metal3.PreprovisioningImageList
	if err := r.Client.List(ctx, &ppis); err != nil {
		return fmt.Errorf("listing preprovisioning images for the orphan sweep: %w", err)
	}
	exists := make(map[string]bool, len(ppis.Items))
	for i := range ppis.Items {
		exists[string(ppis.Items[i].UID)] = true
	}
	var errs []error
	for _, uid := range stored {
		if !exists[uid] {
			errs = append(errs, r.Builder.Discard(uid))
		}
	}
	return errors.Join(errs...)
}
