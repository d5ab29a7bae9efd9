package specialresource

import (
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/sro/naming"
	"github.com/metalforge/metalforge/internal/sro/pullorbuild"
	"github.com/metalforge/metalforge/internal/sro/recipe"
)

// obj is a rendered object: kind/name, its kernel ("" shared), hash "h1", waited for or not.
func obj(state, kind, name, kernel string, wait bool) recipe.Object {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("apps/v1")
	if kind == "ConfigMap" {
		u.SetAPIVersion("v1")
	}
	u.SetKind(kind)
	u.SetNamespace("ns")
	u.SetName(name)
	a := map[string]string{sro.HashAnnotation: "h1"}
	if kernel != "" {
		a[sro.KernelAnnotation] = kernel
	}
	u.SetAnnotations(a)
	return recipe.Object{State: state, Kernel: kernel, Wait: wait, Obj: u}
}

// observed is the existing copy of o: same hash unless hash is given; a DaemonSet with status.
func observed(o recipe.Object, hash string, available int64) *unstructured.Unstructured {
	u := o.Obj.DeepCopy()
	if hash != "" {
		a := u.GetAnnotations()
		a[sro.HashAnnotation] = hash
		u.SetAnnotations(a)
	}
	if u.GetKind() == "DaemonSet" {
		_ = unstructured.SetNestedField(u.Object, map[string]any{"desiredNumberScheduled": int64(2), "numberAvailable": available,
			"updatedNumberScheduled": int64(2)}, "status")
	}
	return u
}

var (
	rbac    = obj("0000-rbac.yaml", "ConfigMap", "rbac", "", false)
	dsX     = obj("1000-driver.yaml", "DaemonSet", "driver-x", "X", true)
	dsY     = obj("1000-driver.yaml", "DaemonSet", "driver-y", "Y", true)
	plugin  = obj("2000-plugin.yaml", "DaemonSet", "plugin", "", true)
	pluginY = obj("2000-plugin.yaml", "ConfigMap", "plugin-y", "Y", false)
)

func states(objs ...recipe.Object) []recipe.RenderedState {
	var out []recipe.RenderedState
	for _, o := range objs {
		if len(out) == 0 || out[len(out)-1].Name != o.State {
			out = append(out, recipe.RenderedState{Name: o.State})
		}
		out[len(out)-1].Objects = append(out[len(out)-1].Objects, o)
	}
	return out
}

func groups(labelled bool, kernels ...string) map[string]kernelGroup {
	out := map[string]kernelGroup{}
	for _, k := range kernels {
		g := kernelGroup{kernel: k, nodes: []string{"n-" + k + "-1", "n-" + k + "-2"}}
		if labelled {
			g.labelled = 2
		}
		out[k] = g
	}
	return out
}

func names(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, u := range objs {
		out = append(out, u.GetName())
	}
	return out
}

func observe(objs ...*unstructured.Unstructured) map[objKey]*unstructured.Unstructured {
	out := map[objKey]*unstructured.Unstructured{}
	for _, u := range objs {
		out[keyOf(u)] = u
	}
	return out
}

// TestPlan covers the gating of states and kernels, one named case per rule.
func TestPlan(t *testing.T) {
	all := states(rbac, dsX, dsY, plugin)
	tests := map[string]struct {
		in          planInput
		apply       []string
		readyStates map[string]int
		waiting     string
		poll        bool
	}{
		"first reconcile applies every state up to the first wait": {
			in:    planInput{states: all, kernels: groups(true, "X", "Y")},
			apply: []string{"rbac", "driver-x", "driver-y"}, readyStates: map[string]int{"": 2, "X": 1, "Y": 1}, waiting: "driver-x created",
		},
		"everything there and available: all ready": {
			in: planInput{states: all, kernels: groups(true, "X", "Y"),
				observed: observe(observed(rbac, "", 0), observed(dsX, "", 2), observed(dsY, "", 2), observed(plugin, "", 2))},
			readyStates: map[string]int{"": 3, "X": 3, "Y": 3},
		},
		"kernels progress on their own; the shared later state waits for both": {
			in: planInput{states: all, kernels: groups(true, "X", "Y"),
				observed: observe(observed(rbac, "", 0), observed(dsX, "", 2), observed(dsY, "", 1))},
			readyStates: map[string]int{"": 2, "X": 2, "Y": 1}, waiting: "driver-y: 1 of 2 pods available",
		},
		"an existing shared object stays ready while a new kernel catches up": {
			in: planInput{states: all, kernels: groups(true, "X", "Y"),
				observed: observe(observed(rbac, "", 0), observed(dsX, "", 2), observed(plugin, "", 2))},
			apply: []string{"driver-y"}, readyStates: map[string]int{"": 3, "X": 3, "Y": 1}, waiting: "driver-y created",
		},
		"a changed shared object is not updated while a kernel is behind": {
			in: planInput{states: all, kernels: groups(true, "X", "Y"),
				observed: observe(observed(rbac, "", 0), observed(dsX, "", 2), observed(plugin, "old", 2))},
			apply: []string{"driver-y"}, readyStates: map[string]int{"": 2, "X": 2, "Y": 1}, waiting: "driver-y created",
		},
		"changed hash is applied": {
			in: planInput{states: all, kernels: groups(true, "X"),
				observed: observe(observed(rbac, "old", 0), observed(dsX, "old", 2), observed(plugin, "", 2))},
			apply: []string{"rbac", "driver-x"}, readyStates: map[string]int{"": 3, "X": 1}, waiting: "driver-x updated",
		},
		"a copy older than our write is not written again": {
			in: planInput{states: all, kernels: groups(true, "X"),
				observed: observe(observed(rbac, "", 0), observed(dsX, "old", 2)), stale: map[objKey]bool{keyOf(dsX.Obj): true}},
			readyStates: map[string]int{"": 2, "X": 1}, waiting: "being updated", poll: true,
		},
		"nodes without the kernel label hold their kernel back": {
			in: planInput{states: all, kernels: groups(false, "X"),
				observed: observe(observed(rbac, "", 0), observed(dsX, "", 2), observed(plugin, "", 2))},
			readyStates: map[string]int{"": 3, "X": 1}, waiting: "0 of 2 nodes labelled", poll: true,
		},
		"a kernel-affine object of a later state waits for its kernel only": {
			in: planInput{states: states(rbac, dsX, dsY, pluginY), kernels: groups(true, "X", "Y"),
				observed: observe(observed(rbac, "", 0), observed(dsX, "", 1), observed(dsY, "", 2))},
			apply: []string{"plugin-y"}, readyStates: map[string]int{"": 3, "X": 1, "Y": 3}, waiting: "driver-x: 1 of 2 pods available",
		},
		"a kernel whose image failed does not hold the shared later state back": {
			in: planInput{states: states(rbac, dsX, plugin), kernels: groups(true, "X"), present: map[string]bool{"X": true, "Y": true}, failed: map[string]bool{"Y": true},
				observed: observe(observed(rbac, "", 0), observed(dsX, "", 2))},
			apply: []string{"plugin"}, readyStates: map[string]int{"": 2, "X": 2, "Y": 1}, waiting: "plugin created",
		},
		"a kernel whose image is being looked up or built holds the shared later state back": {
			in: planInput{states: states(rbac, dsX, plugin), kernels: groups(true, "X"), present: map[string]bool{"X": true, "Y": true},
				observed: observe(observed(rbac, "", 0), observed(dsX, "", 2))},
			readyStates: map[string]int{"": 2, "X": 2, "Y": 1}, waiting: "plugin waits for the earlier states on every kernel",
		},
		"no kernels: the shared pipeline alone": {
			in:    planInput{states: states(rbac, plugin)},
			apply: []string{"rbac", "plugin"}, readyStates: map[string]int{"": 1}, waiting: "plugin created",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			res := plan(tc.in)
			if got := names(res.apply); !slices.Equal(got, tc.apply) {
				t.Errorf("apply %v, want %v", got, tc.apply)
			}
			if !maps.Equal(res.readyStates, tc.readyStates) {
				t.Errorf("ready states %v, want %v", res.readyStates, tc.readyStates)
			}
			if !strings.Contains(res.waiting, tc.waiting) || (tc.waiting == "") != (res.waiting == "") {
				t.Errorf("waiting %q, want %q", res.waiting, tc.waiting)
			}
			if res.poll != tc.poll {
				t.Errorf("poll %v, want %v", res.poll, tc.poll)
			}
		})
	}
}

// TestPlanWaitForLogs: a DaemonSet with wait-for-logs is ready only when every pod's log
// matched, and the controller polls (logs wake nobody).
func TestPlanWaitForLogs(t *testing.T) {
	ds := obj("1000-driver.yaml", "DaemonSet", "driver-x", "X", true)
	ds.WaitForLogs = regexp.MustCompile("loaded")
	in := planInput{states: states(ds), kernels: groups(true, "X"), observed: observe(observed(ds, "", 2))}
	for _, tc := range []struct {
		logs  logState
		ready bool
	}{{logState{0, 0}, false}, {logState{1, 2}, false}, {logState{2, 2}, true}} {
		in.logs = map[objKey]logState{keyOf(ds.Obj): tc.logs}
		res := plan(in)
		if (res.readyStates["X"] == 1) != tc.ready || !res.poll {
			t.Errorf("logs %+v: ready states %v poll %v, want ready %v and a poll", tc.logs, res.readyStates, res.poll, tc.ready)
		}
	}
}

func TestPrune(t *testing.T) {
	mk := func(name, kernel string, build bool) *unstructured.Unstructured {
		o := obj("1000-driver.yaml", "DaemonSet", name, kernel, false).Obj
		if build {
			o.SetLabels(map[string]string{"specialresource.openshift.io/build": "x"})
		}
		return o
	}
	desired := states(rbac, dsX)
	tests := map[string]struct {
		owned   *unstructured.Unstructured
		present map[string]bool
		kernels map[string]kernelGroup
		pruned  bool
	}{
		"desired kept":                            {owned: dsX.Obj, present: map[string]bool{"X": true}, kernels: groups(true, "X")},
		"kernel no node runs deleted":             {owned: mk("driver-z", "Z", false), present: map[string]bool{"X": true}, kernels: groups(true, "X"), pruned: true},
		"kernel still running, image building":    {owned: mk("driver-y", "Y", false), present: map[string]bool{"X": true, "Y": true}, kernels: groups(true, "X")},
		"kernel rendered, object renamed: pruned": {owned: mk("old-driver-x", "X", false), present: map[string]bool{"X": true}, kernels: groups(true, "X"), pruned: true},
		"shared object out of the recipe deleted": {owned: mk("gone", "", false), present: map[string]bool{"X": true}, kernels: groups(true, "X"), pruned: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := prune(planInput{states: desired, owned: []*unstructured.Unstructured{tc.owned}, present: tc.present, kernels: tc.kernels})
			if (len(got) == 1) != tc.pruned {
				t.Fatalf("pruned %v, want %v", names(got), tc.pruned)
			}
		})
	}
}

// TestNodeLabelChanges: a node gets the labels of the states ready for its kernel; loses those
// of states no longer ready and all when no longer selected; other SpecialResources' labels
// (even with a name that starts the same) are left alone.
func TestNodeLabelChanges(t *testing.T) {
	st := states(rbac, dsX, plugin)
	l0, l1, l2 := naming.StateLabel("sr", "0000"), naming.StateLabel("sr", "1000"), naming.StateLabel("sr", "2000")
	other := naming.StateLabel("sr-b", "0000")
	in := planInput{srName: "sr", states: st,
		nodes: []nodeLabels{
			{name: "new", kernel: "X"},
			{name: "behind", kernel: "Y", labels: map[string]string{l0: "Ready", l1: "Ready", l2: "Ready", other: "Ready"}},
			{name: "gone", kernel: "X", labels: map[string]string{l0: "Ready", other: "Ready"}},
			{name: "done", kernel: "X", labels: map[string]string{l0: "Ready", l1: "Ready"}},
		},
		selected: map[string]string{"new": "X", "behind": "Y", "done": "X"},
	}
	got := nodeLabelChanges(in, &planResult{readyStates: map[string]int{"": 3, "X": 2, "Y": 1}})
	ready := "Ready"
	want := map[string]map[string]*string{
		"new":    {l0: &ready, l1: &ready},
		"behind": {l1: nil, l2: nil},
		"gone":   {l0: nil},
	}
	if len(got) != len(want) {
		t.Fatalf("changes for %v, want %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
	for node, w := range want {
		g := got[node]
		if len(g) != len(w) {
			t.Errorf("node %s: %d changes, want %d", node, len(g), len(w))
		}
		for k, v := range w {
			gv, ok := g[k]
			if !ok || (v == nil) != (gv == nil) {
				t.Errorf("node %s label %s: got %v, want %v", node, k, gv, v)
			}
		}
	}
}

// TestNodeLabelsNeedDriverPod: the states from the driver's on are on a node only when an
// available driver pod runs there; earlier states do not need one.
func TestNodeLabelsNeedDriverPod(t *testing.T) {
	st := states(rbac, dsX, plugin)
	l0, l1, l2 := naming.StateLabel("sr", "0000"), naming.StateLabel("sr", "1000"), naming.StateLabel("sr", "2000")
	tests := map[string]struct {
		pods map[string]map[string]bool
		want []string
	}{
		"driver pod on the node":            {pods: map[string]map[string]bool{"X": {"n": true}}, want: []string{l0, l1, l2}},
		"no driver pod (untolerated taint)": {pods: map[string]map[string]bool{"X": {"other": true}}, want: []string{l0}},
		"no pod at all":                     {want: []string{l0}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			in := planInput{srName: "sr", states: st, nodes: []nodeLabels{{name: "n", kernel: "X"}}, selected: map[string]string{"n": "X"}, driverPods: tc.pods}
			res := &planResult{readyStates: map[string]int{"": 3, "X": 3}, servedStates: map[string]int{"X": 3}, driverState: map[string]int{"X": 1}}
			got := slices.Sorted(maps.Keys(nodeLabelChanges(in, res)["n"]))
			if !slices.Equal(got, tc.want) {
				t.Fatalf("labels %v, want %v", got, tc.want)
			}
		})
	}
}

// TestDriverPodsBehind: a driver DaemonSet that counts more, or fewer, available pods than the
// cache shows makes the plan look again soon (pods do not wake the controller); one whose pods are
// all seen, or that runs on fewer nodes than selected (an untolerated taint), does not.
func TestDriverPodsBehind(t *testing.T) {
	ds := func(available int64) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{}}
		if err := unstructured.SetNestedField(u.Object, available, "status", "numberAvailable"); err != nil {
			t.Fatal(err)
		}
		return u
	}
	tests := map[string]struct {
		drivers map[string]*unstructured.Unstructured
		pods    map[string]map[string]bool
		want    bool
	}{
		"every available pod in the cache":      {map[string]*unstructured.Unstructured{"X": ds(2)}, map[string]map[string]bool{"X": {"a": true, "b": true}}, false},
		"a pod the cache does not show yet":     {map[string]*unstructured.Unstructured{"X": ds(2)}, map[string]map[string]bool{"X": {"a": true}}, true},
		"no pod in the cache yet":               {map[string]*unstructured.Unstructured{"X": ds(1)}, nil, true},
		"another kernel's driver behind":        {map[string]*unstructured.Unstructured{"X": ds(1), "Y": ds(1)}, map[string]map[string]bool{"X": {"a": true}}, true},
		"nothing available (not ready yet)":     {map[string]*unstructured.Unstructured{"X": ds(0)}, nil, false},
		"driver DaemonSet not created yet":      {map[string]*unstructured.Unstructured{"X": nil}, nil, false},
		"fewer pods than nodes (tainted node)":  {map[string]*unstructured.Unstructured{"X": ds(1)}, map[string]map[string]bool{"X": {"a": true}}, false},
		"a pod the cache still shows available": {map[string]*unstructured.Unstructured{"X": ds(1)}, map[string]map[string]bool{"X": {"a": true, "b": true}}, true},
	}
	for name, tc := range tests {
		if got := driverPodsBehind(planInput{driverPods: tc.pods}, tc.drivers); got != tc.want {
			t.Errorf("%s: behind %v, want %v", name, got, tc.want)
		}
	}
}

// TestDecide: the outcome's precedence: a pull Secret that kept an image from being looked up,
// a failed build, then a missing image (all Errored, the other kernels still served: looked at
// again as soon as what they wait for needs it), then registry trouble, a waiting state, a running
// build, Ready.
func TestDecide(t *testing.T) {
	cfg := &Config{WaitPoll: time.Second, RetryDelay: 10 * time.Second, Resync: time.Hour}
	img := func(states ...sro.ImageState) map[string]kernelImage {
		m := map[string]kernelImage{}
		for i, s := range states {
			m[string(rune('A'+i))] = kernelImage{state: s, message: "msg " + string(s)}
		}
		return m
	}
	tests := map[string]struct {
		images  map[string]kernelImage
		problem string
		plan    planResult
		cond    string
		reason  string
		message string
		after   time.Duration
	}{
		"the pull Secret wins, looked at again soon": {images: img(sro.ImageUnknown, sro.ImageBuildFailed), problem: "spec.driverContainer.pullSecret: Secret ns/pull not found",
			cond: sro.ConditionErrored, reason: sro.ReasonInvalidSpec, message: "spec.driverContainer.pullSecret: Secret ns/pull not found", after: 10 * time.Second},
		"build failed wins": {images: img(sro.ImageExists, sro.ImageBuildFailed, sro.ImageMissing), plan: planResult{waiting: "x"},
			cond: sro.ConditionErrored, reason: sro.ReasonBuildFailed, message: "kernel B: msg BuildFailed", after: time.Hour},
		"build failed, another kernel's state waits for logs: looked at again at the poll": {images: img(sro.ImageExists, sro.ImageBuildFailed),
			plan: planResult{waiting: "logs", poll: true}, cond: sro.ConditionErrored, reason: sro.ReasonBuildFailed, message: "kernel B", after: time.Second},
		"build failed, the other kernels' states ready (a ready unwatched kind): the resync": {images: img(sro.ImageExists, sro.ImageBuildFailed),
			plan: planResult{poll: true}, cond: sro.ConditionErrored, reason: sro.ReasonBuildFailed, message: "kernel B", after: time.Hour},
		"the pull Secret, the other kernels' states ready (a ready unwatched kind): the retry delay": {images: img(sro.ImageExists, sro.ImageUnknown),
			problem: "spec.driverContainer.pullSecret: Secret ns/pull not found", plan: planResult{poll: true},
			cond: sro.ConditionErrored, reason: sro.ReasonInvalidSpec, message: "Secret ns/pull not found", after: 10 * time.Second},
		"the pull Secret, another kernel's labels behind the cache: looked at again at the poll": {images: img(sro.ImageExists, sro.ImageUnknown),
			problem: "spec.driverContainer.pullSecret: Secret ns/pull not found", plan: planResult{labelsBehind: true},
			cond: sro.ConditionErrored, reason: sro.ReasonInvalidSpec, message: "Secret ns/pull not found", after: time.Second},
		"a kind the cluster does not serve and no CRD of the recipe defines, once its turn came: RecipeFailure, looked at again soon": {
			images: img(sro.ImageExists, sro.ImageBuildFailed), problem: "spec.driverContainer.pullSecret: Secret ns/pull not found",
			plan: planResult{waiting: "Widget w: the cluster does not serve kind Widget in x.io/v1", unservedKind: "state 1000-w.yaml: Widget w: the cluster does not serve kind Widget in x.io/v1"},
			cond: sro.ConditionErrored, reason: sro.ReasonRecipeFailure, message: "state 1000-w.yaml: Widget w: the cluster does not serve kind Widget in x.io/v1", after: 10 * time.Second},
		"a waited-for Job that failed for good: RecipeFailure naming it, polled while it is waited for": {
			images: img(sro.ImageExists), plan: planResult{waitingState: "1500-check.yaml", waiting: "Job ns/check failed", poll: true,
				failedObject: "state 1500-check.yaml: Job ns/check failed (BackoffLimitExceeded) (delete it to run it again)"},
			cond: sro.ConditionErrored, reason: sro.ReasonRecipeFailure, message: "Job ns/check failed (BackoffLimitExceeded) (delete it to run it again)", after: time.Second},
		// The build succeeded, the registry does not show the image yet (a mirror catching up):
		// not a failed build (no Errored, so no BuildFailed Warning), asked again soon.
		"a succeeded build whose image the registry does not show yet: waits, looked at again soon": {
			images: map[string]kernelImage{"A": {state: sro.ImageBuildFailed, unconfirmed: true, message: "Job b succeeded, but the registry does not show r/x:A yet"}},
			cond:   sro.ConditionProgressing, reason: sro.ReasonWaitingForImage, message: "kernel A: Job b succeeded, but the registry does not show r/x:A yet", after: 10 * time.Second},
		"an unconfirmed build beside a failed one: Errored for the failed one, looked at again soon": {
			images: map[string]kernelImage{"A": {state: sro.ImageBuildFailed, unconfirmed: true, message: "Job a succeeded"}, "B": {state: sro.ImageBuildFailed, message: "exit 2"}},
			cond:   sro.ConditionErrored, reason: sro.ReasonBuildFailed, message: "failed for kernel B: exit 2", after: 10 * time.Second},
		"missing image": {images: img(sro.ImageMissing, sro.ImageBuilding),
			cond: sro.ConditionErrored, reason: sro.ReasonImageMissing, message: "kernel A: msg Missing", after: time.Hour},
		"registry unknown retries": {images: img(sro.ImageUnknown), plan: planResult{waiting: "x"},
			cond: sro.ConditionProgressing, reason: sro.ReasonWaitingForImage, message: "msg Unknown", after: 10 * time.Second},
		"waiting state polls": {images: img(sro.ImageExists), plan: planResult{waitingState: "1000-d.yaml", waiting: "DaemonSet ns/d: 1 of 2", poll: true},
			cond: sro.ConditionProgressing, reason: sro.ReasonHandlingState, message: "state 1000-d.yaml: DaemonSet", after: time.Second},
		"building": {images: img(sro.ImageExists, sro.ImageBuilding),
			cond: sro.ConditionProgressing, reason: sro.ReasonWaitingForImage, message: "building the driver image for kernel B", after: time.Hour},
		"ready": {images: img(sro.ImageExists), cond: sro.ConditionReady, reason: sro.ReasonSuccess, message: "every state is ready", after: time.Hour},
		"ready, a node's labels wait for its pod in the cache": {images: img(sro.ImageExists), plan: planResult{labelsBehind: true},
			cond: sro.ConditionReady, reason: sro.ReasonSuccess, message: "every state is ready", after: time.Second},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := tc.plan
			in := inputs{images: tc.images, imageProblem: tc.problem, kernels: []kernelGroup{{kernel: "A"}}}
			got := decide(&sro.SpecialResource{}, in, &p, cfg)
			if got.condition != tc.cond || got.reason != tc.reason || !strings.Contains(got.message, tc.message) || got.after != tc.after {
				t.Fatalf("got %+v, want %s/%s %q after %s", got, tc.cond, tc.reason, tc.message, tc.after)
			}
		})
	}
}

// TestPlanInputFailedKernels: the kernels whose image cannot come without the user, which hold
// back no later shared state of the others: a failed build, a build the builder refused (it shows
// as Building until the builder is asked), a missing image with nothing to build it from, a lookup
// the pull Secret prevents. Not a build running, nor a registry that cannot be reached: those end
// by themselves.
func TestPlanInputFailedKernels(t *testing.T) {
	s := &scope{sr: &sro.SpecialResource{}}
	s.in.images = map[string]kernelImage{
		"exists":       {state: sro.ImageExists},
		"building":     {state: sro.ImageBuilding},
		"refused":      {state: sro.ImageBuilding},
		"unreachable":  {state: sro.ImageUnknown},
		"secret":       {state: sro.ImageUnknown, blocked: true},
		"build-failed": {state: sro.ImageBuildFailed},
		"missing":      {state: sro.ImageMissing},
		// The build pushed, the registry does not show it yet: it may come by itself.
		"pushed-unseen": {state: sro.ImageBuildFailed, unconfirmed: true},
	}
	for _, k := range slices.Sorted(maps.Keys(s.in.images)) {
		s.in.kernels = append(s.in.kernels, kernelGroup{kernel: k, nodes: []string{"n-" + k}})
	}
	s.fx.refusedBuilds = map[string]string{"refused": "cannot start Job b: refused"}
	in := (&Reconciler{}).planInput(s)
	want := []string{"build-failed", "missing", "refused", "secret"}
	if got := slices.Sorted(maps.Keys(in.failed)); !slices.Equal(got, want) {
		t.Fatalf("failed kernels %v, want %v", got, want)
	}
	if len(in.present) != len(s.in.images) || len(in.kernels) != 1 {
		t.Fatalf("present %v, rendered %v", in.present, slices.Collect(maps.Keys(in.kernels)))
	}
}

// crdObj is a rendered CustomResourceDefinition of kind Widget in group, serving version.
func crdObj(state, group, version string, wait bool) recipe.Object {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"group": group, "names": map[string]any{"kind": "Widget", "plural": "widgets"},
		"versions": []any{map[string]any{"name": version, "served": true, "storage": true}},
	}}}
	u.SetGroupVersionKind(crdGVK)
	u.SetName("widgets." + group)
	u.SetAnnotations(map[string]string{sro.HashAnnotation: "h1"})
	return recipe.Object{State: state, Wait: wait, Obj: u}
}

// established is the existing copy of a CRD the API server established.
func established(o recipe.Object) *unstructured.Unstructured {
	u := o.Obj.DeepCopy()
	_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"type": "Established", "status": "True"}}, "status", "conditions")
	return u
}

// widget is a rendered Widget (group/version), not decorated: the cluster does not serve its kind.
func widget(state, groupVersion string) recipe.Object {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(groupVersion)
	u.SetKind("Widget")
	u.SetName("w")
	return recipe.Object{State: state, Obj: u}
}

// TestPlanUnservedKind: an object whose kind the cluster does not serve (not resolved at render)
// is never applied. It waits for its turn like any object; then, when a CRD of its state or an
// earlier one defines its kind, for the kind to be served (polling: no watch reports it); when
// none does, it is the recipe's problem (unservedKind, RecipeFailure).
func TestPlanUnservedKind(t *testing.T) {
	crd := crdObj("0000-crd.yaml", "x.io", "v1", true)
	w := widget("1000-widget.yaml", "x.io/v1")
	unserved := func(objs ...recipe.Object) map[objKey]string {
		m := map[objKey]string{}
		for _, o := range objs {
			m[keyOf(o.Obj)] = "the cluster does not serve kind Widget in " + o.Obj.GetAPIVersion()
		}
		return m
	}
	tests := map[string]struct {
		in           planInput
		apply        []string
		readyStates  map[string]int
		waiting      string
		poll         bool
		unservedKind string
	}{
		"the CRD's state first; the object waits for its turn": {
			in:    planInput{states: states(crd, w), unserved: unserved(w)},
			apply: []string{"widgets.x.io"}, readyStates: map[string]int{}, waiting: "CustomResourceDefinition widgets.x.io created",
		},
		"the CRD established, its kind not served yet: waits, polling": {
			in:          planInput{states: states(crd, w), unserved: unserved(w), observed: observe(established(crd))},
			readyStates: map[string]int{"": 1}, waiting: "Widget w: waits until the cluster serves its kind (CustomResourceDefinition widgets.x.io)", poll: true,
		},
		"a CRD of the same state, not waited for: the object waits for its kind": {
			in:    planInput{states: states(crdObj("1000-widget.yaml", "x.io", "v1", false), w), unserved: unserved(w)},
			apply: []string{"widgets.x.io"}, readyStates: map[string]int{}, waiting: "waits until the cluster serves its kind", poll: true,
		},
		"no CRD of the recipe defines the kind: the recipe's problem": {
			in:          planInput{states: states(rbac, w), unserved: unserved(w), observed: observe(observed(rbac, "", 0))},
			readyStates: map[string]int{"": 1}, waiting: "Widget w: the cluster does not serve kind Widget in x.io/v1",
			unservedKind: "state 1000-widget.yaml: Widget w: the cluster does not serve kind Widget in x.io/v1",
		},
		"a CRD of a later state does not count (its state waits for the object's)": {
			in:          planInput{states: states(widget("0000-widget.yaml", "x.io/v1"), crdObj("1000-crd.yaml", "x.io", "v1", true)), unserved: unserved(widget("0000-widget.yaml", "x.io/v1"))},
			readyStates: map[string]int{}, waiting: "does not serve kind Widget",
			unservedKind: "state 0000-widget.yaml: Widget w: the cluster does not serve kind Widget in x.io/v1",
		},
		"a CRD serving another version does not count": {
			in:          planInput{states: states(crd, widget("1000-widget.yaml", "x.io/v1beta1")), unserved: unserved(widget("1000-widget.yaml", "x.io/v1beta1")), observed: observe(established(crd))},
			readyStates: map[string]int{"": 1}, waiting: "does not serve kind Widget in x.io/v1beta1", poll: true, // the CRD's readiness: no watch
			unservedKind: "state 1000-widget.yaml: Widget w: the cluster does not serve kind Widget in x.io/v1beta1",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			res := plan(tc.in)
			if got := names(res.apply); !slices.Equal(got, tc.apply) {
				t.Errorf("apply %v, want %v", got, tc.apply)
			}
			if !maps.Equal(res.readyStates, tc.readyStates) {
				t.Errorf("ready states %v, want %v", res.readyStates, tc.readyStates)
			}
			if !strings.Contains(res.waiting, tc.waiting) {
				t.Errorf("waiting %q, want %q", res.waiting, tc.waiting)
			}
			if res.poll != tc.poll {
				t.Errorf("poll %v, want %v", res.poll, tc.poll)
			}
			if res.unservedKind != tc.unservedKind {
				t.Errorf("unserved kind %q, want %q", res.unservedKind, tc.unservedKind)
			}
		})
	}
}

// TestNewBuildFailure: a failed build is counted (sro_builds_total{result="failed"}) once, when
// the kernel's status did not say so already; a build that succeeded and whose image the registry
// does not show yet is not a failure.
func TestNewBuildFailure(t *testing.T) {
	failed := pullorbuild.Result{State: sro.ImageBuildFailed, Message: "exit 2"}
	unconfirmed := pullorbuild.Result{State: sro.ImageBuildFailed, Message: "Job b succeeded", Unconfirmed: true}
	tests := map[string]struct {
		res   pullorbuild.Result
		prev  *sro.KernelStatus
		count bool
	}{
		"failed, first seen":                  {res: failed, count: true},
		"failed, the kernel was building":     {res: failed, prev: &sro.KernelStatus{ImageState: sro.ImageBuilding}, count: true},
		"failed, already reported":            {res: failed, prev: &sro.KernelStatus{ImageState: sro.ImageBuildFailed}},
		"succeeded, registry not showing yet": {res: unconfirmed, prev: &sro.KernelStatus{ImageState: sro.ImageBuilding}},
		"building":                            {res: pullorbuild.Result{State: sro.ImageBuilding}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := newBuildFailure(tc.res, tc.prev); got != tc.count {
				t.Fatalf("counted %v, want %v", got, tc.count)
			}
		})
	}
}

// TestPlanFailedObject: a waited-for Job past its backoff limit, or a Pod that failed, holds
// the later states back and is named as failed (the plan's failedObject), not as still
// waiting; one still running or done is not.
func TestPlanFailedObject(t *testing.T) {
	job := obj("1500-check.yaml", "Job", "check", "", true)
	job.Obj.SetAPIVersion("batch/v1")
	pod := obj("1500-check.yaml", "Pod", "check", "", true)
	pod.Obj.SetAPIVersion("v1")
	withStatus := func(o recipe.Object, status map[string]any) *unstructured.Unstructured {
		u := observed(o, "", 0)
		_ = unstructured.SetNestedField(u.Object, status, "status")
		return u
	}
	failedJob := map[string]any{"conditions": []any{map[string]any{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
		"message": "Job has reached the specified backoff limit"}}}
	tests := map[string]struct {
		check  recipe.Object
		status map[string]any
		failed string // in failedObject; "" for none
	}{
		"Job failed": {check: job, status: failedJob,
			failed: "state 1500-check.yaml: Job ns/check failed (BackoffLimitExceeded): Job has reached the specified backoff limit (delete it to run it again)"},
		"Job running":  {check: job, status: map[string]any{"active": int64(1)}},
		"Job complete": {check: job, status: map[string]any{"conditions": []any{map[string]any{"type": "Complete", "status": "True"}}}},
		"Pod failed": {check: pod, status: map[string]any{"phase": "Failed", "reason": "Error", "message": "exit 3"},
			failed: "Pod ns/check failed (Error): exit 3"},
		"Pod pending": {check: pod, status: map[string]any{"phase": "Pending"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			in := planInput{states: states(rbac, dsX, tc.check, plugin), kernels: groups(true, "X"),
				observed: observe(observed(rbac, "", 0), observed(dsX, "", 2), withStatus(tc.check, tc.status))}
			res := plan(in)
			if tc.failed == "" {
				if res.failedObject != "" {
					t.Fatalf("failedObject %q, want none", res.failedObject)
				}
				return
			}
			if !strings.Contains(res.failedObject, tc.failed) {
				t.Fatalf("failedObject %q, want it to contain %q", res.failedObject, tc.failed)
			}
			if slices.Contains(names(res.apply), "plugin") {
				t.Fatal("the state after the failed object was applied")
			}
		})
	}
}
