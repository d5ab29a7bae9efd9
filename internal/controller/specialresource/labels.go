package specialresource

import (
	"github.com/metalforge/metalforge/internal/sro/naming"
)

// nodeLabelChanges gives each node the state labels of the states ready for its kernel, and
// takes them from nodes that are no longer selected or whose kernel is not ready. The states
// from the driver's on are judged node by node, as hold judges them (holdLabels): a node where
// the driver serves (an available pod of it runs there) has those ready for such a node
// (servedStates), whatever the driver's pods on other nodes do, so that one pod restarting does
// not take the labels off every node of its kernel; a node where it does not (a taint the
// DaemonSet does not tolerate, a pod restarting) has none of them. A kernel not rendered this
// time (its new image is being built, say) cannot have its later states judged: a node its
// earlier driver still serves keeps the labels of those it has.
func nodeLabelChanges(in planInput, res *planResult) map[string]map[string]*string {
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
			count := res.readyStates[k]
			serves := in.driverPods[k][n.name]
			if d, ok := res.driverState[k]; ok {
				if serves {
					count = res.servedStates[k]
				} else {
					count = min(count, d)
				}
			}
			for i := 0; i < count && i < len(keys); i++ {
				want[keys[i]] = true
			}
			if in.heldDrivers[k] != nil && serves {
				for _, key := range keys[min(count, len(keys)):] {
					if n.labels[key] == "Ready" {
						want[key] = true
					}
				}
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
