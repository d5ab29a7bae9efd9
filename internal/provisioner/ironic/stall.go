package ironic

import (
	"fmt"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/metalforge/metalforge/internal/provisioner"
)

// A node in one of these states is being worked on by a conductor thread, which holds the node's
// lock (reservation) until it moves the node on. Ironic 39 can lose that thread without moving the
// node: a database error in the deploy worker left 1 in 100 nodes in "deploying" for good in
// 500-host runs, with the error erased soon after (docs/ironic-notes.md). No API call moves such a
// node; restarting Ironic fails it, after which the host's retry takes over. The operator cannot
// fix it, but it can say so instead of waiting without a word.
var workingStates = map[nodes.ProvisionState]bool{
	nodes.Verifying: true, nodes.Inspecting: true, nodes.Cleaning: true, nodes.Deploying: true,
	nodes.Deleting: true, nodes.Adopting: true, nodes.Servicing: true, nodes.Rescuing: true,
	nodes.Unrescuing: true,
}

// stallAfter is how long a node sits in a working state with no lock before the host says so. The
// longest step that runs in a working state is short (Ironic moves a node to a wait state for
// anything that waits on the agent or the BMC), and a conductor keeps the lock while it works.
const stallAfter = 10 * time.Minute

// Stalled reports whether n is in a working state with no conductor holding it, unchanged for
// stallAfter. A reservation hidden by Ironic's policy is not empty, so it never counts as stalled.
// (Exported for bench-ironic, which leaves such nodes out of its figures.)
func Stalled(n *nodes.Node, now time.Time) bool {
	return workingStates[state(n)] && n.Reservation == "" && !n.ProvisionUpdatedAt.IsZero() &&
		now.Sub(n.ProvisionUpdatedAt) >= stallAfter
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
		"(restarting Ironic fails the node, and the host then retries)",
		n.UUID, n.ProvisionState, n.ProvisionUpdatedAt.UTC().Format(time.RFC3339))
}
