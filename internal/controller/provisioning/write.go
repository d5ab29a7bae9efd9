package provisioning

import (
	"context"
	"fmt"

	configv1 "github.com/openshift/api/config/v1"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/patch"
	"github.com/metalforge/metalforge/internal/controller/provisioning/clusteroperator"
)

// write carries out a plan in the order that keeps the reports true: the ClusterOperator exists
// before anything is claimed (the machine-api-operator's downgrade guard), the finalizer is on
// before anything is created (so deleting the Provisioning object always cleans up), Secrets exist
// before the pods that mount them, the statuses say what was written, and events come last.
func (r *Reconciler) write(ctx context.Context, o *observed, p *plan) error {
	co := o.co
	if p.createCO {
		if err := r.Client.Create(ctx, co); apierrors.IsAlreadyExists(err) {
			if err := r.Client.Get(ctx, client.ObjectKeyFromObject(co), co); err != nil {
				return fmt.Errorf("reading clusteroperator %s: %w", co.Name, err)
			}
		} else if err != nil {
			return fmt.Errorf("creating clusteroperator %s: %w", co.Name, err)
		}
	}
	var prov *patch.Helper
	if o.prov != nil {
		prov = patch.NewHelper(r.Client, o.prov, &r.tracker)
	}
	if p.addFinalizer {
		if err := prov.PatchMetadata(ctx, o.prov, func() { controllerutil.AddFinalizer(o.prov, metal3.ProvisioningFinalizer) }); err != nil {
			return err
		}
	}
	for _, s := range p.secretWrites {
		if err := r.put(ctx, s); err != nil {
			return err
		}
	}
	if p.webhookCert != nil && r.WebhookCerts != nil {
		if err := r.WebhookCerts.Set(p.webhookCert); err != nil {
			return err
		}
	}
	written := map[string]*appsv1.Deployment{}
	for _, w := range p.writes {
		if w.recreate {
			if err := r.delete(ctx, w.obj); err != nil {
				return err
			}
			p.requeueAfter = staleRetry
			continue
		}
		if err := r.put(ctx, w.obj); err != nil {
			return err
		}
		if d, ok := w.obj.(*appsv1.Deployment); ok {
			written[d.Name] = d
		}
	}
	for _, obj := range p.deletes {
		if err := r.delete(ctx, obj); err != nil {
			return err
		}
	}
	if p.removeFinalizer {
		err := prov.PatchMetadata(ctx, o.prov, func() { controllerutil.RemoveFinalizer(o.prov, metal3.ProvisioningFinalizer) })
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	if p.observedGeneration != nil {
		setProvisioningStatus(o, *p.observedGeneration, written)
		if _, err := prov.PatchStatus(ctx, o.prov); err != nil {
			return err
		}
	}
	if !p.paused {
		h := patch.NewHelper(r.Client, co, nil)
		clusteroperator.Apply(co, p.state, o.release, clusteroperator.RelatedObjects(o.namespace), o.now)
		if _, err := h.PatchStatus(ctx, co); err != nil {
			return err
		}
		recordConditions(co)
	}
	if o.prov != nil {
		p.events.Emit(r.Recorder, o.prov)
	} else {
		p.events.Emit(r.Recorder, co)
	}
	return nil
}

// put creates an object without a resourceVersion and updates one with (an optimistic update
// of the stored object with the planned changes: a conflict retries the reconcile).
func (r *Reconciler) put(ctx context.Context, obj client.Object) error {
	if obj.GetResourceVersion() == "" {
		if err := r.Client.Create(ctx, obj); err != nil {
			return fmt.Errorf("creating %s: %w", describe(obj), err)
		}
		metricWrites.WithLabelValues("create").Inc()
		return nil
	}
	if err := r.Client.Update(ctx, obj); err != nil {
		return fmt.Errorf("updating %s: %w", describe(obj), err)
	}
	metricWrites.WithLabelValues("update").Inc()
	return nil
}

func (r *Reconciler) delete(ctx context.Context, obj client.Object) error {
	err := r.Client.Delete(ctx, obj, client.PropagationPolicy("Background"), client.Preconditions{UID: ptrUID(obj)})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting %s: %w", describe(obj), err)
	}
	metricWrites.WithLabelValues("delete").Inc()
	return nil
}

// setProvisioningStatus records the spec generation the stack now runs and the generation of
// each Deployment the operator last acted on (written now, or as stored).
func setProvisioningStatus(o *observed, generation int64, written map[string]*appsv1.Deployment) {
	st := &o.prov.Status
	st.ObservedGeneration = generation
	var gens []metal3.GenerationStatus
	for _, name := range stackDeployments {
		d := written[name]
		if d == nil {
			d = o.deployments[name]
		}
		if d == nil {
			continue
		}
		gens = append(gens, metal3.GenerationStatus{Group: "apps", Resource: "deployments", Namespace: d.Namespace, Name: d.Name, LastGeneration: d.Generation})
	}
	// Generations of other resources (an earlier operator's DaemonSets) are kept.
	for _, g := range st.Generations {
		if g.Group != "apps" || g.Resource != "deployments" {
			gens = append(gens, g)
		}
	}
	st.Generations = gens
}

func ptrUID(obj client.Object) *types.UID {
	uid := obj.GetUID()
	return &uid
}

func recordConditions(co *configv1.ClusterOperator) {
	for _, c := range co.Status.Conditions {
		metricCondition.WithLabelValues(string(c.Type)).Set(map[configv1.ConditionStatus]float64{configv1.ConditionTrue: 1}[c.Status])
	}
}
