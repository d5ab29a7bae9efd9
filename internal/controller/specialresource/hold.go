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
// longer selected or its kernel has no available driver.
func (r *Reconciler) hold(s *scope) error {
	if err := r.observeOwned(s, pruneKinds(s.sr)); err != nil {
		return err
	}
	in := r.planInput(s)
	drivers := map[string]string{}
	for _, k := range s.sr.Status.Kernels {
		if k.DaemonSet != "" {
			drivers[k.KernelVersion] = k.DaemonSet
		}
	}
	s.plan = holdPlan(in, drivers)
	r.skipInFlightLabels(s)
	return nil
}

// holdPlan decides, from our objects and the nodes alone, what hold undoes. drivers names each
// kernel's driver DaemonSet as the last full reconcile found it (status.kernels[].daemonSet).
// The recipe counts as kernel-affine when one of our objects is, or the status names a driver;
// otherwise the labels of selected nodes stand (they do not depend on the kernel).
func holdPlan(in planInput, drivers map[string]string) *planResult {
	res := &planResult{readyStates: map[string]int{}, perKernel: map[string]string{},
		driverDaemonSets: map[string]*unstructured.Unstructured{}, hold: true}
	affine := len(drivers) > 0
	for _, u := range in.owned {
		k := u.GetAnnotations()[sro.KernelAnnotation]
		if k == "" {
			continue
		}
		affine = true
		switch {
		case !u.GetDeletionTimestamp().IsZero():
		case !in.present[k]:
			res.prune = append(res.prune, u)
		case u.GetKind() == "DaemonSet":
			// The status's driver if it is there, else the first by name.
			if cur := res.driverDaemonSets[k]; cur == nil || (cur.GetName() != drivers[k] && (u.GetName() == drivers[k] || u.GetName() < cur.GetName())) {
				res.driverDaemonSets[k] = u
			}
		}
	}
	served := map[string]bool{}
	for k, ds := range res.driverDaemonSets {
		ok, _ := daemonSetReady(ds)
		desired, _, _ := unstructured.NestedInt64(ds.Object, "status", "desiredNumberScheduled")
		served[k] = ok && desired > 0
	}
	res.nodeLabels = map[string]map[string]*string{}
	prefix := naming.StateLabelPrefix(in.srName)
	for _, n := range in.nodes {
		if k, selected := in.selected[n.name]; selected && (!affine || served[k]) {
			continue
		}
		if c := stateLabelChanges(n, prefix, nil); c != nil {
			res.nodeLabels[n.name] = c
		}
	}
	return res
}
