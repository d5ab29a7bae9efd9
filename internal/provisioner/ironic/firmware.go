package ironic

import (
	"context"
	"fmt"
	"slices"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/bmc"
	"github.com/metalforge/metalforge/internal/provisioner"
)

// FirmwareSettings reads the BIOS settings Ironic cached from the BMC (GET /v1/nodes/{id}/bios),
// with their schema when asked. One request: the node ID is enough; the node is read only when the
// list is empty (notVerifiedYet), from the watcher's copy when it has one.
func (p *Provisioner) FirmwareSettings(ctx context.Context, host provisioner.Host, includeSchema bool) (metal3.SettingsMap, map[string]metal3.SettingSchema, error) {
	ctx = withOp(ctx, "firmware")
	s, err := p.session(ctx)
	if err != nil {
		return nil, nil, err
	}
	if host.NodeID == "" {
		return nil, nil, fmt.Errorf("reading the BIOS settings of host %s/%s: %w", host.Namespace, host.Name, provisioner.ErrNeedsRegistration)
	}
	list, err := listBIOS(ctx, s, host.NodeID, includeSchema)
	if notFound(err) {
		return nil, nil, fmt.Errorf("reading the BIOS settings of host %s/%s: Ironic node %s is gone: %w",
			host.Namespace, host.Name, host.NodeID, provisioner.ErrNeedsRegistration)
	}
	if err != nil {
		return nil, nil, classifyError(err, "reading the BIOS settings of Ironic node "+host.NodeID)
	}
	if len(list) == 0 {
		if err := p.notVerifiedYet(ctx, s, host, "BIOS settings"); err != nil {
			return nil, nil, err
		}
	}
	settings := make(metal3.SettingsMap, len(list))
	var schema map[string]metal3.SettingSchema
	if includeSchema {
		schema = make(map[string]metal3.SettingSchema, len(list))
	}
	for _, st := range list {
		settings[st.Name] = st.Value
		if includeSchema {
			schema[st.Name] = metal3.SettingSchema{
				AttributeType:   st.AttributeType,
				AllowableValues: st.AllowableValues,
				LowerBound:      st.LowerBound,
				UpperBound:      st.UpperBound,
				MinLength:       st.MinLength,
				MaxLength:       st.MaxLength,
				ReadOnly:        st.ReadOnly,
				ResetRequired:   st.ResetRequired,
				Unique:          st.Unique,
			}
		}
	}
	return settings, schema, nil
}

// listBIOS reads the BIOS settings Ironic cached for a node, with their registry entries (type,
// allowed values, bounds, …) when detail is set.
func listBIOS(ctx context.Context, s *session, nodeID string, detail bool) ([]nodes.BIOSSetting, error) {
	var opts nodes.ListBIOSSettingsOptsBuilder
	if detail {
		opts = nodes.ListBIOSSettingsOpts{Detail: true}
	}
	return nodes.ListBIOSSettings(ctx, s.sc, nodeID, opts).Extract() // callers classify the error
}

// typedSteps is typeBIOSSteps with the node's BIOS registry, read from Ironic only when the steps
// hold a bios.apply_configuration: one request when an operation with BIOS settings starts.
func (p *Provisioner) typedSteps(ctx context.Context, s *session, n *nodes.Node, steps []nodes.CleanStep) ([]nodes.CleanStep, error) {
	if !slices.ContainsFunc(steps, isBIOSApply) {
		return steps, nil
	}
	list, err := listBIOS(ctx, s, n.UUID, true)
	if err != nil {
		return nil, classifyError(err, "reading the BIOS registry of Ironic node "+n.UUID)
	}
	types := make(map[string]string, len(list))
	for _, st := range list {
		types[st.Name] = st.AttributeType
	}
	return typeBIOSSteps(steps, types), nil
}

// FirmwareComponents reads the firmware versions Ironic cached (GET /v1/nodes/{id}/firmware): bios,
// bmc and NICs.
func (p *Provisioner) FirmwareComponents(ctx context.Context, host provisioner.Host) ([]metal3.FirmwareComponentStatus, error) {
	ctx = withOp(ctx, "firmware")
	s, err := p.session(ctx)
	if err != nil {
		return nil, err
	}
	if host.NodeID == "" {
		return nil, fmt.Errorf("reading the firmware components of host %s/%s: %w", host.Namespace, host.Name, provisioner.ErrNeedsRegistration)
	}
	// Told from the address, as registration chose the node's interfaces from it: Ironic lists no
	// components for a node without a firmware interface, the same answer as a BMC that reports
	// none, and refuses its updates only when a cleaning or servicing step runs.
	if a, err := bmc.Parse(host.BMCAddress); err == nil && a.Interfaces.Firmware == "" {
		return nil, fmt.Errorf("reading the firmware components of host %s/%s (%s): %w", host.Namespace, host.Name, a.Type, provisioner.ErrFirmwareUpdateUnsupported)
	}
	list, err := nodes.ListFirmware(ctx, s.sc, host.NodeID).Extract()
	if notFound(err) {
		return nil, fmt.Errorf("reading the firmware components of host %s/%s: Ironic node %s is gone: %w",
			host.Namespace, host.Name, host.NodeID, provisioner.ErrNeedsRegistration)
	}
	if err != nil {
		return nil, classifyError(err, "reading the firmware components of Ironic node "+host.NodeID)
	}
	if len(list) == 0 {
		if err := p.notVerifiedYet(ctx, s, host, "firmware components"); err != nil {
			return nil, err
		}
	}
	out := make([]metal3.FirmwareComponentStatus, 0, len(list))
	for _, c := range list {
		st := metal3.FirmwareComponentStatus{
			Component:          c.Component,
			InitialVersion:     c.InitialVersion,
			CurrentVersion:     c.CurrentVersion,
			LastVersionFlashed: c.LastVersionFlashed,
		}
		switch {
		case c.UpdatedAt != nil:
			st.UpdatedAt = metav1.NewTime(c.UpdatedAt.UTC())
		case !c.CreatedAt.IsZero():
			st.UpdatedAt = metav1.NewTime(c.CreatedAt.UTC())
		}
		out = append(out, st)
	}
	return out, nil
}

// notVerifiedYet tells an empty list of a node Ironic has not verified yet (enroll, verifying) from
// a BMC that reports nothing: Ironic caches the BIOS settings and firmware versions when it
// verifies a node, so a host registered again on a new node (Ironic lost its database), which
// stays available or provisioned meanwhile, would have its HostFirmwareSettings and
// HostFirmwareComponents emptied, its FirmwareSchema swapped for an empty one and its pending
// changes judged unknown until the next re-read. Such a node is ErrNeedsRegistration: the reader
// looks again shortly. Only an empty list costs the node's read (from the watch when it has it).
func (p *Provisioner) notVerifiedYet(ctx context.Context, s *session, host provisioner.Host, what string) error {
	n, ok := p.watch.Get(host.NodeID)
	if !ok {
		// Not put into the watcher's cache (readNode would): a companion's read must not take
		// the place of the node change the watcher tells the host controller about.
		var err error
		if n, err = p.fetchNode(ctx, s, host.NodeID); notFound(err) {
			return fmt.Errorf("reading the %s of host %s/%s: Ironic node %s is gone: %w", what, host.Namespace, host.Name, host.NodeID, provisioner.ErrNeedsRegistration)
		} else if err != nil {
			return err
		}
	}
	switch state(n) {
	case nodes.Enroll, nodes.Verifying:
		return fmt.Errorf("reading the %s of host %s/%s: Ironic node %s is %s, and reads them from the BMC once verified: %w",
			what, host.Namespace, host.Name, host.NodeID, n.ProvisionState, provisioner.ErrNeedsRegistration)
	}
	return nil
}
