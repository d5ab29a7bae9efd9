package ironic

import (
	"context"
	"fmt"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/metalforge/metalforge/internal/bmc"
	"github.com/metalforge/metalforge/internal/provisioner"
	"github.com/metalforge/metalforge/internal/statustext"
)

// Provision takes the node to active with the host's image: manageable → provide (automated
// cleaning) → available → deploy. A node already active is done.
func (p *Provisioner) Provision(ctx context.Context, host provisioner.Host, data provisioner.ProvisionData, restartOnFailure bool) (provisioner.Result, error) {
	ctx = withOp(ctx, "provision")
	s, n, err := p.getNode(ctx, host)
	if err != nil {
		return provisioner.Result{}, err
	}
	if res, handled, err := p.abortLostAgent(ctx, s, n, "provisioning"); handled {
		return res, err
	}
	access, err := parseAccess(host)
	if err != nil {
		return provisioner.Failed(err.Error()), nil
	}
	plan, err := planDeploy(p.cfg, data)
	if err != nil {
		return provisioner.Failed(err.Error()), nil
	}

	d := decideProvisioning(n, plan.matches(n), plan.interfaceChanges(n), restartOnFailure, data.ForceReboot, s.features)
	switch d.act {
	case actProvide:
		return p.provide(ctx, s, n, host, access)
	case actManage:
		return p.changeState(ctx, s, n, nodes.ProvisionStateOpts{Target: nodes.TargetManage}, p.short())
	case actDeploy:
		return p.deploy(ctx, s, n, host, access, data, plan)
	case actUndeploy:
		if state(n) == nodes.DeployWait {
			// A forced reboot before API 1.110: Ironic takes no patch while it waits for the
			// agent, and the cleaning settings are those written when the node was provided.
			p.logger(ctx).Info("Forced reboot: undeploying a deployment that waits for its agent", "node", n.UUID)
			return forcedReboot(p.startState(ctx, s, n, nodes.ProvisionStateOpts{Target: nodes.TargetDeleted}, p.long()))
		}
		// The request needs another deploy interface, which Ironic does not change in deploy
		// failed: undeploy (cleaning as the host's mode says), then deploy from available.
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
		// The image changed while the agent waits for it, or the user forced a reboot: stop this
		// deployment (deploy failed, by request); the next call deploys (again).
		if !data.ForceReboot {
			return p.abort(ctx, s, n, "deployment")
		}
		return forcedReboot(p.startAbort(ctx, s, n, "deployment (forced reboot)"))
	case actPowerOff:
		return p.powerOffAbortedDeploy(ctx, s, n)
	case actUnexpected:
		return provisioner.Result{}, fmt.Errorf("provisioning host %s/%s: Ironic node %s is %q",
			host.Namespace, host.Name, n.UUID, n.ProvisionState)
	}
	res, _ := p.result(d, n, host)
	return res, nil
}

// provide moves a manageable node to available, running automated cleaning when the host's
// cleaning mode asks for it.
func (p *Provisioner) provide(ctx context.Context, s *session, n *nodes.Node, host provisioner.Host, access *bmc.Access) (provisioner.Result, error) {
	if wait := cleaningSettleWait(n, p.now()); wait > 0 {
		return provisioner.Working(wait), nil
	}
	if res, handled, err := p.beforeCleaning(ctx, s, n, host, access); handled {
		return res, err
	}
	pt, clean, err := p.cleaningPatch(n, host, access)
	if err != nil {
		return provisioner.Result{}, err
	}
	// The fingerprint of the last manual cleaning (or of a stale record's check) has done its
	// job: it tells a finished preparation while the node stays manageable. Once provided, the
	// node may be deployed, serviced or changed behind our back and deprovisioned: a preparation
	// with the same steps after that must run, not be taken for finished (and its firmware
	// updates recorded as applied). Nor may a failure of the automated cleaning pass for a check's.
	pt.setKeys("extra", n.Extra, map[string]any{extraPrepared: nil, extraPreparedFrom: nil})
	n, res, err, ok := p.update(ctx, s, n, pt)
	if !ok {
		return res, err
	}
	then := p.short()
	if clean {
		then = p.long()
	}
	return p.changeState(ctx, s, n, nodes.ProvisionStateOpts{Target: nodes.TargetProvide}, then)
}

// deploy writes the plan (instance_info, deploy interface, root device hints, boot mode, agent
// image) and asks Ironic to deploy with the config drive and custom deploy steps.
func (p *Provisioner) deploy(ctx context.Context, s *session, n *nodes.Node, host provisioner.Host, access *bmc.Access,
	data provisioner.ProvisionData, plan deployPlan) (provisioner.Result, error) {
	opts := nodes.ProvisionStateOpts{Target: nodes.TargetActive, DeploySteps: plan.steps}
	if !plan.liveISO && data.HostConfigError != "" {
		// The data was read when the host started provisioning; a Secret lost since (during the
		// cleaning of provide, minutes) would deploy without its user or network data, silently.
		return provisioner.Failed(data.HostConfigError), nil
	}
	if !plan.liveISO {
		// A live ISO gets no config drive: it would need a second virtual media device, which
		// some BMCs lack (metal3 does the same).
		cd, err := configDrive(host, data.HostConfig, n.UUID)
		if err != nil {
			return provisioner.Failed(err.Error()), nil
		}
		opts.ConfigDrive = cd
	}
	var pt patch
	plan.apply(&pt, n)
	pt.setKeys("extra", n.Extra, map[string]any{extraDeployed: plan.fingerprint()})
	pt.setKeys("properties", n.Properties, map[string]any{"capabilities": capabilities(n.Properties["capabilities"], data.BootMode),
		"root_device": rootDeviceProperty(data.RootDeviceHints)})
	if !plan.liveISO {
		if err := p.setDeployImage(&pt, n, host, access); err != nil {
			return provisioner.Result{}, err
		}
	}
	n, res, err, ok := p.update(ctx, s, n, pt)
	if !ok {
		return res, err
	}
	p.logger(ctx).Info("Deploying", "node", n.UUID, "image", redactedURL(n.InstanceInfo["image_source"]), "bootISO", redactedURL(n.InstanceInfo["boot_iso"]),
		"deployInterface", n.DeployInterface)
	return p.changeState(ctx, s, n, opts, p.long())
}

// redactedURL is an instance_info URL fit for a log line: image URLs are user input and may carry
// credentials.
func redactedURL(v any) any {
	if s, ok := v.(string); ok {
		return statustext.Redact(s)
	}
	return v
}

// powerOffAbortedDeploy powers off the server of a deployment this provisioner aborted (a changed
// image, a lost agent, a forced reboot): Ironic's abort leaves it on with its agent, and with fast
// track the next deployment would wait for that agent instead of booting a fresh one.
func (p *Provisioner) powerOffAbortedDeploy(ctx context.Context, s *session, n *nodes.Node) (provisioner.Result, error) {
	p.logger(ctx).Info("Powering off the server of an aborted deployment, so that the next one boots a fresh agent", "node", n.UUID)
	// Ironic's power sync erases last_error once it confirms the power state, and an abort leaves
	// nothing in the history (history.go): kept here, the next call still tells the abort (deploy
	// again) from a failure of the same image (report it).
	p.memory.setRecalledError(n.UUID, n.ProvisionUpdatedAt, n.LastError)
	if _, err := p.powerOffForAgent(ctx, s, n); err != nil {
		return provisioner.Result{}, err
	}
	return p.short(), nil
}

// forcedReboot marks the result of the request a forced reboot made (an abort, an undeploy) as
// one, when Ironic took the request: one it answered busy is asked again, and until then the host
// keeps its reboot annotation (and tells no one the operation restarts).
func forcedReboot(res provisioner.Result, accepted bool, err error) (provisioner.Result, error) {
	res.ForcedReboot = accepted // taken: no error, and the result is the wait after it
	return res, err
}
