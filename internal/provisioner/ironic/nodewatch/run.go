package nodewatch

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
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

// Run lists Ironic's nodes in rounds until ctx ends: every ShortDelay while Ironic works on a
// node or the provisioner wrote lately, every 30 s otherwise, never while no host asks, with at
// most two lists in flight. Errors are logged once and retried next round. The lists are sent
// with ctx.
func (w *Watcher) Run(ctx context.Context) error {
	w.mu.Lock()
	w.running = true
	w.mu.Unlock()
	var lists sync.WaitGroup
	defer func() {
		lists.Wait()
		w.mu.Lock()
		w.running = false
		w.mu.Unlock()
	}()
	// Look every ShortDelay (costs nothing) whether a list is due: a write or a host asking
	// makes one due at once, not after an idle round that began before them.
	tick := time.NewTicker(w.cfg.ShortDelay)
	defer tick.Stop()
	var failing atomic.Bool
	var lastStart time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		now := w.now()
		if !w.wanted(now) || now.Sub(lastStart) < w.interval(now)-w.cfg.ShortDelay/2 {
			continue
		}
		if w.inFlight.Load() < maxInFlight {
			lastStart = now
			w.inFlight.Add(1)
			lists.Go(func() {
				defer w.inFlight.Add(-1)
				_, err := w.List(ctx)
				switch {
				case err != nil && ctx.Err() == nil && !failing.Swap(true):
					w.cfg.Log.Info("Listing Ironic nodes failed; hosts read their nodes one by one until it works again", "error", err.Error())
				case err == nil && failing.Swap(false):
					w.cfg.Log.Info("Listing Ironic nodes works again")
				}
			})
		}
	}
}

// List reads every node with one list (Config.List), caches the reads, records what changed and
// sends notices for hosts whose node changed state. Besides the rounds of Run, the provisioner
// lists through it when it needs a busy count and no recent list gave one.
func (w *Watcher) List(ctx context.Context) ([]nodes.Node, error) {
	list, start, err := w.cfg.List(ctx)
	if err != nil {
		return nil, err
	}
	took := w.now().Sub(start)

	// Lists overlap and may come back out of order: one older than the newest seen only fills
	// in reads the cache does not have newer (put keeps the newest).
	w.mu.Lock()
	newest := start.After(w.listedAt)
	if newest {
		w.listedAt, w.listTook = start, took
	}
	w.mu.Unlock()
	if !newest {
		for i := range list {
			w.reads.put(&list[i], start)
		}
		return list, nil
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
		if w.reads.put(n, start) && w.saw(n) {
			changed = append(changed, n.Name)
		}
	}
	w.reads.retain(keep, start)
	if w.cfg.OnList != nil {
		w.cfg.OnList(list, start)
	}

	w.mu.Lock()
	w.inTransition = inTransition
	for id, sum := range w.seen {
		if !keep[id] {
			// Gone from Ironic: deleted, or Ironic lost its database. Its host re-registers
			// (and adopts) at once rather than at its next power poll.
			delete(w.seen, id)
			changed = append(changed, sum.name)
		}
	}
	w.mu.Unlock()
	w.notify(changed)
	return list, nil
}

// saw records a node's state summary; true when it differs from the one seen before (a node seen
// for the first time is not a change: its host reconciles on its own).
func (w *Watcher) saw(n *nodes.Node) bool {
	sum := summarize(n)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seen == nil {
		w.seen = map[string]stateSummary{}
	}
	old, had := w.seen[n.UUID]
	w.seen[n.UUID] = sum
	return had && old != sum
}

// notify sends the hosts of the named nodes on Changes without blocking.
func (w *Watcher) notify(names []string) {
	for _, name := range names {
		host, ok := w.cfg.HostOf(name)
		if !ok {
			continue // not a node of ours
		}
		select {
		case w.changes <- host:
		default:
		}
	}
}
