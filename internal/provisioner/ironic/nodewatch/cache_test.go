package nodewatch

import (
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
)

func TestNodeCacheReadsAfterWritesOnly(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var c nodeCache
	n := &nodes.Node{UUID: "n1", ProvisionState: "manageable"}

	c.put(n, t0)
	if got, at, ok := c.get("n1", t0.Add(time.Second), 5*time.Second); !ok || got != n || !at.Equal(t0) {
		t.Fatalf("fresh read: got %v %v %v", got, at, ok)
	}
	if _, _, ok := c.get("n1", t0.Add(6*time.Second), 5*time.Second); ok {
		t.Error("a read older than maxAge answered")
	}

	// A write that began and ended after the read: the read no longer counts, and a list sent
	// while the write was in flight does not either.
	c.wrote("n1", t0.Add(2*time.Second))
	c.wrote("n1", t0.Add(3*time.Second))
	if _, _, ok := c.get("n1", t0.Add(3*time.Second), time.Hour); ok {
		t.Error("a read sent before the last write answered")
	}
	if c.put(&nodes.Node{UUID: "n1", ProvisionState: "manageable"}, t0.Add(2500*time.Millisecond)) {
		t.Error("a read sent while a write was in flight was stored")
	}
	if _, _, ok := c.get("n1", t0.Add(4*time.Second), time.Hour); ok {
		t.Error("a read sent while the write was in flight answered")
	}
	after := &nodes.Node{UUID: "n1", ProvisionState: "cleaning"}
	if !c.put(after, t0.Add(4*time.Second)) {
		t.Error("a read sent after the write was not stored")
	}
	if got, _, ok := c.get("n1", t0.Add(5*time.Second), time.Hour); !ok || got != after {
		t.Errorf("a read sent after the write: got %v %v", got, ok)
	}

	// An older read never replaces a newer one.
	if c.put(&nodes.Node{UUID: "n1", ProvisionState: "clean wait"}, t0.Add(3500*time.Millisecond)) {
		t.Error("an older read was stored over a newer one")
	}
	if got, _, _ := c.get("n1", t0.Add(5*time.Second), time.Hour); got != after {
		t.Errorf("an older read replaced a newer one: %s", got.ProvisionState)
	}
	if at, ok := c.readAt(after); !ok || !at.Equal(t0.Add(4*time.Second)) {
		t.Errorf("readAt = %v %v", at, ok)
	}
	if _, ok := c.readAt(&nodes.Node{UUID: "n1"}); ok {
		t.Error("readAt knows a node that is not the cached read")
	}

	// A complete list without the node drops reads taken before it.
	c.put(&nodes.Node{UUID: "n2"}, t0.Add(4*time.Second))
	c.retain(map[string]bool{"n2": true}, t0.Add(10*time.Second))
	if _, _, ok := c.get("n1", t0.Add(10*time.Second), time.Hour); ok {
		t.Error("a node missing from a complete list is still cached")
	}
	if _, _, ok := c.get("n2", t0.Add(10*time.Second), time.Hour); !ok {
		t.Error("a listed node was dropped")
	}
}
