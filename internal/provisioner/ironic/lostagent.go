package ironic

import (
	"context"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/metalforge/metalforge/internal/provisioner"
)

// In these states Ironic waits for the agent: each heartbeat it handles touches the node's
// provision_updated_at, and its only way out of a silent agent is the callback timeout
// ([conductor] clean/deploy/service_callback_timeout, 30 minutes by default), which has to cover a
// real server's boot into the agent.
var agentWaitStates = map[nodes.ProvisionState]bool{
	nodes.CleanWait: true, nodes.DeployWait: true, nodes.ServiceWait: true,
}

// Ironic hands an agent its token in the answer to the first lookup after each boot and refuses
// another while one is stored ("An agent token generation request is being refused as one is
// already present"). When that answer never reaches the agent (Ironic killed between storing the
// token and answering, a connection lost, an agent that gave up on a slow answer) the agent can
// never heartbeat, and the node waits for the callback timeout: half an hour of a host doing
// nothing (fault campaign, finding 4; docs/fault-campaign.md). A stored token shows that the agent
// has booted and looked itself up, so its silence no longer means a slow boot: an agent with a
// token heartbeats at least every [api] ramdisk_heartbeat_timeout (300 s; ironic-python-agent
// every 0.3–0.6 of it). Past AgentLostAfter without a heartbeat, the provisioner aborts the wait,
// which powers the server off (wiping the token), and the operation retries with a fresh boot. (A
// deploy wait's abort leaves the server on, its token kept for fast track: decideProvisioning
// powers it off before the next deployment.)
//
// One such abort per node per lostAgentRetryWindow: an agent that can look itself up but never
// heartbeat (a callback URL Ironic refuses, a firewall between the agent and Ironic) would
// otherwise have its server rebooted every few minutes with nothing shown on the host. The second
// time the wait is left to Ironic's callback timeout, whose failure the host reports and counts.
//
// Tokens Ironic pregenerates (virtual media with a kernel and ramdisk it builds the ISO from) are
// in the boot image from the start, before the server has booted; they say nothing.

// lostAgentRetryWindow: within it, a node's wait is aborted for a lost agent once.
const lostAgentRetryWindow = time.Hour

// agentQuiet reports whether n waits for its agent and nothing has happened to it (no heartbeat
// handled, no state change) for after. It needs only the listed fields; agentLost then decides on
// the full node.
func agentQuiet(n *nodes.Node, now time.Time, after time.Duration) bool {
	return after > 0 && agentWaitStates[state(n)] && !n.ProvisionUpdatedAt.IsZero() &&
		now.Sub(n.ProvisionUpdatedAt) >= after
}

// agentLost reports whether n (read in full, driver_internal_info included) waits for an agent that
// took its token and has been silent for after; f says whether a deploy wait can be aborted.
func agentLost(n *nodes.Node, f Features, now time.Time, after time.Duration) bool {
	if !agentQuiet(n, now, after) || (state(n) == nodes.DeployWait && !f.DeployWaitAbort) {
		return false
	}
	info := n.DriverInternalInfo
	if last, ok := lastHeartbeat(info); ok && now.Sub(last) < after {
		return false
	}
	if _, ok := info["agent_secret_token"]; !ok {
		// Not looked up yet: the server may still be booting, unless the agent that last
		// heartbeat still runs with a token Ironic wiped.
		return orphanedAgent(n)
	}
	if pregenerated, ok := info["agent_secret_token_pregenerated"]; ok && pregenerated != false {
		return false // masked ("******") or true
	}
	return true
}

// A failure that leaves the server on (a cleaning that failed before its first step, as when the
// BMC refused its credentials while the agent inspection booted still ran) makes Ironic wipe the
// agent's token and URL, but not the agent: it goes on heartbeating with the token it has, which
// Ironic refuses ("Invalid or missing agent_token"), and ironic-python-agent never looks itself up
// again. Ironic's next cleaning then takes the fast track (the server is on and was inspected
// within [deploy] fast_track_timeout), does not reboot, and waits for an agent that can never
// answer, until the callback timeout (fault campaign, finding 8; docs/fault-campaign.md). Before a
// cleaning such a server is powered off, so that Ironic boots a fresh agent, which looks itself up
// and gets a token; a wait that meets one anyway is aborted as for a lost agent.

// orphanedAgent reports whether n (read in full) is on, has no agent token stored, and has not
// been powered off, on or rebooted since its agent last heartbeat (Ironic stamps
// last_power_state_change at every power action, and wipes the token when it powers off or
// reboots): the agent that heartbeat then still runs, with a token Ironic no longer knows.
func orphanedAgent(n *nodes.Node) bool {
	info := n.DriverInternalInfo
	if n.PowerState != powerOn || n.TargetPowerState != "" || n.DisablePowerOff {
		return false // off, a power change under way (ours, say), or one we may not make
	}
	if _, ok := info["agent_secret_token"]; ok {
		return false
	}
	heartbeat, ok := lastHeartbeat(info)
	if !ok {
		return false // no agent has heartbeat (or Ironic forgot it)
	}
	if s, ok := info["last_power_state_change"].(string); ok {
		if changed, err := parseIronicTime(s); err != nil || !changed.Before(heartbeat) {
			return false // powered since: a new boot (or a time we cannot read)
		}
	}
	return true
}

// lastHeartbeat reads when Ironic last took a heartbeat of n's agent (or ended its inspection).
func lastHeartbeat(info map[string]any) (time.Time, bool) {
	s, ok := info["agent_last_heartbeat"].(string)
	if !ok {
		return time.Time{}, false
	}
	t, err := parseIronicTime(s)
	return t, err == nil
}

// powerOffOrphanedAgent powers off the server of n, whose agent Ironic no longer accepts
// (orphanedAgent), before a cleaning: Ironic then boots a fresh agent instead of waiting for that
// one. The power change is the provisioner's, not the host's: it is not remembered as a request.
func (p *Provisioner) powerOffOrphanedAgent(ctx context.Context, s *session, n *nodes.Node) (provisioner.Result, error) {
	p.logger(ctx).Info("The server still runs an agent whose token Ironic wiped after a failure: powering it off so that the cleaning boots a fresh one",
		"node", n.UUID, "lastHeartbeat", n.DriverInternalInfo["agent_last_heartbeat"],
		"lastPowerChange", n.DriverInternalInfo["last_power_state_change"])
	accepted, err := p.powerOffForAgent(ctx, s, n)
	if err != nil {
		return provisioner.Result{}, err
	}
	if accepted { // a busy answer (409) is retried on the next pass and counted then
		orphanedAgentPowerOffs.Inc()
	}
	return p.short(), nil
}

// powerOffForAgent powers off the server of n so that Ironic's next operation boots a fresh agent.
// The power change is the provisioner's, not the host's: a power request the host made earlier no
// longer describes the server, and this one is not remembered as a request.
func (p *Provisioner) powerOffForAgent(ctx context.Context, s *session, n *nodes.Node) (accepted bool, err error) {
	accepted, err = p.askPower(ctx, s, n, nodes.PowerOff)
	if err == nil {
		p.memory.setPowerRequest(n.UUID, "")
	}
	return accepted, err
}

// parseIronicTime reads the naive UTC timestamps Ironic keeps in driver_internal_info
// (Python's isoformat, with or without fractional seconds or an offset).
func parseIronicTime(s string) (time.Time, error) {
	if t, err := time.Parse("2006-01-02T15:04:05.999999", s); err == nil {
		return t, nil
	}
	return time.Parse(time.RFC3339Nano, s) // "Z" or "+00:00"; the fraction is optional in both
}

// abortLostAgent aborts the wait of a node whose agent took its token and went silent (see above);
// handled is false when the node is not in that case. Only a node quiet for AgentLostAfter is read
// again in full (driver_internal_info is not in the list the watcher keeps).
func (p *Provisioner) abortLostAgent(ctx context.Context, s *session, n *nodes.Node, op string) (res provisioner.Result, handled bool, err error) {
	now := p.now()
	if !agentQuiet(n, now, p.cfg.AgentLostAfter) || p.memory.lostAgentAbortedSince(n.UUID, now.Add(-lostAgentRetryWindow)) {
		return res, false, nil
	}
	if faultClearsItself(n) {
		// No state change until Ironic clears the fault (startState would wait): not read in
		// full and logged at every poll for as long as the fault lasts; looked at once it is gone.
		return res, false, nil
	}
	full, err := p.fetchNode(ctx, s, n.UUID)
	if err != nil {
		return res, true, err
	}
	if !agentLost(full, s.features, now, p.cfg.AgentLostAfter) {
		return res, false, nil
	}
	p.logger(ctx).Info("The agent cannot heartbeat (it lost its token, or Ironic wiped the token of an agent still running): aborting the wait so that the server boots it again",
		"node", n.UUID, "provisionState", full.ProvisionState, "quietSince", full.ProvisionUpdatedAt.UTC().Format(time.RFC3339),
		"lastHeartbeat", full.DriverInternalInfo["agent_last_heartbeat"], "after", p.cfg.AgentLostAfter)
	res, accepted, err := p.startAbort(ctx, s, full, op+" (agent lost)")
	if accepted {
		p.memory.setLostAgentAbort(n.UUID, now)
		lostAgentAborts.WithLabelValues(full.ProvisionState).Inc()
	}
	return res, true, err
}

// abortedByRequest reports whether n's last operation ended in an abort (Ironic's "By request, the
// clean/deploy/service operation was aborted"). Only the provisioner aborts (a lost agent, a
// changed image, changes taken back), so such a failure is retried at once, not reported.
func abortedByRequest(n *nodes.Node) bool {
	return containsFold(n.LastError, "by request") && containsFold(n.LastError, "was aborted")
}

// interruptedByRestart reports whether n failed because its conductor restarted in the middle of
// the operation: a starting conductor fails the nodes it finds in a working state that nobody
// holds ("The servicing state can't be resumed by conductor …. Moving to fail state.",
// ironic/conductor/base_manager.py), whatever the request was. Found by the fault campaign: Ironic
// killed while hosts were serviced left them in servicing error until their user changed the spec.
func interruptedByRestart(n *nodes.Node) bool {
	return containsFold(n.LastError, "can't be resumed by conductor")
}

// failedOnStaleStep reports whether n's servicing failed on what an earlier failed attempt left
// behind rather than on the request: Ironic 39 retrying bios.apply_configuration after the step
// failed at its reboot finds the earlier attempt's flags in driver_internal_info, takes itself for
// the check after the reboot and fails without PATCHing anything, and its worker then fails with
// "InvalidState: Can not transition from state 'service failed' on event 'done'"
// (docs/ironic-notes.md). That failure clears the flags, so one more start applies the settings.
// Found by the fault campaign: two of a hundred hosts used all their retries. Servicing now drops
// such flags first when it sees them (staleRecordCheck); this rule stays for flags it did not see.
func failedOnStaleStep(n *nodes.Node) bool {
	return containsFold(n.LastError, "can not transition from state 'service failed' on event 'done'")
}
