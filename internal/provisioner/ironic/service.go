package ironic

import (
	"context"
	"fmt"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/metalforge/metalforge/internal/bmc"
	"github.com/metalforge/metalforge/internal/provisioner"
)

// Service applies BIOS settings and firmware updates to an active node through Ironic servicing
// (active → servicing ↔ service wait → active; Ironic reboots the host as the steps need and
// leaves it powered on). The request's fingerprint in the node's extra tells a finished request
// (done at once, however often asked: an operator restart never services twice) and the request
// that failed (reported until the request changes or the host retries it). Empty data while servicing waits or has failed
// aborts it (the user took the changes back), and forgets the fingerprint so that the same changes
// asked again later are applied again; the finished abort names the BIOS settings Ironic had
// already sent to the BMC (staged.go).
func (p *Provisioner) Service(ctx context.Context, host provisioner.Host, data provisioner.ServiceData) (provisioner.Result, error) {
	ctx = withOp(ctx, "service")
	s, n, err := p.getNode(ctx, host)
	if err != nil {
		return provisioner.Result{}, err
	}
	if res, handled, err := p.abortLostAgent(ctx, s, n, "servicing"); handled {
		return res, err
	}
	if !s.features.Servicing {
		return provisioner.Result{}, fmt.Errorf("servicing host %s/%s: Ironic's API goes up to %s, servicing needs 1.%d: %w",
			host.Namespace, host.Name, s.features.MaxVersion, minorServicing, provisioner.ErrServicingUnsupported)
	}
	access, err := parseAccess(host)
	if err != nil {
		return provisioner.Failed(err.Error()), nil
	}
	var steps []nodes.ServiceStep
	if st, ok := biosStep(data.FirmwareSettings); ok {
		steps = append(steps, st)
	}
	if st, ok := firmwareStep(data.FirmwareUpdates); ok {
		steps = append(steps, st)
	}
	fp := fingerprint(steps)
	// Ran: this request was the last one started on the node (its fingerprint written and Ironic
	// accepted the state change; a start Ironic refused does not count, or a failed run's message
	// would be reported for a request that never ran).
	ran := p.finished(n, extraServiced, fp)

	// Finished: this request ran to its end on the node, and (as far as Ironic's clock tells) after
	// the host's servicing started; an older run of the same request does not count.
	finished := ran && data.FinishedBy(n.ProvisionUpdatedAt)
	staleRestart := state(n) == nodes.ServiceFail && failedOnStaleStep(n) && !p.memory.staleServiceRestarted(n.UUID)
	d := decideServicing(n, len(steps) > 0, finished, ran, data.RetryFailed, staleRestart)
	switch d.act {
	case actService:
		if staleRestart {
			p.logger(ctx).Info("Servicing failed on what an earlier attempt left (an Ironic bug): starting it again",
				"node", n.UUID, "lastError", sanitize(n.LastError))
		}
		return p.startServicing(ctx, s, n, host, access, steps, fp, staleRestart)
	case actAbort:
		if _, ok := n.Extra[extraServiced]; ok {
			var pt patch
			pt.setKeys("extra", n.Extra, map[string]any{extraServiced: nil})
			updated, res, err, ok := p.update(ctx, s, n, pt)
			if !ok {
				return res, err
			}
			n = updated
		}
		return p.abort(ctx, s, n, "servicing")
	case actUnexpected:
		return provisioner.Result{}, fmt.Errorf("servicing host %s/%s: Ironic node %s is %q, servicing needs it active",
			host.Namespace, host.Name, n.UUID, n.ProvisionState)
	}
	res, _ := p.result(d, n, host)
	if d.act == actDone && len(steps) == 0 {
		// The changes were taken back and Ironic is done: say what the abort could not undo.
		res.StagedSettings = p.settingsLeftStaged(ctx, s, n)
	}
	return res, nil
}

// ServicingSupported reports whether the negotiated API has servicing (1.87).
func (p *Provisioner) ServicingSupported(ctx context.Context) (bool, error) {
	s, err := p.session(ctx)
	if err != nil {
		return false, err
	}
	return s.features.Servicing, nil
}

// startServicing starts the steps; staleRestart says the start follows a failure on a stale step
// (remembered once Ironic accepted it, forgotten by any other start). A node that holds the stale
// record of a BIOS step is serviced first with the step that drops it (serviceStaleRecord): once
// that servicing is over, whatever its outcome, the request is not the one that ran, and starts.
func (p *Provisioner) startServicing(ctx context.Context, s *session, n *nodes.Node, host provisioner.Host, access *bmc.Access,
	steps []nodes.ServiceStep, fp string, staleRestart bool) (provisioner.Result, error) {
	if res, handled, err := p.serviceStaleRecord(ctx, s, n, host, access); handled {
		return res, err
	}
	return p.startServiceSteps(ctx, s, n, host, access, steps, fp, staleRestart)
}

// serviceStaleRecord starts the servicing that drops the stale record of a BIOS step (staged.go)
// when n holds one and that servicing has not already failed on it; handled says it did, or could
// not read the node (res, err say how). Called before a servicing, and before an undeploy, whose
// automated cleaning and next deployment the record would mislead.
func (p *Provisioner) serviceStaleRecord(ctx context.Context, s *session, n *nodes.Node, host provisioner.Host, access *bmc.Access) (res provisioner.Result, handled bool, err error) {
	full, err := p.fetchNode(ctx, s, n.UUID) // the watcher's node has no driver_internal_info
	if err != nil {
		return provisioner.Result{}, true, err
	}
	check, checkFP, start := p.recordCheckFor(ctx, n, full, extraServiced, "servicing")
	if !start {
		return provisioner.Result{}, false, nil
	}
	res, err = p.startServiceSteps(ctx, s, n, host, access, []nodes.ServiceStep{check}, checkFP, false)
	return res, true, err
}

// startServiceSteps writes the agent image and the fingerprint, and starts servicing with steps.
func (p *Provisioner) startServiceSteps(ctx context.Context, s *session, n *nodes.Node, host provisioner.Host, access *bmc.Access,
	steps []nodes.ServiceStep, fp string, staleRestart bool) (provisioner.Result, error) {
	var pt patch
	if err := p.setDeployImage(&pt, n, host, access); err != nil {
		return provisioner.Result{}, err
	}
	pt.setKeys("extra", n.Extra, map[string]any{extraServiced: fp})
	n, res, err, ok := p.update(ctx, s, n, pt)
	if !ok {
		return res, err
	}
	p.logger(ctx).Info("Starting servicing", "node", n.UUID, "steps", stepNames(steps))
	res, started, err := p.startState(ctx, s, n, nodes.ProvisionStateOpts{Target: nodes.TargetService, ServiceSteps: steps}, p.long())
	p.recordStart(n, extraServiced, fp, started)
	if started {
		p.memory.setStaleServiceRestart(n.UUID, staleRestart)
	}
	return res, err
}

// abort stops what the node waits for (clean wait, service wait, inspect wait, and with API 1.110
// deploy wait).
func (p *Provisioner) abort(ctx context.Context, s *session, n *nodes.Node, what string) (provisioner.Result, error) {
	p.logger(ctx).Info("Aborting", "node", n.UUID, "operation", what, "provisionState", n.ProvisionState)
	res, err := p.changeState(ctx, s, n, nodes.ProvisionStateOpts{Target: nodes.TargetAbort}, p.short())
	if err == nil && !res.Failed() {
		// Remembered so that the failed state it leads to is known for the abort even once
		// Ironic has erased its last_error (history.go).
		p.memory.setAbortRequested(n.UUID, p.now(), n.ProvisionUpdatedAt)
	}
	return res, err
}
