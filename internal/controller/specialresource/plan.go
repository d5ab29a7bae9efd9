package specialresource

import (
	"fmt"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/sro/recipe"
)

// planInput is everything plan decides from; nothing in it talks to the API server.
type planInput struct {
	srName string
	states []recipe.RenderedState
	// affine[i]: the recipe's state i has kernel-affine manifests, even when none was rendered
	// (no kernel has its image yet). A state with kernel-affine objects rendered is affine
	// whatever it says.
	affine []bool
	// unserved are the rendered objects whose kind the cluster did not serve (inputs.unserved),
	// with why: never applied; see object.
	unserved map[objKey]string
	// observed are the existing copies of rendered objects; stale marks those older than our
	// last write of them.
	observed map[objKey]*unstructured.Unstructured
	stale    map[objKey]bool
	logs     map[objKey]logState
	// kernels are the kernels whose manifests were rendered (their image exists), with their
	// nodes; present lists every kernel the selected nodes run.
	kernels map[string]kernelGroup
	present map[string]bool
	// failed are the kernels of present whose image cannot come without the user: its build
	// failed or the builder refused it, it is missing with nothing to build it from, or the pull
	// Secret keeps it from being looked up. Unlike a kernel whose image is being built or looked
	// up, such a kernel holds back no later shared state of the others (failedKernelsWait).
	failed map[string]bool
	// owned are the objects labelled ours (not builds), for pruning.
	owned []*unstructured.Unstructured
	// nodes are all nodes; selected maps the selected ones to their kernel.
	nodes    []nodeLabels
	selected map[string]string
	// driverPods[k] are the nodes where kernel k's driver serves: an available pod of its driver
	// DaemonSet runs there (whose log matched, for a wait-for-logs driver; servedOn).
	driverPods map[string]map[string]bool
	// heldDrivers[k] is the driver DaemonSet an earlier reconcile applied for kernel k, a kernel
	// the selected nodes run whose manifests were not rendered this time (its new image is being
	// built, or could not be looked up): prune keeps it, and it still serves its nodes.
	heldDrivers map[string]*unstructured.Unstructured
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
	// servedStates[k] is how many leading states are ready for a node of kernel k where its
	// driver serves (driverPods): there the driver's DaemonSet is judged by the node's own pod,
	// whatever its pods elsewhere do. At least readyStates[k].
	servedStates map[string]int
	// waitingState and waiting say what the first state that is not ready waits for; perKernel
	// the same per kernel.
	waitingState, waiting string
	perKernel             map[string]string
	// poll: something waited for does not wake the controller by itself.
	poll bool
	// nodeLabels are the state-label changes, per node (value nil: remove).
	nodeLabels map[string]map[string]*string
	// driverDaemonSets is each kernel's first kernel-affine DaemonSet (the driver; for a kernel
	// not rendered, its held driver), and driverState the index of its state (rendered kernels
	// only).
	driverDaemonSets map[string]*unstructured.Unstructured
	driverState      map[string]int
	// hold: the plan of a reconcile waiting for its dependencies (holdPlan): removals only.
	hold bool
	// labelsBehind: a driver DaemonSet counts another number of available pods than the cache
	// shows (driverPodsBehind), so nodes' state labels wait for the cache.
	labelsBehind bool
	// unservedKind names ("state S: Kind ns/name: why") the first object whose turn came while
	// the cluster does not serve its kind and no CustomResourceDefinition of its state or an
	// earlier one defines it: the recipe's problem (RecipeFailure), not something to wait for.
	unservedKind string
	// failedObject names ("state S: Kind ns/name failed…") the first waited-for object that failed
	// for good (failedByKind): the recipe's problem (RecipeFailure), not something to wait for.
	failedObject string
	// crdKinds are the kinds defined by the CRDs of the states walked so far, each to its CRD's
	// name.
	crdKinds map[schema.GroupVersionKind]string
}

// plan walks the states in order. Each kernel is a pipeline of its own: a state's
// kernel-affine manifests for kernel k are applied once every earlier state is ready for k (its
// own manifests and the shared ones), so a kernel that waits for its build holds back no other.
// A state's shared manifests (not kernel-affine) are applied once every earlier state is ready
// for every kernel the selected nodes run, those whose image is being built or looked up too:
// what later states deploy everywhere (a device plugin, say) waits for the drivers. A kernel whose
// image failed (in.failed) is not waited for, unless every kernel failed or its previous driver
// still serves (failedKernelsWait): the other kernels are served, later shared states included.
// Shared manifests that exist unchanged stay ready while a gate is closed, so nodes of a kernel
// that is ready keep their labels while a new kernel catches up. An object is ready when it needs no write and, if waited
// for, its kind says so; an object written now is ready at once unless waited for, so a
// reconcile goes through every state up to the first wait.
func plan(in planInput) *planResult {
	res := &planResult{readyStates: map[string]int{}, servedStates: map[string]int{}, perKernel: map[string]string{},
		nodeLabels: map[string]map[string]*string{}, driverDaemonSets: map[string]*unstructured.Unstructured{}, driverState: map[string]int{},
		crdKinds: map[schema.GroupVersionKind]string{}}
	kernels := slices.Sorted(maps.Keys(in.present))
	for k := range in.kernels {
		if !in.present[k] {
			kernels = append(kernels, k)
		}
	}
	slices.Sort(kernels)
	affine := affineStates(in)
	waitFor := failedKernelsWait(kernels, in.failed, in.heldDrivers)
	// ready[k]: every state so far is ready for kernel k; served[k]: for a node where k's driver
	// serves.
	ready, served := map[string]bool{}, map[string]bool{}
	for _, k := range kernels {
		ready[k], served[k] = true, true
		if ds := in.heldDrivers[k]; ds != nil {
			res.driverDaemonSets[k] = ds
		}
	}
	everyKernel, sharedSoFar := true, true
	for i, st := range in.states {
		res.addCRDKinds(st)
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
			if served[k] {
				ready[k], served[k] = res.kernelState(in, i, k, ready[k], sharedReady, affine[i])
			}
			if ready[k] {
				res.readyStates[k] = i + 1
			} else if waitFor(k) {
				everyKernel = false
			}
			if served[k] {
				res.servedStates[k] = i + 1
			}
		}
	}
	res.prune = prune(in)
	res.nodeLabels = nodeLabelChanges(in, res)
	res.labelsBehind = driverPodsBehind(in, res.driverDaemonSets)
	return res
}

// failedKernelsWait says whether the later shared states wait for kernel k. A kernel whose image
// failed (in.failed) waits for the user, not for time: holding the shared states back for it would
// keep them, and their labels, from every other kernel's nodes until the user acts (a device
// plugin never deployed, or never updated, for kernels whose driver serves). Its own nodes still
// get no label of its first kernel-affine state or a later one (kernelState). Two exceptions wait
// as for a kernel being built: when every kernel failed, no kernel has a driver image for the
// shared states to follow; and a failed kernel whose previous driver still serves (held, a
// version roll whose new build failed) keeps its nodes and their labels, so a changed shared
// state (a new plugin) would reach nodes running the old driver.
func failedKernelsWait(kernels []string, failed map[string]bool, held map[string]*unstructured.Unstructured) func(k string) bool {
	for _, k := range kernels {
		if !failed[k] {
			return func(k string) bool { return !failed[k] || held[k] != nil }
		}
	}
	return func(string) bool { return true }
}

// kernelState decides state i for kernel k: whether it is ready for k (wasReady: every earlier
// state is; only then are k's objects of the state applied and what they wait for recorded), and
// whether it is ready for a node where k's driver serves. A kernel whose manifests were not
// rendered (no image yet) is ready up to its first kernel-affine state: its image state says what
// it waits for.
func (res *planResult) kernelState(in planInput, i int, k string, wasReady, sharedReady, affine bool) (isReady, isServed bool) {
	g, rendered := in.kernels[k]
	if !rendered {
		ok := wasReady && sharedReady && !affine
		return ok, ok
	}
	st := in.states[i]
	isReady, isServed = wasReady && sharedReady, sharedReady
	hasAffine := false
	for _, o := range st.Objects {
		if o.Kernel != k {
			continue
		}
		hasAffine = true
		driver := false
		if _, seen := res.driverState[k]; !seen && o.Obj.GetKind() == "DaemonSet" {
			res.driverDaemonSets[k] = in.observed[keyOf(o.Obj)]
			res.driverState[k] = i
			driver = true
		}
		ok, why := res.object(in, o, &g, wasReady)
		if ok {
			continue
		}
		isReady = false
		if wasReady {
			res.wait(st.Name, k, why)
		}
		// An existing driver DaemonSet is judged node by node (nodeLabelChanges): one pod
		// restarting, or the pods a roll-out has not reached, do not make it unready where its
		// own pod serves.
		if !driver || in.observed[keyOf(o.Obj)] == nil {
			isServed = false
		}
	}
	if wasReady && hasAffine && g.labelled < len(g.nodes) {
		// Judged node by node too: a node without the label has no driver pod.
		isReady = false
		res.wait(st.Name, k, fmt.Sprintf("%d of %d nodes labelled %s", g.labelled, len(g.nodes), sro.KernelLabel))
		res.poll = true
	}
	if wasReady && !sharedReady && res.perKernel[k] == "" {
		res.perKernel[k] = "state " + st.Name + ": " + res.waiting
	}
	return isReady, isServed
}

// affineStates says, per state, whether it has kernel-affine manifests: rendered ones, or, as
// the recipe says (in.affine), ones no kernel was rendered for.
func affineStates(in planInput) []bool {
	out := make([]bool, len(in.states))
	for i, st := range in.states {
		out[i] = i < len(in.affine) && in.affine[i]
		for _, o := range st.Objects {
			out[i] = out[i] || o.Kernel != ""
		}
	}
	return out
}

// driverPodsBehind reports whether a kernel's driver DaemonSet counts another number of
// available pods than the cache shows serving. Pods are read from the cache but do not wake the
// controller (their informer can lag the DaemonSet's): nodes whose pod the cache does not show
// available yet would wait for their state labels, and nodes whose pod stopped would keep them,
// until the resync (10 minutes). Node labels are judged by those pods (nodeLabelChanges).
func driverPodsBehind(in planInput, drivers map[string]*unstructured.Unstructured) bool {
	for k, ds := range drivers {
		if ds == nil {
			continue
		}
		if available, _, _ := unstructured.NestedInt64(ds.Object, "status", "numberAvailable"); available != int64(len(in.driverPods[k])) {
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
	if why, unserved := in.unserved[key]; unserved {
		crd, defined := res.crdKinds[key.gvk]
		switch {
		case !may:
			return false, what + " waits for the earlier states on every kernel"
		case defined:
			// Applied (or being established) by this state or an earlier one: the API server
			// serves the kind a moment after the CRD is established, which no watch reports.
			res.poll = true
			return false, what + ": waits until the cluster serves its kind (CustomResourceDefinition " + crd + ")"
		}
		if res.unservedKind == "" {
			res.unservedKind = "state " + o.State + ": " + what + ": " + why
		}
		return false, what + ": " + why
	}
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
		if failed := failedByKind[key.gvk.Kind]; failed != nil {
			if msg := failed(obs); msg != "" {
				if res.failedObject == "" {
					res.failedObject = "state " + o.State + ": " + what + " " + msg + " (delete it to run it again)"
				}
				return false, what + " " + msg
			}
		}
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

// crdGVK is the kind of a CustomResourceDefinition.
var crdGVK = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}

// addCRDKinds adds to crdKinds the kinds the state's CRDs define, one per served version.
func (res *planResult) addCRDKinds(st recipe.RenderedState) {
	for _, o := range st.Objects {
		if o.Obj.GroupVersionKind() != crdGVK {
			continue
		}
		group, _, _ := unstructured.NestedString(o.Obj.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(o.Obj.Object, "spec", "names", "kind")
		versions, _, _ := unstructured.NestedSlice(o.Obj.Object, "spec", "versions")
		for _, v := range versions {
			m, _ := v.(map[string]any)
			name, _ := m["name"].(string)
			if served, _ := m["served"].(bool); served && name != "" && kind != "" {
				res.crdKinds[schema.GroupVersionKind{Group: group, Version: name, Kind: kind}] = o.Obj.GetName()
			}
		}
	}
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
