package sroclusteroperator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/controller/conditions"
	"github.com/metalforge/metalforge/internal/sro/message"
	"github.com/metalforge/metalforge/internal/sro/naming"
)

// DefaultName is the ClusterOperator's name.
const DefaultName = "special-resource-operator"

// Reasons of the ClusterOperator conditions.
const (
	ReasonAsExpected         = "AsExpected"
	ReasonPreflightSucceeded = "PreflightValidationSucceeded"
	ReasonPreflightPending   = "PreflightValidationPending"
	ReasonPreflightFailed    = "PreflightValidationFailed"
	ReasonProgressing        = "SpecialResourcesProgressing"
	ReasonErrored            = "SpecialResourcesErrored"
)

// DegradedAfter is how long a SpecialResource stays Errored before the ClusterOperator is
// Degraded: OpenShift's Degraded is a failure that persists and needs an administrator, not one
// a retry may end (a registry briefly refusing, a build being retried).
const DegradedAfter = 10 * time.Minute

var metricUpgradeAlert = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: "sro_upgrade_alert",
	Help: "1 while a PreflightValidation's kernel lacks a driver image for some SpecialResource (Upgradeable=False).",
})

func init() { metrics.Registry.MustRegister(metricUpgradeAlert) }

// Reconciler writes the ClusterOperator.
type Reconciler struct {
	Client client.Client
	// APIReader reads the ClusterOperator (which the operator does not cache).
	APIReader client.Reader
	// Name of the ClusterOperator (DefaultName when empty).
	Name string
	// Version is the operator's version, reported in status.versions.
	Version string
	// Namespace is the operator's namespace (a related object).
	Namespace string
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Resync is the longest the ClusterOperator goes unchecked (DefaultResync when zero): it is
	// not watched (nor cached), so one deleted or overwritten by hand (its Upgradeable=False gone,
	// the cluster-version operator no longer held back) is written again at the latest then.
	Resync time.Duration
	// SkipNameValidation lets tests run several managers in one process.
	SkipNameValidation bool
}

// DefaultResync is Reconciler.Resync's default.
const DefaultResync = 5 * time.Minute

// SetupWithManager reconciles the one ClusterOperator when PreflightValidations or the
// SpecialResources' conditions change, and once at start.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil {
		r.Client = mgr.GetClient()
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if r.Name == "" {
		r.Name = DefaultName
	}
	one := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: r.Name}}}
	})
	start := make(chan event.GenericEvent, 1)
	start <- event.GenericEvent{Object: &configv1.ClusterOperator{ObjectMeta: metav1.ObjectMeta{Name: r.Name}}}
	return ctrl.NewControllerManagedBy(mgr).
		Named("sroclusteroperator").
		Watches(&sro.PreflightValidation{}, one).
		Watches(&sro.SpecialResource{}, one, builder.WithPredicates(conditionsChanged())).
		WatchesRawSource(source.Channel(start, one)).
		WithOptions(controller.Options{MaxConcurrentReconciles: 1, SkipNameValidation: &r.SkipNameValidation}).
		Complete(r)
}

// conditionsChanged passes SpecialResources created, deleted, edited, or whose True condition or
// ready generation changed.
func conditionsChanged() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, okO := e.ObjectOld.(*sro.SpecialResource)
		n, okN := e.ObjectNew.(*sro.SpecialResource)
		return !okO || !okN || trueCondition(o) != trueCondition(n) || o.Generation != n.Generation ||
			o.Status.ReadyGeneration != n.Status.ReadyGeneration || erroredMessage(o) != erroredMessage(n)
	}}
}

// erroredMessage is the message of sr's Errored condition when True (Degraded repeats it).
func erroredMessage(sr *sro.SpecialResource) string {
	if c := conditions.Get(sr.Status.Conditions, sro.ConditionErrored); c != nil && c.Status == metav1.ConditionTrue {
		return c.Message
	}
	return ""
}

func trueCondition(sr *sro.SpecialResource) string {
	for _, c := range sr.Status.Conditions {
		if c.Status == metav1.ConditionTrue {
			return c.Type
		}
	}
	return ""
}

// Reconcile computes the conditions and writes the ClusterOperator's status when it changed.
func (r *Reconciler) Reconcile(ctx context.Context, _ reconcile.Request) (ctrl.Result, error) {
	var pvs sro.PreflightValidationList
	if err := r.Client.List(ctx, &pvs); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing PreflightValidations: %w", err)
	}
	var srs sro.SpecialResourceList
	if err := r.Client.List(ctx, &srs); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing SpecialResources: %w", err)
	}
	want, recheck := Conditions(pvs.Items, srs.Items, r.now())
	co := &configv1.ClusterOperator{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Name: r.Name}, co); apierrors.IsNotFound(err) {
		co = &configv1.ClusterOperator{ObjectMeta: metav1.ObjectMeta{Name: r.Name, Labels: map[string]string{sro.OwnedLabel: naming.LabelValue(r.Name)}}}
		if err := r.Client.Create(ctx, co); err != nil {
			return ctrl.Result{}, fmt.Errorf("creating ClusterOperator %s: %w", r.Name, err)
		}
	} else if err != nil {
		return ctrl.Result{}, fmt.Errorf("reading ClusterOperator %s: %w", r.Name, err)
	}
	before := co.DeepCopy()
	now := metav1.NewTime(r.now().Truncate(time.Second))
	co.Status.Conditions = merge(co.Status.Conditions, want, now)
	co.Status.Versions = []configv1.OperandVersion{{Name: "operator", Version: r.Version}}
	co.Status.RelatedObjects = []configv1.ObjectReference{
		{Group: sro.GroupVersion.Group, Resource: "specialresources"},
		{Group: sro.GroupVersion.Group, Resource: "preflightvalidations"},
	}
	if r.Namespace != "" {
		co.Status.RelatedObjects = append(co.Status.RelatedObjects, configv1.ObjectReference{Resource: "namespaces", Name: r.Namespace})
	}
	co.Status.RelatedObjects = append(co.Status.RelatedObjects, driverNamespaces(srs.Items, r.Namespace)...)
	alert := 0.0
	if c := find(co.Status.Conditions, configv1.OperatorUpgradeable); c != nil && c.Status == configv1.ConditionFalse {
		alert = 1
	}
	metricUpgradeAlert.Set(alert)
	// Nothing wakes the controller when a SpecialResource has been Errored for DegradedAfter, nor
	// when the ClusterOperator is changed by someone else.
	resync := r.Resync
	if resync == 0 {
		resync = DefaultResync
	}
	if recheck == 0 || recheck > resync {
		recheck = resync
	}
	res := ctrl.Result{RequeueAfter: recheck}
	if equality.Semantic.DeepEqual(before.Status, co.Status) {
		return res, nil
	}
	if err := r.Client.Status().Patch(ctx, co, client.MergeFrom(before)); err != nil {
		return ctrl.Result{}, fmt.Errorf("writing the status of ClusterOperator %s: %w", r.Name, err)
	}
	return res, nil
}

// driverNamespaces are the namespaces the SpecialResources' drivers run in (their DaemonSets,
// builds and build logs), sorted, without the operator's own: must-gather collects the related
// objects, and a driver that does not load is diagnosed there.
func driverNamespaces(srs []sro.SpecialResource, operator string) []configv1.ObjectReference {
	var names []string
	for i := range srs {
		if ns := srs[i].TargetNamespace(); ns != operator && !slices.Contains(names, ns) {
			names = append(names, ns)
		}
	}
	slices.Sort(names)
	out := make([]configv1.ObjectReference, len(names))
	for i, ns := range names {
		out[i] = configv1.ObjectReference{Resource: "namespaces", Name: ns}
	}
	return out
}

// Conditions are the ClusterOperator's conditions (without times) for these objects at now, and
// when to look again (0: no need) for a SpecialResource Errored for less than DegradedAfter.
//
// Progressing counts the SpecialResources rolling out their spec: Progressing and not yet Ready at
// their generation. One that was Ready at it and waits for a driver pod on a node that rebooted
// (every node, during an upgrade) or joined is not (OpenShift: not Progressing only because
// DaemonSets adjust to a node reboot or scale-up). Degraded names those Errored for DegradedAfter.
func Conditions(pvs []sro.PreflightValidation, srs []sro.SpecialResource, now time.Time) ([]configv1.ClusterOperatorStatusCondition, time.Duration) {
	cond := func(t configv1.ClusterStatusConditionType, st configv1.ConditionStatus, reason, msg string) configv1.ClusterOperatorStatusCondition {
		return configv1.ClusterOperatorStatusCondition{Type: t, Status: st, Reason: reason, Message: message.Sanitize(msg)}
	}
	var progressing, errored []string
	var recheck time.Duration
	for _, sr := range srs {
		if !sr.DeletionTimestamp.IsZero() {
			continue
		}
		if conditions.IsTrue(sr.Status.Conditions, sro.ConditionProgressing) && sr.Status.ReadyGeneration < sr.Generation {
			progressing = append(progressing, sr.Name)
		}
		if c := conditions.Get(sr.Status.Conditions, sro.ConditionErrored); c != nil && c.Status == metav1.ConditionTrue {
			if left := DegradedAfter - now.Sub(c.LastTransitionTime.Time); left > 0 {
				if recheck == 0 || left < recheck {
					recheck = left
				}
			} else {
				errored = append(errored, sr.Name+": "+c.Message)
			}
		}
	}
	slices.Sort(progressing)
	slices.Sort(errored)
	degraded := cond(configv1.OperatorDegraded, configv1.ConditionFalse, ReasonAsExpected, "")
	if len(errored) > 0 {
		degraded = cond(configv1.OperatorDegraded, configv1.ConditionTrue, ReasonErrored,
			fmt.Sprintf("Errored for more than %s: %s", DegradedAfter, strings.Join(errored, "; ")))
	}
	out := []configv1.ClusterOperatorStatusCondition{
		cond(configv1.OperatorAvailable, configv1.ConditionTrue, ReasonAsExpected, fmt.Sprintf("managing %d SpecialResources", len(srs))),
		degraded,
	}
	if len(progressing) > 0 {
		out = append(out, cond(configv1.OperatorProgressing, configv1.ConditionTrue, ReasonProgressing, "progressing: "+message.List(progressing)))
	} else {
		out = append(out, cond(configv1.OperatorProgressing, configv1.ConditionFalse, ReasonAsExpected, ""))
	}
	return append(out, upgradeable(pvs)), recheck
}

// upgradeable is False while some PreflightValidation is not verified: Failed when a
// SpecialResource's check errored (a failed build, say), Pending otherwise.
func upgradeable(pvs []sro.PreflightValidation) configv1.ClusterOperatorStatusCondition {
	var pending, failed []string
	verified := 0
	for _, pv := range pvs {
		if !pv.DeletionTimestamp.IsZero() {
			continue
		}
		if conditions.IsCurrent(pv.Status.Conditions, sro.ConditionReady, pv.Generation) {
			verified++
			continue
		}
		var names []string
		bad := false
		for _, s := range pv.Status.SRStatuses {
			if s.VerificationStatus != sro.VerificationTrue {
				names = append(names, s.Name+": "+s.StatusReason)
				bad = bad || s.VerificationStatus == sro.VerificationError
			}
		}
		if len(names) == 0 {
			names = []string{"not checked yet"}
		}
		entry := "kernel " + pv.Spec.KernelVersion + " (PreflightValidation " + pv.Name + "): " + strings.Join(names, "; ")
		if bad {
			failed = append(failed, entry)
		} else {
			pending = append(pending, entry)
		}
	}
	c := configv1.ClusterOperatorStatusCondition{Type: configv1.OperatorUpgradeable, Status: configv1.ConditionTrue, Reason: ReasonAsExpected}
	switch {
	case len(failed) > 0:
		c.Status, c.Reason, c.Message = configv1.ConditionFalse, ReasonPreflightFailed, "no driver image for "+strings.Join(append(failed, pending...), "; ")
	case len(pending) > 0:
		c.Status, c.Reason, c.Message = configv1.ConditionFalse, ReasonPreflightPending, "no driver image yet for "+strings.Join(pending, "; ")
	case verified > 0:
		c.Reason, c.Message = ReasonPreflightSucceeded, "every SpecialResource has a driver image for the kernels of the PreflightValidations"
	}
	c.Message = message.Sanitize(c.Message)
	return c
}

// merge sets want into have, keeping each condition's lastTransitionTime unless its status
// changed; conditions of other types are kept.
func merge(have, want []configv1.ClusterOperatorStatusCondition, now metav1.Time) []configv1.ClusterOperatorStatusCondition {
	out := slices.Clone(have)
	for _, w := range want {
		if c := find(out, w.Type); c != nil {
			if c.Status != w.Status {
				c.LastTransitionTime = now
			}
			c.Status, c.Reason, c.Message = w.Status, w.Reason, w.Message
			continue
		}
		w.LastTransitionTime = now
		out = append(out, w)
	}
	return out
}

func find(conds []configv1.ClusterOperatorStatusCondition, t configv1.ClusterStatusConditionType) *configv1.ClusterOperatorStatusCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}
