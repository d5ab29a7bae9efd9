package host

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
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

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/cacheview"
	"github.com/metalforge/metalforge/internal/controller/companion"
	"github.com/metalforge/metalforge/internal/controller/events"
	"github.com/metalforge/metalforge/internal/controller/patch"
	"github.com/metalforge/metalforge/internal/controller/predicates"
	"github.com/metalforge/metalforge/internal/provisioner"
)

// Config tunes the controller. DefaultConfig has metal3's production values; tests shorten them.
type Config struct {
	// MaxProvisioningRetries caps provision → deprovision loops for one image (0 = no cap).
	MaxProvisioningRetries int
	// ServicingRetries is how often a failed live update is started again by itself, each after
	// the error backoff; a failure of the BMC (provisioner.Result.Transient) is retried past it
	// (0: never; it then waits for its changes to change).
	ServicingRetries int
	// Backoff is the retry delay after the n-th consecutive error.
	Backoff func(errorCount int) time.Duration
	// InputRetryDelay: how often a host with bad input (missing Secret...) looks again.
	InputRetryDelay time.Duration
	// UnavailableDelay: how often a host looks again while the provisioner is unavailable.
	UnavailableDelay time.Duration
	// PreprovImageDelay: how often a host waiting for its preprovisioning image looks again.
	PreprovImageDelay time.Duration
	// DelayedRequeue: how often a host held back by provisioner capacity looks again.
	DelayedRequeue time.Duration
	// PowerPoll: how often a host in a steady state checks its power.
	PowerPoll time.Duration
	// UnmanagedPoll: how often an unmanaged or detached host looks again.
	UnmanagedPoll time.Duration
	// Concurrency is how many hosts are reconciled at once.
	Concurrency int
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// PreprovisioningImages (--build-preprov-image): hosts get a PreprovisioningImage each, and
	// wait for it to be ready before a step that boots the agent (agentimage.go).
	PreprovisioningImages bool
	// Reconciled, when set, is called at the end of every reconcile of an existing host with the
	// resourceVersion of the copy it started from. A test seam: a test waits until the controller
	// has looked at a change, then asserts what it did (or did not do), instead of sleeping.
	Reconciled func(key types.NamespacedName, resourceVersion string)
	// SecretReconciled is Reconciled for the Secrets the hosts use (secretReleaser): called at
	// the end of every look at a cached Secret, with its resourceVersion.
	SecretReconciled func(key types.NamespacedName, resourceVersion string)
}

// DefaultConfig returns metal3's delays.
func DefaultConfig() Config {
	return Config{
		MaxProvisioningRetries: 5,
		ServicingRetries:       3,
		Backoff:                ExponentialBackoff(time.Minute),
		InputRetryDelay:        10 * time.Second,
		UnavailableDelay:       30 * time.Second,
		PreprovImageDelay:      5 * time.Minute,
		DelayedRequeue:         90 * time.Second,
		PowerPoll:              time.Minute,
		UnmanagedPoll:          10 * time.Minute,
		Concurrency:            20,
	}
}

// Reconciler reconciles BareMetalHosts.
type Reconciler struct {
	Client      client.Client
	APIReader   client.Reader
	Recorder    recorder.EventRecorder
	Provisioner provisioner.Provisioner
	Config      Config

	secrets secrets
	// written remembers our last write of each host (patch.Tracker: stale cached copies, hosts
	// whose provisioner record is gone).
	written patch.Tracker
	regs    registrations
	retries retryTimes
	// finished remembers the live updates the provisioner finished (servicing_memory.go).
	finished finishedServicings
	// preparations remembers the request of each running preparation (preparing_memory.go).
	preparations runningPreparations
	// schemas remembers the settings schema of each FirmwareSchema read (settingTypes).
	schemas schemaMemory
	// dataImages remembers our last write of each host's DataImage status.
	dataImages patch.Tracker
	// images remembers our last write of each host's PreprovisioningImage (imageMemory).
	images imageMemory
	// refusals remembers deleting hosts whose image could not be created (imageRefusals).
	refusals imageRefusals
	// skipNameValidation lets tests run several managers (operator restarts) in one process.
	skipNameValidation bool
}

// secretNamesField indexes hosts by the Secrets they use.
const secretNamesField = ".metalforge.secretNames"

// +kubebuilder:rbac:groups=metal3.io,resources=baremetalhosts,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=metal3.io,resources=baremetalhosts/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=metal3.io,resources=baremetalhosts/finalizers,verbs=update
// +kubebuilder:rbac:groups=metal3.io,resources=hardwaredata,verbs=get;create;update;patch;delete
// +kubebuilder:rbac:groups=metal3.io,resources=preprovisioningimages,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=metal3.io,resources=hostfirmwaresettings;hostfirmwarecomponents;firmwareschemas,verbs=get;list;watch
// +kubebuilder:rbac:groups=metal3.io,resources=hostfirmwarecomponents/status,verbs=get;patch
// +kubebuilder:rbac:groups=metal3.io,resources=hostupdatepolicies,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=metal3.io,resources=dataimages,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=metal3.io,resources=dataimages/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=metal3.io,resources=dataimages/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch;update
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete

// SetupWithManager registers the controller: hosts, plus the (labelled) Secrets they use; and
// beside it the secretReleaser, which lets deleted Secrets go once no host names them.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if r.Client == nil {
		r.Client = mgr.GetClient()
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorder("metal3-baremetal-controller")
	}
	if r.Config.Backoff == nil {
		r.Config.Backoff = DefaultConfig().Backoff
	}
	r.secrets = secrets{client: r.Client, reader: r.APIReader}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &metal3.BareMetalHost{}, secretNamesField, func(o client.Object) []string {
		return secretNames(o.(*metal3.BareMetalHost))
	}); err != nil {
		return fmt.Errorf("indexing hosts by secret: %w", err)
	}
	hostsPerState.use(mgr.GetCache())
	releaser := &secretReleaser{client: r.Client, reconciled: r.Config.SecretReconciled}
	if err := releaser.setup(mgr, r.skipNameValidation); err != nil {
		return fmt.Errorf("setting up the release of deleted secrets: %w", err)
	}
	b := ctrl.NewControllerManagedBy(mgr)
	if w, ok := r.Provisioner.(provisioner.Watcher); ok {
		if err := mgr.Add(manager.RunnableFunc(w.Watch)); err != nil {
			return fmt.Errorf("adding the provisioner's watcher: %w", err)
		}
		b = b.WatchesRawSource(provisionerChanges(w))
	}
	if r.Config.PreprovisioningImages {
		// The host controls its image: a status change of the image wakes the host.
		b = b.Owns(&metal3.PreprovisioningImage{}, builder.WithPredicates(imageChanged()))
	}
	return b.
		For(&metal3.BareMetalHost{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{},
			predicate.LabelChangedPredicate{}, predicates.DeletionMarked(), statusClearedPredicate()))).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.hostsUsingSecret), builder.WithPredicates(predicates.SecretDataChanged())).
		Watches(&metal3.HostFirmwareSettings{}, handler.EnqueueRequestsFromMapFunc(r.hostWaitingOnFirmware), builder.WithPredicates(firmwareVerdictChanged())).
		Watches(&metal3.HostFirmwareComponents{}, handler.EnqueueRequestsFromMapFunc(r.hostWaitingOnFirmware), builder.WithPredicates(firmwareVerdictChanged())).
		Watches(&metal3.HostUpdatePolicy{}, handler.EnqueueRequestsFromMapFunc(hostOfPolicy), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// A DataImage's spec edit or deletion wakes its host (same name), which may wait on it to
		// power on; its status writes (ours, its controller's) do not.
		Watches(&metal3.DataImage{}, &handler.EnqueueRequestForObject{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, predicates.DeletionMarked()))).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(1, r.Config.Concurrency), SkipNameValidation: &r.skipNameValidation}).
		Complete(r)
}

// statusClearedPredicate wakes a host whose status was replaced by someone else (a restore).
func statusClearedPredicate() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e ctrlevent.UpdateEvent) bool {
		o, n := e.ObjectOld.(*metal3.BareMetalHost), e.ObjectNew.(*metal3.BareMetalHost)
		return n.Status.LastUpdated == nil && o.Status.LastUpdated != nil
	}}
}

// hostsUsingSecret wakes the hosts that use a Secret. An edit of a host's preprovisioning network
// data is then registered when the registration memory has the host (registrationInputsChanged);
// a process without that memory registers such a host once anyway (networkDataUnconfirmed).
func (r *Reconciler) hostsUsingSecret(ctx context.Context, o client.Object) []reconcile.Request {
	var hosts metal3.BareMetalHostList
	// Only their names are read: the cache's objects, uncopied.
	if err := r.Client.List(ctx, &hosts, client.InNamespace(o.GetNamespace()), client.MatchingFields{secretNamesField: o.GetName()}, cacheview.ReadOnly); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing hosts using a secret", "secret", klog.KObj(o))
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(hosts.Items))
	for i := range hosts.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&hosts.Items[i])})
	}
	return reqs
}

// Reconcile is the driver: fetch, finalizer, inputs, state machine, then the writes.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (ctrl.Result, error) {
	metricReconciles.Inc()
	host := &metal3.BareMetalHost{}
	if err := r.Client.Get(ctx, req.NamespacedName, host); apierrors.IsNotFound(err) {
		r.written.Forget(req.NamespacedName)
		r.images.forget(req.NamespacedName)
		return ctrl.Result{}, r.policyWithoutHost(ctx, req.NamespacedName)
	} else if err != nil {
		metricReconcileErrors.Inc()
		return ctrl.Result{}, fmt.Errorf("reading host %s: %w", req.NamespacedName, err)
	}
	res, err := r.reconcile(ctx, host)
	if err != nil {
		metricReconcileErrors.Inc()
	}
	return res, err
}

func (r *Reconciler) reconcile(ctx context.Context, host *metal3.BareMetalHost) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx).WithValues(logKeyState, host.Status.Provisioning.State)
	ctx = ctrl.LoggerInto(ctx, log)
	stale := r.written.Stale(host)
	if r.Config.Reconciled != nil && (!stale || companion.Paused(host)) {
		// Reported when this reconcile ends; not for a stale copy, which it does not act on.
		defer r.Config.Reconciled(client.ObjectKeyFromObject(host), host.ResourceVersion)
	}
	if companion.Paused(host) {
		log.V(4).Info("Host is paused")
		return ctrl.Result{}, nil
	}
	if stale {
		// Status-only events are filtered out, so look again shortly rather than wait for one.
		log.V(4).Info("Cache is behind our last write; looking again shortly")
		return ctrl.Result{RequeueAfter: staleRetry}, nil
	}
	if !host.DeletionTimestamp.IsZero() && !controllerutil.ContainsFinalizer(host, metal3.BareMetalHostFinalizer) {
		return ctrl.Result{}, nil
	}
	if !host.DeletionTimestamp.IsZero() && r.written.Finalized(host) {
		// The provisioner's record is gone: only the cleanup that failed last time is left.
		return ctrl.Result{}, r.removeFinalizer(ctx, host)
	}
	if restored, err := r.restoreStatusFromAnnotation(ctx, host); restored || err != nil {
		return ctrl.Result{RequeueAfter: time.Millisecond}, err
	}
	if host.DeletionTimestamp.IsZero() && !controllerutil.ContainsFinalizer(host, metal3.BareMetalHostFinalizer) {
		// The finalizer goes on before the provisioner learns of the host, so that deleting the
		// host always cleans up the provisioner's record.
		if err := r.patchMetadata(ctx, host, func(h *metal3.BareMetalHost) {
			controllerutil.AddFinalizer(h, metal3.BareMetalHostFinalizer)
		}); err != nil {
			return ctrl.Result{}, err
		}
	}

	p := patch.NewHelper(r.Client, host, &r.written)
	wall := r.clock()
	s := &hostScope{ctx: ctx, cfg: &r.Config, prov: r.Provisioner, host: host, regs: &r.regs, retries: &r.retries, finished: &r.finished,
		preparations: &r.preparations, now: apiTime(wall), wall: wall}
	if host.Status.Provisioning.State != metal3.StatePreparing {
		r.preparations.forget(host.UID)
	}
	s.recallRetry()
	if err := r.loadInputs(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	s.consumeHardwareDetails()
	start := time.Now()
	out := s.run()
	s.settleDelayed()
	ran := time.Since(start)
	s.fx.image = s.planImage()
	setConditions(host, out, s.now)
	s.setLiveUpdatesCondition()
	if err := r.write(ctx, s, p); err != nil {
		return ctrl.Result{}, errors.Join(out.err, err)
	}
	// Where a host's time goes: the handlers (provisioner calls) and the writes, and what it waits for.
	log.V(2).Info("Reconciled", "now", s.state(), "handlers", ran.Round(time.Millisecond),
		"total", time.Since(start).Round(time.Millisecond), "again", out.after.Round(time.Millisecond), "waitingFor", out.waitingFor)
	if out.err != nil {
		return ctrl.Result{}, out.err
	}
	if out.kind == kindDone {
		return ctrl.Result{}, nil
	}
	if s.fx.imageCreateRefused {
		// The next reconcile shows the refusal as the image's error and goes on without it.
		return ctrl.Result{RequeueAfter: time.Millisecond}, nil
	}
	return ctrl.Result{RequeueAfter: max(out.after, time.Millisecond)}, nil
}

// write applies the handlers' effects in an order that keeps status truthful: HardwareData before
// the status that says inspection finished, the status, its events and metrics, then annotation
// removals and the image deletion.
func (r *Reconciler) write(ctx context.Context, s *hostScope, p *patch.Helper) error {
	host := s.host
	if s.fx.hardwareData != nil {
		if err := r.writeHardwareData(ctx, host, s.fx.hardwareData); err != nil {
			return err
		}
	}
	if err := r.writeImage(ctx, s.fx.image); err != nil {
		if err := r.imageCreateRefusal(s, err); err != nil {
			return err
		}
	}
	if s.fx.finalize {
		if ppi := s.fx.image.remove; ppi != nil {
			if err := r.deleteImage(ctx, ppi); err != nil {
				return err
			}
		}
		return r.finalize(ctx, s)
	}
	// Before the status write: if that fails, the retry registers again and finds the old Secret
	// in goodCredentials again, so a release is never forgotten.
	if replaced := slices.DeleteFunc(slices.Clone(s.fx.replacedSecrets), func(name string) bool {
		return slices.Contains(secretNames(host), name)
	}); len(replaced) > 0 {
		if err := r.releaseSecrets(ctx, host, replaced); err != nil {
			return err
		}
	}
	if s.fx.recordUpdates {
		if err := r.recordAppliedUpdates(ctx, host, s.fx.appliedUpdates); err != nil {
			return err
		}
	}
	if err := r.writeDataImage(ctx, s.fx.dataImage); err != nil {
		return err
	}
	if policy := s.in.policy.adopt; policy != nil {
		if err := r.adoptPolicy(ctx, host, policy); err != nil {
			return err
		}
	}
	if _, err := r.patchStatus(ctx, host, p, s.now); err != nil {
		return err
	}
	if ra := s.fx.retryAt; ra != nil {
		r.retries.record(host.UID, *ra)
	}
	// What the status now says happened is announced and counted at once: a write below that
	// fails is retried by a reconcile that starts from this status, which would not announce it.
	r.emit(host, &s.fx)
	recordMetrics(&s.fx)
	// After the status write that records what an annotation asked for (a live update started,
	// inspection started, hardware details taken): if that write fails, the annotation is still
	// there to ask again. The other way round, a failed status write lost the request (a host whose
	// power off is disabled stayed on without its live update). A removal that fails after the
	// status write leaves the annotation to be seen again: at least once, as for a reboot.
	if len(s.fx.removeAnnotations) > 0 {
		if err := p.PatchMetadata(ctx, host, func() {
			for key := range s.fx.removeAnnotations {
				delete(host.Annotations, key)
			}
		}); err != nil {
			return err
		}
	}
	if ppi := s.fx.image.remove; ppi != nil {
		if err := r.deleteImage(ctx, ppi); err != nil {
			return err
		}
	}
	return nil
}

// finalize releases what the host holds once the provisioner forgot it, and removes the host's
// finalizer last, so that a failure on the way is retried.
func (r *Reconciler) finalize(ctx context.Context, s *hostScope) error {
	host := s.host
	r.written.MarkFinalized(host)
	r.emit(host, &s.fx)
	recordMetrics(&s.fx)
	r.regs.forget(host.UID)
	r.retries.forget(host.UID)
	r.refusals.forget(host.UID)
	r.finished.forget(host.UID)
	r.preparations.forgetHost(host.UID)
	return r.removeFinalizer(ctx, host)
}

// removeFinalizer deletes what the host owns (HardwareData, its image, the Secrets' claims) and
// lets it go.
func (r *Reconciler) removeFinalizer(ctx context.Context, host *metal3.BareMetalHost) error {
	if err := r.deleteHardwareData(ctx, host); err != nil {
		return err
	}
	if err := r.releaseImage(ctx, host); err != nil {
		return err
	}
	if err := r.releaseSecrets(ctx, host, secretNames(host)); err != nil {
		return err
	}
	err := r.patchMetadata(ctx, host, func(h *metal3.BareMetalHost) {
		controllerutil.RemoveFinalizer(h, metal3.BareMetalHostFinalizer)
	})
	if apierrors.IsNotFound(err) {
		err = nil
	}
	// The tracker entry stays until the informer reports the host gone (Reconcile forgets it
	// then): a stale copy that still carries the finalizer must not be worked on again.
	return err
}

func (r *Reconciler) emit(host *metal3.BareMetalHost, fx *effects) {
	list := fx.events
	if e, ok := transitionEvent(fx.transitions); ok {
		list = append(events.List{e}, list...)
	}
	list.Emit(r.Recorder, host)
}

// restoreStatusFromAnnotation rebuilds an empty status from the status annotation (clusterctl
// move), with HardwareData winning for the hardware, and removes the annotation. The status goes
// through the same patch helper and clock as every other status write.
func (r *Reconciler) restoreStatusFromAnnotation(ctx context.Context, host *metal3.BareMetalHost) (bool, error) {
	if _, ok := host.Annotations[metal3.StatusAnnotation]; !ok {
		return false, nil
	}
	p := patch.NewHelper(r.Client, host, &r.written)
	var list events.List
	restored, err := restoreStatus(host)
	if err != nil {
		list.Warning(reasonBadAnnotation, "Annotation", err.Error())
	}
	if restored {
		hw, err := r.loadHardwareData(ctx, host)
		if err != nil {
			return false, err
		}
		if hw != nil {
			host.Status.HardwareDetails = hw
		}
		// Status first: should removing the annotation fail, the next reconcile sees a status
		// and only removes the annotation. The whole status is written (a restored status is
		// the first write of this host here and must carry the required fields).
		now := r.now()
		if host.Status.LastUpdated == nil {
			host.Status.LastUpdated = &now
		}
		if _, err := p.PatchStatus(ctx, host, patch.Replacing(true)); err != nil {
			return false, err
		}
		list.Normal(reasonStatusRestored, "Annotation", "Status restored from the "+metal3.StatusAnnotation+" annotation")
	}
	if err := p.PatchMetadata(ctx, host, func() { delete(host.Annotations, metal3.StatusAnnotation) }); err != nil {
		return false, err
	}
	list.Emit(r.Recorder, host)
	return restored, nil
}

const logKeyState = "state"

// staleRetry is how soon a host whose cached copy is older than our last write looks again.
const staleRetry = 200 * time.Millisecond
