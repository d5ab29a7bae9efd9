package specialresource

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/sro/naming"
)

// hold is what a reconcile that cannot go through still does: one that waits for its
// dependencies, one that stopped before its plan (an invalid spec, a missing or broken recipe, a
// namespace being deleted) or failed before it, and one whose write failed (an object the API
// server refused). Nothing new is built, applied or labelled, but what no longer holds is undone,
// so that nodes and status stay true meanwhile (a node that rebooted into a kernel whose driver
// cannot be deployed now, say): the DaemonSets and other kernel-affine objects of kernels no
// selected node runs are deleted, and a node loses its state labels when it is no longer selected
// or no available pod of its kernel's driver runs on it. What still holds stays: a working driver
// is not torn down, nor its nodes' labels taken, because the recipe is broken for a moment.
func (r *Reconciler) hold(s *scope) error {
	if err := r.listNodes(s); err != nil {
		return err
	}
	// Listed afresh: a failed reconcile may have listed part of them. A kind the operator may not
	// list is skipped (its objects are not pruned): the full reconcile reports it. The objects of
	// the namespaces a move leaves are kept out only once the move started (leaveOld): until then
	// the driver there still serves its nodes.
	s.in.owned, s.in.left = nil, nil
	var leaving []string
	if s.fx.leaveOld {
		leaving = s.in.oldNamespaces
	}
	if _, err := r.observeOwned(s, listedKinds(s), leaving); err != nil {
		return err
	}
	in := r.planInput(s)
	if !validSelector(s.sr) {
		in.present, in.selected = everyNode(s.in.allNodes)
	}
	res, affine := holdObjects(in, statusDrivers(s.sr))
	in.driverPods = map[string]map[string]bool{}
	for k, ds := range res.driverDaemonSets {
		nodes, err := r.servedOn(s.ctx, ds)
		if err != nil {
			return err
		}
		in.driverPods[k] = nodes
	}
	holdLabels(res, in, affine)
	res.labelsBehind = driverPodsBehind(in, res.driverDaemonSets)
	s.plan = res
	r.skipInFlightLabels(s)
	return nil
}

// validSelector: spec.nodeSelector is a valid label selector (a spec admitted while the webhook
// did not run may have any keys and values).
func validSelector(sr *sro.SpecialResource) bool {
	return len(metav1validation.ValidateLabels(sr.Spec.NodeSelector, field.NewPath("spec", "nodeSelector"))) == 0
}

// everyNode takes every node that reports a kernel as selected, for a hold whose node selector is
// not valid: it matches no node, and judging by it would take every driver away although nothing
// changed on the nodes. Only what no node supports is undone then: the labels of nodes where no
// driver serves, the objects of kernels no node runs.
func everyNode(nodes []nodeLabels) (present map[string]bool, selected map[string]string) {
	present, selected = map[string]bool{}, map[string]string{}
	for _, n := range nodes {
		if n.kernel != "" {
			present[n.kernel] = true
			selected[n.name] = n.kernel
		}
	}
	return present, selected
}

// holdObjects decides, from our objects alone, what hold deletes and which DaemonSet is each
// kernel's driver. drivers names each kernel's driver DaemonSet as the last full reconcile found
// it (status.kernels[].daemonSet). affine: the recipe counts as kernel-affine, when one of our
// objects is or the status names a driver.
func holdObjects(in planInput, drivers map[string]string) (res *planResult, affine bool) {
	res = &planResult{readyStates: map[string]int{}, perKernel: map[string]string{},
		driverDaemonSets: map[string]*unstructured.Unstructured{}, hold: true}
	affine = len(drivers) > 0
	for _, u := range in.owned {
		k := u.GetAnnotations()[sro.KernelAnnotation]
		if k == "" {
			continue
		}
		affine = true
		if !in.present[k] && u.GetDeletionTimestamp().IsZero() {
			res.prune = append(res.prune, u)
		}
	}
	res.driverDaemonSets = pickDrivers(in.owned, drivers, func(k string) bool { return in.present[k] })
	return res, affine
}

// holdLabels adds hold's label removals to res: a node loses its state labels when it is no
// longer selected or, for a kernel-affine recipe, when no available pod of its kernel's driver
// runs on it (in.driverPods, as the full plan judges it). Judged per node, not by the
// DaemonSet's readiness: one pod restarting must not take the labels off every node of its
// kernel for as long as the dependency takes. A shared recipe's labels stand (they do not
// depend on the kernel).
func holdLabels(res *planResult, in planInput, affine bool) {
	res.nodeLabels = map[string]map[string]*string{}
	prefix := naming.StateLabelPrefix(in.srName)
	for _, n := range in.nodes {
		if k, selected := in.selected[n.name]; selected && (!affine || in.driverPods[k][n.name]) {
			continue
		}
		if c := stateLabelChanges(n, prefix, nil); c != nil {
			res.nodeLabels[n.name] = c
		}
	}
}
