package bmceventsubscription

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
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
	"github.com/metalforge/metalforge/internal/statustext"
	"github.com/metalforge/metalforge/internal/webhooks"
)

// Event reasons of a BMCEventSubscription.
const (
	ReasonCreated = "SubscriptionCreated"
	ReasonLost    = "SubscriptionLost"
	ReasonDeleted = "SubscriptionDeleted"
	ReasonFailed  = "SubscriptionError"
	ReasonInvalid = "InvalidSubscription"
	// ReasonHeadersChanged: the headers Secret changed (a rotated token); the subscription is
	// created again with the new headers (a Redfish subscription's headers cannot be changed).
	ReasonHeadersChanged = "SubscriptionHeadersChanged"
	// ReasonLeft: the subscription could not be removed from the BMC (its host is gone from
	// the provisioner) and may still be there.
	ReasonLeft = "SubscriptionLeftOnBMC"
)

// Config tunes the controller. DefaultConfig has the production delays; tests shorten them.
type Config struct {
	// Resync is how often a subscription is checked to still exist on the BMC.
	Resync time.Duration
	// RetryDelay is how soon a failed creation or deletion, or a missing headers Secret, is tried
	// again.
	RetryDelay time.Duration
	// BusyRetry is how soon a request the provisioner could not send because another one holds
	// the host (provisioner.ErrBusy) is tried again.
	BusyRetry time.Duration
	// Concurrency is how many subscriptions are reconciled at once.
	Concurrency int
}

// DefaultConfig returns the production delays.
func DefaultConfig() Config {
	// An hour: each check is a synchronous call through Ironic to the BMC that holds the node's
	// lock (at a thousand subscriptions, 10 minutes made it about two a second).
	// BusyRetry as the DataImage controller's: another request holds the node for about a second.
	return Config{Resync: time.Hour, RetryDelay: time.Minute, BusyRetry: 5 * time.Second, Concurrency: 4}
}

// Reconciler is the BMCEventSubscription controller (see the package comment).
type Reconciler struct {
	Client client.Client
	// APIReader reads a headers Secret the cache does not hold yet: the baremetal-operator caches
	// only the Secrets it labels (cacheview); the controller labels a subscription's Secret on its
	// first read, so that its changes wake the subscriptions that use it.
	APIReader   client.Reader
	Recorder    recorder.EventRecorder
	Provisioner provisioner.EventSubscriber
	Config      Config
	// SkipNameValidation lets tests run several managers in one process.
	SkipNameValidation bool

	written patch.Tracker
	// failures counts each subscription's consecutive failures, for the retry backoff.
	failures sync.Map
}

// hostNameField indexes subscriptions by spec.hostName; headersField by spec.httpHeadersRef.name.
const (
	hostNameField = ".metalforge.spec.hostName"
	headersField  = ".metalforge.spec.httpHeadersRef.name"
)

// +kubebuilder:rbac:groups=metal3.io,resources=bmceventsubscriptions,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=metal3.io,resources=bmceventsubscriptions/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=metal3.io,resources=bmceventsubscriptions/finalizers,verbs=update
// +kubebuilder:rbac:groups=metal3.io,resources=baremetalhosts,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;patch

// SetupWithManager registers the controller: subscriptions (created, deleted; the spec cannot
// change), the hosts they name (appearing, going, registered or not) and their headers Secrets
// (content changed).
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if r.Client == nil {
		r.Client = mgr.GetClient()
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorder("metal3-bmceventsubscription-controller")
	}
	def := DefaultConfig()
	if r.Config.Resync == 0 {
		r.Config.Resync = def.Resync
	}
	if r.Config.RetryDelay == 0 {
		r.Config.RetryDelay = def.RetryDelay
	}
	if r.Config.BusyRetry == 0 {
		r.Config.BusyRetry = def.BusyRetry
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &metal3.BMCEventSubscription{}, hostNameField, func(o client.Object) []string {
		return []string{o.(*metal3.BMCEventSubscription).Spec.HostName}
	}); err != nil {
		return fmt.Errorf("indexing BMCEventSubscriptions by host: %w", err)
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &metal3.BMCEventSubscription{}, headersField, func(o client.Object) []string {
		if ref := o.(*metal3.BMCEventSubscription).Spec.HTTPHeadersRef; ref != nil {
			return []string{ref.Name}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("indexing BMCEventSubscriptions by headers Secret: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("bmceventsubscription").
		For(&metal3.BMCEventSubscription{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, predicates.DeletionMarked()))).
		Watches(&metal3.BareMetalHost{}, handler.EnqueueRequestsFromMapFunc(r.subscriptionsOf), builder.WithPredicates(hostChanges())).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.subscriptionsUsing), builder.WithPredicates(headersChanged())).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(1, r.Config.Concurrency), SkipNameValidation: &r.SkipNameValidation}).
		Complete(r)
}

// headersChanged passes a headers Secret whose content changed. Not one entering the cache: the
// controller labels a Secret when it first reads it, which makes it appear there at once, and a
// reconcile for that would retry a failed create before its backoff; a Secret created or deleted
// by the user is found by the retry that waits for it.
func headersChanged() predicate.Funcs {
	data := predicates.SecretDataChanged()
	return predicate.Funcs{
		CreateFunc:  func(ctrlevent.CreateEvent) bool { return false },
		DeleteFunc:  func(ctrlevent.DeleteEvent) bool { return false },
		GenericFunc: func(ctrlevent.GenericEvent) bool { return false },
		UpdateFunc:  data.Update,
	}
}

// hostChanges passes a host appearing or going, and a change in whether the provisioner can
// reach its BMC (registered, paused, detached, a new node).
func hostChanges() predicate.Funcs {
	return predicate.Funcs{
		GenericFunc: func(ctrlevent.GenericEvent) bool { return false },
		UpdateFunc: func(e ctrlevent.UpdateEvent) bool {
			o, okO := e.ObjectOld.(*metal3.BareMetalHost)
			n, okN := e.ObjectNew.(*metal3.BareMetalHost)
			return okO && okN && (companion.Registered(o) != companion.Registered(n) ||
				o.Status.Provisioning.ID != n.Status.Provisioning.ID || o.Spec.BMC.Address != n.Spec.BMC.Address)
		},
	}
}

func (r *Reconciler) subscriptionsOf(ctx context.Context, host client.Object) []reconcile.Request {
	return r.subscriptionsBy(ctx, host, hostNameField)
}

func (r *Reconciler) subscriptionsUsing(ctx context.Context, secret client.Object) []reconcile.Request {
	return r.subscriptionsBy(ctx, secret, headersField)
}

// subscriptionsBy lists the subscriptions in obj's namespace whose field (an index) names obj.
func (r *Reconciler) subscriptionsBy(ctx context.Context, obj client.Object, field string) []reconcile.Request {
	var list metal3.BMCEventSubscriptionList
	if err := r.Client.List(ctx, &list, client.InNamespace(obj.GetNamespace()), client.MatchingFields{field: obj.GetName()},
		cacheview.ReadOnly); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the subscriptions of an object", "index", field, "name", obj.GetName())
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}

// Reconcile is the driver: fetch, host, finalizer, the decision, one status write, the finalizer
// removal last.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (ctrl.Result, error) {
	sub := &metal3.BMCEventSubscription{}
	if err := r.Client.Get(ctx, req.NamespacedName, sub); apierrors.IsNotFound(err) {
		r.written.Forget(req.NamespacedName)
		return ctrl.Result{}, nil
	} else if err != nil {
		return ctrl.Result{}, fmt.Errorf("reading subscription %s: %w", req.NamespacedName, err)
	}
	if r.written.Stale(sub) {
		return ctrl.Result{RequeueAfter: companion.StaleRetry}, nil
	}
	host := &metal3.BareMetalHost{}
	hostKey := types.NamespacedName{Namespace: sub.Namespace, Name: sub.Spec.HostName}
	if err := r.Client.Get(ctx, hostKey, host, cacheview.ReadOnly); apierrors.IsNotFound(err) || sub.Spec.HostName == "" {
		host = nil
	} else if err != nil {
		return ctrl.Result{}, fmt.Errorf("reading host %s: %w", hostKey, err)
	}
	s := &scope{ctx: ctx, r: r, sub: sub, host: host}
	if sub.DeletionTimestamp.IsZero() && host != nil {
		if err := patch.Metadata(ctx, r.Client, sub, func() {
			controllerutil.AddFinalizer(sub, metal3.BMCEventSubscriptionFinalizer)
		}, &r.written); err != nil {
			return ctrl.Result{}, err
		}
	}
	s.p = patch.NewHelper(r.Client, sub, &r.written)
	res, err := s.run()
	if werr := s.write(); werr != nil {
		return ctrl.Result{}, werr
	}
	return res, err
}

// scope is one reconcile: the subscription (changed in memory), its host (nil when there is
// none), and what to announce once written.
type scope struct {
	ctx     context.Context
	r       *Reconciler
	sub     *metal3.BMCEventSubscription
	host    *metal3.BareMetalHost
	p       *patch.Helper
	events  events.List
	release bool
	// headersVersion is the version (func headersVersion) of the headers the subscription on the
	// BMC now carries, recorded in HTTPHeadersVersionAnnotation after the status.
	headersVersion string
	// createMaybeSent is mayHaveCreated of the status.error the reconcile started from (run
	// clears the no-host message, which does not rule a create out, before delete reads it).
	createMaybeSent bool
}

func (s *scope) run() (ctrl.Result, error) {
	deleting := !s.sub.DeletionTimestamp.IsZero()
	s.createMaybeSent = mayHaveCreated(s.sub.Status.Error)
	if deleting && s.sub.Status.SubscriptionID == "" && (s.host == nil || !companion.Registered(s.host)) {
		// Nothing known on the BMC and no way to look (a host never registered, paused, gone):
		// nothing to wait for. A create whose answer was lost may have left one.
		s.release = true
		if s.createMaybeSent {
			s.events.Warning(ReasonLeft, "Delete", "A create of this subscription failed or was not answered: one may remain on the BMC")
		}
		return ctrl.Result{}, nil
	}
	if s.host != nil && s.sub.Status.Error == noHostMessage(s.sub.Spec.HostName) {
		// Said while the host did not exist (GitOps may create the subscription first): untrue
		// now, and the branches below that wait for the host's registration write no error.
		s.sub.Status.Error = ""
	}
	switch {
	case s.host == nil:
		// Nothing to subscribe with; a deletion goes (the host took its node with it).
		if deleting {
			s.leave("Host " + s.sub.Spec.HostName + " is gone")
		} else {
			s.setError(ReasonInvalid, noHostMessage(s.sub.Spec.HostName))
		}
		return ctrl.Result{}, nil
	case companion.Paused(s.host):
		return ctrl.Result{}, nil // its unpausing wakes the subscription
	case !companion.Registered(s.host):
		if deleting && s.unreachable() {
			s.leave("Host " + s.host.Name + " is detached or being deleted")
		}
		return ctrl.Result{}, nil // the host's registration wakes the subscription
	}
	host := companion.ProvisionerHost(s.host)
	// The provisioner tells a BMC that cannot take subscriptions (IPMI) by its address.
	host.BMCAddress = s.host.Spec.BMC.Address
	if deleting {
		return s.delete(host)
	}
	if errs := statustext.FieldErrors(webhooks.ValidateBMCEventSubscription(s.sub)); len(errs) > 0 && s.sub.Status.SubscriptionID == "" {
		// The webhook refuses these; a subscription written without it gets the same message.
		s.setError(ReasonInvalid, errs.ToAggregate().Error())
		return ctrl.Result{}, nil
	}
	if id := s.sub.Status.SubscriptionID; id != "" {
		exists, err := s.stillOnBMC(host, id)
		switch {
		case listRefused(err):
			// A BMC that took the create but refuses to list or read its subscriptions (the check
			// reads the list, then this one) cannot say whether it still has this one: kept, as
			// metal3 never checks.
			// A changed headers Secret is still renewed below, by the recorded id.
			exists = true
		case err != nil:
			return s.failed(err, "checking the subscription on the BMC")
		}
		s.succeeded()
		if exists && !s.headersChanged() {
			s.sub.Status.Error = ""
			return ctrl.Result{RequeueAfter: companion.Jitter(s.r.Config.Resync)}, nil
		}
		if exists {
			// A Redfish subscription's headers cannot be changed: deleted, then created with
			// the new ones (below). metal3 kept the old ones: a rotated token ended the events.
			if err := s.r.Provisioner.DeleteEventSubscription(s.ctx, host, id); err != nil {
				return s.failed(err, "deleting the subscription to renew its headers")
			}
			s.sub.Status.SubscriptionID = ""
			s.events.Normal(ReasonHeadersChanged, "Delete", "The headers Secret changed: subscription "+id+" deleted from the BMC of host "+
				s.host.Name+", to be created again with the new headers")
			return s.create(host)
		}
		// A BMC reset to its defaults (or replaced) forgets its subscriptions: metal3 never
		// noticed, and events stopped for good. The id may name another client's subscription
		// now: forgotten, never deleted.
		s.events.Warning(ReasonLost, "Create", "The BMC of host "+s.host.Name+" no longer has subscription "+id+
			" with this destination and context (a reset lost it, and may have given its id to another subscription): creating it again")
		s.sub.Status.SubscriptionID = ""
	}
	return s.create(host)
}

// noHostMessage is status.error while spec.hostName names no host, as setError stores it.
func noHostMessage(hostName string) string {
	return statustext.Clean(fmt.Sprintf("spec.hostName: no BareMetalHost %q in this namespace", hostName), statustext.ConditionMessageLimit)
}

// delete removes the subscription from the BMC and lets the object go. Without a recorded id, a
// subscription a create whose answer was lost left is looked for first and removed like ours
// (only after a create that may have been sent: mayHaveCreated).
func (s *scope) delete(host provisioner.Host) (ctrl.Result, error) {
	if recorded := s.sub.Status.SubscriptionID; recorded != "" {
		// Checked first: after a BMC reset the id may name another client's subscription,
		// which deleting it would remove (the hourly check may not have seen the reset yet).
		switch ours, err := s.stillOnBMC(host, recorded); {
		case listRefused(err):
			// Cannot be told: deleted by its id, as metal3 does.
		case err != nil:
			return s.failed(err, "checking the subscription on the BMC before deleting it")
		case !ours:
			s.release = true
			s.events.Normal(ReasonDeleted, "Delete", "Subscription "+recorded+" is no longer on the BMC of host "+s.host.Name+
				" with this destination and context (a reset lost it): nothing deleted")
			return ctrl.Result{}, nil
		}
	} else if !s.createMaybeSent {
		// No create was sent (none yet, or a problem of its spec stopped them): a subscription
		// with this destination and context on the BMC is another client's.
		s.release = true
		return ctrl.Result{}, nil
	} else {
		id, err := s.takeOver(host, provisioner.EventSubscription{Destination: s.sub.Spec.Destination, Context: s.sub.Spec.Context})
		if listRefused(err) {
			s.leaveUnlisted(err)
			return ctrl.Result{}, nil
		}
		if err != nil {
			return s.failed(err, "reading the subscriptions of the BMC")
		}
		s.sub.Status.SubscriptionID = id
	}
	if id := s.sub.Status.SubscriptionID; id != "" {
		if err := s.r.Provisioner.DeleteEventSubscription(s.ctx, host, id); err != nil {
			return s.failed(err, "deleting the subscription from the BMC")
		}
		s.succeeded()
		s.events.Normal(ReasonDeleted, "Delete", "Subscription "+id+" deleted from the BMC of host "+s.host.Name)
	}
	s.release = true
	return ctrl.Result{}, nil
}

// listRefused: the BMC answered the look for a lost create with a refusal (no EventService, an
// account that may not read subscriptions), which no retry changes. Anything else (a BMC or Ironic
// that does not answer, Ironic refusing our own credentials, a node to register again, a reconcile
// that gave up) is waited for.
func listRefused(err error) bool {
	return errors.Is(err, provisioner.ErrBMCRefused)
}

// leaveUnlisted lets a deleted subscription with no recorded id go although the BMC refused to list
// its subscriptions. Mostly nothing was created: a create whose answer came records its id. But a
// create whose answer was lost may have left one, and no status field records a create sent;
// holding the deletion for ever would not find it either, so the Warning names the destination to
// look for.
func (s *scope) leaveUnlisted(err error) {
	s.release = true
	// The destination first: the note is cut at the API server's limit, the BMC's text may be long.
	s.events.Warning(ReasonLeft, "Delete", fmt.Sprintf("A subscription to %s (context %q) may remain on the BMC of host %s if a create's answer was lost: "+
		"none was recorded, and the BMC refused to list its subscriptions (%s)", s.sub.Spec.Destination, s.sub.Spec.Context, s.host.Name, err.Error()))
}

// create creates the subscription on the BMC with the headers its Secret holds now, or takes over
// one an earlier create left there (replaces it, when the subscription has headers).
func (s *scope) create(host provisioner.Host) (ctrl.Result, error) {
	headers, secret, err := s.headers()
	if err != nil {
		s.setError(ReasonInvalid, err.Error())
		return ctrl.Result{RequeueAfter: s.r.Config.RetryDelay}, nil
	}
	version := headersVersion(secret, headers)
	want := provisioner.EventSubscription{Destination: s.sub.Spec.Destination, Context: s.sub.Spec.Context, HTTPHeaders: headers}
	switch id, err := s.takeOver(host, want); {
	case listRefused(err):
		// A BMC that refuses the list for good (an account that may create subscriptions but not
		// read them) would otherwise never get one: it is created without the look, as metal3
		// always does. Only a create whose answer is lost can then be doubled.
	case err != nil:
		return s.failed(err, "reading the subscriptions of the BMC")
	case id != "" && s.sub.Spec.HTTPHeadersRef != nil:
		// Redfish never shows a subscription's headers: the one found may carry a token the
		// Secret held before (one left on the BMC by a deleted object, a create lost before a
		// rotation), and taking it over would record the current ones. Replaced instead.
		if err := s.r.Provisioner.DeleteEventSubscription(s.ctx, host, id); err != nil {
			return s.failed(err, "deleting a subscription found on the BMC, to create it with the current headers")
		}
		s.events.Normal(ReasonHeadersChanged, "Delete", "Subscription "+id+" found on the BMC of host "+s.host.Name+
			" with headers that cannot be read back: deleted, to be created with the headers Secret's")
	case id != "":
		s.succeeded()
		s.sub.Status.SubscriptionID, s.sub.Status.Error, s.headersVersion = id, "", version
		s.events.Normal(ReasonCreated, "Create", "Subscription "+id+" found on the BMC of host "+s.host.Name+" (an earlier create whose answer was lost) and taken over")
		return ctrl.Result{RequeueAfter: companion.Jitter(s.r.Config.Resync)}, nil
	}
	id, err := s.r.Provisioner.CreateEventSubscription(s.ctx, host, want)
	if err != nil {
		return s.failed(err, "creating the subscription on the BMC")
	}
	s.succeeded()
	s.sub.Status.SubscriptionID, s.sub.Status.Error, s.headersVersion = id, "", version
	s.events.Normal(ReasonCreated, "Create", "Subscription "+id+" created on the BMC of host "+s.host.Name)
	return ctrl.Result{RequeueAfter: companion.Jitter(s.r.Config.Resync)}, nil
}

// mayHaveCreated: status.error does not rule out a create sent with no id recorded (one that
// failed or was not answered). A problem of the subscription's own spec (a missing or invalid
// headers Secret, an invalid destination) stops every create while it lasts; the no-host message
// may have replaced a failed create's error, so it does not rule one out. status.error keeps only
// the last error: a create lost before a spec problem that came later goes unwarned.
func mayHaveCreated(statusError string) bool {
	if statusError == "" {
		return false
	}
	return !strings.HasPrefix(statusError, "spec.") || strings.HasPrefix(statusError, "spec.hostName:")
}

// unreachable: the host's BMC cannot be reached through the provisioner for good (the host is
// detached or being deleted), as opposed to not registered yet.
func (s *scope) unreachable() bool {
	_, detached := s.host.Annotations[metal3.DetachedAnnotation]
	return detached || !s.host.DeletionTimestamp.IsZero() || s.host.Status.OperationalStatus == metal3.OperationalStatusDetached
}

// leave lets a deleted subscription go although its host's BMC cannot be reached, saying so.
func (s *scope) leave(why string) {
	s.release = true
	s.events.Warning(ReasonLeft, "Delete", why+": subscription "+s.sub.Status.SubscriptionID+" may remain on its BMC")
}

// stillOnBMC reports whether the BMC still has subscription id with this one's destination and
// context. The id alone is not enough, even for a host with no other BMCEventSubscription: a BMC
// reset to its defaults numbers the subscriptions made after it from the start again, and may give
// this one's old id to anyone's (another client of the BMC, another object of the host), which
// would then be kept (events lost) and removed by this one's deletion. The provisioner reads the
// list and this id alone (two requests, not one per subscription of the BMC).
func (s *scope) stillOnBMC(host provisioner.Host, id string) (bool, error) {
	return s.r.Provisioner.EventSubscriptionExists(s.ctx, host, id,
		provisioner.EventSubscription{Destination: s.sub.Spec.Destination, Context: s.sub.Spec.Context})
}

// hostSubscriptions lists the BMCEventSubscriptions of this one's host, this one included.
func (s *scope) hostSubscriptions() ([]metal3.BMCEventSubscription, error) {
	var list metal3.BMCEventSubscriptionList
	if err := s.r.Client.List(s.ctx, &list, client.InNamespace(s.sub.Namespace), client.MatchingFields{hostNameField: s.sub.Spec.HostName},
		cacheview.ReadOnly); err != nil {
		return nil, fmt.Errorf("listing the subscriptions of host %s: %w", s.sub.Spec.HostName, err)
	}
	return list.Items, nil
}

// takeOver returns a subscription on the BMC with the same destination and context that no other
// BMCEventSubscription of the host records: this one's earlier create, whose answer was lost (its
// status write failed, or the BMC answered after the client gave up), would otherwise be doubled
// at each retry until the BMC is full.
func (s *scope) takeOver(host provisioner.Host, want provisioner.EventSubscription) (string, error) {
	found, err := s.r.Provisioner.FindEventSubscriptions(s.ctx, host, want)
	if err != nil {
		return "", err
	}
	return s.unclaimed(found)
}

// unclaimed returns the first of found that no other BMCEventSubscription of the host records.
func (s *scope) unclaimed(found []string) (string, error) {
	if len(found) == 0 {
		return "", nil
	}
	others, err := s.hostSubscriptions()
	if err != nil {
		return "", err
	}
	for _, id := range found {
		if !slices.ContainsFunc(others, func(o metal3.BMCEventSubscription) bool {
			return o.UID != s.sub.UID && o.Status.SubscriptionID == id
		}) {
			return id, nil
		}
	}
	return "", nil
}

// succeeded resets the retry backoff.
func (s *scope) succeeded() { s.r.failures.Delete(s.sub.UID) }

// retryDelay is the backoff after another failure: RetryDelay, doubling up to Resync.
func (s *scope) retryDelay() time.Duration {
	n := 0
	if v, ok := s.r.failures.Load(s.sub.UID); ok {
		n = v.(int)
	}
	s.r.failures.Store(s.sub.UID, n+1)
	return min(s.r.Config.RetryDelay<<min(n, 16), max(s.r.Config.Resync, s.r.Config.RetryDelay))
}

// failed handles a provisioner error: a host the provisioner does not know now is waited for; a
// host another request holds is tried again in a few seconds, with nothing said; a BMC or Ironic
// that does not answer, or refuses, is shown in status and tried again after a backoff (each
// failing call holds an Ironic worker and the node's lock for up to half a minute).
func (s *scope) failed(err error, doing string) (ctrl.Result, error) {
	if errors.Is(err, provisioner.ErrBusy) {
		// Nothing failed (two subscriptions of one host reconciled together meet each other's
		// node lock): no error, no Warning, no backoff step, as the DataImage controller's Busy.
		ctrl.LoggerFrom(s.ctx).V(1).Info("The provisioner is busy with the host; looking again soon", "doing", doing, "reason", err.Error())
		return ctrl.Result{RequeueAfter: companion.Jitter(s.r.Config.BusyRetry)}, nil
	}
	if errors.Is(err, provisioner.ErrNeedsRegistration) {
		return companion.ProvisionerError(s.ctx, err, doing)
	}
	if errors.Is(err, provisioner.ErrEventSubscriptionUnsupported) {
		// Never possible for this host (an IPMI address): said, not retried; a deletion goes.
		s.setError(ReasonInvalid, doing+": "+err.Error())
		s.release = !s.sub.DeletionTimestamp.IsZero()
		return ctrl.Result{}, nil
	}
	s.setError(ReasonFailed, doing+": "+err.Error())
	return ctrl.Result{RequeueAfter: s.retryDelay()}, nil
}

// setError records msg in status.error, with a Warning when it is new.
func (s *scope) setError(reason, msg string) {
	msg = statustext.Clean(msg, statustext.ConditionMessageLimit)
	if s.sub.Status.Error == msg {
		return
	}
	s.sub.Status.Error = msg
	s.events.Warning(reason, "Validate", msg)
}

// write patches the status when it changed, announces it, then lets the subscription go when
// asked.
func (s *scope) write() error {
	if s.release {
		s.r.failures.Delete(s.sub.UID)
	}
	if err := companion.Finish(s.ctx, s.r.Client, s.p, s.sub, s.events, s.r.Recorder, metal3.BMCEventSubscriptionFinalizer, s.release, &s.r.written); err != nil {
		return err
	}
	if v := s.headersVersion; v != "" && !s.release && s.sub.Annotations[metal3.HTTPHeadersVersionAnnotation] != v {
		// After the status: a lost write of it only re-creates the subscription once more.
		err := s.p.PatchMetadata(s.ctx, s.sub, func() { metav1.SetMetaDataAnnotation(&s.sub.ObjectMeta, metal3.HTTPHeadersVersionAnnotation, v) })
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}
