package ironic

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/metalforge/metalforge/internal/bmc"
	"github.com/metalforge/metalforge/internal/provisioner"
)

// registrationChange is what Register brings in line on an enrolled node, built from what differs.
type registrationChange struct {
	// pt sets the name, driver_info, disable_power_off and network_data; ifaces the driver and
	// interfaces, which Ironic takes in fewer states.
	pt, ifaces patch
	// reset: the driver changes, so every interface ifaces does not set goes back to the new
	// driver's default (an interface of the old driver may not exist in the new one).
	reset bool
	// credentials is the fingerprint of the driver_info pt writes, "" when it leaves it alone.
	credentials string
}

// allowed says whether Ironic takes the whole change on node n now (see updateAllowed).
func (c registrationChange) allowed(n *nodes.Node) bool {
	return len(c.pt)+len(c.ifaces) == 0 || (updateAllowed(n) && (len(c.ifaces) == 0 || interfacesChangeable(n)))
}

// deferredRegistration marks a node (in place of its applied credentials' fingerprint, so that the
// next registration writes them whatever the caller says) whose registration change waits for a
// state Ironic takes it in: getNode applies it then (applyDeferredRegistration).
const deferredRegistration = "deferred-registration"

// registrationChange compares the node with the host: name, BMC access (credentials are new when
// the caller says so, or when they differ from the ones this provisioner wrote: the caller says
// so only once, and that call may have found the node busy), disable_power_off, network data, and
// the driver and interfaces of the BMC type.
func (p *Provisioner) registrationChange(ctx context.Context, s *session, n *nodes.Node, host provisioner.Host, access *bmc.Access,
	networkData map[string]any, credentialsChanged bool) (registrationChange, error) {
	var c registrationChange
	if n.Name != nodeName(host) {
		c.pt.setField("name", nodeName(host), n.Name)
	}
	driverInfo := access.DriverInfo(host.BMCCredentials.Username, host.BMCCredentials.Password, host.DisableCertificateVerification)
	fingerprint := credentialsFingerprint(driverInfo)
	applied, known := p.memory.appliedCreds(n.UUID)
	sameAccess := sameBMC(n.DriverInfo, driverInfo)
	if !sameAccess || ((credentialsChanged || known) && applied != fingerprint) {
		info := maps.Clone(driverInfo)
		for k := range n.DriverInfo { // keep deploy image and other settings; replace BMC keys
			if _, bmcKey := info[k]; !bmcKey && !isBMCKey(k) {
				info[k] = n.DriverInfo[k]
			}
		}
		c.pt.setField("driver_info", info, nil)
		c.credentials = fingerprint
	}
	if s.features.DisablePowerOff && n.DisablePowerOff != host.DisablePowerOff {
		c.pt.setField("disable_power_off", host.DisablePowerOff, n.DisablePowerOff)
	}
	if networkData != nil {
		c.pt.setField("network_data", networkData, n.NetworkData)
	}
	var err error
	c.ifaces, c.reset, err = p.interfaceChange(ctx, s, n, host, access, !sameAccess)
	return c, err
}

// registrationInterfaces are the interface fields a BMC type decides, in the order patches set them.
// inspect_interface only with a new driver (the reset would drop it): it follows the inspection
// mode too, and each inspection sets it (startInspection).
var registrationInterfaces = []string{"boot_interface", "bios_interface", "management_interface", "power_interface",
	"raid_interface", "vendor_interface", "firmware_interface", "inspect_interface"}

// interfaceChange is the patch that gives the node the driver and interfaces of the host's BMC
// type where they differ. The address may change while the host registers (a typo fixed), and
// the new type may need another driver (an IPMI address fixed to a Redfish one: verification
// would fail for ever with redfish keys on an ipmi node) or another boot interface (redfish:// to
// redfish-virtualmedia://: iPXE would stay while an ISO agent image is written). A read from the
// node list has no driver and only some interfaces: the node is read in full (one GET) only when
// the BMC access changed or those it has differ. reset: the driver changes.
func (p *Provisioner) interfaceChange(ctx context.Context, s *session, n *nodes.Node, host provisioner.Host, access *bmc.Access,
	accessChanged bool) (pt patch, reset bool, err error) {
	full := n
	if n.Driver == "" {
		listedSame := n.BootInterface == access.Interfaces.Boot &&
			(n.RAIDInterface == access.Interfaces.RAID || n.RAIDInterface == raidSoftware)
		if !accessChanged && listedSame {
			return nil, false, nil
		}
		if full, err = p.fetchNode(ctx, s, n.UUID); err != nil {
			return nil, false, err
		}
	}
	reset = full.Driver != access.Driver
	if reset {
		pt.setField("driver", access.Driver, full.Driver)
	}
	have := map[string]string{
		"boot_interface": full.BootInterface, "bios_interface": full.BIOSInterface, "management_interface": full.ManagementInterface,
		"power_interface": full.PowerInterface, "raid_interface": full.RAIDInterface, "vendor_interface": full.VendorInterface,
		"firmware_interface": full.FirmwareInterface, "inspect_interface": full.InspectInterface,
	}
	want := map[string]string{
		"boot_interface": access.Interfaces.Boot, "bios_interface": access.Interfaces.BIOS, "management_interface": access.Interfaces.Management,
		"power_interface": access.Interfaces.Power, "raid_interface": access.Interfaces.RAID, "vendor_interface": access.Interfaces.Vendor,
		"firmware_interface": access.Interfaces.Firmware, "inspect_interface": inspectInterface(host, access),
	}
	// Software RAID is the provisioner's own choice (a preparation's) and works with every driver;
	// so do the deploy interfaces it chooses, which a reset would drop.
	if full.RAIDInterface == raidSoftware {
		want["raid_interface"] = raidSoftware
	}
	if reset && (full.DeployInterface == deployRamdisk || full.DeployInterface == deployCustomAgent) {
		pt.setField("deploy_interface", full.DeployInterface, nil)
	}
	for _, field := range registrationInterfaces {
		switch w := want[field]; {
		case w == "": // Ironic's default: the reset gives the new driver's
		case reset: // sent even when equal: the reset would drop it
			pt.setField(field, w, nil)
		case field == "inspect_interface":
		default:
			pt.setField(field, w, have[field])
		}
	}
	if len(pt) > 0 {
		p.logger(ctx).Info("The BMC type needs other Ironic interfaces", "node", n.UUID, "driver", access.Driver, "paths", pt.paths())
	}
	return pt, reset, nil
}

// applyRegistration writes the change (with reset_interfaces when the driver changes) and
// remembers the credentials written; ok is false when the caller must return res, err.
func (p *Provisioner) applyRegistration(ctx context.Context, s *session, n *nodes.Node, c registrationChange) (
	updated *nodes.Node, res provisioner.Result, err error, ok bool) {
	if c.credentials != "" {
		p.logger(ctx).Info("Updating the BMC access of the Ironic node", "node", n.UUID)
	}
	if c.reset {
		updated, err = p.patchNodeResettingInterfaces(ctx, s, n, append(slices.Clone(c.pt), c.ifaces...))
		if busy(err) {
			return nil, p.short(), nil, false
		}
		if err != nil {
			return nil, provisioner.Result{}, err, false
		}
	} else if updated, res, err, ok = p.update(ctx, s, n, append(slices.Clone(c.pt), c.ifaces...)); !ok {
		return nil, res, err, false
	}
	if c.credentials != "" {
		p.memory.setAppliedCreds(n.UUID, c.credentials)
	}
	return updated, provisioner.Result{}, nil, true
}

// applyOrDefer writes what Ironic takes of the change in n's state and leaves the rest for later:
// Ironic refuses a PATCH while the node waits for its agent (clean, deploy or service wait: 409
// until the callback or its timeout), and interface changes outside enroll, manageable and
// available. Answering busy instead would hold the whole host (its state handler, with the
// lost-agent and image-change aborts) until then. What is left is marked on the node, in place of
// its applied credentials (so that they are written again with it, whatever the caller says),
// and applied by the first call that finds the node in a state that takes it (getNode). The
// interfaces of the same driver may wait alone (credentials must not wait for the node's next
// deprovisioning); a new driver waits with its keys (another driver's keys would fail its power
// sync), and so does everything during a verification (it ends in seconds).
func (p *Provisioner) applyOrDefer(ctx context.Context, s *session, n *nodes.Node, c registrationChange) (
	updated *nodes.Node, applied registrationChange, res provisioner.Result, err error, ok bool) {
	if !c.allowed(n) && updateAllowed(n) && !c.reset && state(n) != nodes.Verifying {
		applied = registrationChange{pt: c.pt, credentials: c.credentials}
	} else if c.allowed(n) {
		applied = c
	}
	if updated, res, err, ok = p.applyRegistration(ctx, s, n, applied); !ok {
		return nil, applied, res, err, false
	}
	if !c.allowed(n) {
		mark := deferredRegistration
		if len(applied.pt) > 0 || len(c.pt) == 0 {
			mark = deferredInterfaces
		}
		p.logger(ctx).Info("Ironic does not take the registration change in this state; applying it later", "node", n.UUID,
			"provisionState", n.ProvisionState, "applied", applied.pt.paths(), "later", append(c.pt.paths(), c.ifaces.paths()...))
		p.memory.setAppliedCreds(n.UUID, mark)
	}
	return updated, applied, provisioner.Result{}, nil, true
}

// deferredInterfaces marks a node whose deferred registration change is its interfaces alone.
const deferredInterfaces = "deferred-interfaces"

// applyDeferredRegistration applies the change applyOrDefer left, once n's state takes it; it
// returns the node as it is then. Failures (busy, say) are left to the next call.
func (p *Provisioner) applyDeferredRegistration(ctx context.Context, s *session, n *nodes.Node, host provisioner.Host) *nodes.Node {
	mark, _ := p.memory.appliedCreds(n.UUID)
	switch {
	case host.BMCCredentials.Password == "": // no Secret to write (a host deleted without one)
		return n
	case mark == deferredRegistration && updateAllowed(n), mark == deferredInterfaces && interfacesChangeable(n):
	default:
		return n
	}
	access, err := parseAccess(host)
	if err != nil {
		return n
	}
	networkData, err := preprovisioningNetworkData(p.cfg, host)
	if err != nil {
		return n
	}
	change, err := p.registrationChange(ctx, s, n, host, access, networkData, false)
	if err != nil {
		return n
	}
	updated, applied, _, err, ok := p.applyOrDefer(ctx, s, n, change)
	if !ok || err != nil {
		return n
	}
	p.logger(ctx).Info("Applied the deferred registration change", "node", n.UUID, "paths", append(applied.pt.paths(), applied.ifaces.paths()...))
	return updated
}

// patchNodeResettingInterfaces is patchNode with ?reset_interfaces=true (API 1.45), which
// gophercloud's Update cannot send: a driver change resets every interface the patch does not set.
func (p *Provisioner) patchNodeResettingInterfaces(ctx context.Context, s *session, n *nodes.Node, pt patch) (*nodes.Node, error) {
	body := make([]map[string]any, len(pt))
	for i, op := range pt {
		m, err := op.ToNodeUpdateMap()
		if err != nil {
			return nil, fmt.Errorf("building the update of Ironic node %s: %w", n.UUID, err)
		}
		body[i] = m
	}
	p.logger(ctx).V(1).Info("Updating Ironic node, resetting interfaces", "node", n.UUID, "paths", pt.paths())
	var r nodes.UpdateResult
	ended := p.watch.Writing(n.UUID)
	resp, err := s.sc.Patch(ctx, s.sc.ServiceURL("nodes", n.UUID)+"?reset_interfaces=true", body, &r.Body,
		&gophercloud.RequestOpts{OkCodes: []int{http.StatusOK}})
	ended()
	_, r.Header, r.Err = gophercloud.ParseResponse(resp, err)
	updated, err := r.Extract()
	if err != nil {
		return nil, classifyError(err, "updating Ironic node "+n.UUID)
	}
	p.watch.Saw(updated)
	return updated, nil
}
