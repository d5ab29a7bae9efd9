package provisioning

import (
	"context"
	"fmt"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/patch"
	"github.com/metalforge/metalforge/internal/controller/provisioning/clusteroperator"
	"github.com/metalforge/metalforge/internal/controller/provisioning/platform"
	"github.com/metalforge/metalforge/internal/controller/provisioning/render"
	"github.com/metalforge/metalforge/internal/controller/provisioning/secrets"
)

// Config tunes the controller.
type Config struct {
	// Namespace is where the stack runs (openshift-machine-api).
	Namespace string
	// ImagesPath is the images file (images.json), read at every reconcile.
	ImagesPath string
	// ReleaseVersion is the operator's release (RELEASE_VERSION), written to the
	// ClusterOperator's versions once the stack runs at it.
	ReleaseVersion string
	// Resync is how often a complete stack is looked at again (certificate renewal, drift).
	Resync time.Duration
	// RetryInvalid is how often an invalid configuration is looked at again: a spec change wakes
	// the operator at once, but a repaired Secret it does not cache (unlabelled) does not.
	RetryInvalid time.Duration
	// ImagesPoll is how often the images file is checked for a change (10 s when 0).
	ImagesPoll time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// DefaultResync: certificates are renewed a month before they expire, so an hourly look is plenty.
const DefaultResync = time.Hour

// Reconciler reconciles the Provisioning singleton and the baremetal ClusterOperator.
type Reconciler struct {
	Client    client.Client
	APIReader client.Reader
	Recorder  recorder.EventRecorder
	Config    Config
	// WebhookCerts, when set, is given the operator's own webhook certificate whenever it is
	// created or renewed (the webhook server serves from it).
	WebhookCerts *CertStore

	tracker patch.Tracker
	// failures is since when the stack's writes fail (syncerror.go).
	failures syncFailures
	// skipNameValidation lets tests run several managers in one process.
	skipNameValidation bool
}

// singleton is the one request every watch maps to: there is one stack per cluster.
var singleton = reconcile.Request{NamespacedName: types.NamespacedName{Name: metal3.ProvisioningSingletonName}}

// SetupWithManager registers the controller. Every watch wakes the singleton.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil {
		r.Client = mgr.GetClient()
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorder("cluster-baremetal-operator")
	}
	if r.Config.Resync == 0 {
		r.Config.Resync = DefaultResync
	}
	if r.Config.RetryInvalid == 0 {
		r.Config.RetryInvalid = time.Minute
	}
	toSingleton := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{singleton}
	})
	named := func(name string) predicate.Predicate {
		return predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetName() == name })
	}
	inNamespace := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetNamespace() == r.Config.Namespace })
	// The cluster's pull secret: a new or rotated one is copied for the
	// image-customization-controller at once, not at the next resync.
	clusterPullSecret := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetNamespace() == secrets.ClusterPullSecretNamespace && o.GetName() == secrets.ClusterPullSecretName
	})
	images := newImagesWatcher(r.Config.ImagesPath, r.Config.ImagesPoll)
	if err := mgr.Add(images); err != nil {
		return fmt.Errorf("adding the images file watcher: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("provisioning").
		For(&metal3.Provisioning{}, builder.WithPredicates(named(metal3.ProvisioningSingletonName))).
		Watches(&appsv1.Deployment{}, toSingleton, builder.WithPredicates(inNamespace)).
		Watches(&corev1.Service{}, toSingleton, builder.WithPredicates(inNamespace)).
		Watches(&corev1.Secret{}, toSingleton, builder.WithPredicates(predicate.Or(inNamespace, clusterPullSecret))).
		// A container that restarts changes only its pod (crashLoop).
		Watches(&corev1.Pod{}, toSingleton, builder.WithPredicates(inNamespace)).
		Watches(&discoveryv1.EndpointSlice{}, toSingleton, builder.WithPredicates(inNamespace, predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetLabels()[discoveryv1.LabelServiceName] == render.StateService
		}))).
		Watches(&admissionv1.ValidatingWebhookConfiguration{}, toSingleton, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetName() == render.BMOWebhookConfig || o.GetName() == render.CBOWebhookConfig
		}))).
		Watches(&configv1.ClusterOperator{}, toSingleton, builder.WithPredicates(named(clusteroperator.Name))).
		Watches(&configv1.Infrastructure{}, toSingleton, builder.WithPredicates(named(platform.InfrastructureName))).
		Watches(&configv1.Proxy{}, toSingleton, builder.WithPredicates(named(proxyName))).
		Watches(&metal3.BareMetalHost{}, toSingleton, builder.WithPredicates(busyChanged())).
		WatchesRawSource(images.source()).
		WithOptions(controller.Options{MaxConcurrentReconciles: 1, SkipNameValidation: &r.skipNameValidation}).
		Complete(r)
}

// Reconcile is the driver: observe, decide, write.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (ctrl.Result, error) {
	if req.Name != metal3.ProvisioningSingletonName || req.Namespace != "" {
		// Another Provisioning: the webhook refuses to create one; one made without the webhook
		// is ignored, as OpenShift's operator does.
		return ctrl.Result{}, nil
	}
	metricReconciles.Inc()
	res, err := r.reconcile(ctx)
	if err != nil {
		metricReconcileErrors.Inc()
	}
	return res, err
}

func (r *Reconciler) reconcile(ctx context.Context) (ctrl.Result, error) {
	now := time.Now
	if r.Config.Now != nil {
		now = r.Config.Now
	}
	o, err := r.observe(ctx, now())
	if err != nil {
		return ctrl.Result{}, err
	}
	if o.prov != nil && r.tracker.Stale(o.prov) {
		// Our last write has not reached the cache yet; its event wakes us again.
		return ctrl.Result{RequeueAfter: staleRetry}, nil
	}
	p, err := decide(o)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.write(ctx, o, p); err != nil {
		return ctrl.Result{}, r.writeFailed(ctx, o, p, err)
	}
	r.failures.succeeded()
	ctrl.LoggerFrom(ctx).V(1).Info("Reconciled", "state", p.state.Reason, "writes", len(p.writes)+len(p.secretWrites),
		"deletes", len(p.deletes), "again", p.requeueAfter)
	return ctrl.Result{RequeueAfter: p.requeueAfter}, nil
}

// staleRetry is how soon a reconcile that found the cache behind our own write looks again.
const staleRetry = 200 * time.Millisecond

// describe names an object for messages.
func describe(obj client.Object) string {
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	if kind == "" {
		kind = fmt.Sprintf("%T", obj)
	}
	if obj.GetNamespace() == "" {
		return kind + " " + obj.GetName()
	}
	return kind + " " + obj.GetNamespace() + "/" + obj.GetName()
}
