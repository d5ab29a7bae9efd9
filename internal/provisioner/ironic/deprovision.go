package ironic

import (
	"context"
	"fmt"
	"slices"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/metalforge/metalforge/internal/provisioner"
)

// Deprovision takes the image away: active → deleting → (automated cleaning) → available. The
// host's cleaning mode decides whether Ironic cleans; a failed clean is retried from manageable.
func (p *Provisioner) Deprovision(ctx context.Context, host provisioner.Host, restartOnFailure bool) (provisioner.Result, error) {
	ctx = withOp(ctx, "deprovision")
	s, n, err := p.getNode(ctx, host)
	if err != nil {
		return provisioner.Result{}, err
	}
	if res, handled, err := p.abortLostAgent(ctx, s, n, "deprovisioning"); handled {
		return res, err
	}
	access, err := parseAccess(host)
	if err != nil {
		return provisioner.Failed(err.Error()), nil
	}
	d := decideDeprovisioning(n, restartOnFailure)
	switch d.act {
	case actUndeploy:
		if st := state(n); s.features.Servicing && (st == nodes.Active || st == nodes.ServiceFail) {
			// A stale BIOS record (left by a live update that was aborted or failed at its
			// reboot) would make the automated cleaning skip the step it waits on, and the next
			// deployment the step that waits for the agent (staged.go): it goes first.
			if res, handled, err := p.serviceStaleRecord(ctx, s, n, host, access); handled {
				return res, err
			}
		}
		pt, _, err := p.cleaningPatch(n, host, access)
		if err != nil {
			return provisioner.Result{}, err
		}
		if len(pt) > 0 && !updateAllowed(n) {
			// A deployment waiting for its agent (wait call-back): Ironic refuses any PATCH until
			// its callback timeout (30 min), and the undeploy it takes from there cleans at once
			// with the node's automated_clean as it is (DELETING → CLEANING in one conductor task),
			// leaving no moment to change it.
			return p.undeployFromWait(ctx, s, n, pt, s.features)
		}
		n, res, err, ok := p.update(ctx, s, n, pt)
		if !ok {
			return res, err
		}
		return p.changeState(ctx, s, n, nodes.ProvisionStateOpts{Target: nodes.TargetDeleted}, p.long())
	case actAbort:
		// A manual cleaning (preparing) or a servicing waiting for the agent is in the way: stop
		// it; clean failed → manage → provide, service failed → undeploy.
		return p.abort(ctx, s, n, "manual cleaning or servicing")
	case actManage:
		return p.changeState(ctx, s, n, nodes.ProvisionStateOpts{Target: nodes.TargetManage}, p.short())
	case actProvide:
		// After a failed or aborted cleaning, or a fresh registration: clean (or not) on the way
		// to available.
		return p.provide(ctx, s, n, host, access)
	case actUnexpected:
		return provisioner.Result{}, fmt.Errorf("deprovisioning host %s/%s: Ironic node %s is %q",
			host.Namespace, host.Name, n.UUID, n.ProvisionState)
	}
	res, _ := p.result(d, n, host)
	return res, nil
}

// undeployFromWait deprovisions a node whose cleaning settings (pt: automated_clean, the agent
// image) Ironic will not take in its state, a deployment waiting for the agent. With API 1.110 the
// deployment is aborted (deploy failed, where Ironic takes the patch): the next call writes it and
// undeploys, so that the cleaning honours the host's cleaning mode (disabled means no cleaning,
// enabled means the disks are cleaned). Without the abort, a patch that leaves automated_clean as
// it is (a new agent image only) does not hold the undeploy back: the cleaning runs as asked, with
// the agent image the node has, and the next deployment or preparation writes the new one. One
// that changes automated_clean waits for Ironic's callback timeout (deploy failed): undeploying
// now would clean a host whose cleaning is disabled, or not clean one whose cleaning is enabled.
func (p *Provisioner) undeployFromWait(ctx context.Context, s *session, n *nodes.Node, pt patch, f Features) (provisioner.Result, error) {
	switch {
	case state(n) == nodes.DeployWait && f.DeployWaitAbort:
		return p.abort(ctx, s, n, "deployment, to change its cleaning settings before undeploying")
	case !slices.ContainsFunc(pt, func(op nodes.UpdateOperation) bool { return op.Path == "/automated_clean" }):
		return p.changeState(ctx, s, n, nodes.ProvisionStateOpts{Target: nodes.TargetDeleted}, p.long())
	}
	res := withStall(p.long(), n, p.now())
	if res.Waiting == "" {
		res.Waiting = fmt.Sprintf("Ironic to end the deployment of node %s (%q, until its callback timeout): it takes no change of automated_clean before that (API 1.110 would abort it)",
			n.UUID, n.ProvisionState)
	}
	return res, nil
}
