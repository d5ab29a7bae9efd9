package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/noauth"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
)

// Stall detection. Ironic 39 was seen to leave 2 of 500 nodes in "deploying" for good: deploy
// steps computed, no step started, no conductor holding the node, no last_error, nothing in the
// log (docs/ironic-notes.md). No API call moves a node out of "deploying"; only a conductor
// restart fails it. Neither driver can do anything about it, so instead of waiting for -timeout
// the benchmark reports such a node and goes on without it, in both runs alike.

// threadStates are the provision states in which a conductor thread is working on the node and
// holds its lock; the waits for an agent ("wait call-back", "clean wait", ...) are not among them.
// They are Ironic's STUCK_STATES_TREATED_AS_FAIL, which a starting conductor fails when unlocked.
var threadStates = []string{"deploying", "cleaning", "inspecting", "deleting", "servicing", "verifying", "adopting", "rescuing", "unrescuing"}

const (
	stallAfter = 10 * time.Minute // in a thread state, unlocked and unchanged for this long
	stallPoll  = time.Minute
)

// stalls lists Ironic's nodes every stallPoll with a client of its own (not counted as either
// driver's calls) and remembers the stalled ones by node name.
type stalls struct {
	mu      sync.Mutex
	why     map[string]string
	onStall func(node string)
}

// watchStalls runs until ctx ends; onStall (may be nil) is called once per stalled node.
func (e *env) watchStalls(ctx context.Context, onStall func(node string)) *stalls {
	s := &stalls{why: map[string]string{}, onStall: onStall}
	c, err := noauth.NewBareMetalNoAuth(noauth.EndpointOpts{IronicEndpoint: e.ironic.Endpoint()})
	if err != nil {
		fmt.Printf("stall watch: %v\n", err)
		return s
	}
	c.Microversion = "1.89"
	go func() {
		tick := time.NewTicker(stallPoll)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			pages, err := nodes.List(c, nodes.ListOpts{Fields: []string{"name", "provision_state", "provision_updated_at", "reservation"}}).AllPages(ctx)
			if err != nil {
				continue // Ironic busy: next round
			}
			list, err := nodes.ExtractNodes(pages)
			if err != nil {
				continue
			}
			for _, n := range list {
				if n.Reservation != "" || !slices.Contains(threadStates, n.ProvisionState) || time.Since(n.ProvisionUpdatedAt) < stallAfter {
					continue
				}
				s.mark(n.Name, fmt.Sprintf("stalled in Ironic: %q since %s with no conductor working on it", n.ProvisionState, n.ProvisionUpdatedAt.Format(time.TimeOnly)))
			}
		}
	}()
	return s
}

func (s *stalls) mark(node, why string) {
	s.mu.Lock()
	_, seen := s.why[node]
	if !seen {
		s.why[node] = why
	}
	s.mu.Unlock()
	if !seen {
		fmt.Printf("  %s: %s\n", node, why)
		if s.onStall != nil {
			s.onStall(node)
		}
	}
}

// reason says why the node stalled, or "" when it has not.
func (s *stalls) reason(node string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.why[node]
}

func (s *stalls) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.why)
}
