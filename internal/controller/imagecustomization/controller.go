package imagecustomization

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/source"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/imagebuilder"
	"github.com/metalforge/metalforge/internal/controller/patch"
	"github.com/metalforge/metalforge/internal/imagecustomization/imagebuild"
)

// Config tunes the controller. DefaultConfig has the production values; tests shorten them.
type Config struct {
	// GracePeriod: no image is built earlier than this after the PreprovisioningImage was
	// created (seed 001: 60 s).
	GracePeriod time.Duration
	// MinRetryDelay and MaxRetryDelay bound the growing retry of a missing Secret or an
	// override that cannot be fetched (metal3: 10 s and 10 min).
	MinRetryDelay, MaxRetryDelay time.Duration
	// Concurrency is how many images are reconciled at once.
	Concurrency int
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Reconciled, when set, is called at the end of every reconcile of an existing image with the
	// resourceVersion of the copy it started from (a test seam, as the host controller's).
	Reconciled func(key types.NamespacedName, resourceVersion string)
}

// DefaultConfig returns the production values.
func DefaultConfig() Config {
	return Config{GracePeriod: 60 * time.Second, MinRetryDelay: 10 * time.Second, MaxRetryDelay: 10 * time.Minute, Concurrency: 4}
}

// Reconciler reconciles PreprovisioningImages.
type Reconciler struct {
	Client    client.Client
	APIReader client.Reader
	Recorder  recorder.EventRecorder
	Builder   *imagebuild.Builder
	Config    Config

	written patch.Tracker
	// checksums wakes an image whose background checksum is done (Checksummed).
	checksums chan ctrlevent.TypedGenericEvent[*metal3.PreprovisioningImage]
	// skipNameValidation lets tests run several managers (restarts) in one process.
	skipNameValidation bool
}

// +kubebuilder:rbac:groups=metal3.io,resources=preprovisioningimages,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=metal3.io,resources=preprovisioningimages/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=metal3.io,resources=preprovisioningimages/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch;update

// SetupWithManager registers the controller: PreprovisioningImages, the labelled Secrets they
// name, background checksums as they finish, and the start-up sweep of orphaned images.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if r.Client == nil {
		r.Client = mgr.GetClient()
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorder("image-customization-controller")
	}
	r.checksums = make(chan ctrlevent.TypedGenericEvent[*metal3.PreprovisioningImage], 1024)
	secrets, err := imagebuilder.IndexNetworkData(ctx, mgr)
	if err != nil {
		return err
	}
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error { return r.sweepOrphans(ctx, mgr) })); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&metal3.PreprovisioningImage{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{},
			predicate.LabelChangedPredicate{}, imagebuilder.DeletionPredicate()))).
		Watches(&corev1.Secret{}, secrets).
		WatchesRawSource(source.Channel(r.checksums, &handler.TypedEnqueueRequestForObject[*metal3.PreprovisioningImage]{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(1, r.Config.Concurrency), SkipNameValidation: &r.skipNameValidation}).
		Complete(r)
}

// Checksummed wakes the image whose background checksum is stored (the builder's OnChecksum).
func (r *Reconciler) Checksummed(namespace, name string) {
	ppi := &metal3.PreprovisioningImage{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	select {
	case r.checksums <- ctrlevent.TypedGenericEvent[*metal3.PreprovisioningImage]{Object: ppi}:
	default:
		// The queue is full of wake-ups already; the next reconcile of this image writes it.
	}
}

// Reconcile is the driver: fetch, deletion, finalizer, inputs, decide, write.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (ctrl.Result, error) {
	ppi := &metal3.PreprovisioningImage{}
	if err := r.Client.Get(ctx, req.NamespacedName, ppi); apierrors.IsNotFound(err) {
		r.written.Forget(req.NamespacedName)
		// Gone without our finalizer's step (removed by hand): its image is not served any more.
		return ctrl.Result{}, r.Builder.DiscardNamed(req.Namespace, req.Name)
	} else if err != nil {
		return ctrl.Result{}, fmt.Errorf("reading preprovisioning image %s: %w", req.NamespacedName, err)
	}
	// An object deleted without our finalizer's step and created again under its name before this
	// reconcile: the old one was never seen gone, and its image must not stay served.
	if err := r.Builder.DiscardNamedExcept(req.Namespace, req.Name, string(ppi.UID)); err != nil {
		return ctrl.Result{}, fmt.Errorf("discarding the images of earlier objects named %s: %w", req.NamespacedName, err)
	}
	if r.written.Stale(ppi) {
		return ctrl.Result{RequeueAfter: 100 * time.Millisecond}, nil
	}
	if r.Config.Reconciled != nil {
		defer r.Config.Reconciled(req.NamespacedName, ppi.ResourceVersion)
	}
	if !ppi.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.delete(ctx, ppi)
	}
	if !controllerutil.ContainsFinalizer(ppi, metal3.PreprovisioningImageFinalizer) {
		// The finalizer goes on before an image exists, so deleting the object always discards it.
		if err := patch.Metadata(ctx, r.Client, ppi, func() {
			controllerutil.AddFinalizer(ppi, metal3.PreprovisioningImageFinalizer)
		}, &r.written); err != nil {
			return ctrl.Result{}, err
		}
	}
	p := patch.NewHelper(r.Client, ppi, &r.written)
	s := &scope{ctx: ctx, cfg: &r.Config, b: r.Builder, ppi: ppi, now: r.now()}
	if err := r.loadSecret(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	out := s.run()
	if err := r.write(ctx, s, p); err != nil {
		return ctrl.Result{}, errors.Join(out.err, err)
	}
	if out.err != nil {
		return ctrl.Result{}, out.err
	}
	return ctrl.Result{RequeueAfter: out.after}, nil
}

// write stores the new image before the status names it, then the checksum annotation, the
// status, the events, and discards the image of a failure.
func (r *Reconciler) write(ctx context.Context, s *scope, p *patch.Helper) error {
	ppi := s.ppi
	if s.commit != nil {
		if err := r.Builder.Commit(s.commit); err != nil {
			return fmt.Errorf("storing image %s/%s: %w", ppi.Namespace, ppi.Name, err)
		}
	}
	// The checksum of the image the status will name (the record holds it once computed).
	want := ""
	if s.served != nil {
		want = checksumAnnotation(r.Builder.Current(string(ppi.UID)))
	} else if ppi.Status.ImageURL != "" {
		if cur := r.Builder.Current(string(ppi.UID)); cur != nil && r.Builder.URL(cur) == ppi.Status.ImageURL {
			want = checksumAnnotation(cur)
		}
	}
	if ppi.Annotations[metal3.ImageSHA256Annotation] != want {
		if err := p.PatchMetadata(ctx, ppi, func() {
			if want == "" {
				delete(ppi.Annotations, metal3.ImageSHA256Annotation)
				return
			}
			if ppi.Annotations == nil {
				ppi.Annotations = map[string]string{}
			}
			ppi.Annotations[metal3.ImageSHA256Annotation] = want
		}); err != nil {
			return err
		}
	}
	if _, err := p.PatchStatus(ctx, ppi); err != nil {
		return err
	}
	s.events.Emit(r.Recorder, ppi)
	// After the status that stops naming the image (a failed write leaves both as they were, and
	// is retried), and after the events: a failed discard is retried by the next reconcile, which
	// finds the same failure and would not announce it again.
	if s.discard {
		if err := r.Builder.Discard(string(ppi.UID)); err != nil {
			return fmt.Errorf("discarding the image of %s/%s: %w", ppi.Namespace, ppi.Name, err)
		}
	}
	return nil
}

// loadSecret reads the network data Secret (labelling it for the cache when needed).
func (r *Reconciler) loadSecret(ctx context.Context, s *scope) error {
	secret, err := imagebuilder.NetworkDataSecret(ctx, r.Client, r.APIReader, s.ppi)
	if errors.Is(err, imagebuilder.ErrMissing) {
		s.missing = true
		return nil
	}
	s.secret = secret
	return err
}

// delete discards the image once no other finalizer holds the object (the host's keeps it in use
// while the host is deleted), then lets the object go.
func (r *Reconciler) delete(ctx context.Context, ppi *metal3.PreprovisioningImage) error {
	return imagebuilder.ReleaseFinalizer(ctx, r.Client, ppi, func() error { return r.Builder.Discard(string(ppi.UID)) }, &r.written)
}

func (r *Reconciler) now() time.Time {
	if r.Config.Now != nil {
		return r.Config.Now()
	}
	return time.Now()
}
