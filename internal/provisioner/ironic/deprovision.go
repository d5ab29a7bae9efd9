package ironic

import (
	"context"
	"fmt"

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
