package kernel

import (
	"slices"
	"testing"
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
					if chosen == "" || OSSourceBefore(k, n.name, n.labels, chosen, labels) {
						chosen, labels = n.name, n.labels
					}
				}
				if chosen != tc.want {
					t.Fatalf("order %v chose %s, want %s", order, chosen, tc.want)
				}
			}
		})
	}
	if OSOf(k, nfd).MajorMinor != "rhel9.2" || !OSLabelled(k, nfd) || OSLabelled(k, nil) {
		t.Fatalf("NFD labels: OS %+v, labelled %v", OSOf(k, nfd), OSLabelled(k, nfd))
	}
}

// TestUpgradeOSLabels: the labels preflight renders a kernel's operating system with are those of
// a node running it when one does, none for a kernel whose release names its OS, else those of
// the labelled nodes when they agree on one OS.
func TestUpgradeOSLabels(t *testing.T) {
	ubuntu := func(major, minor string) map[string]string {
		return map[string]string{
			"feature.node.kubernetes.io/system-os_release.ID":               "ubuntu",
			"feature.node.kubernetes.io/system-os_release.VERSION_ID.major": major,
			"feature.node.kubernetes.io/system-os_release.VERSION_ID.minor": minor,
		}
	}
	rhcos := map[string]string{
		"feature.node.kubernetes.io/system-os_release.ID":               "rhcos",
		"feature.node.kubernetes.io/system-os_release.RHEL_VERSION":     "9.2",
		"feature.node.kubernetes.io/system-os_release.VERSION_ID.major": "4",
	}
	const (
		oldUbuntu = "6.8.0-45-generic"
		newUbuntu = "6.8.0-50-generic"
		newRHEL   = "5.14.0-427.13.1.el9_4.x86_64"
	)
	for name, tc := range map[string]struct {
		k     string
		nodes []Labelled
		want  string // OSOf(k, labels).MajorMinor
	}{
		"a node runs the kernel": {k: newUbuntu, nodes: []Labelled{
			{"a", oldUbuntu, ubuntu("22", "04")}, {"b", newUbuntu, ubuntu("24", "04")}}, want: "ubuntu24.04"},
		"a node runs it, unlabelled: no OS, as the SpecialResource controller renders": {k: newUbuntu, nodes: []Labelled{
			{"a", oldUbuntu, ubuntu("22", "04")}, {"b", newUbuntu, nil}, {"c", oldUbuntu, rhcos}}, want: ""},
		"the release names the OS": {k: newRHEL, nodes: []Labelled{{"a", "5.14.0-284.30.1.el9_2.x86_64", rhcos}}, want: "rhel9.4"},
		"the nodes agree":          {k: newUbuntu, nodes: []Labelled{{"b", oldUbuntu, ubuntu("22", "04")}, {"a", oldUbuntu, ubuntu("22", "04")}, {"c", oldUbuntu, nil}}, want: "ubuntu22.04"},
		"the nodes disagree":       {k: newUbuntu, nodes: []Labelled{{"a", oldUbuntu, ubuntu("22", "04")}, {"b", oldUbuntu, ubuntu("24", "04")}}, want: ""},
		"no node labelled":         {k: newUbuntu, nodes: []Labelled{{"a", oldUbuntu, nil}}, want: ""},
		"no node":                  {k: newUbuntu, want: ""},
	} {
		t.Run(name, func(t *testing.T) {
			reversed := slices.Clone(tc.nodes)
			slices.Reverse(reversed)
			for _, order := range [][]Labelled{tc.nodes, reversed} {
				if got := OSOf(tc.k, UpgradeOSLabels(tc.k, order)).MajorMinor; got != tc.want {
					t.Fatalf("nodes %v: OS %q, want %q", order, got, tc.want)
				}
			}
		})
	}
}
