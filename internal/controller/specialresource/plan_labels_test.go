package specialresource

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metalforge/metalforge/internal/sro/naming"
	"github.com/metalforge/metalforge/internal/sro/recipe"
)

// TestPlanNodeLabelsPerNode: the plan judges the states from the driver's on node by node (as
// hold does): a node keeps, or gets, their labels while its own driver pod serves, whatever the
// driver's pods elsewhere do; and a recipe whose driver is kernel-affine stays so when no kernel
// has its image yet: no node is labelled as served and no later shared state is applied without a
// driver. A kernel whose image is being built holds the later shared states back; one whose image
// failed (build failed or refused, missing, lookup prevented by the pull Secret) does not: the
// other kernels get them and their labels, its own nodes only those before the driver.
func TestPlanNodeLabelsPerNode(t *testing.T) {
	l0, l1, l2 := naming.StateLabel("sr", "0000"), naming.StateLabel("sr", "1000"), naming.StateLabel("sr", "2000")
	all := map[string]string{l0: "Ready", l1: "Ready", l2: "Ready"}
	// unrendered are the states of rbac, dsX and plugin when no kernel has its image: the
	// driver's state is there, empty.
	unrendered := []recipe.RenderedState{{Name: "0000-rbac.yaml", Objects: []recipe.Object{rbac}}, {Name: "1000-driver.yaml"},
		{Name: "2000-plugin.yaml", Objects: []recipe.Object{plugin}}}
	oldX := observed(dsX, "old", 2)
	// pluginNoWait is a later shared state ready once applied: a node can be labelled with it in
	// the reconcile that creates it.
	pluginNoWait := obj("2000-plugin.yaml", "DaemonSet", "plugin", "", false)
	tests := map[string]struct {
		in planInput
		// labels are the nodes' state labels before (nodes n-X-1, n-X-2 on X, n-Y-1 on Y).
		labels map[string]map[string]string
		// changes are the label changes: "node: +added -removed", sorted.
		changes []string
		apply   []string
		pruned  []string
	}{
		"one driver pod restarting: the other node keeps its labels": {
			in: planInput{states: states(rbac, dsX, plugin), kernels: groups(true, "X"), driverPods: map[string]map[string]bool{"X": {"n-X-1": true}},
				observed: observe(observed(rbac, "", 0), observed(dsX, "", 1), observed(plugin, "", 2))},
			labels:  map[string]map[string]string{"n-X-1": all, "n-X-2": all},
			changes: []string{"n-X-2: -1000 -2000"},
		},
		"a pod available while another restarts: its node gets the labels": {
			in: planInput{states: states(rbac, dsX, plugin), kernels: groups(true, "X"), driverPods: map[string]map[string]bool{"X": {"n-X-1": true}},
				observed: observe(observed(rbac, "", 0), observed(dsX, "", 1), observed(plugin, "", 2))},
			changes: []string{"n-X-1: +0000 +1000 +2000", "n-X-2: +0000"},
		},
		"driver rolling out: nodes its old pods serve keep their labels": {
			in: planInput{states: states(rbac, dsX, plugin), kernels: groups(true, "X"), driverPods: map[string]map[string]bool{"X": {"n-X-1": true, "n-X-2": true}},
				observed: observe(observed(rbac, "", 0), observed(dsX, "old", 2), observed(plugin, "", 2))},
			labels: map[string]map[string]string{"n-X-1": all, "n-X-2": all},
			apply:  []string{"driver-x"},
		},
		"no kernel has its image: only the states before the driver, no later shared state": {
			in:      planInput{states: unrendered, affine: []bool{false, true, false}, present: map[string]bool{"X": true}, observed: observe(observed(rbac, "", 0))},
			changes: []string{"n-X-1: +0000", "n-X-2: +0000"},
		},
		"a kernel whose image is being built holds the later shared state back": {
			in: planInput{states: states(rbac, dsX, plugin), kernels: groups(true, "X"), present: map[string]bool{"X": true, "Y": true},
				driverPods: map[string]map[string]bool{"X": {"n-X-1": true, "n-X-2": true}}, observed: observe(observed(rbac, "", 0), observed(dsX, "", 2))},
			labels:  map[string]map[string]string{"n-Y-1": all},
			changes: []string{"n-X-1: +0000 +1000", "n-X-2: +0000 +1000", "n-Y-1: -1000 -2000"},
		},
		"a kernel whose image failed holds no later shared state back: the others' nodes labelled through it": {
			in: planInput{states: states(rbac, dsX, pluginNoWait), kernels: groups(true, "X"), present: map[string]bool{"X": true, "Y": true},
				failed: map[string]bool{"Y": true}, driverPods: map[string]map[string]bool{"X": {"n-X-1": true, "n-X-2": true}},
				observed: observe(observed(rbac, "", 0), observed(dsX, "", 2))},
			labels:  map[string]map[string]string{"n-Y-1": all},
			changes: []string{"n-X-1: +0000 +1000 +2000", "n-X-2: +0000 +1000 +2000", "n-Y-1: -1000 -2000"},
			apply:   []string{"plugin"},
		},
		"a kernel whose image failed: a changed later shared state is updated for the others": {
			in: planInput{states: states(rbac, dsX, pluginNoWait), kernels: groups(true, "X"), present: map[string]bool{"X": true, "Y": true},
				failed: map[string]bool{"Y": true}, driverPods: map[string]map[string]bool{"X": {"n-X-1": true, "n-X-2": true}},
				observed: observe(observed(rbac, "", 0), observed(dsX, "", 2), observed(pluginNoWait, "old", 0))},
			labels: map[string]map[string]string{"n-X-1": all, "n-X-2": all, "n-Y-1": {l0: "Ready"}},
			apply:  []string{"plugin"},
		},
		"a kernel whose new image failed while its old driver serves: a changed later shared state waits": {
			// A version roll: the new plugin must not reach the node the old Y driver still runs on.
			in: planInput{states: states(rbac, dsX, pluginNoWait), kernels: groups(true, "X"), present: map[string]bool{"X": true, "Y": true},
				failed: map[string]bool{"Y": true}, heldDrivers: map[string]*unstructured.Unstructured{"Y": observed(dsY, "old", 1)},
				driverPods: map[string]map[string]bool{"X": {"n-X-1": true, "n-X-2": true}, "Y": {"n-Y-1": true}},
				observed:   observe(observed(rbac, "", 0), observed(dsX, "", 2), observed(pluginNoWait, "old", 0))},
			// As while a kernel is built: the held plugin's state is not ready for X; the node the
			// old Y driver serves keeps what it had (as in "new image being built").
			labels:  map[string]map[string]string{"n-X-1": all, "n-X-2": all, "n-Y-1": all},
			changes: []string{"n-X-1: -2000", "n-X-2: -2000"},
		},
		"every kernel's image failed: no later shared state without a driver anywhere": {
			in: planInput{states: unrendered, affine: []bool{false, true, false}, present: map[string]bool{"X": true}, failed: map[string]bool{"X": true},
				observed: observe(observed(rbac, "", 0))},
			changes: []string{"n-X-1: +0000", "n-X-2: +0000"},
		},
		"new image being built: nodes the old driver serves keep their labels": {
			in: planInput{states: unrendered, affine: []bool{false, true, false}, present: map[string]bool{"X": true}, owned: []*unstructured.Unstructured{oldX},
				heldDrivers: map[string]*unstructured.Unstructured{"X": oldX}, driverPods: map[string]map[string]bool{"X": {"n-X-1": true}},
				observed: observe(observed(rbac, "", 0), observed(plugin, "", 2))},
			labels:  map[string]map[string]string{"n-X-1": all, "n-X-2": all},
			changes: []string{"n-X-2: -1000 -2000"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			in := tc.in
			in.srName, in.selected = "sr", map[string]string{}
			for _, n := range []string{"n-X-1", "n-X-2", "n-Y-1"} {
				k := n[2:3]
				in.nodes = append(in.nodes, nodeLabels{name: n, kernel: k, labels: tc.labels[n]})
				if in.present[k] || in.kernels[k].kernel != "" {
					in.selected[n] = k
				}
			}
			res := plan(in)
			if got := labelChanges(res.nodeLabels); !slices.Equal(got, tc.changes) {
				t.Errorf("label changes %q, want %q", got, tc.changes)
			}
			if got := names(res.apply); !slices.Equal(got, tc.apply) {
				t.Errorf("apply %v, want %v", got, tc.apply)
			}
			if got := names(res.prune); !slices.Equal(got, tc.pruned) {
				t.Errorf("prune %v, want %v", got, tc.pruned)
			}
		})
	}
}

// labelChanges writes state label changes as "node: +added -removed" (state IDs), sorted.
func labelChanges(changes map[string]map[string]*string) []string {
	var out []string
	for _, node := range slices.Sorted(maps.Keys(changes)) {
		var parts []string
		for _, key := range slices.Sorted(maps.Keys(changes[node])) {
			sign := "+"
			if changes[node][key] == nil {
				sign = "-"
			}
			parts = append(parts, sign+key[len(key)-4:])
		}
		out = append(out, fmt.Sprintf("%s: %s", node, strings.Join(parts, " ")))
	}
	return out
}
