package ironic

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/ports"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/bmc"
	"github.com/metalforge/metalforge/internal/provisioner"
)

// Register creates the host's node (driver, interfaces and driver_info from the BMC address, a
// port for the boot MAC) or finds it (by ID, then by name: a node found by name is re-linked), brings
// its settings in line (credentials, disable_power_off, automated_clean, network data) and moves it
// from enroll to manageable, which makes Ironic check the BMC. A node past enroll is registered;
// while part of the change waits for a state Ironic takes it in (applyOrDefer), the result says
// so (RegistrationDeferred) on every call.
func (p *Provisioner) Register(ctx context.Context, host provisioner.Host, opts provisioner.RegisterOptions) (provisioner.Result, string, error) {
	res, id, err := p.register(withOp(ctx, "register"), host, opts)
	// Registration is what sends the password: whatever Ironic answers, it never goes further.
	res.ErrorMessage = sanitizeSecrets(res.ErrorMessage, host.BMCCredentials.Password)
	return res, id, scrub(err, host.BMCCredentials.Password)
}

func (p *Provisioner) register(ctx context.Context, host provisioner.Host, opts provisioner.RegisterOptions) (provisioner.Result, string, error) {
	p.watch.Asked()
	log := p.logger(ctx)
	access, err := parseAccess(host)
	if err != nil {
		return provisioner.Failed(err.Error()), host.NodeID, nil
	}
	s, err := p.session(ctx)
	if err != nil {
		return provisioner.Result{}, host.NodeID, err
	}
	if msg := registrationProblem(host, access, s.features); msg != "" {
		return provisioner.Failed(msg), host.NodeID, nil
	}
	networkData, err := preprovisioningNetworkData(p.cfg, host)
	if err != nil {
		return provisioner.Failed(err.Error()), host.NodeID, nil
	}

	// A host without a node ID goes straight to enrollment: Ironic refuses a second node with the
	// same name, and enroll then looks the existing one up (a lookup first would cost every new
	// host a request that answers 404).
	var n *nodes.Node
	if host.NodeID != "" {
		if n, err = p.findNode(ctx, s, host); err != nil {
			return provisioner.Result{}, host.NodeID, err
		}
	}
	if n != nil {
		// A node stalled in verifying (or any working state) is deleted and enrolled anew.
		n, err = p.recoverStalled(ctx, s, n, host)
		switch {
		case errors.Is(err, provisioner.ErrNeedsRegistration):
			n, err = nil, nil
		case err != nil:
			return provisioner.Result{}, host.NodeID, err
		}
	}
	driverInfo := access.DriverInfo(host.BMCCredentials.Username, host.BMCCredentials.Password, host.DisableCertificateVerification)
	fingerprint := credentialsFingerprint(driverInfo)
	newCredentials, deferred := false, false

	if n == nil {
		res, created, err := p.enroll(ctx, s, host, access, driverInfo, networkData)
		if created == nil && err == nil && !res.Busy && !res.Failed() {
			// The name is taken: the host's node exists (its ID was not recorded, or Ironic
			// lost the database and someone enrolled it again).
			created, err = p.fetchNode(ctx, s, nodeName(host))
			if notFound(err) {
				return p.short(), host.NodeID, nil // deleted in between: try again
			}
			if err != nil {
				return provisioner.Result{}, host.NodeID, err
			}
			log.Info("Found the host's Ironic node by name; re-linking", "node", created.UUID, "previous", host.NodeID)
			relinked := host
			relinked.NodeID = created.UUID
			return p.register(ctx, relinked, opts)
		}
		if created == nil {
			return res, host.NodeID, err
		}
		n, newCredentials = created, true
		p.memory.setAppliedCreds(n.UUID, fingerprint)
		if res, err := p.ensurePort(ctx, s, n, host.BootMACAddress, true); err != nil || res.Failed() || res.Busy {
			return res, n.UUID, err
		}
	} else {
		change, err := p.registrationChange(ctx, s, n, host, access, networkData, opts.CredentialsChanged)
		if err != nil {
			return provisioner.Result{}, n.UUID, err
		}
		updated, applied, later, res, err, ok := p.applyOrDefer(ctx, s, n, change)
		if !ok {
			return res, n.UUID, err
		}
		n, newCredentials, deferred = updated, applied.credentials != "", later
		// Polling a verification needs no port check, nor does a node whose port this provisioner
		// created or found before; everything else (first call after a restart, re-link, a new
		// boot MAC) does.
		if n.ProvisionState != string(nodes.Verifying) {
			if res, err := p.ensurePort(ctx, s, n, host.BootMACAddress, false); err != nil || res.Failed() || res.Busy {
				return res, n.UUID, err
			}
		}
	}

	// RestartOnFailure comes with every call while the host shows its registration error, polls
	// included. Restart once per reported failure: when the manage this provisioner restarted
	// failed too, report that (the host counts it and backs off) instead of asking Ironic to check
	// the BMC again on every poll with the same rejected credentials.
	restart := opts.RestartOnFailure
	if restart && state(n) == nodes.Enroll && n.LastError != "" && !newCredentials {
		if p.memory.takeRestartedManage(n.UUID) {
			restart = false
		}
	}
	d := decideRegistration(n, newCredentials, restart)
	if res, ok := p.result(d, n, host); ok {
		if d.act == actDone {
			p.memory.setRestartedManage(n.UUID, false)
			// Not all of the change is in Ironic: the host must not record it as sent (a new
			// operator process would not know it is owed), so it calls again.
			res.RegistrationDeferred = deferred
		}
		return res, n.UUID, nil
	}
	if d.act == actManage {
		if restart && n.LastError != "" && !newCredentials {
			p.memory.setRestartedManage(n.UUID, true)
		}
		res, err := p.changeState(ctx, s, n, nodes.ProvisionStateOpts{Target: nodes.TargetManage}, p.short())
		return res, n.UUID, err
	}
	return provisioner.Result{}, n.UUID, fmt.Errorf("registering host %s/%s: unexpected action %s", host.Namespace, host.Name, d.act)
}

// registrationProblem checks what Ironic cannot do for this host; "" when nothing.
func registrationProblem(host provisioner.Host, access *bmc.Access, f Features) string {
	switch {
	case access.NeedsMAC && host.BootMACAddress == "":
		return fmt.Sprintf("BMC type %s needs spec.bootMACAddress", access.Type)
	case host.BootMode == metal3.UEFISecureBoot && !access.SupportsSecureBoot:
		return fmt.Sprintf("BMC type %s cannot turn on secure boot (spec.bootMode UEFISecureBoot)", access.Type)
	case host.DisablePowerOff && !f.DisablePowerOff:
		// Powering such a host off by accident could need a trip to the data center.
		return fmt.Sprintf("Ironic API %s cannot keep a host from being powered off (spec.disablePowerOff needs 1.%d); not managing the host",
			f.MaxVersion, minorDisablePowerOff)
	}
	return ""
}

// findNode looks the node up by ID, then by name. nil when Ironic has neither (never registered,
// or Ironic lost its database). A cached read of the node by ID answers as it does for getNode.
func (p *Provisioner) findNode(ctx context.Context, s *session, host provisioner.Host) (*nodes.Node, error) {
	if host.NodeID != "" {
		if n, ok := p.watch.Get(host.NodeID); ok {
			return n, nil
		}
		n, err := p.fetchNode(ctx, s, host.NodeID)
		if err == nil {
			return n, nil
		}
		if !notFound(err) {
			return nil, err
		}
	}
	n, err := p.fetchNode(ctx, s, nodeName(host))
	switch {
	case err == nil:
		if host.NodeID != "" && n.UUID != host.NodeID {
			p.logger(ctx).Info("Found the host's Ironic node by name; re-linking", "node", n.UUID, "previous", host.NodeID)
		}
		return n, nil
	case notFound(err):
		return nil, nil
	}
	return nil, err
}

// enroll creates the node. created is nil when the caller must return res, err.
func (p *Provisioner) enroll(ctx context.Context, s *session, host provisioner.Host, access *bmc.Access, driverInfo map[string]any, networkData map[string]any) (provisioner.Result, *nodes.Node, error) {
	info := maps.Clone(driverInfo)
	if img, ok := deployImage(p.cfg, access, host.PreprovisioningImage); ok {
		for k, v := range img {
			if v != nil {
				info[k] = v
			}
		}
	}
	clean := automatedClean(host.AutomatedCleaningMode)
	props := map[string]any{"capabilities": capabilities(nil, host.BootMode)}
	if host.Architecture != "" {
		props["cpu_arch"] = host.Architecture
	}
	opts := nodes.CreateOpts{
		Name:                nodeName(host),
		Driver:              access.Driver,
		DriverInfo:          info,
		BootInterface:       access.Interfaces.Boot,
		BIOSInterface:       access.Interfaces.BIOS,
		ManagementInterface: access.Interfaces.Management,
		PowerInterface:      access.Interfaces.Power,
		RAIDInterface:       access.Interfaces.RAID,
		VendorInterface:     access.Interfaces.Vendor,
		FirmwareInterface:   access.Interfaces.Firmware,
		InspectInterface:    inspectInterface(host, access),
		AutomatedClean:      &clean,
		Properties:          props,
		NetworkData:         networkData,
	}
	if s.features.DisablePowerOff {
		opts.DisablePowerOff = &host.DisablePowerOff
	}
	p.logger(ctx).Info("Enrolling the host in Ironic", "nodeName", opts.Name, "driver", opts.Driver,
		"driverInfo", bmc.RedactDriverInfo(info))
	n, err := nodes.Create(ctx, s.sc, opts).Extract()
	switch {
	case err == nil:
		p.watch.Saw(n)
		return provisioner.Result{}, n, nil
	case isStatus(err, http.StatusConflict):
		// The name is taken: the caller looks the node up by name.
		return provisioner.Result{}, nil, nil
	case isStatus(err, http.StatusBadRequest):
		// E.g. the BMC type needs an interface this Ironic does not enable: the user's to fix.
		return provisioner.Failed("Ironic refused to enroll the host: " + faultOf(err)), nil, nil
	}
	return provisioner.Result{}, nil, classifyError(err, "enrolling host "+opts.Name+" in Ironic")
}

// ensurePort makes sure the boot MAC has a port on this node. A MAC already on another node is a
// host error (two hosts claim one NIC).
func (p *Provisioner) ensurePort(ctx context.Context, s *session, n *nodes.Node, mac string, fresh bool) (provisioner.Result, error) {
	if mac == "" {
		return provisioner.Result{}, nil
	}
	mac = strings.ToLower(mac)
	if p.memory.bootPort(n.UUID) == mac {
		return provisioner.Result{}, nil
	}
	if !fresh {
		owner, err := p.portOwner(ctx, s, mac)
		if err != nil {
			return provisioner.Result{}, err
		}
		switch owner {
		case n.UUID:
			p.memory.setBootPort(n.UUID, mac)
			return provisioner.Result{}, nil
		case "":
		default:
			return provisioner.Failed(fmt.Sprintf("boot MAC address %s belongs to another Ironic node (%s)", mac, owner)), nil
		}
	}
	pxe := true
	_, err := ports.Create(ctx, s.sc, ports.CreateOpts{NodeUUID: n.UUID, Address: mac, PXEEnabled: &pxe}).Extract()
	switch {
	case err == nil:
		p.memory.setBootPort(n.UUID, mac)
		return provisioner.Result{}, nil
	case busy(err):
		owner, lookErr := p.portOwner(ctx, s, mac)
		if lookErr == nil && owner != "" && owner != n.UUID {
			return provisioner.Failed(fmt.Sprintf("boot MAC address %s belongs to another Ironic node (%s)", mac, owner)), nil
		}
		if lookErr == nil && owner == n.UUID {
			p.memory.setBootPort(n.UUID, mac)
			return provisioner.Result{}, nil
		}
		return p.short(), nil
	}
	return provisioner.Result{}, classifyError(err, fmt.Sprintf("creating the port %s of Ironic node %s", mac, n.UUID))
}

// portOwner returns the node that has a port with this MAC, "" when none.
func (p *Provisioner) portOwner(ctx context.Context, s *session, mac string) (string, error) {
	pages, err := ports.List(s.sc, ports.ListOpts{Address: mac, Fields: []string{"uuid", "node_uuid"}}).AllPages(ctx)
	if err != nil {
		return "", classifyError(err, "looking up the Ironic port of "+mac)
	}
	list, err := ports.ExtractPorts(pages)
	if err != nil {
		return "", fmt.Errorf("reading the Ironic ports of %s: %w", mac, err)
	}
	if len(list) == 0 {
		return "", nil
	}
	return list[0].NodeUUID, nil
}

// isBMCKey: driver_info keys that describe BMC access (replaced as a whole when it changes).
func isBMCKey(k string) bool {
	for _, prefix := range []string{"redfish_", "ipmi_", "idrac_"} {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

// sameBMC compares the non-secret BMC keys of a node's driver_info with the wanted ones (Ironic
// masks secrets, so passwords cannot be compared; a changed Secret is CredentialsChanged).
func sameBMC(have, want map[string]any) bool {
	for k, v := range want {
		if isSecretKey(k) {
			continue
		}
		if !sameJSON(v, have[k]) {
			return false
		}
	}
	for k := range have {
		if isBMCKey(k) && !isSecretKey(k) {
			if _, ok := want[k]; !ok {
				return false
			}
		}
	}
	return true
}

func isSecretKey(k string) bool {
	redacted := bmc.RedactDriverInfo(map[string]any{k: "x"})
	return redacted[k] != "x"
}

// credentialsFingerprint identifies what was written to driver_info without keeping the password
// (in memory only, never logged).
func credentialsFingerprint(driverInfo map[string]any) string {
	h := sha256.New()
	keys := make([]string, 0, len(driverInfo))
	for k := range driverInfo {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(h, "%s=%v\x00", k, driverInfo[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// preprovisioningNetworkData is the node's network_data when no image builder puts it into the
// agent image: Ironic then writes it into the ISO it builds.
func preprovisioningNetworkData(cfg Config, host provisioner.Host) (map[string]any, error) {
	if cfg.PreprovisioningImageBuilder || host.PreprovisioningNetworkData == "" {
		return nil, nil
	}
	data, err := provisioner.ParseConfigData(host.PreprovisioningNetworkData)
	if err != nil {
		return nil, fmt.Errorf("spec.preprovisioningNetworkDataName: %w", err)
	}
	return data, nil
}
