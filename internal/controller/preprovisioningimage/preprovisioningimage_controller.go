package preprovisioningimage

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/conditions"
	"github.com/metalforge/metalforge/internal/controller/events"
	"github.com/metalforge/metalforge/internal/controller/imagebuilder"
	"github.com/metalforge/metalforge/internal/controller/patch"
)

// Config tunes the controller; DefaultConfig has metal3's values, tests shorten them.
type Config struct {
	// MissingNetworkDataRetry and MissingNetworkDataMaxRetry bound how soon an image whose
	// network data Secret is missing looks again: the time since the error plus the first, at
	// most the second.
	MissingNetworkDataRetry    time.Duration
	MissingNetworkDataMaxRetry time.Duration
	// Concurrency is how many images are reconciled at once.
	Concurrency int
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// DefaultConfig returns metal3's delays (10 s, growing to 10 min).
func DefaultConfig() Config {
	return Config{MissingNetworkDataRetry: 10 * time.Second, MissingNetworkDataMaxRetry: 10 * time.Minute, Concurrency: 4}
}

// Reconciler is the built-in PreprovisioningImage controller.
type Reconciler struct {
	Client    client.Client
	APIReader client.Reader
	Recorder  recorder.EventRecorder
	Images    Images
	Config    Config

	// SkipNameValidation lets tests run several managers (each with this controller) in one
	// process.
	SkipNameValidation bool

	written patch.Tracker
}

// Event reasons: the Error condition's reasons, on the transition to that error.
const actionBuild = "BuildImage"

// +kubebuilder:rbac:groups=metal3.io,resources=preprovisioningimages,verbs=get;list;watch
// +kubebuilder:rbac:groups=metal3.io,resources=preprovisioningimages/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch;update

// SetupWithManager registers the controller: images, and the network data Secrets they name.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if r.Client == nil {
		r.Client = mgr.GetClient()
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorder("metal3-preprovisioningimage-controller")
	}
	if r.Config.MissingNetworkDataRetry <= 0 || r.Config.MissingNetworkDataMaxRetry <= 0 {
		def := DefaultConfig()
		r.Config.MissingNetworkDataRetry, r.Config.MissingNetworkDataMaxRetry = def.MissingNetworkDataRetry, def.MissingNetworkDataMaxRetry
	}
	secrets, err := imagebuilder.IndexNetworkData(ctx, mgr)
	if err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("preprovisioningimage").
		// Spec changes and new images; not the status this controller writes. Deletion steps too:
		// an image the image-customization controller finalized is released here.
		For(&metal3.PreprovisioningImage{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{},
			imagebuilder.DeletionPredicate()))).
		// The version of the Secret is in the image's status: any change of it matters.
		Watches(&corev1.Secret{}, secrets).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(1, r.Config.Concurrency), SkipNameValidation: &r.SkipNameValidation}).
		Complete(r)
}

// Reconcile is the driver: fetch, read the network data Secret, decide, write the status once.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (ctrl.Result, error) {
	ppi := &metal3.PreprovisioningImage{}
	if err := r.Client.Get(ctx, req.NamespacedName, ppi); apierrors.IsNotFound(err) {
		r.written.Forget(req.NamespacedName)
		return ctrl.Result{}, nil
	} else if err != nil {
		return ctrl.Result{}, fmt.Errorf("reading PreprovisioningImage %s: %w", req.NamespacedName, err)
	}
	if !ppi.DeletionTimestamp.IsZero() {
		// Nothing to discard (the images are not this controller's), but an image the
		// image-customization controller built keeps its finalizer after that controller is gone
		// (the builder switched, or the cluster operator dropped it): released here, as metal3's
		// image controller releases it whatever its provider.
		return ctrl.Result{}, imagebuilder.ReleaseFinalizer(ctx, r.Client, ppi, nil, &r.written)
	}
	if r.written.Stale(ppi) {
		return ctrl.Result{RequeueAfter: staleRetry}, nil
	}
	net, err := r.networkData(ctx, ppi)
	if err != nil {
		return ctrl.Result{}, err
	}
	d := decide(ppi, r.Images, net, r.now(), retryDelays{r.Config.MissingNetworkDataRetry, r.Config.MissingNetworkDataMaxRetry})
	p := patch.NewHelper(r.Client, ppi, &r.written)
	before := conditions.Get(ppi.Status.Conditions, string(metal3.ConditionImageError))
	failedBefore := before != nil && before.Status == "True"
	ppi.Status = d.status
	if _, err := p.PatchStatus(ctx, ppi); err != nil {
		return ctrl.Result{}, err
	}
	// An Event when the image fails (or fails differently), after the status that records it.
	if c := conditions.Get(ppi.Status.Conditions, string(metal3.ConditionImageError)); c != nil && c.Status == "True" &&
		(!failedBefore || before.Reason != c.Reason || before.Message != c.Message) {
		var list events.List
		list.Warning(c.Reason, actionBuild, c.Message)
		list.Emit(r.Recorder, ppi)
	}
	return ctrl.Result{RequeueAfter: d.requeueAfter}, nil
}

// networkData reads the Secret the image names (the version only: the content is not used).
func (r *Reconciler) networkData(ctx context.Context, ppi *metal3.PreprovisioningImage) (networkData, error) {
	secret, err := imagebuilder.NetworkDataSecret(ctx, r.Client, r.APIReader, ppi)
	switch {
	case errors.Is(err, imagebuilder.ErrMissing):
		return networkData{missing: true}, nil
	case err != nil || secret == nil:
		return networkData{}, err
	}
	return networkData{version: secret.ResourceVersion}, nil
}

func (r *Reconciler) now() time.Time {
	if r.Config.Now != nil {
		return r.Config.Now()
	}
	return time.Now()
}

// staleRetry is how soon an image whose cached copy is older than our last write looks again.
const staleRetry = 200 * time.Millisecond
