package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/noauth"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/metalforge/metalforge/internal/provisioner/ironic"
)

// Stall detection. Ironic 39 on MariaDB 11.8 with its default snapshot isolation left about 1 in
// 100 nodes in "deploying" for good: the deploy worker died on a database error and nothing moved
// the node on (docs/ironic-notes.md; hack/ironic-up.sh now avoids it). No API call moves such a
// node; a conductor restart fails it, and Ironic deletes it in maintenance. The operator does the
// latter after 10 minutes (--ironic-stalled-node-after) and registers the host again; the baseline
// script does not. So that both runs compare alike, the benchmark reports such a node
// (ironic.Stalled, the operator's own test) and goes on without it, in both runs.

const stallPoll = time.Minute

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
				if !ironic.Stalled(&n, time.Now()) {
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
