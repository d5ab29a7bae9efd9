package companion

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/cacheview"
	"github.com/metalforge/metalforge/internal/controller/patch"
)

// Driver is the reconcile loop a companion controller shares with the others: read the host and
// the companion (same key), stop when the host is gone or not registered, look again shortly when
// the cache does not show the controller's own last write yet, then run the controller's work.
type Driver struct {
	Client client.Client
	// Written is the controller's patch.Tracker (its writes of the companion).
	Written *patch.Tracker
	// Reconciled is the controller's test seam (nil: none): called at the end of every reconcile
	// that did not find the cache stale, with the companion's resourceVersion after it ("" when
	// there is none).
	Reconciled func(key types.NamespacedName, resourceVersion string)
}

// Run reconciles the companion obj (an empty object of its kind) of the host key. work gets the
// host and whether obj exists (obj is filled in when it does).
func (d *Driver) Run(ctx context.Context, key types.NamespacedName, obj client.Object,
	work func(host *metal3.BareMetalHost, exists bool) (ctrl.Result, error)) (ctrl.Result, error) {
	stale := false
	if d.Reconciled != nil {
		defer func() {
			if !stale {
				d.Reconciled(key, obj.GetResourceVersion())
			}
		}()
	}
	host := &metal3.BareMetalHost{}
	// The host is only read (work must not change it): no copy of the cache's.
	if err := d.Client.Get(ctx, key, host, cacheview.ReadOnly); apierrors.IsNotFound(err) {
		d.Written.Forget(key)
		return ctrl.Result{}, nil
	} else if err != nil {
		return ctrl.Result{}, fmt.Errorf("reading host %s: %w", key, err)
	}
	if !Registered(host) {
		return ctrl.Result{}, nil // the host's next relevant change wakes the controller
	}
	exists := true
	if err := d.Client.Get(ctx, key, obj); apierrors.IsNotFound(err) {
		exists = false
	} else if err != nil {
		return ctrl.Result{}, fmt.Errorf("reading %T %s: %w", obj, key, err)
	}
	if exists && d.Written.Stale(obj) {
		stale = true
		return ctrl.Result{RequeueAfter: StaleRetry}, nil // the last write is on its way
	}
	return work(host, exists)
}

// WriteStatus writes the companion's status through p when it changed, moving lastUpdated (the
// field's address in obj) with the change only: a periodic read that finds nothing new writes
// nothing. The first write replaces the whole status (it must carry the required empty fields).
func WriteStatus(ctx context.Context, p *patch.Helper, obj client.Object, lastUpdated **metav1.Time, firstWrite bool, now time.Time) error {
	stamp := metav1.NewTime(now.Truncate(time.Second))
	_, err := p.PatchStatus(ctx, obj, patch.IgnoringFields("lastUpdated"),
		patch.Stamping(func() { *lastUpdated = &stamp }), patch.Replacing(firstWrite))
	return err
}
