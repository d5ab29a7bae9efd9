package ironic

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/metalforge/metalforge/internal/bmc"
	"github.com/metalforge/metalforge/internal/provisioner"
)

// busyStates are the states that count against PROVISIONING_LIMIT, as in metal3.
var busyStates = map[nodes.ProvisionState]bool{
	nodes.Cleaning: true, nodes.CleanWait: true,
	nodes.Inspecting: true, nodes.InspectWait: true,
	nodes.Deploying: true, nodes.DeployWait: true,
	nodes.Deleting: true,
}

// HasCapacity reports whether host may start: a host that boots by virtual media always may, and
// does not count (metal3: such hosts need no DHCP and share one image); another may when fewer
// than PROVISIONING_LIMIT nodes are busy. (It held virtual media hosts back behind PXE ones.) The
// count comes from one list request (the watcher's, when it is recent) and is reused for
// CapacityCacheTTL, so a thousand hosts asking at once cost one request.
func (p *Provisioner) HasCapacity(ctx context.Context, host provisioner.Host) (bool, error) {
	if bmc.BootsFromISO(host.BMCAddress) {
		return true, nil
	}
	ctx = withOp(ctx, "capacity")
	busy, err := p.capacity.count(ctx, p.listNodes)
	if err != nil {
		return false, err
	}
	return busy < p.cfg.ProvisioningLimit, nil
}

// busyCount counts the nodes busy in states that count against the limit, leaving out virtual
// media nodes.
func busyCount(list []nodes.Node) int {
	n := 0
	for _, node := range list {
		if busyStates[nodes.ProvisionState(node.ProvisionState)] && !strings.Contains(node.BootInterface, "virtual-media") {
			n++
		}
	}
	return n
}

// capacityCache keeps the busy count for a few seconds; one caller refreshes it while the others
// wait for the result.
type capacityCache struct {
	ttl      time.Duration
	now      func() time.Time
	fetching sync.Mutex // held by the caller that lists
	mu       sync.Mutex
	at       time.Time
	n        int
}

func (c *capacityCache) count(ctx context.Context, fetch func(context.Context) (int, error)) (int, error) {
	if n, ok := c.fresh(); ok {
		return n, nil
	}
	// One caller lists (fetch calls set) while the others wait for its count.
	c.fetching.Lock()
	defer c.fetching.Unlock()
	if n, ok := c.fresh(); ok {
		return n, nil
	}
	return fetch(ctx)
}

func (c *capacityCache) fresh() (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n, !c.at.IsZero() && c.now().Sub(c.at) < c.ttl
}

// set records a count from a list sent at `at` (the watcher's or HasCapacity's own).
func (c *capacityCache) set(n int, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if at.After(c.at) {
		c.n, c.at = n, at
	}
}

var _ provisioner.Capacity = (*Provisioner)(nil)
