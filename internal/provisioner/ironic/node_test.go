package ironic

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/metalforge/metalforge/internal/provisioner"
)

// TestHostOfNode: the watcher's notices go to the host a node is named after (namespace~name, as
// metal3 names nodes), and never to nodes someone else enrolled.
func TestHostOfNode(t *testing.T) {
	for name, c := range map[string]struct {
		node string
		want types.NamespacedName
		ok   bool
	}{
		"ours":             {node: nodeName(provisioner.Host{Namespace: "ns", Name: "host-0"}), want: types.NamespacedName{Namespace: "ns", Name: "host-0"}, ok: true},
		"someone else's":   {node: "someone-elses-node"},
		"no namespace":     {node: "~host"},
		"no name":          {node: "ns~"},
		"empty (no name)":  {node: ""},
		"second separator": {node: "ns~a~b", want: types.NamespacedName{Namespace: "ns", Name: "a~b"}, ok: true},
	} {
		got, ok := hostOfNode(c.node)
		if ok != c.ok || got != c.want {
			t.Errorf("%s: hostOfNode(%q) = %v %t, want %v %t", name, c.node, got, ok, c.want, c.ok)
		}
	}
}
