package ironic

import (
	"context"
	"fmt"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/metalforge/metalforge/internal/provisioner"
)

// A node in one of these states is being worked on by a conductor thread, which holds the node's
// lock (reservation) until it moves the node on. Ironic 39 can lose that thread without moving the
// node: a database error in the deploy worker left 1 in 100 nodes in "deploying" for good in
// 500-host runs, with the error erased soon after (docs/ironic-notes.md), and a conductor that
// starts after a crash fails at most [conductor] periodic_max_workers such nodes per state (128 in
// our configuration) and leaves the others. No API call moves such a node out of its state; Ironic
// does delete it once it is in maintenance (its own way out for "hopelessly broken nodes"). So
// after StalledNodeAfter the provisioner deletes it and the host registers again: a new node,
// which cleans, deploys, inspects or is adopted again as the host's state needs. A node that is
// held (a reservation, also one hidden by policy) or that changed state recently is never touched.
var workingStates = map[nodes.ProvisionState]bool{
	nodes.Verifying: true, nodes.Inspecting: true, nodes.Cleaning: true, nodes.Deploying: true,
	nodes.Deleting: true, nodes.Adopting: true, nodes.Servicing: true, nodes.Rescuing: true,
	nodes.Unrescuing: true,
}

// stallAfter is how long a node sits in a working state with no lock before the host says so (when
// the provisioner does not delete it first, or cannot). The longest step that runs in a working
// state is short (Ironic moves a node to a wait state for anything that waits on the agent or the
// BMC), and a conductor keeps the lock while it works.
const stallAfter = 10 * time.Minute

// Stalled reports whether n is in a working state with no conductor holding it, unchanged for
// stallAfter. A reservation hidden by Ironic's policy is not empty, so it never counts as stalled.
// (Exported for bench-ironic, which leaves such nodes out of its figures.)
func Stalled(n *nodes.Node, now time.Time) bool { return stalledFor(n, now, stallAfter) }

// stalledFor reports whether n has been in a working state with no conductor holding it for after
// (0: never).
func stalledFor(n *nodes.Node, now time.Time, after time.Duration) bool {
	return after > 0 && workingStates[state(n)] && n.Reservation == "" && !n.ProvisionUpdatedAt.IsZero() &&
		now.Sub(n.ProvisionUpdatedAt) >= after
}

// withStall adds to a wait on n what the host really waits for when Ironic stopped working on n
// (by now).
func withStall(res provisioner.Result, n *nodes.Node, now time.Time) provisioner.Result {
	res.Waiting = stalled(n, now)
	return res
}

// stalled says what the host waits for when n is Stalled, or "".
func stalled(n *nodes.Node, now time.Time) string {
	if !Stalled(n, now) {
		return ""
	}
	// A time, not a duration: the message stays the same, so the host's status is written once.
	return fmt.Sprintf("Ironic, which has left node %s in %q since %s with no conductor working on it "+
		"(the provisioner deletes such a node and registers the host again, unless --ironic-stalled-node-after is 0; restarting Ironic fails it)",
		n.UUID, n.ProvisionState, n.ProvisionUpdatedAt.UTC().Format(time.RFC3339))
}

// recoverStalled deletes n when Ironic has left it stalled for StalledNodeAfter (see above), and
// then answers ErrNeedsRegistration, which makes the host register again. n comes from the node
// watch, which may be seconds old, so the node is read again before anything is done. A node that
// is not stalled, or that Ironic would not let go of yet (busy), is returned as it is: the
// operation goes on, and says what it waits for.
func (p *Provisioner) recoverStalled(ctx context.Context, s *session, n *nodes.Node, host provisioner.Host) (*nodes.Node, error) {
	now := p.now()
	if !stalledFor(n, now, p.cfg.StalledNodeAfter) {
		return n, nil
	}
	fresh, err := p.fetchNode(ctx, s, n.UUID)
	if err != nil {
		if notFound(err) {
			return nil, fmt.Errorf("node %s of host %s/%s is gone from Ironic: %w", n.UUID, host.Namespace, host.Name, provisioner.ErrNeedsRegistration)
		}
		return nil, err
	}
	if !stalledFor(fresh, now, p.cfg.StalledNodeAfter) {
		p.watch.Saw(fresh)
		return fresh, nil
	}
	since := fresh.ProvisionUpdatedAt.UTC().Format(time.RFC3339)
	p.logger(ctx).Info("Ironic left the node in a working state with no conductor: deleting it to register the host again",
		"node", fresh.UUID, "provisionState", fresh.ProvisionState, "since", since, "after", p.cfg.StalledNodeAfter)
	res, err := p.deleteNode(ctx, s, fresh, fmt.Sprintf("Metalforge: left in %s with no conductor since %s", fresh.ProvisionState, since))
	if err != nil || res.Busy {
		return fresh, err
	}
	stalledNodeDeletions.WithLabelValues(fresh.ProvisionState).Inc()
	return nil, fmt.Errorf("node %s of host %s/%s: Ironic left it in %q with no conductor working on it since %s, so it was deleted: %w",
		fresh.UUID, host.Namespace, host.Name, fresh.ProvisionState, since, provisioner.ErrNeedsRegistration)
}
