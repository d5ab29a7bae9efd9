package ironic

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/metalforge/metalforge/internal/bmc"
	"github.com/metalforge/metalforge/internal/provisioner"
)

// Service applies BIOS settings and firmware updates to an active node through Ironic servicing
// (active → servicing ↔ service wait → active; Ironic reboots the host as the steps need and
// leaves it powered on). The run record in the node's extra (servicerun.go) tells the run of the
// host's attempt that finished (done at once, however often asked, with what it applied: an
// operator restart never services twice) from one that failed (reported until the host retries
// it with a new attempt or the request changes) or was aborted (started again). Empty data while
// servicing waits or has failed aborts it (the user took the changes back), and once the node is
// active again forgets the request so that the same changes asked again later are applied again;
// the finished abort names the BIOS settings Ironic had already sent to the BMC (staged.go).
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
	f, run, hasRun := p.serviceFactsOf(n, data, fp, len(steps) > 0)
	d := decideServicing(n, f)
	switch d.act {
	case actService:
		if data.AfterFailure {
			return provisioner.Result{Restart: true}, nil // the host's status first
		}
		if f.staleRestart {
			p.logger(ctx).Info("Servicing failed on what an earlier attempt left (an Ironic bug): starting it again",
				"node", n.UUID, "lastError", sanitize(n.LastError))
		}
		return p.startServicing(ctx, s, n, host, access, steps, newServiceRun(n, data, settingNames(data)), fp, f.staleRestart)
	case actAbort:
		if st := state(n); (st == nodes.ServiceWait || st == nodes.ServiceHold) && p.memory.abortAskedIn(n.UUID, n.ProvisionUpdatedAt) {
			// Asked already: Ironic flagged the step that cannot be interrupted (abort_after) and
			// aborts once it ends. Asking again every few seconds for the minutes a flash takes
			// would only take the node's lock for nothing.
			return p.long(), nil
		}
		// Abort first: Ironic refuses any PATCH of a node in service wait (a state change in
		// progress), and the request is forgotten once the node is active again (below). In
		// service failed after an abort that let a step end, the record keeps that step first:
		// the abort from there names none, and what the step applied must still be reported.
		if step := abortedStep(n.LastError); step != "" && state(n) == nodes.ServiceFail && hasRun && f.current && run.AbortedAfter != step {
			run.AbortedAfter = step
			var pt patch
			pt.setKeys("extra", n.Extra, map[string]any{extraServiceRun: run.value()})
			var res provisioner.Result
			var ok bool
			if n, res, err, ok = p.update(ctx, s, n, pt); !ok {
				return res, err
			}
		}
		return p.abort(ctx, s, n, "servicing")
	case actUnexpected:
		return provisioner.Result{}, fmt.Errorf("servicing host %s/%s: Ironic node %s is %q, servicing needs it active",
			host.Namespace, host.Name, n.UUID, n.ProvisionState)
	}
	res, _ := p.result(d, n, host)
	// Judged on Ironic's whole message (a bool: nothing of it leaves here), or, for the recorded
	// failure reported again, as it was judged then.
	res.Transient = res.Failed() && (bmcFault(d.msg) || (hasRun && run.BMCFault && res.ErrorMessage == run.Failed))
	switch {
	case res.Failed() && hasRun && f.requested && run.Failed != res.ErrorMessage:
		return p.recordFailure(ctx, s, n, run, res)
	case d.act != actDone:
	case f.current && f.failed == "" && !f.aborted:
		res.Serviced = run.serviced()
		if !hasRun { // an older operator's fingerprint: its request was the one asked
			res.Serviced = &provisioner.Serviced{Settings: settingNames(data), Updates: data.FirmwareUpdates}
		}
		p.memory.clearAbortRequested(n.UUID)
	case len(steps) == 0:
		if f.current {
			res.Serviced = f.partial // applied before the abort took effect
		}
		return p.forgetAbortedRequest(ctx, s, n, res)
	}
	return res, nil
}

// recordFailure keeps the failure res reports in the run's record, so that the node active again
// after it (an admin aborted the failed servicing) is not taken for a success.
func (p *Provisioner) recordFailure(ctx context.Context, s *session, n *nodes.Node, run serviceRun, res provisioner.Result) (provisioner.Result, error) {
	run.Failed, run.BMCFault = res.ErrorMessage, res.Transient
	var pt patch
	pt.setKeys("extra", n.Extra, map[string]any{extraServiceRun: run.value()})
	if _, busyRes, err, ok := p.update(ctx, s, n, pt); !ok {
		return busyRes, err
	}
	return res, nil
}

// forgetAbortedRequest ends an abort (the changes were taken back and Ironic is done): the request
// and its record are forgotten, so that asking for the same changes later applies them, and res
// names what the abort could not undo.
func (p *Provisioner) forgetAbortedRequest(ctx context.Context, s *session, n *nodes.Node, res provisioner.Result) (provisioner.Result, error) {
	var pt patch
	pt.setKeys("extra", n.Extra, map[string]any{extraServiced: nil, extraServiceRun: nil})
	n, busyRes, err, ok := p.update(ctx, s, n, pt)
	if !ok {
		return busyRes, err
	}
	p.memory.clearAbortRequested(n.UUID)
	res.StagedSettings = p.settingsLeftStaged(ctx, s, n)
	return res, nil
}

// settingNames names, sorted, the firmware settings data sets (for the run record).
func settingNames(data provisioner.ServiceData) []string {
	return slices.Sorted(maps.Keys(data.FirmwareSettings))
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
	steps []nodes.ServiceStep, run serviceRun, fp string, staleRestart bool) (provisioner.Result, error) {
	if res, handled, err := p.serviceStaleRecordFor(ctx, s, n, host, access, run.Since); handled {
		return res, err
	}
	return p.startServiceSteps(ctx, s, n, host, access, steps, run, fp, staleRestart)
}

// serviceStaleRecord starts the servicing that drops the stale record of a BIOS step (staged.go)
// when n holds one and that servicing has not already failed on it; handled says it did, or could
// not read the node (res, err say how). Called before a servicing, and before an undeploy, whose
// automated cleaning and next deployment the record would mislead.
func (p *Provisioner) serviceStaleRecord(ctx context.Context, s *session, n *nodes.Node, host provisioner.Host, access *bmc.Access) (res provisioner.Result, handled bool, err error) {
	return p.serviceStaleRecordFor(ctx, s, n, host, access, "")
}

// serviceStaleRecordFor is serviceStaleRecord within the host's servicing attempt since (its
// attemptToken): the check's run record keeps it and applies nothing (ranRecordCheck tells it).
func (p *Provisioner) serviceStaleRecordFor(ctx context.Context, s *session, n *nodes.Node, host provisioner.Host, access *bmc.Access, since string) (res provisioner.Result, handled bool, err error) {
	full, err := p.fetchNode(ctx, s, n.UUID) // the watcher's node has no driver_internal_info
	if err != nil {
		return provisioner.Result{}, true, err
	}
	checkStep, checkFP, start := p.recordCheckFor(ctx, n, full, extraServiced, "servicing")
	if !start {
		return provisioner.Result{}, false, nil
	}
	check := serviceRun{Since: since, StateSince: ironicStamp(n.ProvisionUpdatedAt)}
	res, err = p.startServiceSteps(ctx, s, n, host, access, []nodes.ServiceStep{checkStep}, check, checkFP, false)
	return res, true, err
}

// startServiceSteps writes the agent image, the fingerprint and the run's record, and starts
// servicing with steps.
func (p *Provisioner) startServiceSteps(ctx context.Context, s *session, n *nodes.Node, host provisioner.Host, access *bmc.Access,
	steps []nodes.ServiceStep, run serviceRun, fp string, staleRestart bool) (provisioner.Result, error) {
	var pt patch
	if err := p.setDeployImage(&pt, n, host, access); err != nil {
		return provisioner.Result{}, err
	}
	pt.setKeys("extra", n.Extra, map[string]any{extraServiced: fp, extraServiceRun: run.value()})
	n, res, err, ok := p.update(ctx, s, n, pt)
	if !ok {
		return res, err
	}
	p.logger(ctx).Info("Starting servicing", "node", n.UUID, "steps", stepNames(steps))
	res, started, err := p.startState(ctx, s, n, nodes.ProvisionStateOpts{Target: nodes.TargetService, ServiceSteps: steps}, p.long())
	p.recordStart(n, extraServiced, fp, started)
	if res.Failed() {
		return p.recordFailure(ctx, s, n, run, res) // refused: that too is the request's failure
	}
	if started {
		p.memory.setStaleServiceRestart(n.UUID, staleRestart)
		p.memory.clearAbortRequested(n.UUID) // an abort before this start is not this run's
	}
	return res, err
}

// abort stops what the node waits for (clean wait, service wait, inspect wait, and with API 1.110
// deploy wait).
func (p *Provisioner) abort(ctx context.Context, s *session, n *nodes.Node, what string) (provisioner.Result, error) {
	res, _, err := p.startAbort(ctx, s, n, what)
	return res, err
}

// startAbort is abort that also says whether Ironic took the request. Only a taken abort is
// remembered: one Ironic answered busy (409, the node locked by a vendor passthru or a virtual
// media call talking to a slow BMC), or left waiting (maintenance, a stale read), was recorded as
// asked, and abortAskedIn then kept it from being asked again until the node moved, which a node
// waiting for a silent agent never does: the wait ran to Ironic's 30-minute timeout.
func (p *Provisioner) startAbort(ctx context.Context, s *session, n *nodes.Node, what string) (provisioner.Result, bool, error) {
	p.logger(ctx).Info("Aborting", "node", n.UUID, "operation", what, "provisionState", n.ProvisionState)
	res, accepted, err := p.startState(ctx, s, n, nodes.ProvisionStateOpts{Target: nodes.TargetAbort}, p.short())
	if accepted {
		// Remembered so that the failed state it leads to is known for the abort even once
		// Ironic has erased its last_error (history.go).
		p.memory.setAbortRequested(n.UUID, p.now(), n.ProvisionUpdatedAt)
	}
	return res, accepted, err
}
