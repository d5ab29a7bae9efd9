package ironic

import (
	"context"
	"fmt"
	"net/http"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner"
)

// Ironic power states.
const (
	powerOn       = string(nodes.PowerOn)
	powerOff      = string(nodes.PowerOff)
	softPowerOff  = string(nodes.SoftPowerOff)
	rebooting     = string(nodes.Rebooting)
	softRebooting = string(nodes.SoftRebooting)
)

// PowerOn turns the host on. A power on Ironic tried and could not do is a failure, reported
// once, forced or not; the next call tries again (force changes nothing here).
func (p *Provisioner) PowerOn(ctx context.Context, host provisioner.Host, _ bool) (provisioner.Result, error) {
	ctx = withOp(ctx, "power")
	s, n, err := p.getNode(ctx, host)
	if err != nil {
		return provisioner.Result{}, err
	}
	return p.power(ctx, s, n, host, decidePowerOn(p.powerNode(n), p.lastPower(n)))
}

// PowerOff turns the host off: soft (ACPI) by default with fallback to hard when the BMC cannot do
// it or it did not work; hard for RebootModeHard or force.
func (p *Provisioner) PowerOff(ctx context.Context, host provisioner.Host, mode metal3.RebootMode, force bool) (provisioner.Result, error) {
	ctx = withOp(ctx, "power")
	s, n, err := p.getNode(ctx, host)
	if err != nil {
		return provisioner.Result{}, err
	}
	return p.power(ctx, s, n, host, decidePowerOff(p.powerNode(n), mode, p.lastPower(n), force))
}

// powerNode is n for a power decision: without a last_error recalled from the node's history
// (history.go), which is the failure of its provision state, not of a power change. Ironic clears
// last_error when it starts a power change; for a node in a failed state getNode fills it in
// again, and the reboot asked of it would read as failed (a host whose power off is disabled was
// then rebooted again after every backoff).
func (p *Provisioner) powerNode(n *nodes.Node) *nodes.Node {
	if n.LastError == "" || !failedStates[state(n)] {
		return n
	}
	if text, known := p.memory.recalledError(n.UUID, n.ProvisionUpdatedAt); !known || text != n.LastError {
		return n // Ironic's own last_error
	}
	c := *n
	c.LastError = ""
	return &c
}

// lastPower is the last power change asked for this node, if it has not been seen through. A
// change asked without an answer (changePower) counts as asked once n shows a power change
// pending: Ironic took it, and a reboot it did must not be asked again once it ends. Until then it
// does not count: taking it for asked would report a reboot Ironic never did as done. (A reboot
// that Ironic took and ended before the node was read again is still asked a second time.)
func (p *Provisioner) lastPower(n *nodes.Node) string {
	if target := p.memory.powerUnanswered(n.UUID); target != "" && n.TargetPowerState != "" {
		p.memory.setPowerRequest(n.UUID, target)
		return target
	}
	return p.memory.powerRequest(n.UUID)
}

func (p *Provisioner) power(ctx context.Context, s *session, n *nodes.Node, host provisioner.Host, d decision) (provisioner.Result, error) {
	switch d.act {
	case actDone, actFail:
		// Seen through, or reported: the next request starts afresh.
		p.memory.setPowerRequest(n.UUID, "")
	case actPowerOn:
		return p.changePower(ctx, s, n, nodes.PowerOn)
	case actPowerOff:
		return p.changePower(ctx, s, n, nodes.PowerOff)
	case actSoftPowerOff:
		return p.softPower(ctx, s, n, nodes.SoftPowerOff, nodes.PowerOff)
	case actReboot:
		return p.changePower(ctx, s, n, nodes.Rebooting)
	case actSoftReboot:
		return p.softPower(ctx, s, n, nodes.SoftRebooting, nodes.Rebooting)
	}
	res, _ := p.result(d, n, host)
	return res, nil
}

// softPower asks for a soft power change, and for its hard form when Ironic refuses the soft one
// (400: the BMC cannot do it).
func (p *Provisioner) softPower(ctx context.Context, s *session, n *nodes.Node, soft, hard nodes.TargetPowerState) (provisioner.Result, error) {
	res, err := p.changePower(ctx, s, n, soft)
	if isStatus(err, http.StatusBadRequest) {
		p.logger(ctx).Info("Soft power change is not supported, asking for the hard one", "node", n.UUID, "target", hard)
		return p.changePower(ctx, s, n, hard)
	}
	return res, err
}

// Reboot restarts the host through Ironic (hard: power cycle, or a BMC restart for a node with
// disable_power_off; soft: ACPI restart, falling back to hard when the BMC cannot do it), then
// follows it until Ironic is done (decideReboot). The host controller reboots with PowerOff then
// PowerOn, except for hosts whose power off is disabled. The reboot asked is remembered in memory
// only: after a restart of the operator while Ironic reboots, the next call waits for that reboot
// and then asks for another one.
func (p *Provisioner) Reboot(ctx context.Context, host provisioner.Host, mode metal3.RebootMode) (provisioner.Result, error) {
	ctx = withOp(ctx, "power")
	s, n, err := p.getNode(ctx, host)
	if err != nil {
		return provisioner.Result{}, err
	}
	return p.power(ctx, s, n, host, decideReboot(p.powerNode(n), mode, p.lastPower(n)))
}

// PowerState reports the node's power as Ironic last saw it.
func (p *Provisioner) PowerState(ctx context.Context, host provisioner.Host) (bool, bool, error) {
	ctx = withOp(ctx, "power")
	_, n, err := p.getNode(ctx, host)
	if err != nil {
		return false, false, err
	}
	switch n.PowerState {
	case powerOn:
		return true, true, nil
	case powerOff:
		return false, true, nil
	}
	return false, false, nil
}

// changePower asks for a power change. Ironic refuses (409) while the node is locked or changing
// provision state: that is a retry. A 400 is returned as the error so the caller can fall back.
func (p *Provisioner) changePower(ctx context.Context, s *session, n *nodes.Node, target nodes.TargetPowerState) (provisioner.Result, error) {
	accepted, err := p.askPower(ctx, s, n, target)
	if err != nil {
		if unanswered(err) {
			p.memory.setPowerUnanswered(n.UUID, string(target)) // Ironic may have taken it: lastPower
		}
		return provisioner.Result{}, err
	}
	if accepted {
		p.memory.setPowerRequest(n.UUID, string(target))
	}
	return p.short(), nil
}

// askPower sends the power change request; accepted is false when Ironic answered busy (409), which
// the caller retries.
func (p *Provisioner) askPower(ctx context.Context, s *session, n *nodes.Node, target nodes.TargetPowerState) (accepted bool, err error) {
	opts := nodes.PowerStateOpts{Target: target}
	if target == nodes.SoftPowerOff || target == nodes.SoftRebooting {
		opts.Timeout = int(p.cfg.SoftPowerOffTimeout.Seconds())
	}
	p.logger(ctx).Info("Changing power", "node", n.UUID, "from", n.PowerState, "target", target)
	ended := p.watch.Writing(n.UUID)
	err = nodes.ChangePowerState(ctx, s.sc, n.UUID, opts).ExtractErr()
	ended()
	switch {
	case err == nil:
		return true, nil
	case busy(err):
		return false, nil
	}
	return false, classifyError(err, fmt.Sprintf("asking Ironic for %s on node %s", target, n.UUID))
}
