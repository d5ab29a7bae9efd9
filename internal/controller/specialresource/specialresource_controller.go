package specialresource

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/controller/patch"
	"github.com/metalforge/metalforge/internal/sro/build"
	"github.com/metalforge/metalforge/internal/sro/image"
	"github.com/metalforge/metalforge/internal/sro/message"
)

// Config tunes the controller. DefaultConfig has the production values; tests shorten them.
type Config struct {
	// Concurrency is how many SpecialResources are reconciled at once.
	Concurrency int
	// WaitPoll is how often a SpecialResource waiting for something no watch reports (pod
	// logs, objects of kinds the controller does not watch) looks again.
	WaitPoll time.Duration
	// RetryDelay is how often a SpecialResource whose registry could not be asked, whose input
	// (pull Secret, recipe ConfigMap) is missing, or whose pull Secret is malformed or refused by
	// the registry, looks again.
	RetryDelay time.Duration
	// Resync is how often a Ready or Errored SpecialResource looks again anyway (a change of
	// its recipe ConfigMap wakes it at once: recipewatch.go).
	Resync time.Duration
	// LogTailLines is how much of a driver pod's log is matched by wait-for-logs.
	LogTailLines int64
	// NodeLabelWorkers is how many node label patches run at once.
	NodeLabelWorkers int
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// DefaultConfig returns the production values.
func DefaultConfig() Config {
	return Config{Concurrency: 10, WaitPoll: 5 * time.Second, RetryDelay: 30 * time.Second, Resync: 10 * time.Minute,
		LogTailLines: 20, NodeLabelWorkers: 8}
}

// Reconciler reconciles SpecialResources.
type Reconciler struct {
	Client    client.Client
	APIReader client.Reader
	Recorder  recorder.EventRecorder
	// Registry looks driver images up (image.Remote when nil).
	Registry image.Registry
	// Builder builds missing images (chosen from the cluster's APIs when nil).
	Builder build.Builder
	// BuildImage is the kaniko image of Job builds (build.DefaultJobImage when empty).
	BuildImage string
	// Logs reads the last lines of a pod container's log (the API server's pods/log when nil;
	// a test seam: envtest runs no kubelet).
	Logs func(ctx context.Context, namespace, pod, container string, tailLines int64) (string, error)
	// ClusterVersion reports the cluster's version for templates (ClusterVersion "version" on
	// OpenShift, the Kubernetes version elsewhere, when nil).
	ClusterVersion func(ctx context.Context) (string, error)
	Config         Config

	tracker patch.Tracker
	applied appliedTracker
	logs    logCache
	// nodeWrites remembers our node label writes (see nodeWrites).
	nodeWrites nodeWrites
	// skipNameValidation lets tests run several managers in one process.
	skipNameValidation bool
}

// Reconcile is the driver: fetch, finalizer, phases, then the writes.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (ctrl.Result, error) {
	sr := &sro.SpecialResource{}
	if err := r.Client.Get(ctx, req.NamespacedName, sr); apierrors.IsNotFound(err) {
		r.tracker.Forget(req.NamespacedName)
		forgetMetrics(req.Name)
		return ctrl.Result{}, nil
	} else if err != nil {
		return ctrl.Result{}, fmt.Errorf("reading SpecialResource %s: %w", req.Name, err)
	}
	log := ctrl.LoggerFrom(ctx)
	if r.tracker.Stale(sr) {
		// Status-only events of our own writes are filtered out: look again shortly.
		log.V(4).Info("Cache is behind our last write; looking again shortly")
		return ctrl.Result{RequeueAfter: staleRetry}, nil
	}
	if !sr.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, sr)
	}
	if !controllerutil.ContainsFinalizer(sr, sro.Finalizer) {
		// Before anything is created, so that deleting the SpecialResource always cleans up.
		if err := patch.Metadata(ctx, r.Client, sr, func() { controllerutil.AddFinalizer(sr, sro.Finalizer) }, &r.tracker); err != nil {
			return ctrl.Result{}, err
		}
	}
	helper := patch.NewHelper(r.Client, sr, &r.tracker)
	s := &scope{ctx: ctx, cfg: &r.Config, sr: sr, now: metav1.NewTime(r.now().Truncate(time.Second))}
	start := time.Now()
	out, err := r.runAndWrite(ctx, s)
	if err != nil {
		// Status says only that something failed; the error (logged by controller-runtime)
		// has the details.
		out = errored(sro.ReasonInternalError, internalErrorMessage, 0)
		var applyErr *applyError
		if errors.As(err, &applyErr) && applyErr.permanent {
			out = errored(sro.ReasonRecipeFailure, message.Sanitize(applyErr.Error()), r.Config.RetryDelay)
			err = nil
		}
		out = pollHeldLabels(out, s.plan, &r.Config)
		r.finishStatus(s, out)
		if _, perr := helper.PatchStatus(ctx, sr); perr != nil {
			err = errors.Join(err, perr)
		}
		r.afterWrite(s, out)
		if err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{RequeueAfter: out.after}, nil
	}
	out = pollHeldLabels(out, s.plan, &r.Config)
	r.finishStatus(s, out)
	if _, err := helper.PatchStatus(ctx, sr); err != nil {
		return ctrl.Result{}, err
	}
	r.afterWrite(s, out)
	log.V(2).Info("Reconciled", "condition", out.condition, "reason", out.reason, "state", out.state,
		"kernels", len(s.in.kernels), "took", time.Since(start).Round(time.Millisecond), "again", out.after)
	return ctrl.Result{RequeueAfter: out.after}, nil
}

// runAndWrite runs the phases and writes what they decided. A reconcile that ended before its
// plan (a phase stopped it: an invalid spec, a missing or broken recipe, a namespace being
// deleted; or failed) undoes what no longer holds all the same (hold): nodes whose driver stopped
// must not keep its state labels, nor a kernel no node runs its DaemonSet, for as long. After a
// failure only that is written: nothing is created, started or applied.
func (r *Reconciler) runAndWrite(ctx context.Context, s *scope) (outcome, error) {
	out, err := r.run(s)
	if s.plan == nil {
		err = errors.Join(err, r.hold(s))
	}
	if err == nil {
		return out, r.write(ctx, s)
	}
	if s.plan != nil {
		err = errors.Join(err, r.pruneAndLabel(ctx, s))
	}
	return out, err
}

// pollHeldLabels makes a reconcile that held (hold) look again every WaitPoll while a driver
// DaemonSet counts another number of available pods than the cache shows: pods do not wake the
// controller, and the labels of the nodes whose pod stopped would stay until something else did
// (the plan's outcome does the same: decide).
func pollHeldLabels(out outcome, p *planResult, cfg *Config) outcome {
	if p != nil && p.hold && p.labelsBehind && (out.after == 0 || out.after > cfg.WaitPoll) {
		out.after = cfg.WaitPoll
	}
	return out
}

// finishStatus sets the status from the scope and the outcome (pure, status.go).
func (r *Reconciler) finishStatus(s *scope, out outcome) {
	transition := setStatus(s.sr, s, out, s.now)
	if transition != "" {
		if out.condition == sro.ConditionErrored {
			s.fx.events.Warning(out.reason, "Reconcile", out.message)
		} else {
			s.fx.events.Normal(transition, "Reconcile", out.message)
		}
	}
}

// afterWrite emits the events and records the metrics once the status is written.
func (r *Reconciler) afterWrite(s *scope, out outcome) {
	s.fx.events.Emit(r.Recorder, s.sr)
	recordMetrics(s, out)
}

func (r *Reconciler) now() time.Time {
	if r.Config.Now != nil {
		return r.Config.Now()
	}
	return time.Now()
}

// staleRetry is how soon a SpecialResource whose cached copy is older than our last write
// looks again.
const staleRetry = 200 * time.Millisecond

// internalErrorMessage is the status message of an unexpected failure (details in the logs).
const internalErrorMessage = "internal error, see the operator logs"
