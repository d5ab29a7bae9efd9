package specialresource

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/sro/naming"
)

// hold is what a reconcile that waits for its dependencies still does. Nothing new is built,
// applied or labelled (the dependencies come first), but what no longer holds is undone, so that
// nodes and status stay true while a dependency is not Ready (a node that rebooted into a kernel
// whose dependency image is still building, say): the DaemonSets and other kernel-affine objects
// of kernels no selected node runs are deleted, and a node loses its state labels when it is no
// longer selected or no available pod of its kernel's driver runs on it.
func (r *Reconciler) hold(s *scope) error {
	if err := r.observeOwned(s, pruneKinds(s.sr)); err != nil {
		return err
	}
	in := r.planInput(s)
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
	s.plan = res
	r.skipInFlightLabels(s)
	return nil
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
