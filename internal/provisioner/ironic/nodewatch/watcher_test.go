package nodewatch

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	"k8s.io/apimachinery/pkg/types"
)

const (
	shortDelay = 3 * time.Second
	longDelay  = 10 * time.Second
)

// testClock is a clock the test moves by hand.
type testClock struct{ t time.Time }

func (c *testClock) now() time.Time               { return c.t }
func (c *testClock) add(d time.Duration)          { c.t = c.t.Add(d) }
func (c *testClock) at(d time.Duration) time.Time { return c.t.Add(d) }

// hostOf names nodes "namespace/name" as their hosts; others are not a host's.
func hostOf(name string) (types.NamespacedName, bool) {
	ns, host, ok := strings.Cut(name, "/")
	return types.NamespacedName{Namespace: ns, Name: host}, ok && ns != "" && host != ""
}

// newTestWatcher returns a watcher on clock c whose lists answer with what *list holds, sent at
// the clock's time when List is called.
func newTestWatcher(c *testClock, list *[]nodes.Node) *Watcher {
	return New(Config{
		List: func(context.Context) ([]nodes.Node, time.Time, error) {
			return append([]nodes.Node(nil), *list...), c.now(), nil
		},
		HostOf:     hostOf,
		ShortDelay: shortDelay, LongDelay: longDelay,
		ReadTTL: time.Second,
		Now:     c.now,
	})
}

func TestWatchNoticesChanges(t *testing.T) {
	w := New(Config{HostOf: hostOf, ShortDelay: shortDelay, LongDelay: longDelay})
	w.changes = make(chan types.NamespacedName, 2)
	n := &nodes.Node{UUID: "u1", Name: "ns/host", ProvisionState: "verifying", TargetProvisionState: "manageable"}
	if w.saw(n) {
		t.Error("a node seen for the first time is a change")
	}
	same := *n
	if w.saw(&same) {
		t.Error("the same state is a change")
	}
	done := same
	done.ProvisionState, done.TargetProvisionState = "manageable", ""
	if !w.saw(&done) {
		t.Error("verifying → manageable is not a change")
	}
	// Only nodes that HostOf names are hosts; the channel never blocks.
	w.notify([]string{"ns/host", "someone-elses-node", "ns/a", "ns/b"})
	if got := <-w.changes; got != (types.NamespacedName{Namespace: "ns", Name: "host"}) {
		t.Errorf("notice %v", got)
	}
	if got := <-w.changes; got.Name != "a" {
		t.Errorf("second notice %v, want ns/a (the foreign node is skipped)", got)
	}
	select {
	case got := <-w.changes:
		t.Errorf("a notice beyond the buffer was kept: %v", got)
	default:
	}
}

func TestWatchInterval(t *testing.T) {
	w := New(Config{ShortDelay: shortDelay, LongDelay: longDelay})
	now := time.Unix(5000, 0)
	if got := w.interval(now); got != idleInterval {
		t.Errorf("idle: %s, want %s", got, idleInterval)
	}
	w.lastWrite.Store(now.Add(-time.Second).UnixNano())
	if got := w.interval(now); got != shortDelay {
		t.Errorf("just wrote: %s, want %s", got, shortDelay)
	}
	w.lastWrite.Store(0)
	w.inTransition = true
	if got := w.interval(now); got != shortDelay {
		t.Errorf("a node in transition: %s, want %s", got, shortDelay)
	}
	// Slow lists (waiting for one of Ironic's API threads) do not space the rounds out: lists
	// overlap instead (Run).
	w.listTook = 15 * time.Second
	if got := w.interval(now); got != shortDelay {
		t.Errorf("lists taking 15 s while Ironic works: %s, want %s", got, shortDelay)
	}
	w.listTook = 100 * time.Millisecond

	// Reads answer polls for about two rounds while the watcher lists, ReadTTL otherwise.
	w.reads.ttl = time.Second
	if got := w.readMaxAge(now); got != time.Second {
		t.Errorf("no watcher: read max age %s", got)
	}
	w.running, w.listedAt = true, now.Add(-time.Second)
	if got := w.readMaxAge(now); got <= shortDelay || got > 3*shortDelay {
		t.Errorf("watcher listing: read max age %s", got)
	}
	w.listTook = 15 * time.Second
	if got := w.readMaxAge(now); got != 2*longDelay {
		t.Errorf("slow lists while Ironic works: read max age %s, want %s", got, 2*longDelay)
	}
	w.listTook = 100 * time.Millisecond
	w.listedAt = now.Add(-time.Minute)
	if got := w.readMaxAge(now); got != time.Second {
		t.Errorf("watcher not listing for a minute: read max age %s, want the TTL", got)
	}
}

// TestListAnswersPollsAfterWritesOnly follows one node through lists, a write and the clock: a
// poll is answered from a list only when the list was sent after the write ended, hosts hear of
// state changes and of nodes gone, and lists that come back out of order do not count as newest.
func TestListAnswersPollsAfterWritesOnly(t *testing.T) {
	clock := &testClock{t: time.Unix(10000, 0)}
	list := []nodes.Node{{UUID: "u1", Name: "ns/h1", ProvisionState: "manageable"}}
	w := newTestWatcher(clock, &list)
	var onList []time.Time
	w.cfg.OnList = func(_ []nodes.Node, at time.Time) { onList = append(onList, at) }
	w.running = true // as while Run goes: reads answer for about two rounds
	ctx := context.Background()

	if _, err := w.List(ctx); err != nil {
		t.Fatal(err)
	}
	clock.add(2 * time.Second)
	n, ok := w.Get("u1")
	if !ok || n.ProvisionState != "manageable" {
		t.Fatalf("a poll 2 s after a list: %v %v, want the listed node", n, ok)
	}
	if !w.Listed(n) {
		t.Error("a read 2 s old from a list is not taken as listed")
	}
	if got := w.interval(clock.now()); got != idleInterval {
		t.Errorf("nothing written, nothing in transition: interval %s, want %s", got, idleInterval)
	}

	// A write (provide) begins; a list sent while it is in flight still shows manageable.
	ended := w.Writing("u1")
	clock.add(100 * time.Millisecond)
	if _, err := w.List(ctx); err != nil {
		t.Fatal(err)
	}
	clock.add(100 * time.Millisecond)
	ended()
	if n, ok := w.Get("u1"); ok {
		t.Fatalf("a list sent while a write was in flight answered a poll: %s", n.ProvisionState)
	}
	if got := w.interval(clock.now()); got != shortDelay {
		t.Errorf("just wrote: interval %s, want %s", got, shortDelay)
	}

	// The next list, sent after the write ended, answers and tells the host about the change.
	clock.add(time.Second)
	list[0].ProvisionState, list[0].TargetProvisionState = "cleaning", "available"
	if _, err := w.List(ctx); err != nil {
		t.Fatal(err)
	}
	if n, ok := w.Get("u1"); !ok || n.ProvisionState != "cleaning" {
		t.Errorf("a list sent after the write: %v %v, want cleaning", n, ok)
	}
	if got := drain(w); len(got) != 1 || got[0] != (types.NamespacedName{Namespace: "ns", Name: "h1"}) {
		t.Errorf("notices after manageable → cleaning: %v, want ns/h1 once", got)
	}
	if !w.inTransition {
		t.Error("a node with a target state does not put the watcher in transition")
	}

	// A list that comes back after a newer one only fills in reads: it neither becomes the newest
	// nor reaches OnList.
	lists := len(onList)
	newestAt := w.listedAt
	older := clock.at(-500 * time.Millisecond)
	w.cfg.List = func(context.Context) ([]nodes.Node, time.Time, error) {
		return []nodes.Node{{UUID: "u1", Name: "ns/h1", ProvisionState: "clean wait"}}, older, nil
	}
	if _, err := w.List(ctx); err != nil {
		t.Fatal(err)
	}
	if !w.listedAt.Equal(newestAt) || len(onList) != lists {
		t.Errorf("an older list counted as newest (listedAt %v, OnList calls %d → %d)", w.listedAt, lists, len(onList))
	}
	if n, _ := w.Get("u1"); n.ProvisionState != "cleaning" {
		t.Errorf("an older list replaced a newer read: %s", n.ProvisionState)
	}

	// The node disappears from a complete list (deleted elsewhere, or Ironic lost its database):
	// its host hears of it at once, and the read is gone.
	list = nil
	w.cfg.List = func(context.Context) ([]nodes.Node, time.Time, error) { return nil, clock.now(), nil }
	clock.add(time.Second)
	if _, err := w.List(ctx); err != nil {
		t.Fatal(err)
	}
	if got := drain(w); len(got) != 1 || got[0].Name != "h1" {
		t.Errorf("notices for a node gone from Ironic: %v, want ns/h1", got)
	}
	if _, ok := w.Get("u1"); ok {
		t.Error("a node gone from the list still answers polls")
	}
	if len(onList) != 4 {
		t.Errorf("OnList got %d lists, want the 4 that were newest", len(onList))
	}
}

// TestReadsWithoutRun: while Run does not go, a read answers only for ReadTTL, on the injected
// clock, and Removed forgets what the write record kept.
func TestReadsWithoutRun(t *testing.T) {
	clock := &testClock{t: time.Unix(20000, 0)}
	var list []nodes.Node
	w := newTestWatcher(clock, &list)
	n := &nodes.Node{UUID: "u2", Name: "ns/h2", ProvisionState: "active"}
	w.Put(n, clock.now())
	clock.add(500 * time.Millisecond)
	if got, ok := w.Get("u2"); !ok || got != n {
		t.Fatalf("a GET 0.5 s ago: %v %v, want it to answer", got, ok)
	}
	if w.Listed(n) {
		t.Error("a read 0.5 s old is taken as a listed one")
	}
	clock.add(time.Second)
	if _, ok := w.Get("u2"); ok {
		t.Error("a read older than ReadTTL answered while the watcher does not list")
	}
	w.Put(n, clock.now())
	w.Forget("u2")
	if _, ok := w.Get("u2"); ok {
		t.Error("a forgotten read answered")
	}

	// A write's record keeps older reads out until the node is removed.
	ended := w.Writing("u2")
	ended()
	w.Put(n, clock.at(-time.Second))
	if _, ok := w.Get("u2"); ok {
		t.Error("a read sent before a write answered")
	}
	w.Removed("u2")
	w.Put(n, clock.at(-time.Millisecond))
	if _, ok := w.Get("u2"); !ok {
		t.Error("after Removed, the write record still kept a read out")
	}
	if !w.wanted(clock.now()) || w.wanted(clock.at(unusedAfter+time.Second)) {
		t.Error("polls do not keep the watcher wanted for unusedAfter")
	}
}

func drain(w *Watcher) []types.NamespacedName {
	var out []types.NamespacedName
	for {
		select {
		case nn := <-w.changes:
			out = append(out, nn)
		default:
			return out
		}
	}
}
