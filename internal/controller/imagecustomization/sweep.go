package imagecustomization

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

// sweepOrphans discards, once the cache is synced at start, the stored images whose
// PreprovisioningImage no longer exists: an object deleted while the controller was down after
// someone removed its finalizer is never reconciled again, so nothing else would stop serving
// its image. The store is read before the cache, so an image committed meanwhile (its object is
// in the cache, as it was reconciled) is not in the snapshot. An image whose object is not in the
// cache is discarded only when the API server says the object is gone (NotFound, or another UID
// under its name): the cache may cover fewer namespaces than the images were built for.
//
// The sweep is best effort: it logs what it could not do and never stops the manager (the image
// server every host boots from runs in the same process); a reconcile of the name, or the next
// start, tries again.
func (r *Reconciler) sweepOrphans(ctx context.Context, mgr ctrl.Manager) error {
	log := ctrl.LoggerFrom(ctx).WithName("orphan-sweep")
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return nil // stopping
	}
	stored := r.Builder.Stored()
	var ppis metal3.PreprovisioningImageList
	if err := r.Client.List(ctx, &ppis); err != nil {
		log.Error(err, "Listing preprovisioning images; orphaned images are left until the next start")
		return nil
	}
	cached := make(map[string]bool, len(ppis.Items))
	for i := range ppis.Items {
		cached[string(ppis.Items[i].UID)] = true
	}
	for _, img := range stored {
		if cached[img.UID] {
			continue
		}
		key := types.NamespacedName{Namespace: img.Namespace, Name: img.Name}
		var ppi metal3.PreprovisioningImage
		err := r.APIReader.Get(ctx, key, &ppi)
		if err != nil && !apierrors.IsNotFound(err) {
			log.Error(err, "Checking whether an image's object still exists; its image is kept", "preprovisioningImage", key)
			continue
		}
		if err == nil && string(ppi.UID) == img.UID {
			continue // exists outside the cache
		}
		if err := r.Builder.Discard(img.UID); err != nil {
			log.Error(err, "Discarding the image of a deleted object", "preprovisioningImage", key)
			continue
		}
		log.Info("Discarded the image of an object deleted while the controller was down", "preprovisioningImage", key)
	}
	return nil
}
