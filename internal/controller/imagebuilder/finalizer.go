package imagebuilder

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/patch"
)

// DeletionPredicate passes the updates a deleted image's finalizer step waits for: the deletion
// itself, and another finalizer (the host's) going.
func DeletionPredicate() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e ctrlevent.UpdateEvent) bool {
		return !e.ObjectNew.GetDeletionTimestamp().Equal(e.ObjectOld.GetDeletionTimestamp()) ||
			len(e.ObjectNew.GetFinalizers()) != len(e.ObjectOld.GetFinalizers())
	}}
}

// ReleaseFinalizer lets a deleted image go: once metal3's image finalizer is the only one left (the
// host's keeps the image in use while the host is deleted), discard (nil: nothing to discard)
// drops what the image served, then the finalizer is removed. Whichever builder runs removes it,
// as metal3's image controller does whatever its provider: an image the image-customization
// controller finalized stays deletable after the operator's built-in builder takes over.
func ReleaseFinalizer(ctx context.Context, c client.Client, ppi *metal3.PreprovisioningImage, discard func() error, written *patch.Tracker) error {
	if !controllerutil.ContainsFinalizer(ppi, metal3.PreprovisioningImageFinalizer) || len(ppi.Finalizers) > 1 {
		return nil
	}
	if discard != nil {
		if err := discard(); err != nil {
			return err
		}
	}
	err := patch.Metadata(ctx, c, ppi, func() {
		controllerutil.RemoveFinalizer(ppi, metal3.PreprovisioningImageFinalizer)
	}, written)
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
