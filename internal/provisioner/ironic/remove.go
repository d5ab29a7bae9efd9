package ironic

import (
	"context"
	"errors"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/metalforge/metalforge/internal/provisioner"
)

// Detach removes the node from Ironic without touching the host: no power change, no cleaning, the
// disk as it is. A node in a state Ironic will not delete (active, failed...) is put in maintenance
// first, which makes Ironic skip its checks and leave the hardware alone.
func (p *Provisioner) Detach(ctx context.Context, host provisioner.Host) (provisioner.Result, error) {
	return p.remove(withOp(ctx, "detach"), host)
}

// Delete removes the node from Ironic for good. The host controller deprovisions and powers off
// before it deletes, so this is the same as Detach.
func (p *Provisioner) Delete(ctx context.Context, host provisioner.Host) (provisioner.Result, error) {
	return p.remove(withOp(ctx, "delete"), host)
}

// StopForDeletion ends what Ironic does with the node of a deleted host before it is powered off
// (decideBeforeDeletion): an operation waiting for the agent is aborted, a running one waited for.
func (p *Provisioner) StopForDeletion(ctx context.Context, host provisioner.Host) (provisioner.Result, error) {
	ctx = withOp(ctx, "delete")
	s, n, err := p.getNode(ctx, host)
	if err != nil {
		return provisioner.Result{}, err
	}
	d := decideBeforeDeletion(n, s.features)
	if d.act == actAbort && p.memory.abortAskedIn(n.UUID, n.ProvisionUpdatedAt) {
		d = do(actWaitShort) // asked already: a step that cannot be aborted ends first
	}
	if d.act == actAbort {
		return p.abort(ctx, s, n, "the operation of a deleted host ("+n.ProvisionState+")")
	}
	res, _ := p.result(d, n, host)
	return res, nil
}

// deletableStates are where Ironic deletes a node without maintenance: its DELETE_ALLOWED_STATES,
// and available ([conductor] allow_deleting_available_nodes, on by default). Anywhere else it
// answers 409 ("Can not delete node … while it is in provision state …"), which reads as a locked
// node: a node in inspect failed, or in clean failed without the maintenance a failed clean step
// sets, waited for ever.
var deletableStates = map[nodes.ProvisionState]bool{
	nodes.Enroll: true, nodes.Manageable: true, nodes.Available: true, nodes.AdoptFail: true,
}

func (p *Provisioner) remove(ctx context.Context, host provisioner.Host) (provisioner.Result, error) {
	s, n, err := p.getNode(ctx, host)
	if errors.Is(err, provisioner.ErrNeedsRegistration) {
		// No ID or a stale one: the node may still exist under the host's name.
		n, err = p.findNode(ctx, s, provisioner.Host{Namespace: host.Namespace, Name: host.Name})
		if err != nil {
			return provisioner.Result{}, err
		}
		if n == nil {
			return provisioner.Done(), nil
		}
	} else if err != nil {
		return provisioner.Result{}, err
	}
	res, err := p.deleteNode(ctx, s, n, "removed by Metalforge")
	if err == nil && !res.Busy {
		p.logger(ctx).Info("Removed the Ironic node", "node", n.UUID, "host", host.Namespace+"/"+host.Name)
	}
	return res, err
}

// deleteNode deletes n from Ironic, putting it in maintenance (with reason) first when its state
// needs it; a node already gone counts as deleted. Busy when Ironic holds the node.
func (p *Provisioner) deleteNode(ctx context.Context, s *session, n *nodes.Node, reason string) (provisioner.Result, error) {
	if !deletableStates[nodes.ProvisionState(n.ProvisionState)] && !n.Maintenance {
		if res, err := p.setMaintenance(ctx, s, n, true, reason); err != nil || res.Busy {
			return res, err
		}
	}
	ended := p.watch.Writing(n.UUID)
	err := nodes.Delete(ctx, s.sc, n.UUID).ExtractErr()
	ended()
	switch {
	case err == nil, notFound(err):
		// The node is gone, and a new registration enrolls a node with a new UUID: nothing about
		// this one is worth keeping.
		p.watch.Removed(n.UUID)
		p.memory.forget(n.UUID)
		return provisioner.Done(), nil
	case busy(err):
		return p.short(), nil
	}
	return provisioner.Result{}, classifyError(err, "deleting Ironic node "+n.UUID)
}
