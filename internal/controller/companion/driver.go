package companion

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/cacheview"
	"github.com/metalforge/metalforge/internal/controller/conditions"
	"github.com/metalforge/metalforge/internal/controller/patch"
)

// Driver is the reconcile loop a companion controller shares with the others: read the host and
// the companion (same key), stop when the host is gone or not registered (after marking or
// unmarking a user's companion: NoHost, HostFound), look again shortly when the cache does not
// show the controller's own last write yet, put off the first read after the operator started of
// a companion that asks for nothing, then run the controller's work.
type Driver struct {
	Client client.Client
	// Written is the controller's patch.Tracker (its writes of the companion).
	Written *patch.Tracker
	// Reconciled is the controller's test seam (nil: none): called at the end of every reconcile
	// that did not find the cache stale, with the companion's resourceVersion after it ("" when
	// there is none).
	Reconciled func(key types.NamespacedName, resourceVersion string)
	// Settled reports whether a companion's status was judged for its current spec and asks for
	// no change (nil: never); Resync is the controller's periodic re-read. See Run.
	Settled func(obj client.Object) bool
	Resync  time.Duration
	// NoHost marks a companion a user created whose name matches no host (nil: nothing is done);
	// see NoHost.
	NoHost func(ctx context.Context, obj client.Object) error
	// HostFound takes that mark back once the host exists but is not registered yet (nil:
	// nothing is done); see Unmark.
	HostFound func(ctx context.Context, obj client.Object) error

	// seen holds the hosts this process has reconciled.
	seen sync.Map
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
	_, seen := d.seen.LoadOrStore(key, struct{}{})
	host := &metal3.BareMetalHost{}
	// The host is only read (work must not change it): no copy of the cache's.
	if err := d.Client.Get(ctx, key, host, cacheview.ReadOnly); apierrors.IsNotFound(err) {
		d.seen.Delete(key)
		return d.noHost(ctx, key, obj, &stale)
	} else if err != nil {
		return ctrl.Result{}, fmt.Errorf("reading host %s: %w", key, err)
	}
	if !Registered(host) {
		return d.unregistered(ctx, key, obj, &stale)
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
	if !seen && exists && d.Settled != nil && d.Settled(obj) && !Applying(host) {
		// The operator just started (every host is reconciled once then) and this companion was
		// read and judged by the process before, with nothing pending: only the host's preparing
		// or servicing changes what the provisioner shows, and leaving those wakes the companion
		// anyway. Its re-read is spread over the resync period instead of every host's firmware
		// being read from the provisioner at once, which made 40 % of the requests a busy Ironic
		// answered after each restart in the fault campaign (docs/dev/firmware.md).
		return ctrl.Result{RequeueAfter: Spread(d.Resync)}, nil
	}
	return work(host, exists)
}

// noHost handles a key with no host: a companion the controllers created goes with its host (the
// garbage collector deletes it); one a user created is marked by d.NoHost, so that a name that
// matches no host does not go unnoticed.
func (d *Driver) noHost(ctx context.Context, key types.NamespacedName, obj client.Object, stale *bool) (ctrl.Result, error) {
	if err := d.Client.Get(ctx, key, obj); apierrors.IsNotFound(err) {
		d.Written.Forget(key)
		return ctrl.Result{}, nil
	} else if err != nil {
		return ctrl.Result{}, fmt.Errorf("reading %T %s: %w", obj, key, err)
	}
	if d.NoHost == nil || OwnedByHost(obj) || !obj.GetDeletionTimestamp().IsZero() {
		d.Written.Forget(key)
		return ctrl.Result{}, nil
	}
	if d.Written.Stale(obj) {
		*stale = true
		return ctrl.Result{RequeueAfter: StaleRetry}, nil
	}
	// The host's creation wakes the controller (HostChanges): no periodic look is needed.
	return ctrl.Result{}, d.NoHost(ctx, obj)
}

// unregistered handles a host that exists but that the provisioner cannot answer about yet
// (registering, paused, detached, being deleted): a companion a user created before its host loses
// the mark of d.NoHost, which would otherwise go on saying the host does not exist until it
// registers, and for good when registration fails (bad BMC credentials). The host's next relevant
// change wakes the controller.
func (d *Driver) unregistered(ctx context.Context, key types.NamespacedName, obj client.Object, stale *bool) (ctrl.Result, error) {
	if d.HostFound == nil {
		return ctrl.Result{}, nil
	}
	if err := d.Client.Get(ctx, key, obj); apierrors.IsNotFound(err) {
		return ctrl.Result{}, nil
	} else if err != nil {
		return ctrl.Result{}, fmt.Errorf("reading %T %s: %w", obj, key, err)
	}
	if OwnedByHost(obj) || !obj.GetDeletionTimestamp().IsZero() {
		return ctrl.Result{}, nil // never marked
	}
	if d.Written.Stale(obj) {
		*stale = true
		return ctrl.Result{RequeueAfter: StaleRetry}, nil
	}
	return ctrl.Result{}, d.HostFound(ctx, obj)
}

// Spread returns a random delay up to d (at least a millisecond: a zero RequeueAfter would not
// requeue): when the first re-read after a start happens.
func Spread(d time.Duration) time.Duration {
	return time.Millisecond + time.Duration(rand.Int64N(max(int64(d), 1))) //nolint:gosec // spreading load, not security
}

// Settled is what Driver.Settled asks of a companion, given its status: its values were read
// (lastUpdated) and the change condition was computed for its current generation and is False.
func Settled(lastUpdated *metav1.Time, conds []metav1.Condition, changeDetected string, generation int64) bool {
	c := conditions.Get(conds, changeDetected)
	return lastUpdated != nil && c != nil && c.ObservedGeneration == generation && c.Status == metav1.ConditionFalse
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
