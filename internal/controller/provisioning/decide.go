package provisioning

import (
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/events"
	"github.com/metalforge/metalforge/internal/controller/provisioning/clusteroperator"
	"github.com/metalforge/metalforge/internal/controller/provisioning/render"
	"github.com/metalforge/metalforge/internal/statustext"
	"github.com/metalforge/metalforge/internal/webhooks"
)

// Event reasons (on the Provisioning object).
const (
	ReasonInvalidConfiguration   = "InvalidConfiguration"
	ReasonCreated                = "Created"
	ReasonUpdated                = "Updated"
	ReasonClaimed                = "Claimed"
	ReasonRecreated              = "Recreated"
	ReasonSecretGenerated        = "SecretGenerated"
	ReasonCertificateIssued      = "CertificateIssued"
	ReasonDeployComplete         = "DeployComplete"
	ReasonDeployTimedOut         = "DeployTimedOut"
	ReasonDeploymentCrashLooping = "DeploymentCrashLooping"
	ReasonDeleted                = "StackDeleted"
	ReasonRemoved                = "Removed"
)

// plan is what a reconcile decided; write carries it out.
type plan struct {
	state clusteroperator.State
	// paused: the Provisioning object is paused; its stack and the ClusterOperator stay as they are.
	paused bool
	// createCO: the ClusterOperator is missing and is created first.
	createCO bool
	// addFinalizer / removeFinalizer on the Provisioning object.
	addFinalizer, removeFinalizer bool
	// secretWrites are Secrets to create (no resourceVersion) or update.
	secretWrites []*corev1.Secret
	// writes are the stack's objects to create or update, in order.
	writes []objectWrite
	// deletes are objects to delete, in order.
	deletes []client.Object
	// observedGeneration, when set, is written to the Provisioning status with the
	// Deployments' generations (after the writes).
	observedGeneration *int64
	events             events.List
	requeueAfter       time.Duration
	// webhookCert is the operator's own webhook certificate (TLS Secret data) to serve.
	webhookCert map[string][]byte
}

// decide turns what was observed into a plan. It reads no API and writes nothing.
func decide(o *observed) (*plan, error) {
	p := &plan{createCO: o.coMissing}
	if !o.features.Enabled() {
		p.state = clusteroperator.State{Reason: clusteroperator.ReasonUnsupportedPlatform, AtLevel: true}
		return p, nil // and no requeue: nothing to do here, ever
	}
	if err := p.platformObjects(o); err != nil {
		return nil, err
	}
	prov := o.prov
	switch {
	case prov == nil:
		p.state = clusteroperator.State{Reason: clusteroperator.ReasonWaitingForProvisioningCR, AtLevel: true}
		p.requeueAfter = o.resync
		return p, nil
	case !prov.DeletionTimestamp.IsZero():
		return p, p.deleteStack(o)
	case paused(prov):
		// Nothing changes while paused, the ClusterOperator included.
		p.paused = true
		return p, nil
	}
	if !controllerutil.ContainsFinalizer(prov, metal3.ProvisioningFinalizer) {
		p.addFinalizer = true
	}
	if msg := invalid(o); msg != "" {
		p.invalid(o, msg)
		if last := lastApplied(o); last != nil {
			if _, _, err := p.planStack(last); err != nil && unusableSecret(err) == "" {
				return nil, err
			}
		}
		return p, nil
	}
	stack, bmoReady, err := p.planStack(o)
	if err != nil {
		if msg := unusableSecret(err); msg != "" {
			p.invalid(o, msg)
			return p, nil
		}
		return nil, err
	}
	p.recordApplied(o)
	p.observedGeneration = &prov.Generation
	p.rollout(o, stack, bmoReady)
	return p, nil
}

// planStack plans the stack's Secrets and objects as o's Provisioning spec has them, and what
// this configuration no longer has. bmoReady: the baremetal-operator runs its current spec, so
// what waits for its webhook is planned too.
func (p *plan) planStack(o *observed) (stack *render.Stack, bmoReady bool, err error) {
	in, err := p.planSecrets(o)
	if err != nil {
		return nil, false, err
	}
	stack = render.Render(in)
	for _, obj := range stack.Objects {
		p.planObject(o, obj, true)
	}
	bmoReady = available(o.deployments[render.BMODeployment]) && !p.writesDeployment(render.BMODeployment)
	if bmoReady {
		for _, obj := range stack.AfterBMO {
			p.planObject(o, obj, true)
		}
	}
	p.removeAbsent(o, stack)
	return stack, bmoReady, nil
}

// removeAbsent deletes what this configuration does not have any more (the
// image-customization-controller once the images file no longer names it), and what OpenShift's
// operator ran that this one does not build (render.OpenShiftLeftovers), if it is ours.
func (p *plan) removeAbsent(o *observed, stack *render.Stack) {
	for _, obj := range append(slices.Clone(stack.Absent), render.OpenShiftLeftovers(o.namespace)...) {
		if existing := stored(o, obj); existing != nil && ours(existing, o.prov) {
			p.deletes = append(p.deletes, existing)
			p.events.NormalAbout(existing, ReasonRemoved, "Delete", "Removed "+describe(existing)+": the configuration no longer has it")
		}
	}
}

// paused: the pause annotation stops every change to the stack.
func paused(prov *metal3.Provisioning) bool {
	_, ok := prov.Annotations[metal3.ProvisioningPausedAnnotation]
	return ok
}

// invalid is what is wrong with the input ("" when nothing): the Provisioning spec, every field at
// once, then the images file.
func invalid(o *observed) string {
	if errs := webhooks.ValidateProvisioningOn(o.prov, string(o.features.Platform), o.features.Modes); len(errs) > 0 {
		return statustext.FieldErrors(errs).ToAggregate().Error()
	}
	if o.imagesErr != nil {
		return o.imagesErr.Error()
	}
	if err := render.CheckICC(render.Input{Images: o.images, Spec: o.prov.Spec}); err != nil {
		return err.Error()
	}
	return ""
}

// invalid reports bad input: Degraded with the message, and an event when the message is new (so
// the same bad spec is reported once, not at every resync). Nothing of the bad spec is deployed and
// observedGeneration stays where it was: the last good stack keeps running, maintained from the
// last valid spec (lastApplied) when there is one.
func (p *plan) invalid(o *observed, msg string) {
	// The ClusterOperator is readable cluster-wide: the URLs it may quote lose their credentials.
	msg = statustext.Clean(msg, statustext.ConditionMessageLimit)
	p.state = clusteroperator.State{Reason: clusteroperator.ReasonInvalidConfiguration, Message: msg, Busy: o.busy}
	p.requeueAfter = o.retry
	if c := clusteroperator.Condition(o.co, "Degraded"); c == nil || c.Reason != clusteroperator.ReasonInvalidConfiguration || c.Message != msg {
		p.events.Warning(ReasonInvalidConfiguration, "Validate", msg)
	}
}

// writesDeployment reports whether the plan changes the named Deployment.
func (p *plan) writesDeployment(name string) bool {
	return slices.ContainsFunc(p.writes, func(w objectWrite) bool {
		_, ok := w.obj.(*appsv1.Deployment)
		return ok && w.obj.GetName() == name
	})
}

// available: the Deployment runs its current spec with every replica available.
func available(d *appsv1.Deployment) bool {
	if d == nil || d.Status.ObservedGeneration < d.Generation {
		return false
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	return d.Status.UpdatedReplicas >= want && d.Status.AvailableReplicas >= want && d.Status.UnavailableReplicas == 0
}

// timedOut: the Deployment gave up on its rollout (its progress deadline passed).
func timedOut(d *appsv1.Deployment) bool {
	if d == nil || d.Status.ObservedGeneration < d.Generation {
		return false
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse && c.Reason == "ProgressDeadlineExceeded" {
			return true
		}
	}
	return false
}

// unavailableLimit is how long a Deployment whose rollout finished may be unavailable before it is
// reported (Degraded): the rollout's own deadline, 5 minutes (render's progressDeadline).
const unavailableLimit = 5 * time.Minute

// down: the Deployment finished its rollout and has been unavailable for unavailableLimit at now
// (its pod crash-loops, or cannot be placed again). Kubernetes checks the progress deadline only
// while a rollout is under way, so nothing else ever reports this; the time comes from the
// Deployment's Available condition, so the decision holds across operator restarts.
func down(d *appsv1.Deployment, now time.Time) bool {
	if d == nil || d.Status.ObservedGeneration < d.Generation || available(d) {
		return false
	}
	rolledOut := false
	var since time.Time
	for _, c := range d.Status.Conditions {
		switch {
		case c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionTrue && c.Reason == "NewReplicaSetAvailable":
			rolledOut = true
		case c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionFalse:
			since = c.LastTransitionTime.Time
		}
	}
	return rolledOut && !since.IsZero() && !now.Before(since.Add(unavailableLimit))
}

// rollout decides the state from the plan's writes, the Deployments' progress and what the stack
// says it waits for.
func (p *plan) rollout(o *observed, stack *render.Stack, bmoReady bool) {
	var waiting, late, downs, loops, names []string
	for _, rendered := range stack.Deployments() {
		name := rendered.Name
		names = append(names, name)
		d := o.deployments[name]
		loop := crashLoop(d, o.pods, o.now)
		switch {
		case p.writesDeployment(name) || d == nil:
			waiting = append(waiting, name)
		case timedOut(d):
			late = append(late, name)
		case loop != "":
			loops = append(loops, fmt.Sprintf("%s deployment crash-looping (%s)", name, loop))
		case down(d, o.now):
			downs = append(downs, name)
		case !available(d):
			waiting = append(waiting, name)
		}
	}
	switch {
	case len(late) > 0:
		msg := fmt.Sprintf("%s deployment rollout taking too long", strings.Join(late, " and "))
		p.state = clusteroperator.State{Reason: clusteroperator.ReasonDeployTimedOut, Message: msg, Busy: o.busy}
		if c := clusteroperator.Condition(o.co, "Degraded"); c == nil || c.Reason != clusteroperator.ReasonDeployTimedOut {
			p.events.Warning(ReasonDeployTimedOut, "Rollout", msg)
		}
	case len(downs) > 0 || len(loops) > 0:
		parts := loops
		if len(downs) > 0 {
			parts = append(parts, fmt.Sprintf("%s deployment unavailable for more than %d minutes since its rollout finished: look at its pods",
				strings.Join(downs, " and "), int(unavailableLimit.Minutes())))
		}
		msg := strings.Join(parts, "; ")
		p.state = clusteroperator.State{Reason: clusteroperator.ReasonDeploymentCrashLooping, Message: msg, Busy: o.busy}
		if c := clusteroperator.Condition(o.co, "Degraded"); c == nil || c.Reason != clusteroperator.ReasonDeploymentCrashLooping {
			p.events.Warning(ReasonDeploymentCrashLooping, "Rollout", msg)
		}
		// The Deployment's status changes when its pod runs again; this is a safety net.
		p.requeueAfter = 30 * time.Second
	case len(waiting) > 0 || len(stack.Waiting) > 0 || len(p.writes) > 0 || len(p.secretWrites) > 0:
		var parts []string
		if len(waiting) > 0 {
			parts = append(parts, "Waiting for "+strings.Join(waiting, " and ")+" to roll out")
		}
		if len(stack.Waiting) > 0 {
			parts = append(parts, "Waiting for "+strings.Join(stack.Waiting, " and "))
		}
		progress := strings.Join(parts, "; ")
		if progress == "" {
			progress = "Applying metal3 resources"
		}
		p.state = clusteroperator.State{Reason: clusteroperator.ReasonSyncing, Progress: progress, Busy: o.busy}
		// The Deployments' status changes wake the operator; this is a safety net.
		p.requeueAfter = 30 * time.Second
	default:
		p.state = clusteroperator.State{Reason: clusteroperator.ReasonDeployComplete, Busy: o.busy, AtLevel: bmoReady}
		if c := clusteroperator.Condition(o.co, "Available"); c == nil || c.Reason != clusteroperator.ReasonDeployComplete {
			p.events.Normal(ReasonDeployComplete, "Rollout", strings.Join(names, ", ")+" are running")
		}
		p.requeueAfter = o.resync
	}
}
