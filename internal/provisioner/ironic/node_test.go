package ironic

import (
	"testing"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
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

// TestFinishedNeedsAnAcceptedStart: a request counts as the one that ran on the node only when its
// fingerprint is in the node's extra and Ironic accepted the state change after it was written.
// A start Ironic refused (busy) leaves the fingerprint behind: without the memory of the refusal,
// a node still in "service failed" from the previous request would report that request's failure
// as this one's instead of starting it.
func TestFinishedNeedsAnAcceptedStart(t *testing.T) {
	const id = "0b3c9c3e-5d1a-4c1e-9a57-6b1f1f2f0002"
	p := &Provisioner{}
	n := &nodes.Node{UUID: id, Extra: map[string]any{extraServiced: "fp-b"}}
	if !p.finished(n, extraServiced, "fp-b") {
		t.Error("a fingerprint in extra with no refusal remembered (written by an earlier operator): want finished")
	}
	if p.finished(n, extraServiced, "fp-c") {
		t.Error("another request's fingerprint in extra: want not finished")
	}
	p.recordStart(n, extraServiced, "fp-b", false)
	if p.finished(n, extraServiced, "fp-b") {
		t.Error("the start of fp-b was refused: want not finished")
	}
	n.Extra[extraPrepared] = "fp-b"
	if !p.finished(n, extraPrepared, "fp-b") {
		t.Error("a refused servicing start counts against the preparation with the same fingerprint")
	}
	if d := decideServicing(&nodes.Node{ProvisionState: string(nodes.ServiceFail), LastError: "bios failed"},
		serviceFacts{hasSteps: true, ran: p.finished(n, extraServiced, "fp-b")}); d.act != actService {
		t.Errorf("service failed after a refused start of the new request: %+v, want servicing started", d)
	}
	p.recordStart(n, extraServiced, "fp-b", true)
	if !p.finished(n, extraServiced, "fp-b") {
		t.Error("the start of fp-b went through: want finished")
	}
}
