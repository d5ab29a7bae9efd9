package ironic

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

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

// The marks of a node whose registration change waits for a state Ironic takes it in, kept in
// place of its applied credentials' fingerprint (so that the next registration writes them
// whatever the caller says); getNode applies the change once the node's state takes what is
// marked (applyDeferredRegistration). They only save the host's next Register call: Register
// reports a deferral of the BMC access or the driver (Result.RegistrationDeferred), so that the
// host does not record the registration as sent and a new operator process, which has no marks,
// sends it again (interfaces waiting alone: see applyOrDefer).
const (
	// deferredRegistration: the BMC access, disable_power_off or network data wait (with the
	// interfaces of the same driver, if any): taken where Ironic updates the node at all.
	deferredRegistration = "deferred-registration"
	// deferredDriver: a new driver waits with its keys (reset_interfaces): taken only where
	// Ironic changes interfaces.
	deferredDriver = "deferred-driver"
	// deferredInterfaces: the interfaces of the same driver wait alone.
	deferredInterfaces = "deferred-interfaces"
	// refusedRegistration: Ironic refused the deferred change for good (a 4xx other than 409)
	// when getNode sent it: nothing is retried behind the host's back; the next Register sends
	// the change again and reports Ironic's refusal.
	refusedRegistration = "refused-registration"
)

// deferralTakenIn says whether n's state takes what mark keeps waiting (at least the part that
// applyOrDefer would then write: the BMC access goes ahead of the interfaces of the same driver).
func deferralTakenIn(mark string, n *nodes.Node) bool {
	switch mark {
	case deferredRegistration:
		return updateAllowed(n) && state(n) != nodes.Verifying
	case deferredDriver, deferredInterfaces:
		return interfacesChangeable(n)
	}
	return false
}

// refusedForGood: Ironic refused a request for what it is, not for the node's state or lock (a
// 4xx other than 409; 404 and 401 are about the node or the session, not the change).
func refusedForGood(err error) bool {
	st := statusOf(err)
	return st >= 400 && st < 500 && st != http.StatusConflict && st != http.StatusNotFound && st != http.StatusUnauthorized
}

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
	} else {
		// Removed from the host (or put into the image the builder makes): Ironic would go on
		// writing the old addresses into every agent ISO it builds.
		c.pt.setField("network_data", nil, n.NetworkData)
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
// remembers the credentials written; ok is false when the caller must return res, err. A change
// Ironic refuses for what it is (a 4xx other than 409: an interface it does not enable, say) is a
// failure naming Ironic's reason.
func (p *Provisioner) applyRegistration(ctx context.Context, s *session, n *nodes.Node, c registrationChange) (
	updated *nodes.Node, res provisioner.Result, err error, ok bool) {
	if c.credentials != "" {
		p.logger(ctx).Info("Updating the BMC access of the Ironic node", "node", n.UUID)
	}
	all := append(slices.Clone(c.pt), c.ifaces...)
	if c.reset {
		updated, err = p.patchNodeResettingInterfaces(ctx, s, n, all)
		if err == nil {
			updated, err = p.restoreDroppedInterfaces(ctx, s, updated, c.ifaces)
		}
		if busy(err) {
			return nil, p.short(), nil, false
		}
	} else if updated, res, err, ok = p.update(ctx, s, n, all); !ok && err == nil {
		return nil, res, nil, false
	}
	if refusedForGood(err) {
		return nil, provisioner.Failed(registrationRefusal(n, all, err)), nil, false
	}
	if err != nil {
		return nil, provisioner.Result{}, err, false
	}
	if c.credentials != "" {
		p.memory.setAppliedCreds(n.UUID, c.credentials)
	}
	return updated, provisioner.Result{}, nil, true
}

// registrationRefusal says what Ironic refused of a registration change and why (paths only:
// values may be secrets; Ironic's reason is sanitized).
func registrationRefusal(n *nodes.Node, pt patch, err error) string {
	return fmt.Sprintf("Ironic refused the registration change of node %s (%s): %s", n.UUID, strings.Join(pt.paths(), ", "), faultOf(err))
}

// restoreDroppedInterfaces sets again the interfaces a reset_interfaces PATCH was to set and did
// not: Ironic's API applies only the fields whose value differs from the node's
// (api/controllers/v1/utils.py patch_update_changed_fields), and the conductor then resets every
// interface outside that change set to the new driver's default (conductor/manager.py
// update_node). An interface whose wanted value is the current one (a deploy_interface ramdisk,
// a raid_interface agent, inspect_interface agent on both drivers) came back as the default.
func (p *Provisioner) restoreDroppedInterfaces(ctx context.Context, s *session, n *nodes.Node, ifaces patch) (*nodes.Node, error) {
	have := interfacesOf(n)
	var pt patch
	for _, op := range ifaces {
		field := strings.TrimPrefix(op.Path, "/")
		if h, isInterface := have[field]; isInterface && op.Op == nodes.ReplaceOp {
			pt.setField(field, op.Value, h)
		}
	}
	if len(pt) == 0 {
		return n, nil
	}
	p.logger(ctx).Info("Ironic reset interfaces the driver change kept; setting them again", "node", n.UUID, "paths", pt.paths())
	return p.patchNode(ctx, s, n, pt)
}

// interfacesOf are n's interfaces the registration sets, by field.
func interfacesOf(n *nodes.Node) map[string]string {
	return map[string]string{
		"boot_interface": n.BootInterface, "bios_interface": n.BIOSInterface, "management_interface": n.ManagementInterface,
		"power_interface": n.PowerInterface, "raid_interface": n.RAIDInterface, "vendor_interface": n.VendorInterface,
		"firmware_interface": n.FirmwareInterface, "inspect_interface": n.InspectInterface, "deploy_interface": n.DeployInterface,
	}
}

// applyOrDefer writes what Ironic takes of the change in n's state and leaves the rest for later:
// Ironic refuses a PATCH while the node waits for its agent (clean, deploy or service wait: 409
// until the callback or its timeout), and interface changes outside enroll, manageable and
// available. Answering busy instead would hold the whole host (its state handler, with the
// lost-agent and image-change aborts) until then. What is left is marked on the node, in place of
// its applied credentials (so that they are written again with it, whatever the caller says),
// and applied by the first call that finds the node in a state that takes it (getNode); the
// caller reports it (deferred, Result.RegistrationDeferred) unless only interfaces of the same
// driver wait, so that it is sent again after an operator restart. The interfaces of the same driver may wait alone (credentials
// must not wait for the node's next deprovisioning); a new driver waits with its keys (another
// driver's keys would fail its power sync), and so does everything during a verification (it
// ends in seconds).
func (p *Provisioner) applyOrDefer(ctx context.Context, s *session, n *nodes.Node, c registrationChange) (
	updated *nodes.Node, applied registrationChange, deferred bool, res provisioner.Result, err error, ok bool) {
	deferred = !c.allowed(n)
	if deferred && updateAllowed(n) && !c.reset && state(n) != nodes.Verifying {
		applied = registrationChange{pt: c.pt, credentials: c.credentials}
	} else if !deferred {
		applied = c
	}
	if updated, res, err, ok = p.applyRegistration(ctx, s, n, applied); !ok {
		return nil, applied, deferred, res, err, false
	}
	if deferred {
		mark := deferredRegistration
		switch {
		case c.reset:
			mark = deferredDriver
		case len(applied.pt) > 0 || len(c.pt) == 0:
			mark = deferredInterfaces
		}
		p.logger(ctx).Info("Ironic does not take the registration change in this state; applying it later", "node", n.UUID,
			"provisionState", n.ProvisionState, "applied", applied.pt.paths(), "later", append(c.pt.paths(), c.ifaces.paths()...))
		p.memory.setAppliedCreds(n.UUID, mark)
		// Interfaces of the same driver waiting alone are not reported: the BMC access is in
		// Ironic, and an active node takes them only once it is deprovisioned, maybe months
		// later; reported, the host would register at every reconcile until then (a GET and a
		// driver_info PATCH each time, for every host an older release or metal3 enrolled with
		// other interfaces). The mark applies them when the node is available again; after an
		// operator restart, the next registration finds the boot or RAID interface still
		// differing and marks them again (the others only show in a full read).
		deferred = mark != deferredInterfaces
	}
	return updated, applied, deferred, provisioner.Result{}, nil, true
}

// applyDeferredRegistration applies the change applyOrDefer left, once n's state takes it
// (deferralTakenIn: never in a state where it would only be deferred again); it returns the node
// as it is then. A failure that may pass (busy, Ironic unavailable) is logged and left to the
// next call; a refusal for good drops the change (refusedRegistration), so that it is not sent
// again on every poll, and the host's next Register, which sends it again, reports it.
func (p *Provisioner) applyDeferredRegistration(ctx context.Context, s *session, n *nodes.Node, host provisioner.Host) *nodes.Node {
	mark, _ := p.memory.appliedCreds(n.UUID)
	if host.BMCCredentials.Password == "" || !deferralTakenIn(mark, n) { // no Secret to write: a host deleted without one
		return n
	}
	log := p.logger(ctx)
	access, err := parseAccess(host)
	if err != nil {
		return n // Register reports it
	}
	networkData, err := preprovisioningNetworkData(p.cfg, host)
	if err != nil {
		return n // Register reports it
	}
	change, err := p.registrationChange(ctx, s, n, host, access, networkData, false)
	var res provisioner.Result
	var updated *nodes.Node
	var applied registrationChange
	ok := false
	if err == nil {
		updated, applied, _, res, err, ok = p.applyOrDefer(ctx, s, n, change)
	}
	switch {
	case ok:
		if len(applied.pt)+len(applied.ifaces) > 0 {
			log.Info("Applied the deferred registration change", "node", n.UUID, "paths", append(applied.pt.paths(), applied.ifaces.paths()...))
		}
		return updated
	case res.Failed():
		log.Info("Ironic refused the deferred registration change; the host's next registration reports it", "node", n.UUID,
			"reason", sanitizeSecrets(res.ErrorMessage, host.BMCCredentials.Password))
		p.memory.setAppliedCreds(n.UUID, refusedRegistration)
	case err != nil:
		log.Info("Could not apply the deferred registration change; trying again later", "node", n.UUID,
			"error", scrub(err, host.BMCCredentials.Password).Error())
	default:
		log.V(1).Info("Ironic node busy; applying the deferred registration change later", "node", n.UUID)
	}
	return n
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
