package ironic

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metalforge/metalforge/internal/provisioner"
)

// nameSeparator joins namespace and name in the node name, as in metal3.
const nameSeparator = "~"

// faultServiceFailure and faultCleanFailure are the faults Ironic records (with maintenance) when
// a service or clean step fails. Nothing in Ironic clears them: the next state change must.
const (
	faultServiceFailure = "service failure"
	faultCleanFailure   = "clean failure"
)

func nodeName(host provisioner.Host) string { return host.Namespace + nameSeparator + host.Name }

// hostOfNode is the host a node named by nodeName belongs to; false for other nodes.
func hostOfNode(name string) (types.NamespacedName, bool) {
	ns, host, ok := strings.Cut(name, nameSeparator)
	if !ok || ns == "" || host == "" {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: ns, Name: host}, true
}

// getNode reads the host's node by its ID. No ID, no such node, or a node Ironic stalled (deleted
// here, stall.go) is ErrNeedsRegistration. A failed node whose last_error Ironic erased has it
// from its history (history.go); a last_error that is a failed virtual media attach or detach is
// set aside for DataImage (dataimage.go).
func (p *Provisioner) getNode(ctx context.Context, host provisioner.Host) (*session, *nodes.Node, error) {
	s, err := p.session(ctx)
	if err != nil {
		return nil, nil, err
	}
	if host.NodeID == "" {
		return s, nil, fmt.Errorf("host %s/%s has no Ironic node yet: %w", host.Namespace, host.Name, provisioner.ErrNeedsRegistration)
	}
	n, ok := p.watch.Get(host.NodeID)
	if !ok {
		if n, err = p.readNode(ctx, s, host); err != nil {
			return s, nil, err
		}
	}
	if n, err = p.recoverStalled(ctx, s, n, host); err != nil {
		return s, n, err
	}
	n = p.applyDeferredRegistration(ctx, s, n, host)
	n = p.setAsideVmediaFailure(n) // not any other operation's failure (dataimage.go)
	p.confirmStarts(n)
	return s, p.recallLastError(ctx, s, n), nil
}

// readNode GETs the host's node and caches the read.
func (p *Provisioner) readNode(ctx context.Context, s *session, host provisioner.Host) (*nodes.Node, error) {
	at := p.now()
	n, err := p.fetchNode(ctx, s, host.NodeID)
	if notFound(err) {
		return nil, fmt.Errorf("node %s of host %s/%s is gone from Ironic: %w", host.NodeID, host.Namespace, host.Name, provisioner.ErrNeedsRegistration)
	}
	if err != nil {
		return nil, err
	}
	p.watch.Put(n, at)
	return n, nil
}

// fetchNode is GET /v1/nodes/{id or name}; errors are classified (404 stays an *apiError).
func (p *Provisioner) fetchNode(ctx context.Context, s *session, ident string) (*nodes.Node, error) {
	n, err := nodes.Get(ctx, s.sc, ident).Extract()
	if err != nil {
		return nil, classifyError(err, "reading Ironic node "+ident)
	}
	return n, nil
}

// patchNode applies a JSON patch and returns the updated node. An empty patch costs nothing.
func (p *Provisioner) patchNode(ctx context.Context, s *session, n *nodes.Node, pt patch) (*nodes.Node, error) {
	if len(pt) == 0 {
		return n, nil
	}
	p.logger(ctx).V(1).Info("Updating Ironic node", "node", n.UUID, "paths", pt.paths())
	ended := p.watch.Writing(n.UUID)
	updated, err := nodes.Update(ctx, s.sc, n.UUID, pt.opts()).Extract()
	ended()
	if err != nil {
		return nil, classifyError(err, "updating Ironic node "+n.UUID)
	}
	p.watch.Saw(updated)
	return updated, nil
}

// changeState asks Ironic for a provision state change and answers Working: after `then` when it
// was accepted, after a short delay when Ironic was busy (409: locked, or the state moved on). See
// startState.
func (p *Provisioner) changeState(ctx context.Context, s *session, n *nodes.Node, opts nodes.ProvisionStateOpts, then provisioner.Result) (provisioner.Result, error) {
	res, _, err := p.startState(ctx, s, n, opts, then)
	return res, err
}

// startState is changeState that also says whether Ironic accepted the change. A node in
// maintenance cannot change state: maintenance set by hand (no fault) is cleared first, and so is
// the ones Ironic sets when a service or clean step fails (faults "service failure", "clean
// failure": the state change is what follows that failure, a retry, an abort, an undeploy or a
// manage, as metal3 clears them); other faults (set by Ironic, e.g. after power sync failures)
// clear themselves, so the call waits. A 400 answer
// (Ironic rejects the request, e.g. an unknown step) is a failed operation with Ironic's reason.
// Every clean and service step list reaches Ironic here, so this is where BIOS setting values get
// the JSON type of their registry attribute (typedSteps; the fingerprints of the requests were
// taken from the steps as written, which stay what the caller built).
func (p *Provisioner) startState(ctx context.Context, s *session, n *nodes.Node, opts nodes.ProvisionStateOpts, then provisioner.Result) (provisioner.Result, bool, error) {
	log := p.logger(ctx)
	var err error
	if opts.CleanSteps, err = p.typedSteps(ctx, s, n, opts.CleanSteps); err != nil {
		return provisioner.Result{}, false, err
	}
	if opts.ServiceSteps, err = p.typedSteps(ctx, s, n, opts.ServiceSteps); err != nil {
		return provisioner.Result{}, false, err
	}
	if n.Maintenance {
		if faultClearsItself(n) {
			log.Info("Waiting for Ironic to clear a fault before changing the provision state", "node", n.UUID, "fault", n.Fault)
			// Say which fault: without it the host shows only the step it waits on, not why.
			res := p.short()
			res.Waiting = faultWait(n)
			return res, false, nil
		}
		if res, err := p.setMaintenance(ctx, s, n, false, ""); err != nil || res.Busy {
			return res, false, err
		}
	}
	log.Info("Changing the provision state", "node", n.UUID, "provisionState", n.ProvisionState, "target", opts.Target)
	stale := p.watch.Listed(n)
	ended := p.watch.Writing(n.UUID)
	err = nodes.ChangeProvisionState(ctx, s.sc, n.UUID, opts).ExtractErr()
	ended()
	switch {
	case err == nil:
		return then, true, nil
	case busy(err):
		log.Info("Ironic node busy, retrying later", "node", n.UUID, "target", opts.Target)
		return p.short(), false, nil
	case isStatus(err, http.StatusBadRequest) && stale:
		// Decided on a list some seconds old: Ironic may have changed the node since (a fault put
		// it in maintenance, say). The next call reads the node again (the write made the list
		// stale) and decides anew; a refusal of a decision made on a fresh read is a failure.
		log.Info("Ironic refused a state change decided on a listed read; deciding again", "node", n.UUID, "target", opts.Target, "reason", faultOf(err))
		return p.short(), false, nil
	case isStatus(err, http.StatusBadRequest):
		return provisioner.Failed(fmt.Sprintf("Ironic refused to %s the node: %s", opts.Target, faultOf(err))), false, nil
	}
	return provisioner.Result{}, false, classifyError(err, fmt.Sprintf("asking Ironic to %s node %s", opts.Target, n.UUID))
}

// faultClearsItself: n is in maintenance for a fault Ironic set and clears by itself (a power
// failure, at the next successful power sync), not the failure of a service or clean step, which
// the next state change clears: no state change can be asked until then.
func faultClearsItself(n *nodes.Node) bool {
	return n.Maintenance && n.Fault != "" && n.Fault != faultServiceFailure && n.Fault != faultCleanFailure
}

// faultWait is what a host waits for while Ironic keeps its node in maintenance for a fault that
// clears itself (a power failure clears at the next successful power sync). Not the maintenance
// reason: the node list does not carry it, and its text varies, so the status would flap.
func faultWait(n *nodes.Node) string {
	return fmt.Sprintf("Ironic to clear the fault %q of node %s (maintenance) before changing its provision state", sanitize(n.Fault), n.UUID)
}

// updateAllowed says whether Ironic's API takes a PATCH of n: not while a transition runs
// (target_provision_state set), except in the states of states.UPDATE_ALLOWED_STATES, and never in
// inspecting from API 1.39 (api/controllers/v1/node.py patch). Elsewhere the answer is 409, which
// the provisioner would take for a busy node and retry until the wait ends (up to Ironic's
// callback timeout: 30 minutes).
func updateAllowed(n *nodes.Node) bool {
	st := state(n)
	return st != nodes.Inspecting && (n.TargetProvisionState == "" || updateAllowedStates[st])
}

var updateAllowedStates = map[nodes.ProvisionState]bool{
	nodes.DeployFail: true, nodes.InspectWait: true, nodes.InspectFail: true, nodes.CleanFail: true, nodes.Error: true,
	nodes.Verifying: true, nodes.AdoptFail: true, nodes.RescueFail: true, nodes.UnrescueFail: true, "service": true,
	nodes.ServiceHold: true, nodes.ServiceFail: true,
}

// interfacesChangeable says whether Ironic takes a change of n's driver or interfaces: only in
// enroll, manageable and available (conductor/manager.py update_node also allows inspect wait and
// maintenance, where a running inspection or a broken node should not have its interfaces
// changed under it); elsewhere it answers InvalidState, a 409.
func interfacesChangeable(n *nodes.Node) bool {
	switch state(n) {
	case nodes.Enroll, nodes.Manageable, nodes.Available:
		return updateAllowed(n)
	}
	return false
}

// finished reports whether the operation fingerprinted fp was started on this node earlier (its
// fingerprint is in extra[key]) and is therefore done when the node is back in its stable state.
func (p *Provisioner) finished(n *nodes.Node, key, fp string) bool {
	if v, _ := n.Extra[key].(string); v != fp {
		return false
	}
	if key == extraPrepared && preparedNotStarted(n) {
		return false
	}
	bad, failed := p.memory.failedStart(n.UUID, key)
	return !failed || bad != fp
}

// recordStart notes whether the state change for fp went through after its fingerprint was
// written: a fingerprint whose operation never started must not count as finished. Not started
// includes a request that got no answer (a timeout, a 5xx), which Ironic may have carried out all
// the same: confirmStarts corrects that from what the node shows next. (Taking such a request for
// started instead would report a preparation that never ran as done.)
func (p *Provisioner) recordStart(n *nodes.Node, key, fp string, started bool) {
	p.memory.recordStart(n.UUID, key, fp, started)
}

// confirmStarts drops the failed start remembered under a key when n shows that operation
// running or failed with that very fingerprint in its extra: Ironic took the state change after
// all (it answered after the client's timeout, or with a 5xx after the conductor had started it).
// Without this, the node back in manageable (active) after the operation would hold a
// fingerprint still taken for never started, and the same RAID, BIOS and firmware steps would
// run a second time. The fingerprint is written just before the state change and the operation
// starts only from a stable state, so a node in these states with it runs that operation.
func (p *Provisioner) confirmStarts(n *nodes.Node) {
	for _, key := range []string{extraPrepared, extraServiced} {
		bad, failed := p.memory.failedStart(n.UUID, key)
		if !failed || !runningUnder(n, key) {
			continue
		}
		if v, _ := n.Extra[key].(string); v == bad {
			p.memory.recordStart(n.UUID, key, bad, true)
		}
	}
}

// runningUnder says whether n is in the operation that writes its fingerprint under key, started
// after that write: a manual cleaning (target manageable, which Ironic keeps in clean failed for a
// manual cleaning: conductor/utils.py cleaning_error_handler; a manual cleaning starts only from
// manageable, so a clean failed node with a failed start got it from that start) for
// extraPrepared, a servicing for extraServiced. Not service failed: a servicing is started again
// from there, and the failed state may be the earlier run's, with the same fingerprint.
func runningUnder(n *nodes.Node, key string) bool {
	switch key {
	case extraPrepared:
		switch state(n) {
		case nodes.Cleaning, nodes.CleanWait, nodes.CleanHold, nodes.CleanFail:
			return n.TargetProvisionState == string(nodes.Manageable)
		}
	case extraServiced:
		switch state(n) {
		case nodes.Servicing, nodes.ServiceWait, nodes.ServiceHold:
			return true
		}
	}
	return false
}

// setMaintenance sets or clears maintenance; Working(short) when busy.
func (p *Provisioner) setMaintenance(ctx context.Context, s *session, n *nodes.Node, on bool, reason string) (provisioner.Result, error) {
	ended := p.watch.Writing(n.UUID)
	var err error
	if on {
		err = nodes.SetMaintenance(ctx, s.sc, n.UUID, nodes.MaintenanceOpts{Reason: reason}).ExtractErr()
	} else {
		err = nodes.UnsetMaintenance(ctx, s.sc, n.UUID).ExtractErr()
	}
	ended()
	switch {
	case err == nil:
		n.Maintenance = on
		return provisioner.Result{}, nil
	case busy(err):
		return p.short(), nil
	}
	return provisioner.Result{}, classifyError(err, fmt.Sprintf("setting maintenance=%t on Ironic node %s", on, n.UUID))
}

// update applies a patch, answering Working(short) when Ironic is busy; ok is false when the
// caller must return res, err.
func (p *Provisioner) update(ctx context.Context, s *session, n *nodes.Node, pt patch) (updated *nodes.Node, res provisioner.Result, err error, ok bool) {
	updated, err = p.patchNode(ctx, s, n, pt)
	switch {
	case err == nil:
		return updated, provisioner.Result{}, nil, true
	case busy(err):
		p.logger(ctx).Info("Ironic node busy, retrying the update later", "node", n.UUID, "reason", faultOf(err))
		res := p.short()
		if fault := faultOf(err); containsFold(fault, "updated unless it is in one of allowed") {
			// Not a lock that goes away: the decisions avoid such changes (interfacesChangeable),
			// so this is a state they did not foresee. Say it rather than wait without a word.
			res.Waiting = fmt.Sprintf("Ironic to take a change of node %s, which it refuses in state %q: %s", n.UUID, n.ProvisionState, fault)
		}
		return nil, res, nil, false
	}
	return nil, provisioner.Result{}, err, false
}
