package specialresource

import (
	"slices"
	"testing"

	"github.com/metalforge/metalforge/internal/sro/kernel"
)

// TestOSSourceIsStable: the node a kernel group takes its operating-system values from does not
// depend on the order nodes are listed in: a node-feature-discovery-labelled node wins over one
// without labels (whose kernel names no minor release), then the first by name.
func TestOSSourceIsStable(t *testing.T) {
	const k = "5.14.0-284.30.1.el9_2.x86_64"
	nfd := map[string]string{
		"feature.node.kubernetes.io/system-os_release.ID":               "rhcos",
		"feature.node.kubernetes.io/system-os_release.VERSION_ID.major": "4",
		"feature.node.kubernetes.io/system-os_release.VERSION_ID.minor": "14",
		"feature.node.kubernetes.io/system-os_release.RHEL_VERSION":     "9.2",
	}
	type node struct {
		name   string
		labels map[string]string
	}
	for name, tc := range map[string]struct {
		nodes []node
		want  string
	}{
		"labelled beats unlabelled": {nodes: []node{{"a", nil}, {"b", nfd}, {"c", nil}}, want: "b"},
		"first by name":             {nodes: []node{{"c", nfd}, {"a", nfd}, {"b", nfd}}, want: "a"},
		"none labelled":             {nodes: []node{{"z", nil}, {"m", nil}}, want: "m"},
	} {
		t.Run(name, func(t *testing.T) {
			// Every order the cache may list the nodes in picks the same node.
			orders := [][]node{tc.nodes, slices.Clone(tc.nodes)}
			slices.Reverse(orders[1])
			for _, order := range orders {
				var chosen string
				var labels map[string]string
				for _, n := range order {
					if chosen == "" || osSourceBefore(n.name, n.labels, chosen, labels) {
						chosen, labels = n.name, n.labels
					}
				}
				if chosen != tc.want {
					t.Fatalf("order %v chose %s, want %s", order, chosen, tc.want)
				}
			}
		})
	}
	if kernel.OSOf(k, nfd).MajorMinor != "rhel9.2" || !kernel.OSLabelled(nfd) || kernel.OSLabelled(nil) {
		t.Fatalf("NFD labels: OS %+v, labelled %v", kernel.OSOf(k, nfd), kernel.OSLabelled(nfd))
	}
}
