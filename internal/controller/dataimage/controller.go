package dataimage

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

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
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/cacheview"
	"github.com/metalforge/metalforge/internal/controller/companion"
	"github.com/metalforge/metalforge/internal/controller/events"
	"github.com/metalforge/metalforge/internal/controller/patch"
	"github.com/metalforge/metalforge/internal/provisioner"
)

// Config tunes the controller. DefaultConfig has the production delays; tests shorten them.
type Config struct {
	// Resync is how often an attached image is checked to still be there.
	Resync time.Duration
	// BusyRetry is how soon a deletion looks again while the provisioner works on the host.
	BusyRetry time.Duration
	// RetryDelay is how soon a failed detach is tried again, and how often a deletion the host
	// controller should carry out is looked at again.
	RetryDelay time.Duration
	// ProvisionerRetry is how soon a DataImage is looked at again when the provisioner cannot
	// answer (Ironic down or answering 5xx, the host's BMC unreachable, the node lost).
	ProvisionerRetry time.Duration
	// Concurrency is how many DataImages are reconciled at once.
	Concurrency int
	// Reconciled, when set, is called at the end of every reconcile that did not find the cache
	// behind its own last write, with the DataImage's resourceVersion after it ("" when gone): a
	// test seam, as the host controller's.
	Reconciled func(key types.NamespacedName, resourceVersion string)
}

// DefaultConfig returns the production delays.
func DefaultConfig() Config {
	return Config{Resync: 10 * time.Minute, BusyRetry: 5 * time.Second, RetryDelay: time.Minute,
		ProvisionerRetry: companion.ProvisionerRetry, Concurrency: 4}
}

// Reconciler is the DataImage controller (see the package comment).
type Reconciler struct {
	Client      client.Client
	Recorder    recorder.EventRecorder
	Provisioner provisioner.DataImager
	Config      Config

	// SkipNameValidation lets tests run several managers in one process.
	SkipNameValidation bool

	written patch.Tracker
}

// +kubebuilder:rbac:groups=metal3.io,resources=dataimages,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=metal3.io,resources=dataimages/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=metal3.io,resources=dataimages/finalizers,verbs=update
// +kubebuilder:rbac:groups=metal3.io,resources=baremetalhosts,verbs=get;list;watch

// SetupWithManager registers the controller: DataImages (spec edits, deletion, and the host
// controller's writes while one is being deleted) and the host of the same name (it appearing or
// going, its power, state and registration).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil {
		r.Client = mgr.GetClient()
	}
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorder("metal3-dataimage-controller")
	}
	def := DefaultConfig()
	if r.Config.Resync == 0 {
		r.Config.Resync = def.Resync
	}
	if r.Config.BusyRetry == 0 {
		r.Config.BusyRetry = def.BusyRetry
	}
	if r.Config.RetryDelay == 0 {
		r.Config.RetryDelay = def.RetryDelay
	}
	if r.Config.ProvisionerRetry == 0 {
		r.Config.ProvisionerRetry = def.ProvisionerRetry
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("dataimage").
		For(&metal3.DataImage{}, builder.WithPredicates(dataImageChanges())).
		Watches(&metal3.BareMetalHost{}, &handler.EnqueueRequestForObject{}, builder.WithPredicates(hostChanges())).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(1, r.Config.Concurrency), SkipNameValidation: &r.SkipNameValidation}).
		Complete(r)
}

// dataImageChanges passes creation, spec edits and deletion, and, for a DataImage being deleted,
// status changes (the host controller detaching it at its host's power on).
func dataImageChanges() predicate.Funcs {
	return predicate.Funcs{
		UpdateFunc: func(e ctrlevent.UpdateEvent) bool {
			return e.ObjectNew.GetGeneration() != e.ObjectOld.GetGeneration() ||
				!e.ObjectNew.GetDeletionTimestamp().IsZero()
		},
		GenericFunc: func(ctrlevent.GenericEvent) bool { return false },
	}
}

// hostChanges passes the host events that change what this controller decides: the host
// appearing or going, being paused, detached or deleted, registered on a node, moving between
// states, its power changing, or starting or ending a step that applies firmware (preparing,
// servicing: a live update ends with the host provisioned and powered on as before, and a
// DataImage deleted meanwhile waited for it).
func hostChanges() predicate.Funcs {
	return predicate.Funcs{
		GenericFunc: func(ctrlevent.GenericEvent) bool { return false },
		UpdateFunc: func(e ctrlevent.UpdateEvent) bool {
			o, okO := e.ObjectOld.(*metal3.BareMetalHost)
			n, okN := e.ObjectNew.(*metal3.BareMetalHost)
			if !okO || !okN {
				return false
			}
			return companion.Registered(o) != companion.Registered(n) || o.Status.Provisioning.ID != n.Status.Provisioning.ID ||
				o.Status.Provisioning.State != n.Status.Provisioning.State || o.Status.PoweredOn != n.Status.PoweredOn ||
				o.Spec.Online != n.Spec.Online || companion.HasRebootAnnotation(o) != companion.HasRebootAnnotation(n) ||
				companion.Applying(o) != companion.Applying(n)
		},
	}
}

// Reconcile is the driver: fetch, the host, metadata, then the decision and one status write.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (res ctrl.Result, err error) {
	di := &metal3.DataImage{}
	stale := false
	if r.Config.Reconciled != nil {
		defer func() {
			if !stale {
				r.Config.Reconciled(req.NamespacedName, di.ResourceVersion)
			}
		}()
	}
	if err := r.Client.Get(ctx, req.NamespacedName, di); apierrors.IsNotFound(err) {
		r.written.Forget(req.NamespacedName)
		di.ResourceVersion = ""
		return ctrl.Result{}, nil
	} else if err != nil {
		return ctrl.Result{}, fmt.Errorf("reading data image %s: %w", req.NamespacedName, err)
	}
	if r.written.Stale(di) {
		stale = true
		return ctrl.Result{RequeueAfter: companion.StaleRetry}, nil
	}
	host := &metal3.BareMetalHost{}
	// The host is only read: no copy of the cache's.
	if err := r.Client.Get(ctx, req.NamespacedName, host, cacheview.ReadOnly); apierrors.IsNotFound(err) {
		host = nil
	} else if err != nil {
		return ctrl.Result{}, fmt.Errorf("reading host %s: %w", req.NamespacedName, err)
	}
	s := &scope{ctx: ctx, r: r, di: di, host: host, before: di.DeepCopy()}
	res, err = s.run()
	if werr := s.write(); werr != nil {
		return ctrl.Result{}, werr
	}
	return res, err
}

// scope is one reconcile: the DataImage (changed in memory), its host (nil when there is none),
// and what to announce once written.
type scope struct {
	ctx  context.Context
	r    *Reconciler
	di   *metal3.DataImage
	host *metal3.BareMetalHost
	// before is the DataImage as read, which the status write diffs against.
	before *metal3.DataImage
	events events.List
	// release: remove the finalizer after the status write.
	release bool
}

func (s *scope) run() (ctrl.Result, error) {
	deleting := !s.di.DeletionTimestamp.IsZero()
	if s.host == nil || !s.host.DeletionTimestamp.IsZero() {
		// Nothing attaches or detaches it any more (a host being deleted leaves the provisioner):
		// the finalizer must not hold it when its owner's garbage collection deletes it.
		s.release = s.host == nil || deleting
		if s.host == nil && !deleting && !companion.OwnedByHost(s.di) {
			s.setMessage(ReasonNoHost, "Validate", fmt.Sprintf("metadata.name: no BareMetalHost %q in this namespace: a DataImage is attached to the host of the same name", s.di.Name))
		}
		return ctrl.Result{}, nil
	}
	s.clearMessage("metadata.name:")
	if companion.Paused(s.host) {
		return ctrl.Result{}, nil // the host's unpausing wakes this DataImage
	}
	if err := s.adopt(deleting); err != nil {
		return ctrl.Result{}, err
	}
	if !companion.Registered(s.host) {
		// No node to ask (not registered yet, detached, or being deleted by the provisioner):
		// a DataImage being deleted goes, as metal3's does for a detached host.
		s.release = deleting
		return ctrl.Result{}, nil
	}
	if !deleting {
		if err := ValidateURL(s.di.Spec.URL); err != nil {
			s.setMessage(ReasonInvalid, "Validate", err.Error())
			return ctrl.Result{}, nil
		}
		s.clearMessage("spec.url:")
	}
	if hostWillSync(s.host) && !deleting {
		return ctrl.Result{}, nil // the host controller acts now
	}
	if !deleting && s.di.Status.AttachedImage == nil {
		return ctrl.Result{}, nil // nothing to check
	}
	if deleting && agentMayBoot(s.host) && !hostWillSync(s.host) {
		// The CD may hold the agent Ironic boots (inspection, cleaning, deployment): a detach now
		// would eject it. The host's next state wakes the DataImage.
		return ctrl.Result{}, nil
	}
	st, err := s.r.Provisioner.DataImage(s.ctx, companion.ProvisionerHost(s.host))
	if errors.Is(err, provisioner.ErrDataImageUnsupported) {
		// Nothing can be attached to this host: nothing to detach either.
		s.release = deleting
		if !deleting {
			s.setMessage(ReasonFailed, "Attach", Message(err.Error()))
		}
		return ctrl.Result{}, nil
	}
	if err != nil {
		return s.provisionerError(err, deleting, "reading the virtual media of the host")
	}
	s.clearMessage(unansweredPrefix)
	switch {
	case st.Busy:
		return ctrl.Result{RequeueAfter: s.r.Config.BusyRetry}, nil
	case !st.Attached:
		// Detached, or ejected behind the operator's back (Ironic's cleaning boots its agent from
		// the CD): status follows, and a DataImage being deleted goes.
		s.di.Status.AttachedImage = nil
		s.release = deleting
		return ctrl.Result{RequeueAfter: s.resync(deleting)}, nil
	case !deleting:
		return ctrl.Result{RequeueAfter: s.r.Config.Resync}, nil
	case hostWillSync(s.host):
		// The host controller detaches it at the power on; looked at again, in case the host
		// stays held off (a failing power on, a servicing error waiting for the user).
		return ctrl.Result{RequeueAfter: s.r.Config.RetryDelay}, nil
	case runsOS(s.host) && s.host.Status.PoweredOn:
		// metal3: detached at the host's next power on; a running OS keeps its CD until then
		// (the host's power change and its detach wake this DataImage).
		return ctrl.Result{}, nil
	case st.Error != "":
		// Our last detach failed: said, and tried again RetryDelay after it was asked (at once when
		// the failure shows later than that: a BMC slow to fail, sushy retrying its 5xx answers).
		s.setMessage(ReasonFailed, "Detach", Message("detaching: "+st.Error))
		if s.retryLater() {
			return ctrl.Result{RequeueAfter: s.r.Config.RetryDelay}, nil
		}
	}
	return s.detach()
}

// retryLater: the last detach was asked less than RetryDelay ago.
func (s *scope) retryLater() bool {
	last := s.di.Status.LastReconciled
	return last != nil && time.Since(last.Time) < s.r.Config.RetryDelay
}

// detach empties the CD of a host that runs no OS of ours, or is off, for a DataImage being
// deleted.
func (s *scope) detach() (ctrl.Result, error) {
	res, err := s.r.Provisioner.DetachDataImage(s.ctx, companion.ProvisionerHost(s.host))
	if err != nil {
		return s.provisionerError(err, true, "detaching the virtual media of the host")
	}
	now := metav1.Now()
	if res.Failed() {
		s.setMessage(ReasonFailed, "Detach", Message("detaching: "+res.ErrorMessage))
		s.di.Status.LastReconciled = &metav1.Time{Time: now.Truncate(time.Second)}
		return ctrl.Result{RequeueAfter: s.r.Config.RetryDelay}, nil
	}
	if !res.Busy {
		s.di.Status.AttachedImage = nil
		s.di.Status.LastReconciled = &metav1.Time{Time: now.Truncate(time.Second)}
		s.events.Normal(ReasonDetaching, "Detach", "Detaching the host's virtual CD: the DataImage is being deleted")
	}
	return ctrl.Result{RequeueAfter: s.r.Config.BusyRetry}, nil
}

// unansweredPrefix starts the message of a deletion held by a provisioner that cannot answer.
const unansweredPrefix = "detaching: the provisioner cannot answer, retrying: "

// UnansweredMessage is status.error.message of a DataImage whose deletion waits for a provisioner
// that cannot answer: err's text, credentials removed.
func UnansweredMessage(err error) string { return Message(unansweredPrefix + err.Error()) }

// provisionerError is the outcome of a provisioner call that failed. A provisioner that cannot
// answer is waited for (companion.ProvisionerError); a deletion it holds says so in status.error
// (cleared by the next answer), since nothing else tells the user why the DataImage stays
// Terminating: the wait may last as long as the BMC is unreachable.
func (s *scope) provisionerError(err error, deleting bool, doing string) (ctrl.Result, error) {
	res, err2 := companion.ProvisionerError(s.ctx, err, doing)
	if err2 != nil {
		return res, err2
	}
	if deleting {
		s.setMessage(ReasonFailed, "Detach", UnansweredMessage(err))
	}
	return ctrl.Result{RequeueAfter: s.r.Config.ProvisionerRetry}, nil
}

func (s *scope) resync(deleting bool) time.Duration {
	if deleting {
		return 0
	}
	return s.r.Config.Resync
}

// adopt gives the DataImage its finalizer and a controller owner reference to its host (metal3:
// the DataImage goes with the host), in one metadata patch.
func (s *scope) adopt(deleting bool) error {
	return patch.Metadata(s.ctx, s.r.Client, s.di, func() {
		if !deleting {
			controllerutil.AddFinalizer(s.di, metal3.DataImageFinalizer)
		}
		for _, ref := range s.di.OwnerReferences {
			if ref.UID == s.host.UID {
				return
			}
		}
		ref := metav1.NewControllerRef(s.host, metal3.GroupVersion.WithKind("BareMetalHost"))
		if metav1.GetControllerOf(s.di) != nil {
			ref.Controller = nil // someone else controls it: only an owner reference
		}
		s.di.OwnerReferences = append(s.di.OwnerReferences, *ref)
	}, &s.r.written)
}

// setMessage records a problem in status.error.message (the attach count is left alone): one the
// user must fix, or a detach that failed or waits for the provisioner. Announced when it is new,
// with action, what failed.
func (s *scope) setMessage(reason, action, msg string) {
	e := s.di.Status.Error
	if e != nil && e.Message == msg {
		return
	}
	if e == nil {
		e = &metal3.DataImageError{}
		s.di.Status.Error = e
	}
	e.Message = msg
	s.events.Warning(reason, action, msg)
}

// clearMessage removes a message this controller wrote (its field prefix), once it no longer
// holds. The count goes with it: a count without a message would read as an attach under way.
func (s *scope) clearMessage(prefix string) {
	e := s.di.Status.Error
	if e == nil || !strings.HasPrefix(e.Message, prefix) {
		return
	}
	s.di.Status.Error = nil
}

// write patches the status when it changed, announces it, then lets the DataImage go when asked.
func (s *scope) write() error {
	p := patch.NewHelper(s.r.Client, StatusBase(s.before, s.di), &s.r.written)
	return companion.Finish(s.ctx, s.r.Client, p, s.di, s.events, s.r.Recorder, metal3.DataImageFinalizer, s.release, &s.r.written)
}

// runsOS: the host runs an operating system of ours (or its own), whose CD is changed only at its
// power on.
func runsOS(h *metal3.BareMetalHost) bool {
	st := h.Status.Provisioning.State
	return st == metal3.StateProvisioned || st == metal3.StateExternallyProvisioned
}

// agentMayBoot: a state in which the provisioner may boot its agent from the virtual CD (a live
// update too: the host stays provisioned while Ironic's agent runs from it).
func agentMayBoot(h *metal3.BareMetalHost) bool {
	if companion.Applying(h) {
		return true
	}
	switch h.Status.Provisioning.State {
	case metal3.StateAvailable, metal3.StateReady, metal3.StateProvisioned, metal3.StateExternallyProvisioned:
		return false
	}
	return true
}

// hostWillSync: the host controller is the one acting on the CD now: a host that runs an OS is
// off and wants to be on (no reboot annotation holds it), or, with its power off disabled, is
// asked to reboot (host/power.go, host/dataimage.go).
func hostWillSync(h *metal3.BareMetalHost) bool {
	if !runsOS(h) {
		return false
	}
	_, oneShot := h.Annotations[metal3.RebootAnnotationPrefix]
	if h.Spec.DisablePowerOff && h.Status.PoweredOn {
		return oneShot
	}
	return !h.Status.PoweredOn && h.Spec.Online && !companion.HasRebootAnnotation(h)
}
