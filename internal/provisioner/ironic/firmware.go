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
// with their schema when asked. One request: the node ID is enough, the node is not read.
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
