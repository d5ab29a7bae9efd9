package preflightvalidation

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	buildv1 "github.com/openshift/api/build/v1"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/controller/cacheview"
	"github.com/metalforge/metalforge/internal/controller/conditions"
	"github.com/metalforge/metalforge/internal/controller/events"
	"github.com/metalforge/metalforge/internal/controller/patch"
	"github.com/metalforge/metalforge/internal/sro/build"
	"github.com/metalforge/metalforge/internal/sro/image"
	"github.com/metalforge/metalforge/internal/sro/message"
)

// Reconciler reconciles PreflightValidations.
type Reconciler struct {
	Client    client.Client
	APIReader client.Reader
	Recorder  recorder.EventRecorder
	Registry  image.Registry
	Builder   build.Builder
	// ClusterVersion is given to templates when spec.clusterVersion is empty (the current version;
	// a SpecialResource whose rendering depends on it is then not verified).
	ClusterVersion func(ctx context.Context) (string, error)
	// RetryDelay is how often a PreflightValidation that is not verified looks again (builds
	// and SpecialResources wake it sooner).
	RetryDelay time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time

	tracker  patch.Tracker
	refusals refusals
	// SkipNameValidation lets tests run several managers in one process.
	SkipNameValidation bool
}

// DefaultRetryDelay is RetryDelay's default.
const DefaultRetryDelay = 30 * time.Second

// staleRetry is how soon a reconcile that found the cache behind our last status write looks
// again.
const staleRetry = 100 * time.Millisecond

// SetupWithManager watches PreflightValidations, SpecialResources and builds.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil {
		r.Client = mgr.GetClient()
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorder("special-resource-operator")
	}
	if r.RetryDelay == 0 {
		r.RetryDelay = DefaultRetryDelay
	}
	if r.Registry == nil {
		r.Registry = image.Remote{}
	}
	if r.Builder == nil || r.ClusterVersion == nil {
		return errors.New("preflightvalidation: Builder and ClusterVersion are required")
	}
	all := handler.EnqueueRequestsFromMapFunc(r.all)
	b := ctrl.NewControllerManagedBy(mgr).
		Named("preflightvalidation").
		For(&sro.PreflightValidation{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&sro.SpecialResource{}, all, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&batchv1.Job{}, all, builder.WithPredicates(isBuild()))
	if r.Builder.Kind() == "Build" {
		b = b.Watches(&buildv1.Build{}, all, builder.WithPredicates(isBuild()))
	}
	return b.WithOptions(controller.Options{SkipNameValidation: &r.SkipNameValidation}).Complete(r)
}

func isBuild() predicate.Funcs {
	return predicate.NewPredicateFuncs(func(o client.Object) bool {
		_, ok := o.GetLabels()[build.BuildLabel]
		return ok
	})
}

// all wakes every PreflightValidation (there are few: one per planned upgrade).
func (r *Reconciler) all(ctx context.Context, _ client.Object) []reconcile.Request {
	var list sro.PreflightValidationList
	if err := r.Client.List(ctx, &list); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing PreflightValidations")
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, pv := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKey{Name: pv.Name}})
	}
	return reqs
}

// check is one SpecialResource's result and what to write for it.
type check struct {
	name    string
	sr      *sro.SpecialResource
	status  sro.VerificationStatus
	reason  string
	image   string
	start   *build.Request
	cleanup [2]string // namespace, build name
	// final: an Error that only a change of a SpecialResource or the PreflightValidation can
	// mend (an invalid spec, a cycle, a template or kernel-mapping error, a build the builder
	// refused but for its pull Secret's format, failed dependencies that are all final), so not
	// retried by time.
	final bool
	// refused is the build the builder refused (nil: none).
	refused *refusal
}

// Reconcile verifies every SpecialResource for the kernel, writes builds, then the status once.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (ctrl.Result, error) {
	pv := &sro.PreflightValidation{}
	if err := r.Client.Get(ctx, req.NamespacedName, pv); apierrors.IsNotFound(err) {
		r.tracker.Forget(req.NamespacedName)
		r.refusals.forget(req.Name)
		return ctrl.Result{}, nil
	} else if err != nil {
		return ctrl.Result{}, fmt.Errorf("reading PreflightValidation %s: %w", req.Name, err)
	}
	if !pv.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	if r.tracker.Stale(pv) {
		// Status-only events of our own writes are filtered out, and this request may have
		// absorbed the delayed retry: look again shortly.
		return ctrl.Result{RequeueAfter: staleRetry}, nil
	}
	var srs sro.SpecialResourceList
	if err := r.Client.List(ctx, &srs); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing SpecialResources: %w", err)
	}
	version := pv.Spec.ClusterVersion
	if version == "" {
		var err error
		if version, err = r.ClusterVersion(ctx); err != nil {
			return ctrl.Result{}, err
		}
	}
	var nodes corev1.NodeList
	if err := r.Client.List(ctx, &nodes, cacheview.ReadOnly); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing nodes: %w", err)
	}
	v := newVerifier(ctx, r, pv, srs.Items, nodes.Items, version)
	var checks []*check
	for i := range srs.Items {
		sr := &srs.Items[i]
		if !sr.DeletionTimestamp.IsZero() {
			continue
		}
		c, err := v.check(sr)
		if err != nil {
			return ctrl.Result{}, err
		}
		checks = append(checks, c)
	}
	var evs events.List
	// The status is written whatever a build deletion's failure: it is returned after.
	cleanupErr := r.writeBuilds(ctx, pv, checks, &evs)
	helper := patch.NewHelper(r.Client, pv, &r.tracker)
	if verified := setStatus(pv, checks, r.now()); verified != nil {
		if *verified {
			evs.Normal(sro.ReasonVerified, "Preflight", "Every SpecialResource has a driver image for kernel "+pv.Spec.KernelVersion)
		} else {
			evs.Warning(sro.ReasonVerifying, "Preflight", conditions.Get(pv.Status.Conditions, sro.ConditionReady).Message)
		}
	}
	if _, err := helper.PatchStatus(ctx, pv); err != nil {
		return ctrl.Result{}, err
	}
	evs.Emit(r.Recorder, pv)
	if cleanupErr != nil {
		return ctrl.Result{}, cleanupErr
	}
	if !retry(checks) {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{RequeueAfter: r.RetryDelay}, nil
}

// setStatus records the checks (lastTransitionTime moves only when a SpecialResource's result
// changes) and the Ready condition. It returns the new Ready value when it changed, else nil.
func setStatus(pv *sro.PreflightValidation, checks []*check, now time.Time) *bool {
	at := metav1.NewTime(now.Truncate(time.Second))
	prev := map[string]sro.SpecialResourceVerification{}
	for _, s := range pv.Status.SRStatuses {
		prev[s.Name] = s
	}
	out := make([]sro.SpecialResourceVerification, 0, len(checks))
	var notYet []string
	for _, c := range checks {
		v := sro.SpecialResourceVerification{Name: c.name, VerificationStatus: c.status, StatusReason: message.Sanitize(c.reason), Image: c.image, LastTransitionTime: at}
		if p, ok := prev[c.name]; ok && p.VerificationStatus == c.status {
			v.LastTransitionTime = p.LastTransitionTime
		}
		if c.status != sro.VerificationTrue {
			notYet = append(notYet, fmt.Sprintf("%s (%s)", c.name, c.status))
		}
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b sro.SpecialResourceVerification) int { return strings.Compare(a.Name, b.Name) })
	pv.Status.SRStatuses = out
	pv.Status.ObservedGeneration = pv.Generation
	was := conditions.IsTrue(pv.Status.Conditions, sro.ConditionReady)
	cond := conditions.True(sro.ConditionReady, sro.ReasonVerified, fmt.Sprintf("%d SpecialResources have a driver image for kernel %s", len(out), pv.Spec.KernelVersion))
	if len(notYet) > 0 {
		cond = conditions.False(sro.ConditionReady, sro.ReasonVerifying, message.Sanitize("no driver image yet for kernel "+pv.Spec.KernelVersion+": "+strings.Join(notYet, ", ")))
	}
	first := conditions.Get(pv.Status.Conditions, sro.ConditionReady) == nil
	conditions.Set(&pv.Status.Conditions, cond, pv.Generation, now)
	now2 := len(notYet) == 0
	if first || was != now2 {
		return &now2
	}
	return nil
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}
