package specialresource

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/sro/naming"
	"github.com/metalforge/metalforge/internal/test/poll"
)

// TestHoldPlan: while waiting for its dependencies a SpecialResource only undoes: the objects of
// a kernel no selected node runs are deleted, and a node loses its state labels when it is no
// longer selected or no available pod of its kernel's driver runs on it (whatever the
// DaemonSet's readiness); nothing is labelled.
func TestHoldPlan(t *testing.T) {
	l0, l1 := naming.StateLabel("sr", "0000"), naming.StateLabel("sr", "1000")
	served := observed(dsX, "", 2)
	notReady := observed(dsX, "", 1)
	gone := observed(obj("1000-driver.yaml", "DaemonSet", "driver-z", "Z", true), "", 2)
	shared := observed(rbac, "", 0)
	labelled := map[string]string{l0: "Ready", l1: "Ready"}
	onN := map[string]map[string]bool{"X": {"n": true}}
	elsewhere := map[string]map[string]bool{"X": {"other": true}}
	tests := map[string]struct {
		owned   []*unstructured.Unstructured
		drivers map[string]string
		// pods are the nodes with an available driver pod, per kernel.
		pods map[string]map[string]bool
		node nodeLabels
		// selected is the node's kernel ("" not selected).
		selected string
		removed  bool
		pruned   []string
	}{
		"driver available on the node: labels kept":              {owned: []*unstructured.Unstructured{shared, served}, pods: onN, node: nodeLabels{name: "n", labels: labelled}, selected: "X"},
		"DaemonSet not Ready, node's pod available: labels kept": {owned: []*unstructured.Unstructured{notReady}, pods: onN, node: nodeLabels{name: "n", labels: labelled}, selected: "X"},
		"new kernel, no driver: labels go":                       {owned: []*unstructured.Unstructured{shared, served}, pods: onN, node: nodeLabels{name: "n", labels: labelled}, selected: "Y", removed: true},
		"DaemonSet Ready, no pod on the node: labels go":         {owned: []*unstructured.Unstructured{served}, pods: elsewhere, node: nodeLabels{name: "n", labels: labelled}, selected: "X", removed: true},
		"no longer selected: labels go":                          {owned: []*unstructured.Unstructured{served}, pods: onN, node: nodeLabels{name: "n", labels: labelled}, removed: true},
		"driver pruned earlier, status names it":                 {drivers: map[string]string{"X": "driver-x"}, node: nodeLabels{name: "n", labels: labelled}, selected: "Y", removed: true},
		"shared recipe: labels kept":                             {owned: []*unstructured.Unstructured{shared}, node: nodeLabels{name: "n", labels: labelled}, selected: "Y"},
		"kernel no node runs: pruned":                            {owned: []*unstructured.Unstructured{shared, served, gone}, pods: onN, node: nodeLabels{name: "n", labels: labelled}, selected: "X", pruned: []string{"driver-z"}},
		"unlabelled node gets nothing":                           {owned: []*unstructured.Unstructured{served}, node: nodeLabels{name: "n"}, selected: "X"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			in := planInput{srName: "sr", owned: tc.owned, nodes: []nodeLabels{tc.node}, selected: map[string]string{}, present: map[string]bool{"X": true, "Y": true}}
			if tc.selected != "" {
				in.selected[tc.node.name] = tc.selected
			}
			got, affine := holdObjects(in, tc.drivers)
			in.driverPods = map[string]map[string]bool{}
			for k := range got.driverDaemonSets { // what hold lists: the chosen drivers' pods
				in.driverPods[k] = tc.pods[k]
			}
			holdLabels(got, in, affine)
			if fmt.Sprint(names(got.prune)) != fmt.Sprint(tc.pruned) {
				t.Errorf("pruned %v, want %v", names(got.prune), tc.pruned)
			}
			c := got.nodeLabels[tc.node.name]
			if tc.removed {
				if len(c) != 2 || c[l0] != nil || c[l1] != nil {
					t.Fatalf("changes %v, want %s and %s removed", c, l0, l1)
				}
			} else if len(got.nodeLabels) != 0 {
				t.Fatalf("changes %v, want none", slices.Collect(maps.Keys(got.nodeLabels)))
			}
			if ds := got.driverDaemonSets["X"]; slices.Contains(tc.owned, served) && (ds == nil || ds.GetName() != "driver-x") {
				t.Errorf("driver of X %v, want driver-x", ds)
			}
		})
	}
}

// TestWaitingForDependencyUndoes: a depends on b, both Ready on kernel X with two nodes. Node x0
// reboots into Y; b's Y driver is not available yet, so b is Progressing and a waits. Meanwhile
// a's X driver leaves x0: x0 loses a's state labels and a's status counts only x1. When x1
// follows, a's X DaemonSet goes (no node runs X), still before b is Ready.
func TestWaitingForDependencyUndoes(t *testing.T) {
	h := start(t)
	h.node("x0", kernelX, true)
	h.node("x1", kernelX, true)
	for _, img := range []string{"a", "b"} {
		h.push("vendor/" + img + ":" + kernelX)
		h.push("vendor/" + img + ":" + kernelY)
	}
	b := h.specialResource("b")
	a := h.specialResource("a")
	a.Spec.DependsOn = []sro.SpecialResourceDependency{{Name: b.Name}}
	t.Cleanup(func() { h.deleteAndWait(b.Name) }) // after a is gone
	if err := env.Client.Create(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	h.create(a)
	h.runDaemonSet(h.waitDaemonSets(b.Name, kernelX)[kernelX], 2)
	h.waitSR(b.Name, "b Ready", isTrue(sro.ConditionReady, ""))
	aX := h.waitDaemonSets(a.Name, kernelX)[kernelX]
	h.runDaemonSet(aX, 2)
	h.waitSR(a.Name, "a Ready on both nodes", func(sr *sro.SpecialResource) bool {
		return isTrue(sro.ConditionReady, "")(sr) && sr.Status.NodesServed == 2
	})
	l1000 := naming.StateLabel(a.Name, "1000")
	poll.Until(t, "both nodes labelled", func() (bool, string) {
		return h.nodeNamed("x0").Labels[l1000] == "Ready" && h.nodeNamed("x1").Labels[l1000] == "Ready", ""
	})

	h.setKernel("x0", kernelY)
	h.waitDaemonSets(b.Name, kernelX, kernelY)
	h.waitSR(a.Name, "a waits for b", isTrue(sro.ConditionProgressing, sro.ReasonWaitingForDependency))
	h.runDaemonSet(aX, 1) // the DaemonSet controller: x0 left kernel X
	got := h.waitSR(a.Name, "a counts only x1", func(sr *sro.SpecialResource) bool { return sr.Status.NodesServed == 1 })
	if !isTrue(sro.ConditionProgressing, sro.ReasonWaitingForDependency)(got) {
		t.Fatalf("a: %s", describe(got))
	}
	poll.Until(t, "x0 without a's labels, x1 with them", func() (bool, string) {
		x0, x1 := h.nodeNamed("x0").Labels, h.nodeNamed("x1").Labels
		for key := range x0 {
			if naming.IsStateLabelOf(key, a.Name) {
				return false, "x0 " + fmt.Sprint(x0)
			}
		}
		return x1[l1000] == "Ready", "x1 " + fmt.Sprint(x1)
	})

	h.setKernel("x1", kernelY)
	poll.Until(t, "a's X DaemonSet deleted while a waits", func() (bool, string) {
		// (a may have made Y's DaemonSet in a reconcile before b's status said it was not Ready.)
		dss := h.daemonSets(a.Name)
		_, has := dss[kernelX]
		return !has, fmt.Sprint(slices.Collect(maps.Keys(dss)))
	})
	got = h.waitSR(a.Name, "a serves nothing", func(sr *sro.SpecialResource) bool { return sr.Status.NodesServed == 0 })
	if !isTrue(sro.ConditionProgressing, sro.ReasonWaitingForDependency)(got) {
		t.Fatalf("a: %s", describe(got))
	}
	for key := range h.nodeNamed("x1").Labels {
		if naming.IsStateLabelOf(key, a.Name) {
			t.Fatalf("x1 kept %s", key)
		}
	}
}

// TestPollHeldLabels: a reconcile that held looks again every WaitPoll while a driver DaemonSet
// counts other available pods than the cache shows (pods wake nobody), sooner than its outcome
// says, never later.
func TestPollHeldLabels(t *testing.T) {
	cfg := &Config{WaitPoll: 5 * time.Second}
	held := &planResult{hold: true, labelsBehind: true}
	tests := map[string]struct {
		p     *planResult
		after time.Duration
		want  time.Duration
	}{
		"held, pods behind, only on change": {p: held, want: 5 * time.Second},
		"held, pods behind, RetryDelay":     {p: held, after: 30 * time.Second, want: 5 * time.Second},
		"held, pods behind, sooner":         {p: held, after: time.Second, want: time.Second},
		"held, pods caught up":              {p: &planResult{hold: true}, after: 30 * time.Second, want: 30 * time.Second},
		"the full plan's (decide)":          {p: &planResult{labelsBehind: true}, after: 30 * time.Second, want: 30 * time.Second},
		"no plan":                           {after: 30 * time.Second, want: 30 * time.Second},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := pollHeldLabels(outcome{after: tc.after}, tc.p, cfg).after; got != tc.want {
				t.Fatalf("again after %s, want %s", got, tc.want)
			}
		})
	}
}
