package ironic

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/metalforge/metalforge/internal/bmc"
	"github.com/metalforge/metalforge/internal/provisioner"
)

// extraPrepared and extraServiced hold, in the node's extra, the fingerprint of the last manual
// cleaning (prepare) and servicing the provisioner started, so that a finished operation is
// recognised as finished (Ironic keeps no trace of which steps ran) and not started again.
// extraPrepared lasts until the node is provided (provide drops it): a preparation after that
// (after a deprovisioning, say) runs again even with the same steps.
const (
	extraPrepared = "metalforge_prepared"
	extraServiced = "metalforge_serviced"
	// extraPreparedFrom is the node's provision_updated_at when extraPrepared was written: a node
	// still manageable since then never started that cleaning (see preparedNotStarted).
	extraPreparedFrom = "metalforge_prepared_from"
)

// Prepare applies RAID, root device hints, BIOS settings and firmware updates through manual
// cleaning (manageable → cleaning → manageable). Root device hints alone need no cleaning.
func (p *Provisioner) Prepare(ctx context.Context, host provisioner.Host, data provisioner.PrepareData, restartOnFailure bool) (provisioner.Result, error) {
	ctx = withOp(ctx, "prepare")
	s, n, err := p.getNode(ctx, host)
	if err != nil {
		return provisioner.Result{}, err
	}
	if res, handled, err := p.abortLostAgent(ctx, s, n, "preparation"); handled {
		return res, err
	}
	access, err := parseAccess(host)
	if err != nil {
		return provisioner.Failed(err.Error()), nil
	}
	raid, err := planRAID(access, data.TargetRAIDConfig, data.ActualRAIDConfig, data.RootDeviceHints)
	if err != nil {
		return provisioner.Failed(err.Error()), nil
	}
	steps := cleanSteps(raid, data)
	fp := fingerprint(raid.iface, raid.logical, steps)

	d := decidePreparation(n, len(steps) > 0, p.finished(n, extraPrepared, fp), restartOnFailure)
	switch d.act {
	case actDone:
		return p.setRootDeviceHints(ctx, s, n, data)
	case actClean:
		if res, handled, err := p.beforeCleaning(ctx, s, n, host, access); handled {
			return res, err
		}
		return p.startCleaning(ctx, s, n, host, access, data, raid, steps, fp)
	case actManage:
		if state(n) == nodes.CleanFail && !ranRecordCheck(n, extraPrepared) {
			// Forget the failed attempt, so the next call starts it again from manageable (a
			// failed check is remembered: staleRecordAction does not start it again).
			var pt patch
			pt.setKeys("extra", n.Extra, map[string]any{extraPrepared: nil, extraPreparedFrom: nil})
			updated, res, err, ok := p.update(ctx, s, n, pt)
			if !ok {
				return res, err
			}
			n = updated
		}
		return p.changeState(ctx, s, n, nodes.ProvisionStateOpts{Target: nodes.TargetManage}, p.short())
	case actUnexpected:
		return provisioner.Result{}, fmt.Errorf("preparing host %s/%s: Ironic node %s is %q, preparing needs it manageable",
			host.Namespace, host.Name, n.UUID, n.ProvisionState)
	}
	res, _ := p.result(d, n, host)
	return res, nil
}

// cleanSteps lists the manual cleaning steps: RAID first (the volumes the BIOS and firmware steps
// do not care about), then BIOS settings, then firmware.
func cleanSteps(raid raidPlan, data provisioner.PrepareData) []nodes.CleanStep {
	steps := append([]nodes.CleanStep(nil), raid.steps...)
	if st, ok := biosStep(data.FirmwareSettings); ok {
		steps = append(steps, st)
	}
	if st, ok := firmwareStep(data.FirmwareUpdates); ok {
		steps = append(steps, st)
	}
	return steps
}

// startCleaning writes what the steps need (raid_interface, root device hints, the agent image, the
// fingerprint), sets target_raid_config, and starts manual cleaning.
func (p *Provisioner) startCleaning(ctx context.Context, s *session, n *nodes.Node, host provisioner.Host, access *bmc.Access,
	data provisioner.PrepareData, raid raidPlan, steps []nodes.CleanStep, fp string) (provisioner.Result, error) {
	if wait := cleaningSettleWait(n, p.now()); wait > 0 {
		return provisioner.Working(wait), nil
	}
	var pt patch
	if raid.iface != "" {
		pt.setField("raid_interface", raid.iface, n.RAIDInterface)
	}
	pt.setKeys("properties", n.Properties, map[string]any{"root_device": rootDeviceProperty(data.RootDeviceHints)})
	if err := p.setDeployImage(&pt, n, host, access); err != nil {
		return provisioner.Result{}, err
	}
	var from any
	if !n.ProvisionUpdatedAt.IsZero() {
		from = n.ProvisionUpdatedAt.UTC().Format(time.RFC3339Nano)
	}
	pt.setKeys("extra", n.Extra, map[string]any{extraPrepared: fp, extraPreparedFrom: from})
	n, res, err, ok := p.update(ctx, s, n, pt)
	if !ok {
		return res, err
	}
	if raid.iface != "" {
		// A plan that only deletes empties target_raid_config: it must not keep describing the
		// volumes the cleaning deletes (nor be created again by a later create_configuration).
		ended := p.watch.Writing(n.UUID)
		err := nodes.SetRAIDConfig(ctx, s.sc, n.UUID, raid.targetRAIDConfig()).ExtractErr()
		ended()
		if err != nil {
			p.recordStart(n, extraPrepared, fp, false)
		}
		switch {
		case busy(err):
			return p.short(), nil
		case isStatus(err, http.StatusBadRequest):
			return provisioner.Failed("Ironic refused the RAID configuration: " + faultOf(err)), nil
		case err != nil:
			return provisioner.Result{}, classifyError(err, "setting the target RAID configuration of Ironic node "+n.UUID)
		}
	}
	p.logger(ctx).Info("Starting manual cleaning", "node", n.UUID, "steps", stepNames(steps))
	res, started, err := p.startState(ctx, s, n, nodes.ProvisionStateOpts{Target: nodes.TargetClean, CleanSteps: steps}, p.long())
	p.recordStart(n, extraPrepared, fp, started)
	return res, err
}

// beforeCleaning readies the manageable node n for a cleaning: a preparation's manual cleaning, or
// the automated cleaning of a provide. It reads n in full (the watcher's node has no
// driver_internal_info) and, when the server still runs an agent whose token Ironic wiped
// (orphanedAgent), powers it off first; when n holds the stale record of a BIOS step (staged.go)
// and that record's check has not already failed on it, it starts the manual cleaning that drops
// the record (a preparation's BIOS step would otherwise run as the record's check, and the BIOS
// periodic task would end a provide's cleaning wait early; the check needs no agent: Ironic runs
// it without booting one). handled says it did one of them, or could not read the node (res, err
// say how).
func (p *Provisioner) beforeCleaning(ctx context.Context, s *session, n *nodes.Node, host provisioner.Host, access *bmc.Access) (res provisioner.Result, handled bool, err error) {
	full, err := p.fetchNode(ctx, s, n.UUID)
	if err != nil {
		return provisioner.Result{}, true, err
	}
	if orphanedAgent(full) {
		res, err = p.powerOffOrphanedAgent(ctx, s, full)
		return res, true, err
	}
	check, checkFP, start := p.recordCheckFor(ctx, n, full, extraPrepared, "manual cleaning")
	if !start {
		return provisioner.Result{}, false, nil
	}
	res, err = p.startCleaning(ctx, s, n, host, access, provisioner.PrepareData{}, raidPlan{}, []nodes.CleanStep{check}, checkFP)
	return res, true, err
}

// setRootDeviceHints writes properties/root_device (removes it without hints); done either way.
func (p *Provisioner) setRootDeviceHints(ctx context.Context, s *session, n *nodes.Node, data provisioner.PrepareData) (provisioner.Result, error) {
	var pt patch
	pt.setKeys("properties", n.Properties, map[string]any{"root_device": rootDeviceProperty(data.RootDeviceHints)})
	if _, res, err, ok := p.update(ctx, s, n, pt); !ok {
		return res, err
	}
	return provisioner.Done(), nil
}

func stepNames(steps []nodes.CleanStep) []string {
	out := make([]string, len(steps))
	for i, st := range steps {
		out[i] = string(st.Interface) + "." + st.Step
	}
	return out
}

// preparedNotStarted: the node has not changed provision state since the preparation's fingerprint
// was written (extraPreparedFrom), so the cleaning it was written for never started. The
// fingerprint is written before the cleaning is asked for; an operator stopped in between (or
// whose request got no answer, and restarted before asking again), reading it back with no memory
// of the failed start, took the preparation for finished: the host went available with none of
// its settings or updates applied, and the updates recorded as applied. A fingerprint an older
// operator wrote without the time is trusted, as before.
func preparedNotStarted(n *nodes.Node) bool {
	v, _ := n.Extra[extraPreparedFrom].(string)
	from, err := time.Parse(time.RFC3339Nano, v)
	if v == "" || err != nil || n.ProvisionUpdatedAt.IsZero() {
		return false
	}
	return !n.ProvisionUpdatedAt.After(from)
}
