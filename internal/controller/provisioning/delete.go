package provisioning

import (
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/provisioning/clusteroperator"
	"github.com/metalforge/metalforge/internal/controller/provisioning/render"
)

// deleteStack plans the removal of everything the Provisioning object's stack consists of, the
// webhook configuration first (so no host write waits on a webhook that is going away), then the
// finalizer. The operator's own webhook and the ClusterOperator stay: they belong to the platform,
// not to this Provisioning object.
func (p *plan) deleteStack(o *observed) error {
	var order []client.Object
	if w := o.webhookConfigs[render.BMOWebhookConfig]; w != nil {
		order = append(order, w)
	}
	// The baremetal-operator first: it stops asking for images and for Ironic.
	for _, name := range []string{render.BMODeployment, render.ICCDeployment, render.Metal3Deployment} {
		if d := o.deployments[name]; d != nil {
			order = append(order, d)
		}
	}
	for _, name := range []string{render.BMOWebhookService, render.ICCService, render.StateService} {
		if s := o.services[name]; s != nil {
			order = append(order, s)
		}
	}
	for _, name := range stackSecrets {
		if s := o.secrets[name]; s != nil {
			order = append(order, s)
		}
	}
	for _, obj := range order {
		if ours(obj, o.prov) {
			p.deletes = append(p.deletes, obj)
		}
	}
	if len(p.deletes) > 0 {
		p.events.Normal(ReasonDeleted, "Delete", "Deleting the provisioning stack: the Provisioning object is being deleted")
	}
	p.removeFinalizer = controllerutil.ContainsFinalizer(o.prov, metal3.ProvisioningFinalizer)
	p.state = clusteroperator.State{Reason: clusteroperator.ReasonResourceNotFound}
	return nil
}

// ours: the Provisioning object controls obj, or obj carries the operator's claim or label.
func ours(obj client.Object, prov *metal3.Provisioning) bool {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.UID == prov.UID {
			return true
		}
	}
	if _, ok := obj.GetAnnotations()[render.OwnedAnnotation]; ok {
		return true
	}
	_, ok := obj.GetLabels()[render.ComponentLabel]
	return ok
}
