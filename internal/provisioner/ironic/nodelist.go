package ironic

import (
	"context"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metalforge/metalforge/internal/provisioner"
	"github.com/metalforge/metalforge/internal/provisioner/ironic/nodewatch"
)

// nodeWatch is what the provisioner uses of the node watcher and node cache (nodewatch.Watcher):
// a poll answered from a fresh-enough read, the provisioner's own reads and writes recorded, one
// list of every node, and the watch loop with its change notices.
type nodeWatch interface {
	// Get answers a poll from a read sent after the node's last write, young enough; it counts
	// as a host asking. Asked counts a host asking before it has a node.
	Get(id string) (*nodes.Node, bool)
	Asked()
	// Put records a GET's read, sent at sentAt; Saw records the node a write answered with.
	Put(n *nodes.Node, sentAt time.Time)
	Saw(n *nodes.Node)
	// Writing marks a write to a node as begun, and ended() as ended.
	Writing(id string) (ended func())
	// Listed: n is the cached read of its node and old enough to come from a list.
	Listed(n *nodes.Node) bool
	// Forget drops a node's read (the next call reads Ironic); Removed drops all about a node.
	Forget(id string)
	Removed(id string)
	// List lists every node now; Run lists in rounds until ctx ends; Changes names the hosts
	// whose node changed.
	List(ctx context.Context) ([]nodes.Node, error)
	Run(ctx context.Context) error
	Changes() <-chan types.NamespacedName
}

var (
	_ nodeWatch           = (*nodewatch.Watcher)(nil)
	_ provisioner.Watcher = (*Provisioner)(nil)
)

// listFields are the node fields every operation reads (decide*, the patches, the capacity count).
// disable_power_off is added when the microversion has it.
var listFields = []string{
	"uuid", "name", "provision_state", "target_provision_state", "power_state", "target_power_state",
	"last_error", "maintenance", "fault", "provision_updated_at", "inspection_finished_at", "reservation",
	"boot_interface", "deploy_interface", "inspect_interface", "raid_interface", "automated_clean",
	"driver_info", "extra", "instance_info", "properties", "network_data",
}

// Watch lists Ironic's nodes in rounds until ctx ends (nodewatch.Watcher.Run): every ShortDelay
// while Ironic works on a node or the provisioner wrote lately, every 30 s otherwise, never while
// no host asks, with at most two lists in flight. Errors are logged once and retried next round.
func (p *Provisioner) Watch(ctx context.Context) error {
	return p.watch.Run(withOp(ctx, "watch"))
}

// Changes delivers the hosts whose Ironic node changed state, as the watcher saw it.
func (p *Provisioner) Changes() <-chan types.NamespacedName { return p.watch.Changes() }

// listNodes lists every node through the watcher (which caches the reads and notices changes)
// and returns the busy count for HasCapacity.
func (p *Provisioner) listNodes(ctx context.Context) (int, error) {
	list, err := p.watch.List(ctx)
	if err != nil {
		return 0, err
	}
	return busyCount(list), nil
}

// listAll reads every node with one paginated list of listFields, and says when it was sent.
func (p *Provisioner) listAll(ctx context.Context) ([]nodes.Node, time.Time, error) {
	s, err := p.session(ctx)
	if err != nil {
		return nil, time.Time{}, err
	}
	fields := listFields
	if s.features.DisablePowerOff {
		fields = append(fields[:len(fields):len(fields)], "disable_power_off")
	}
	start := p.now()
	pages, err := nodes.List(s.sc, nodes.ListOpts{Fields: fields, Limit: 1000}).AllPages(ctx)
	if err != nil {
		return nil, time.Time{}, classifyError(err, "listing Ironic nodes")
	}
	list, err := nodes.ExtractNodes(pages)
	if err != nil {
		return nil, time.Time{}, classifyError(err, "reading the list of Ironic nodes")
	}
	return list, start, nil
}
