package ironic

import (
	"context"
	"fmt"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/bmc"
	"github.com/metalforge/metalforge/internal/provisioner"
)

// Inspect starts or follows inspection: in-band by the agent by default, out-of-band through the
// BMC (redfish) for inspectionMode fast. A node Ironic has inspected before answers with its stored
// inventory unless Refresh asks for a new inspection.
func (p *Provisioner) Inspect(ctx context.Context, host provisioner.Host, opts provisioner.InspectOptions) (provisioner.Result, *metal3.HardwareDetails, error) {
	ctx = withOp(ctx, "inspect")
	s, n, err := p.getNode(ctx, host)
	if err != nil {
		return provisioner.Result{}, nil, err
	}
	access, err := parseAccess(host)
	if err != nil {
		return provisioner.Failed(err.Error()), nil, nil
	}
	d := decideInspection(n, opts, n.InspectInterface != inspectInterface(host, access))
	switch d.act {
	case actDone:
		if opts.Skip {
			return provisioner.Done(), nil, nil
		}
		details, err := p.hardwareDetails(ctx, s, n, host)
		if err != nil || details != nil {
			return provisioner.Done(), details, err
		}
		// Ironic has no inventory after all (e.g. the inspection data was removed): inspect.
		res, err := p.startInspection(ctx, s, n, host, access)
		return res, nil, err
	case actManage:
		res, err := p.changeState(ctx, s, n, nodes.ProvisionStateOpts{Target: nodes.TargetManage}, p.short())
		return res, nil, err
	case actAbort:
		if opts.Skip {
			res, err := p.abort(ctx, s, n, "inspection (inspection disabled)")
			return res, nil, err
		}
		// A forced reboot: the abort (inspect failed, by request) leads to a new inspection,
		// which the host may count as started (metal3 removes the reboot annotation here too).
		res, err := forcedReboot(p.startAbort(ctx, s, n, "inspection (forced reboot)"))
		res.Started = res.ForcedReboot
		return res, nil, err
	case actInspect:
		res, err := p.startInspection(ctx, s, n, host, access)
		return res, nil, err
	case actUnexpected:
		return provisioner.Result{}, nil, fmt.Errorf("inspecting host %s/%s: Ironic node %s is %q, inspection needs it manageable",
			host.Namespace, host.Name, n.UUID, n.ProvisionState)
	}
	res, _ := p.result(d, n, host)
	res.Started = res.Busy && (state(n) == nodes.Inspecting || state(n) == nodes.InspectWait)
	return res, nil, nil
}

// startInspection sets the inspect interface, boot mode and agent image, then asks Ironic to
// inspect.
func (p *Provisioner) startInspection(ctx context.Context, s *session, n *nodes.Node, host provisioner.Host, access *bmc.Access) (provisioner.Result, error) {
	iface := inspectInterface(host, access)
	var pt patch
	pt.setField("inspect_interface", iface, n.InspectInterface)
	pt.setKeys("properties", n.Properties, map[string]any{"capabilities": capabilities(n.Properties["capabilities"], host.BootMode)})
	if iface == "agent" {
		if err := p.setDeployImage(&pt, n, host, access); err != nil {
			return provisioner.Result{}, err
		}
	}
	n, res, err, ok := p.update(ctx, s, n, pt)
	if !ok {
		return res, err
	}
	p.logger(ctx).Info("Starting hardware inspection", "node", n.UUID, "interface", iface)
	res, accepted, err := p.startState(ctx, s, n, nodes.ProvisionStateOpts{Target: nodes.TargetInspect}, p.long())
	res.Started = accepted && err == nil
	return res, err
}

// hardwareDetails reads the node's inventory; nil when Ironic has none.
func (p *Provisioner) hardwareDetails(ctx context.Context, s *session, n *nodes.Node, host provisioner.Host) (*metal3.HardwareDetails, error) {
	data, err := nodes.GetInventory(ctx, s.sc, n.UUID).Extract()
	if notFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, classifyError(err, "reading the inventory of Ironic node "+n.UUID)
	}
	return hardwareFromInventory(data, host.BootMACAddress), nil
}
