package companion

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/metalforge/metalforge/internal/controller/events"
	"github.com/metalforge/metalforge/internal/controller/patch"
)

// Finish is the write of an object whose controller holds it with a finalizer until what it
// stands for outside the API server is gone (a DataImage's virtual CD, a BMC event subscription):
// the status when it changed, the Events that announce it, then, when release is set, the
// finalizer removed last, so that a failure on the way is retried. The object being gone already
// is no error.
func Finish(ctx context.Context, c client.Client, p *patch.Helper, obj client.Object, list events.List, rec recorder.EventRecorder,
	finalizer string, release bool, tracker *patch.Tracker) error {
	if _, err := p.PatchStatus(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	list.Emit(rec, obj)
	if !release || !controllerutil.ContainsFinalizer(obj, finalizer) {
		return nil
	}
	err := patch.Metadata(ctx, c, obj, func() { controllerutil.RemoveFinalizer(obj, finalizer) }, tracker)
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
