package specialresource

import (
	"fmt"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/sro/naming"
	"github.com/metalforge/metalforge/internal/sro/recipe"
)

// planInput is everything plan decides from; nothing in it talks to the API server.
type planInput struct {
	srName string
	states []recipe.RenderedState
	// observed are the existing copies of rendered objects; stale marks those older than our
	// last write of them.
	observed map[objKey]*unstructured.Unstructured
	stale    map[objKey]bool
	logs     map[objKey]logState
	// kernels are the kernels whose manifests were rendered (their image exists), with their
	// nodes; present lists every kernel the selected nodes run.
	kernels map[string]kernelGroup
	present map[string]bool
	// owned are the objects labelled ours (not builds), for pruning.
	owned []*unstructured.Unstructured
	// nodes are all nodes; selected maps the selected ones to their kernel.
	nodes    []nodeLabels
	selected map[string]string
	// driverPods[k] are the nodes where an available pod of kernel k's driver DaemonSet runs.
	driverPods map[string]map[string]bool
}

// planResult is what plan decided.
type planResult struct {
	// apply are the objects to create or update, in order.
	apply []*unstructured.Unstructured
	// prune are our objects to delete.
	prune []*unstructured.Unstructured
	// readyStates[k] is how many leading states are ready for kernel k; readyStates[""] for
	// the manifests that are not kernel-affine.
	readyStates map[string]int
	// waitingState and waiting say what the first state that is not ready waits for; perKernel
	// the same per kernel.
	waitingState, waiting string
	perKernel             map[string]string
	// poll: something waited for does not wake the controller by itself.
	poll bool
	// nodeLabels are the state-label changes, per node (value nil: remove).
	nodeLabels map[string]map[string]*string
	// driverDaemonSets is each kernel's first kernel-affine DaemonSet (the driver), and
	// driverState the index of its state.
	driverDaemonSets map[string]*unstructured.Unstructured
	driverState      map[string]int
	// hold: the plan of a reconcile waiting for its dependencies (holdPlan): removals only.
	hold bool
	// labelsBehind: a driver DaemonSet counts more available pods than the cache shows
	// (driverPodsBehind), so nodes wait for their state labels.
	labelsBehind bool
}

// plan walks the states in order. Each kernel is a pipeline of its own: a state's
// kernel-affine manifests for kernel k are applied once every earlier state is ready for k (its
// own manifests and the shared ones), so a kernel that waits for its build holds back no other.
// A state's shared manifests (not kernel-affine) are applied once every earlier state is ready
// for every kernel: what later states deploy everywhere (a device plugin, say) waits for the
// drivers. Shared manifests that exist unchanged stay ready while a gate is closed, so nodes of
// a kernel that is ready keep their labels while a new kernel catches up. An object is ready
// when it needs no write and, if waited for, its kind says so; an object written now is ready
// at once unless waited for, so a reconcile goes through every state up to the first wait.
func plan(in planInput) *planResult {
	res := &planResult{readyStates: map[string]int{}, perKernel: map[string]string{}, nodeLabels: map[string]map[string]*string{},
		driverDaemonSets: map[string]*unstructured.Unstructured{}, driverState: map[string]int{}}
	kernels := slices.Sorted(maps.Keys(in.kernels))
	prevKernel := map[string]bool{}
	for _, k := range kernels {
		prevKernel[k] = true
	}
	everyKernel, sharedSoFar := true, true
	for i, st := range in.states {
		gate := everyKernel && sharedSoFar
		sharedReady := true
		for _, o := range st.Objects {
			if o.Kernel != "" {
				continue
			}
			if ok, why := res.object(in, o, nil, gate); !ok {
				sharedReady = false
				res.wait(st.Name, "", why)
			}
		}
		sharedSoFar = sharedSoFar && sharedReady
		if sharedSoFar {
			res.readyStates[""] = i + 1
		}
		everyKernel = true
		for _, k := range kernels {
			if !prevKernel[k] {
				everyKernel = false
				continue
			}
			g := in.kernels[k]
			kernelReady := sharedReady
			affine := false
			for _, o := range st.Objects {
				if o.Kernel != k {
					continue
				}
				affine = true
				if _, seen := res.driverState[k]; !seen && o.Obj.GetKind() == "DaemonSet" {
					res.driverDaemonSets[k] = in.observed[keyOf(o.Obj)]
					res.driverState[k] = i
				}
				if ok, why := res.object(in, o, &g, true); !ok {
					kernelReady = false
					res.wait(st.Name, k, why)
				}
			}
			if affine && g.labelled < len(g.nodes) {
				kernelReady = false
				res.wait(st.Name, k, fmt.Sprintf("%d of %d nodes labelled %s", g.labelled, len(g.nodes), sro.KernelLabel))
				res.poll = true
			}
			if !sharedReady && res.perKernel[k] == "" {
				res.perKernel[k] = "state " + st.Name + ": " + res.waiting
			}
			prevKernel[k] = kernelReady
			if kernelReady {
				res.readyStates[k] = i + 1
			} else {
				everyKernel = false
			}
		}
	}
	res.prune = prune(in)
	res.nodeLabels = nodeLabelChanges(in, res.readyStates, res.driverState, hasAffine(in.states))
	res.labelsBehind = driverPodsBehind(in, res.driverDaemonSets)
	return res
}

// driverPodsBehind reports whether a kernel's driver DaemonSet counts more available pods than
// the cache shows available. Pods are read from the cache but do not wake the controller (their
// informer can lag the DaemonSet's), so the nodes of the pods not seen yet would wait for their
// state labels until the resync (10 minutes) although the DaemonSet is ready.
func driverPodsBehind(in planInput, drivers map[string]*unstructured.Unstructured) bool {
	for k, ds := range drivers {
		if ds == nil {
			continue
		}
		if available, _, _ := unstructured.NestedInt64(ds.Object, "status", "numberAvailable"); available > int64(len(in.driverPods[k])) {
			return true
		}
	}
	return false
}

// object decides about one object: whether to apply it (only when may), and whether it is
// ready.
func (res *planResult) object(in planInput, o recipe.Object, g *kernelGroup, may bool) (bool, string) {
	key := keyOf(o.Obj)
	obs := in.observed[key]
	what := o.Obj.GetKind() + " " + objName(key)
	changed := obs != nil && obs.GetAnnotations()[sro.HashAnnotation] != o.Obj.GetAnnotations()[sro.HashAnnotation]
	switch {
	case (obs == nil || changed) && !may:
		return false, what + " waits for the earlier states on every kernel"
	case obs == nil:
		res.apply = append(res.apply, o.Obj)
		return !o.Wait, what + " created"
	case changed:
		if in.stale[key] {
			// Our update is on its way to the cache; writing again would only repeat it.
			res.poll = true
			return false, what + " being updated"
		}
		res.apply = append(res.apply, o.Obj)
		return !o.Wait, what + " updated"
	case !o.Wait:
		return true, ""
	}
	kind, known := readinessByKind[key.gvk.Kind]
	if !known {
		return true, ""
	}
	if !kind.watched {
		res.poll = true
	}
	if ok, why := kind.check(obs); !ok {
		return false, what + ": " + why
	}
	if g != nil && key.gvk.Kind == "DaemonSet" && len(g.nodes) > 0 {
		if desired, _, _ := unstructured.NestedInt64(obs.Object, "status", "desiredNumberScheduled"); desired == 0 {
			return false, what + ": no pod scheduled yet on the " + fmt.Sprint(len(g.nodes)) + " nodes of the kernel"
		}
	}
	if o.WaitForLogs != nil {
		res.poll = true
		ls, ok := in.logs[key]
		if !ok || ls.pods == 0 || ls.matched < ls.pods {
			return false, fmt.Sprintf("%s: %d of %d pods' logs match %q", what, ls.matched, ls.pods, o.WaitForLogs.String())
		}
	}
	return true, ""
}

// wait records what the first state that is not ready waits for (and per kernel).
func (res *planResult) wait(state, k, why string) {
	if res.waiting == "" {
		res.waitingState, res.waiting = state, why
	}
	if k != "" && res.perKernel[k] == "" {
		res.perKernel[k] = "state " + state + ": " + why
	}
}

func objName(k objKey) string {
	if k.namespace == "" {
		return k.name
	}
	return k.namespace + "/" + k.name
}

// hasAffine: some state renders kernel-affine manifests.
func hasAffine(states []recipe.RenderedState) bool {
	for _, st := range states {
		for _, o := range st.Objects {
			if o.Kernel != "" {
				return true
			}
		}
	}
	return false
}

// prune picks our objects to delete: those the recipe no longer renders, except the
// kernel-affine objects of a kernel that a selected node still runs but whose image is not there
// yet (building, or the registry could not be asked): the old driver keeps running until the new
// one can replace it. Objects of a kernel no selected node runs are deleted.
func prune(in planInput) []*unstructured.Unstructured {
	desired := map[objKey]bool{}
	for _, st := range in.states {
		for _, o := range st.Objects {
			desired[keyOf(o.Obj)] = true
		}
	}
	var out []*unstructured.Unstructured
	for _, u := range in.owned {
		if desired[keyOf(u)] || !u.GetDeletionTimestamp().IsZero() {
			continue
		}
		if k := u.GetAnnotations()[sro.KernelAnnotation]; k != "" && in.present[k] {
			if _, rendered := in.kernels[k]; !rendered {
				continue
			}
		}
		out = append(out, u)
	}
	return out
}

// nodeLabelChanges gives each node the state labels of the states ready for its kernel, and
// takes them from nodes that are no longer selected or whose kernel is not ready. The states
// from the driver's on are ready for a node only when an available driver pod runs on it: a
// node the DaemonSet does not run on (a taint it does not tolerate) is not counted by the
// DaemonSet's readiness, and must not be labelled as served. A recipe without kernel-affine
// manifests labels every selected node by its shared states.
func nodeLabelChanges(in planInput, readyStates, driverState map[string]int, affine bool) map[string]map[string]*string {
	changes := map[string]map[string]*string{}
	// The label keys are the same for every node: computed once, not per node and label.
	prefix := naming.StateLabelPrefix(in.srName)
	keys := make([]string, len(in.states))
	for i := range in.states {
		keys[i] = naming.StateLabel(in.srName, in.states[i].ID())
	}
	for _, n := range in.nodes {
		want := map[string]bool{}
		if k, selected := in.selected[n.name]; selected {
			count := readyStates[k]
			if d, ok := driverState[k]; ok && !in.driverPods[k][n.name] {
				count = min(count, d)
			}
			if !affine {
				count = readyStates[""]
			}
			for i := 0; i < count && i < len(in.states); i++ {
				want[keys[i]] = true
			}
		}
		if c := stateLabelChanges(n, prefix, want); c != nil {
			changes[n.name] = c
		}
	}
	return changes
}

// stateLabelChanges turns the node's state labels of the SpecialResource (naming.StateLabelPrefix)
// into want: the wanted ones set to Ready, the others removed (value nil). Nil when the node has
// them already.
func stateLabelChanges(n nodeLabels, prefix string, want map[string]bool) map[string]*string {
	ready := "Ready"
	var c map[string]*string
	for key := range want {
		if n.labels[key] != ready {
			if c == nil {
				c = map[string]*string{}
			}
			c[key] = &ready
		}
	}
	for key := range n.labels {
		if naming.HasStatePrefix(key, prefix) && !want[key] {
			if c == nil {
				c = map[string]*string{}
			}
			c[key] = nil
		}
	}
	return c
}
