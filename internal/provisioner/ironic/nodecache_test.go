package ironic

import (
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	"k8s.io/apimachinery/pkg/types"
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

func TestWatchNoticesChanges(t *testing.T) {
	p := &Provisioner{cfg: DefaultConfig()}
	p.watch.changes = make(chan types.NamespacedName, 2)
	n := &nodes.Node{UUID: "u1", Name: "ns~host", ProvisionState: "verifying", TargetProvisionState: "manageable"}
	if p.saw(n) {
		t.Error("a node seen for the first time is a change")
	}
	same := *n
	if p.saw(&same) {
		t.Error("the same state is a change")
	}
	done := same
	done.ProvisionState, done.TargetProvisionState = "manageable", ""
	if !p.saw(&done) {
		t.Error("verifying → manageable is not a change")
	}
	// Only nodes named namespace~name are hosts; the channel never blocks.
	p.notify([]string{"ns~host", "someone-elses-node", "ns~a", "ns~b"})
	if got := <-p.watch.changes; got != (types.NamespacedName{Namespace: "ns", Name: "host"}) {
		t.Errorf("notice %v", got)
	}
	if got := <-p.watch.changes; got.Name != "a" {
		t.Errorf("second notice %v, want ns/a (the foreign node is skipped)", got)
	}
	select {
	case got := <-p.watch.changes:
		t.Errorf("a notice beyond the buffer was kept: %v", got)
	default:
	}
}

func TestWatchInterval(t *testing.T) {
	p := &Provisioner{cfg: DefaultConfig()}
	now := time.Unix(5000, 0)
	if got := p.watchInterval(now); got != watchIdleInterval {
		t.Errorf("idle: %s, want %s", got, watchIdleInterval)
	}
	p.watch.lastWrite.Store(now.Add(-time.Second).UnixNano())
	if got := p.watchInterval(now); got != p.cfg.ShortDelay {
		t.Errorf("just wrote: %s, want %s", got, p.cfg.ShortDelay)
	}
	p.watch.lastWrite.Store(0)
	p.watch.inTransition = true
	if got := p.watchInterval(now); got != p.cfg.ShortDelay {
		t.Errorf("a node in transition: %s, want %s", got, p.cfg.ShortDelay)
	}
	// Slow lists (waiting for one of Ironic's API threads) do not space the rounds out: lists
	// overlap instead (Watch).
	p.watch.listTook = 15 * time.Second
	if got := p.watchInterval(now); got != p.cfg.ShortDelay {
		t.Errorf("lists taking 15 s while Ironic works: %s, want %s", got, p.cfg.ShortDelay)
	}
	p.watch.listTook = 100 * time.Millisecond

	// Reads answer polls for about two rounds while the watcher lists, NodeCacheTTL otherwise.
	p.nodes.ttl = time.Second
	if got := p.readMaxAge(now); got != time.Second {
		t.Errorf("no watcher: read max age %s", got)
	}
	p.watch.running, p.watch.listedAt = true, now.Add(-time.Second)
	if got := p.readMaxAge(now); got <= p.cfg.ShortDelay || got > 3*p.cfg.ShortDelay {
		t.Errorf("watcher listing: read max age %s", got)
	}
	p.watch.listTook = 15 * time.Second
	if got := p.readMaxAge(now); got != 2*p.cfg.LongDelay {
		t.Errorf("slow lists while Ironic works: read max age %s, want %s", got, 2*p.cfg.LongDelay)
	}
	p.watch.listTook = 100 * time.Millisecond
	p.watch.listedAt = now.Add(-time.Minute)
	if got := p.readMaxAge(now); got != time.Second {
		t.Errorf("watcher not listing for a minute: read max age %s, want the TTL", got)
	}
}
