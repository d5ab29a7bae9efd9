package ironic

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	"k8s.io/apimachinery/pkg/types"
)

// The node watcher replaces one GET per busy host per poll (metal3's way: 50 requests a second for
// 500 hosts at 10 s, each ~7 ms of Ironic's CPU) with one list of every node per round (~80 ms for
// 500 nodes with the fields below): a host's poll reads the list's copy of its node when that copy
// was taken after the provisioner's last write to the node (nodeCache). Each list is compared with
// what the provisioner saw before, and the hosts whose node changed state are sent on Changes, so
// the controller reconciles them at once instead of at their next poll: a host moves on within one
// list round of Ironic finishing a step.
//
// Without Watch running (unit tests, or a provisioner used on its own) every poll is a GET, as before.

// listFields are the node fields every operation reads (decide*, the patches, the capacity count).
// disable_power_off is added when the microversion has it.
var listFields = []string{
	"uuid", "name", "provision_state", "target_provision_state", "power_state", "target_power_state",
	"last_error", "maintenance", "fault", "provision_updated_at", "inspection_finished_at", "reservation",
	"boot_interface", "deploy_interface", "inspect_interface", "raid_interface", "automated_clean",
	"driver_info", "extra", "instance_info", "properties", "network_data",
}

// Watcher timing.
const (
	// watchIdleInterval is the list interval while no node is in transition and nothing was
	// written lately: power changes and failures made outside the operator still show up.
	watchIdleInterval = 30 * time.Second
	// watchMaxInFlight: lists are sent every round even when the last one has not come back yet,
	// up to this many at once. A slow list is nearly always one waiting for a thread of Ironic's
	// API server (the embedded one has ten, shared with every agent's lookups and heartbeats and
	// with provision-state changes that take seconds), not one that costs much (about 80 ms of
	// Ironic's CPU for 500 nodes): waiting for it before sending the next would make the hosts'
	// news a whole queue wait older.
	watchMaxInFlight = 2
	// watchUnusedAfter: with no host asking about a node for this long, the watcher stops listing.
	watchUnusedAfter = 2 * time.Minute
	// listedReadAge: a read older than this is taken as the watcher's (see listedRead).
	listedReadAge = time.Second
	// changesBuffer is how many change notices may wait for the controller; more are dropped (the
	// hosts' own polls still find the change).
	changesBuffer = 4096
)

// stateSummary is what a host's reconcile decides on; a change of it is worth a notice. The name
// says whose node it is.
type stateSummary struct {
	name, provision, targetProvision, power, targetPower, lastError, fault string
	maintenance                                                            bool
}

func summarize(n *nodes.Node) stateSummary {
	return stateSummary{
		name:      n.Name,
		provision: n.ProvisionState, targetProvision: n.TargetProvisionState,
		power: n.PowerState, targetPower: n.TargetPowerState,
		lastError: n.LastError, fault: n.Fault, maintenance: n.Maintenance,
	}
}

// watchState is what the watcher keeps between rounds.
type watchState struct {
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

// Changes delivers the hosts whose Ironic node changed state, as the watcher saw it.
func (p *Provisioner) Changes() <-chan types.NamespacedName { return p.watch.changes }

// Watch lists Ironic's nodes in rounds until ctx ends: every ShortDelay while Ironic works on a
// node or the provisioner wrote lately, every 30 s otherwise, never while no host asks, with at
// most two lists in flight. Errors are logged once and retried next round.
func (p *Provisioner) Watch(ctx context.Context) error {
	p.watch.mu.Lock()
	p.watch.running = true
	p.watch.mu.Unlock()
	var lists sync.WaitGroup
	defer func() {
		lists.Wait()
		p.watch.mu.Lock()
		p.watch.running = false
		p.watch.mu.Unlock()
	}()
	// Look every ShortDelay (costs nothing) whether a list is due: a write or a host asking
	// makes one due at once, not after an idle round that began before them.
	tick := time.NewTicker(p.cfg.ShortDelay)
	defer tick.Stop()
	var failing atomic.Bool
	var lastStart time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		now := time.Now()
		if !p.watchWanted(now) || now.Sub(lastStart) < p.watchInterval(now)-p.cfg.ShortDelay/2 {
			continue
		}
		if p.watch.inFlight.Load() < watchMaxInFlight {
			lastStart = now
			p.watch.inFlight.Add(1)
			lists.Go(func() {
				defer p.watch.inFlight.Add(-1)
				_, err := p.listNodes(withOp(ctx, "watch"))
				switch {
				case err != nil && ctx.Err() == nil && !failing.Swap(true):
					p.log.Info("Listing Ironic nodes failed; hosts read their nodes one by one until it works again", "error", err.Error())
				case err == nil && failing.Swap(false):
					p.log.Info("Listing Ironic nodes works again")
				}
			})
		}
	}
}

// watchWanted: some host asked about a node lately.
func (p *Provisioner) watchWanted(now time.Time) bool {
	return now.Sub(time.Unix(0, p.watch.lastUse.Load())) < watchUnusedAfter
}

// watchInterval is how long to wait before the next list (see Watch).
func (p *Provisioner) watchInterval(now time.Time) time.Duration {
	p.watch.mu.Lock()
	busy := p.watch.inTransition
	p.watch.mu.Unlock()
	if busy || now.Sub(time.Unix(0, p.watch.lastWrite.Load())) < p.cfg.LongDelay {
		return p.cfg.ShortDelay
	}
	return watchIdleInterval
}

// readMaxAge is how old a cached read may be to answer a poll: a little over two list rounds
// while the watcher runs and lists, NodeCacheTTL otherwise (reads shared within one reconcile).
// While Ironic works on nodes it is at most two long polls: older news would hold a host back
// longer than polling by itself would, so it reads its node instead.
func (p *Provisioner) readMaxAge(now time.Time) time.Duration {
	ttl := p.nodes.ttl
	p.watch.mu.Lock()
	running, listedAt, took, busy := p.watch.running, p.watch.listedAt, p.watch.listTook, p.watch.inTransition
	p.watch.mu.Unlock()
	if !running || listedAt.IsZero() {
		return ttl
	}
	round := p.watchInterval(now) + took
	if now.Sub(listedAt) > 2*round {
		return ttl // the watcher has not listed for two rounds: do not lean on old lists
	}
	age := 2*round + time.Second
	if busy {
		age = min(age, 2*p.cfg.LongDelay)
	}
	return max(ttl, age)
}

// listNodes reads every node with one paginated list, caches the reads, records what changed and
// sends notices for hosts whose node changed state. It returns the busy count for HasCapacity.
func (p *Provisioner) listNodes(ctx context.Context) (int, error) {
	s, err := p.session(ctx)
	if err != nil {
		return 0, err
	}
	fields := listFields
	if s.features.DisablePowerOff {
		fields = append(fields[:len(fields):len(fields)], "disable_power_off")
	}
	start := time.Now()
	pages, err := nodes.List(s.sc, nodes.ListOpts{Fields: fields, Limit: 1000}).AllPages(ctx)
	if err != nil {
		return 0, classifyError(err, "listing Ironic nodes")
	}
	list, err := nodes.ExtractNodes(pages)
	if err != nil {
		return 0, classifyError(err, "reading the list of Ironic nodes")
	}
	took := time.Since(start)
	busy := busyCount(list)

	// Lists overlap and may come back out of order: one older than the newest seen only fills
	// in reads the cache does not have newer (put keeps the newest).
	p.watch.mu.Lock()
	newest := start.After(p.watch.listedAt)
	if newest {
		p.watch.listedAt, p.watch.listTook = start, took
	}
	p.watch.mu.Unlock()
	if !newest {
		for i := range list {
			p.nodes.put(&list[i], start)
		}
		return busy, nil
	}

	keep := make(map[string]bool, len(list))
	inTransition := false
	var changed []string
	for i := range list {
		n := &list[i]
		keep[n.UUID] = true
		if n.TargetProvisionState != "" || n.TargetPowerState != "" {
			inTransition = true
		}
		if p.nodes.put(n, start) && p.saw(n) {
			changed = append(changed, n.Name)
		}
	}
	p.nodes.retain(keep, start)
	p.capacity.set(busy, start)

	p.watch.mu.Lock()
	p.watch.inTransition = inTransition
	for id, sum := range p.watch.seen {
		if !keep[id] {
			// Gone from Ironic: deleted, or Ironic lost its database. Its host re-registers
			// (and adopts) at once rather than at its next power poll.
			delete(p.watch.seen, id)
			changed = append(changed, sum.name)
		}
	}
	p.watch.mu.Unlock()
	p.notify(changed)
	return busy, nil
}

// saw records a node's state summary; true when it differs from the one seen before (a node seen
// for the first time is not a change: its host reconciles on its own).
func (p *Provisioner) saw(n *nodes.Node) bool {
	sum := summarize(n)
	p.watch.mu.Lock()
	defer p.watch.mu.Unlock()
	if p.watch.seen == nil {
		p.watch.seen = map[string]stateSummary{}
	}
	old, had := p.watch.seen[n.UUID]
	p.watch.seen[n.UUID] = sum
	return had && old != sum
}

// notify sends the hosts of the named nodes on Changes without blocking.
func (p *Provisioner) notify(names []string) {
	for _, name := range names {
		ns, host, ok := strings.Cut(name, nameSeparator)
		if !ok || ns == "" || host == "" {
			continue // not a node of ours
		}
		select {
		case p.watch.changes <- types.NamespacedName{Namespace: ns, Name: host}:
		default:
		}
	}
}

// writing marks a write to a node as begun; the returned function marks it as ended. Reads sent
// before the end do not answer later polls (nodeCache).
func (p *Provisioner) writing(id string) (ended func()) {
	p.nodes.wrote(id, time.Now())
	p.watch.lastWrite.Store(time.Now().UnixNano())
	return func() { p.nodes.wrote(id, time.Now()) }
}
