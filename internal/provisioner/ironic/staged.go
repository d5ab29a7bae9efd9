package ironic

import (
	"context"
	"maps"
	"slices"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
)

// Ironic's redfish BIOS step PATCHes the settings into the BMC's pending BIOS settings, records
// them in driver_internal_info (redfish_bios_state: reboot_requested, requested_bios_attrs) and
// reboots; the BMC applies pending settings when the server boots, and the step, run again after
// the reboot, checks them and removes the record. An abort or failure in between (a reboot the BMC
// refused, changes taken back) leaves the record, and the settings staged on the BMC: the server's
// next boot applies them, the abort's own power cycle included, while Ironic's cached BIOS
// settings (and so HostFirmwareSettings) go on showing the old values until Ironic reads the BIOS
// again (its next servicing or cleaning). Ironic offers no way to take them back.

const (
	infoRedfishBIOSState  = "redfish_bios_state"
	infoRebootRequested   = "reboot_requested"
	infoRequestedBIOSAttr = "requested_bios_attrs"
)

// stagedBIOSSettings names, sorted, the BIOS settings the record in info says were sent to the BMC
// and not yet checked after a reboot (nil when there is no such record). Ironic reads the names
// from the record or, left by an older Ironic, from the top level of driver_internal_info.
func stagedBIOSSettings(info map[string]any) []string {
	state, _ := info[infoRedfishBIOSState].(map[string]any)
	if requested, _ := state[infoRebootRequested].(bool); !requested {
		return nil
	}
	attrs, _ := state[infoRequestedBIOSAttr].(map[string]any)
	if len(attrs) == 0 {
		attrs, _ = info[infoRequestedBIOSAttr].(map[string]any)
	}
	if len(attrs) == 0 {
		return nil
	}
	return slices.Sorted(maps.Keys(attrs))
}

// settingsLeftStaged reads n in full (the watcher's node has no driver_internal_info) and returns
// stagedBIOSSettings. Called once an abort has finished; a node that cannot be read says nothing
// (the record is what Ironic shows, not what the host needs).
func (p *Provisioner) settingsLeftStaged(ctx context.Context, s *session, n *nodes.Node) []string {
	full, err := p.fetchNode(ctx, s, n.UUID)
	if err != nil {
		p.logger(ctx).Info("Cannot read whether the aborted servicing left BIOS settings staged", "node", n.UUID, "reason", err.Error())
		return nil
	}
	staged := stagedBIOSSettings(full.DriverInternalInfo)
	if len(staged) > 0 {
		p.logger(ctx).Info("The aborted servicing left BIOS settings staged on the BMC: its next boot applies them",
			"node", n.UUID, "settings", staged)
	}
	return staged
}
