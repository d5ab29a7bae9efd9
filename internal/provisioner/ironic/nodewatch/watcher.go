package nodewatch

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	"k8s.io/apimachinery/pkg/types"
)

// Watcher timing.
const (
	// idleInterval is the list interval while no node is in transition and nothing was written
	// lately: power changes and failures made outside the operator still show up.
	idleInterval = 30 * time.Second
	// maxInFlight: lists are sent every round even when the last one has not come back yet, up to
	// this many at once. A slow list is nearly always one waiting for a thread of Ironic's API
	// server (the embedded one has ten, shared with every agent's lookups and heartbeats and with
	// provision-state changes that take seconds), not one that costs much (about 80 ms of Ironic's
	// CPU for 500 nodes): waiting for it before sending the next would make the hosts' news a whole
	// queue wait older.
	maxInFlight = 2
	// unusedAfter: with no host asking about a node for this long, the watcher stops listing.
	unusedAfter = 2 * time.Minute
	// listedReadAge: a read older than this is taken as the watcher's (see Listed).
	listedReadAge = time.Second
	// changesBuffer is how many change notices may wait for the controller; more are dropped (the
	// hosts' own polls still find the change).
	changesBuffer = 4096
)

// Config is what the watcher needs from the provisioner.
type Config struct {
	// List reads every node with one (paginated) request and returns when that request was sent:
	// the nodes it returns are as Ironic had them at that time or later.
	List func(ctx context.Context) ([]nodes.Node, time.Time, error)
	// OnList, if set, is given every list that is the newest so far and when it was sent (the
	// provisioner's busy count for PROVISIONING_LIMIT).
	OnList func(list []nodes.Node, sentAt time.Time)
	// HostOf names the host whose node has this name; false for nodes that are not a host's.
	HostOf func(nodeName string) (types.NamespacedName, bool)
	// ShortDelay is the list interval while Ironic works on a node or the provisioner wrote to one
	// in the last LongDelay (the provisioner's short and long requeue delays).
	ShortDelay, LongDelay time.Duration
	// ReadTTL is how old a read may be to answer a call while the watcher does not list (reads
	// shared by the calls of one reconcile, e.g. Adopt then PowerState).
	ReadTTL time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Log is for the list rounds, which run outside any host's reconcile.
	Log logr.Logger
}

// Watcher keeps the newest read of each node and lists every node in rounds while Run goes. It is
// safe for concurrent use.
type Watcher struct {
	cfg     Config
	now     func() time.Time
	reads   nodeCache
	changes chan types.NamespacedName

	mu sync.Mutex
	// seen is the last state summary of each node, from any read or write answer.
	seen map[string]stateSummary
	// listedAt is when the newest complete list was sent, listTook how long it took.
	listedAt time.Time
	listTook time.Duration
	inFlight atomic.Int32
	// inTransition: the last list had a node with a target state (Ironic is working on it).
	inTransition bool
	running      bool

	lastUse   atomic.Int64 // unix nanoseconds of the last node read asked for
	lastWrite atomic.Int64 // unix nanoseconds of the last write
}

// New returns a watcher; it lists nothing until Run.
func New(cfg Config) *Watcher {
	w := &Watcher{cfg: cfg, now: cfg.Now, changes: make(chan types.NamespacedName, changesBuffer)}
	if w.now == nil {
		w.now = time.Now
	}
	w.reads.ttl = cfg.ReadTTL
	return w
}

// Changes delivers the hosts whose Ironic node changed state, as the watcher saw it.
func (w *Watcher) Changes() <-chan types.NamespacedName { return w.changes }

// Get answers a host's poll with the newest read of the node when it may (see nodeCache: sent
// after the provisioner's last write to the node, and at most readMaxAge old). Asking counts as a
// host asking (Asked).
func (w *Watcher) Get(id string) (*nodes.Node, bool) {
	now := w.now()
	w.lastUse.Store(now.UnixNano())
	n, _, ok := w.reads.get(id, now, w.readMaxAge(now))
	return n, ok
}

// Asked records that a host asks about its node (one not registered yet, say): the watcher lists
// while hosts ask, and stops unusedAfter the last one did.
func (w *Watcher) Asked() { w.lastUse.Store(w.now().UnixNano()) }

// Put records a read of n by a request sent at sentAt (a GET): it may answer later polls, and a
// change of state from what was seen before is taken as seen, not notified again.
func (w *Watcher) Put(n *nodes.Node, sentAt time.Time) {
	w.reads.put(n, sentAt)
	w.saw(n)
}

// Saw records the node a write answered with (PATCH, create): its state counts as seen, so the
// next list does not report the provisioner's own change. It does not answer polls: the answer
// came before the write was marked ended.
func (w *Watcher) Saw(n *nodes.Node) { w.saw(n) }

// Writing marks a write to a node as begun; the returned function marks it as ended. Reads sent
// before the end do not answer later polls (nodeCache), and a write makes the watcher list every
// ShortDelay for a LongDelay.
func (w *Watcher) Writing(id string) (ended func()) {
	now := w.now()
	w.reads.wrote(id, now)
	w.lastWrite.Store(now.UnixNano())
	return func() { w.reads.wrote(id, w.now()) }
}

// Listed reports whether n is the cached read of its node and older than a second, i.e. most
// likely from the watcher's list rather than a GET of the calling operation: an action Ironic
// refuses after a decision on such a read is decided again rather than failed.
func (w *Watcher) Listed(n *nodes.Node) bool {
	at, cached := w.reads.readAt(n)
	return cached && w.now().Sub(at) > listedReadAge
}

// Forget drops the node's read, so that the next call reads the node from Ironic.
func (w *Watcher) Forget(id string) { w.reads.forget(id) }

// Removed drops everything about a node the provisioner deleted.
func (w *Watcher) Removed(id string) { w.reads.forgetAll(id) }

// wanted: some host asked about a node lately.
func (w *Watcher) wanted(now time.Time) bool {
	return now.Sub(time.Unix(0, w.lastUse.Load())) < unusedAfter
}

// interval is how long to wait before the next list (see Run).
func (w *Watcher) interval(now time.Time) time.Duration {
	w.mu.Lock()
	busy := w.inTransition
	w.mu.Unlock()
	if busy || now.Sub(time.Unix(0, w.lastWrite.Load())) < w.cfg.LongDelay {
		return w.cfg.ShortDelay
	}
	return idleInterval
}

// readMaxAge is how old a cached read may be to answer a poll: a little over two list rounds
// while the watcher runs and lists, ReadTTL otherwise (reads shared within one reconcile).
// While Ironic works on nodes it is at most two long polls: older news would hold a host back
// longer than polling by itself would, so it reads its node instead.
func (w *Watcher) readMaxAge(now time.Time) time.Duration {
	ttl := w.reads.ttl
	w.mu.Lock()
	running, listedAt, took, busy := w.running, w.listedAt, w.listTook, w.inTransition
	w.mu.Unlock()
	if !running || listedAt.IsZero() {
		return ttl
	}
	round := w.interval(now) + took
	if now.Sub(listedAt) > 2*round {
		return ttl // the watcher has not listed for two rounds: do not lean on old lists
	}
	age := 2*round + time.Second
	if busy {
		age = min(age, 2*w.cfg.LongDelay)
	}
	return max(ttl, age)
}
