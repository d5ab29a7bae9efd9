package ironic

import (
	"context"
	"fmt"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/metalforge/metalforge/internal/provisioner"
)

// Adopt makes Ironic manage an already provisioned host as active without touching its disk:
// after a re-registration (Ironic lost its database) the node is manageable; it gets the image's
// instance_info and is adopted (manageable → adopting → active). An active node is done, which
// makes Adopt cheap for the steady state that calls it on every reconcile.
func (p *Provisioner) Adopt(ctx context.Context, host provisioner.Host, data provisioner.ProvisionData, restartOnFailure bool) (provisioner.Result, error) {
	ctx = withOp(ctx, "adopt")
	s, n, err := p.getNode(ctx, host)
	if err != nil {
		return provisioner.Result{}, err
	}
	hasImage := data.Image != nil && data.Image.URL != "" || data.CustomDeploy != nil && data.CustomDeploy.Method != ""
	d := decideAdoption(n, host.State, hasImage, restartOnFailure)
	switch d.act {
	case actAdopt:
		return p.adopt(ctx, s, n, host, data)
	case actManage:
		// Adoption starts from manageable.
		return p.changeState(ctx, s, n, nodes.ProvisionStateOpts{Target: nodes.TargetManage}, p.short())
	case actUnexpected:
		return provisioner.Result{}, fmt.Errorf("adopting host %s/%s: Ironic node %s is %q (registration must finish first)",
			host.Namespace, host.Name, n.UUID, n.ProvisionState)
	}
	res, _ := p.result(d, n, host)
	return res, nil
}

// adopt writes what is on the disk into instance_info (Ironic takes over the node as deployed
// with it) and asks Ironic to adopt.
func (p *Provisioner) adopt(ctx context.Context, s *session, n *nodes.Node, host provisioner.Host, data provisioner.ProvisionData) (provisioner.Result, error) {
	var pt patch
	// Externally provisioned without an image: nothing to record; Ironic adopts a node without
	// image_source too (it only validates the boot interface for non-local boot).
	if plan, err := planDeploy(p.cfg, data); err == nil {
		plan.apply(&pt, n)
	}
	pt.setKeys("properties", n.Properties, map[string]any{"capabilities": capabilities(n.Properties["capabilities"], data.BootMode)})
	n, res, err, ok := p.update(ctx, s, n, pt)
	if !ok {
		return res, err
	}
	return p.changeState(ctx, s, n, nodes.ProvisionStateOpts{Target: nodes.TargetAdopt}, p.short())
}
