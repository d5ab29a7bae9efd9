package nodewatch

import (
	"sync"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
)

// nodeCache holds the newest read of each node, from a GET or from the node list the watcher
// takes, with the time its request was sent. A read may answer a later call only when
//   - it was sent after this provisioner's last write to the node finished, so it shows that write
//     (Ironic answers requests concurrently: a read sent while a write is in flight may not), and
//   - it is young enough (the caller says how young).
//
// The first rule is what makes a shared list safe to poll from: a node that this provisioner just
// asked to provide is never seen "manageable" by a list that Ironic answered before the provide.
type nodeCache struct {
	// ttl is how old a read may be to answer a call while the watcher does not run (reads shared
	// by the calls of one reconcile, e.g. Adopt then PowerState).
	ttl   time.Duration
	mu    sync.Mutex
	reads map[string]nodeRead
	// written is when the last write to each node ended (or began, while it is in flight).
	written map[string]time.Time
}

type nodeRead struct {
	n  *nodes.Node
	at time.Time // when the request that returned n was sent
}

// get returns the node's cached read when it is usable at now, and when it was sent.
func (c *nodeCache) get(id string, now time.Time, maxAge time.Duration) (*nodes.Node, time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.reads[id]
	if !ok || now.Sub(r.at) > maxAge || !r.at.After(c.written[id]) {
		return nil, time.Time{}, false
	}
	return r.n, r.at, true
}

// readAt returns when n was read, if n is the cached read of its node.
func (c *nodeCache) readAt(n *nodes.Node) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.reads[n.UUID]
	if !ok || r.n != n {
		return time.Time{}, false
	}
	return r.at, true
}

// put stores a read sent at `at`, unless a newer one is stored or a write ended after it was sent;
// it reports whether it stored it.
func (c *nodeCache) put(n *nodes.Node, at time.Time) bool {
	if n == nil || n.UUID == "" {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reads == nil {
		c.reads, c.written = map[string]nodeRead{}, map[string]time.Time{}
	}
	if old, had := c.reads[n.UUID]; had && old.at.After(at) {
		return false
	}
	if !at.After(c.written[n.UUID]) {
		return false
	}
	c.reads[n.UUID] = nodeRead{n: n, at: at}
	return true
}

// wrote marks a write to the node: reads sent before now no longer count. Called before a write
// is sent and again when its answer (or error) came back.
func (c *nodeCache) wrote(id string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.written == nil {
		c.reads, c.written = map[string]nodeRead{}, map[string]time.Time{}
	}
	delete(c.reads, id)
	c.written[id] = now
}

// forget drops the node's read, so that the next call reads it again.
func (c *nodeCache) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.reads, id)
}

// forgetAll drops everything about a node (it was deleted).
func (c *nodeCache) forgetAll(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.reads, id)
	delete(c.written, id)
}

// retain drops the reads of nodes not in keep (a complete list no longer has them: deleted by
// someone else) that were read before `at`.
func (c *nodeCache) retain(keep map[string]bool, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, r := range c.reads {
		if !keep[id] && r.at.Before(at) {
			delete(c.reads, id)
		}
	}
	for id, w := range c.written {
		if !keep[id] && w.Before(at.Add(-time.Hour)) {
			delete(c.written, id)
		}
	}
}
