package ironic

import (
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
)

// cleanSettle is how long a node that just finished manual cleaning is left alone before the next
// cleaning (provide, or manual cleaning again) starts.
//
// Why: in Ironic 39 the redfish BIOS and RAID interfaces resume an asynchronous clean step from a
// periodic task with an RPC cast (continue_node_clean) that waits, patiently, for the node lock,
// while the agent's heartbeat may already be finishing the same step. When the heartbeat wins and
// the cleaning ends, the cast still gets the lock a moment later (Ironic retries it every
// node_locked_retry_interval, 1 s). If by then a new cleaning has put the node in "clean wait"
// again, the cast resumes *that* cleaning before its steps exist and fails it with "BUG: No clean
// steps for <node>, step index is 0" (seen once in CI: provide right after a RAID + BIOS manual
// cleaning). Waiting a few seconds after the manual cleaning lets the stale cast find the node
// manageable, where it gives up harmlessly.
const cleanSettle = 5 * time.Second

// cleaningSettleWait is how much longer to wait before starting a cleaning on n: non-zero only for a
// manageable node whose last state change (a manual cleaning ending) was less than cleanSettle ago.
// The node's extra tells a node that went through manual cleaning from one just inspected, which
// needs no wait. An Ironic clock ahead of ours makes the wait at most cleanSettle.
func cleaningSettleWait(n *nodes.Node, now time.Time) time.Duration {
	if state(n) != nodes.Manageable || isEmpty(n.Extra[extraPrepared]) || n.ProvisionUpdatedAt.IsZero() {
		return 0
	}
	left := cleanSettle - now.Sub(n.ProvisionUpdatedAt)
	return min(max(left, 0), cleanSettle)
}
