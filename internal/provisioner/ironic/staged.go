package ironic

import (
	"context"
	"slices"
	"strconv"
	"strings"

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
// and not yet checked after a reboot, leaving out those whose value in cached (the BIOS settings
// Ironic last read from the BMC) is already the one asked for: the record outlives the abort, and a
// boot since then applied them, which Ironic saw when it read the BIOS again (every servicing
// starts by reading it). Nil when nothing is left. Ironic reads the names from the record or, left
// by an older Ironic, from the top level of driver_internal_info.
func stagedBIOSSettings(info map[string]any, cached map[string]string) []string {
	state, _ := info[infoRedfishBIOSState].(map[string]any)
	if requested, _ := state[infoRebootRequested].(bool); !requested {
		return nil
	}
	attrs, _ := state[infoRequestedBIOSAttr].(map[string]any)
	if len(attrs) == 0 {
		attrs, _ = info[infoRequestedBIOSAttr].(map[string]any)
	}
	var staged []string
	for name, value := range attrs {
		if current, ok := cached[name]; !ok || !sameBIOSValue(value, current) {
			staged = append(staged, name)
		}
	}
	slices.Sort(staged)
	return staged
}

// sameBIOSValue: value, as the record holds it (a JSON string, number or boolean, in the type of
// its attribute), is cached, as Ironic stores every value (a Python str: 30, True).
func sameBIOSValue(value any, cached string) bool {
	switch v := value.(type) {
	case string:
		return v == cached
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64) == cached
	case bool:
		return strings.EqualFold(strconv.FormatBool(v), cached)
	}
	return false
}

// settingsLeftStaged reads n in full (the watcher's node has no driver_internal_info) and the BIOS
// settings Ironic cached, and returns stagedBIOSSettings. Called once an abort has finished. A node
// that cannot be read says nothing (the record is what Ironic shows, not what the host needs); BIOS
// settings that cannot be read leave every recorded setting named, as not known to be applied.
func (p *Provisioner) settingsLeftStaged(ctx context.Context, s *session, n *nodes.Node) []string {
	full, err := p.fetchNode(ctx, s, n.UUID)
	if err != nil {
		p.logger(ctx).Info("Cannot read whether the aborted servicing left BIOS settings staged", "node", n.UUID, "reason", err.Error())
		return nil
	}
	if stagedBIOSSettings(full.DriverInternalInfo, nil) == nil { // no record: no second request
		return nil
	}
	list, err := listBIOS(ctx, s, n.UUID, false)
	if err != nil {
		p.logger(ctx).Info("Cannot read the BIOS settings Ironic cached: naming every staged setting", "node", n.UUID, "reason", err.Error())
	}
	cached := make(map[string]string, len(list))
	for _, st := range list {
		cached[st.Name] = st.Value
	}
	staged := stagedBIOSSettings(full.DriverInternalInfo, cached)
	if len(staged) > 0 {
		p.logger(ctx).Info("The aborted servicing left BIOS settings staged on the BMC: its next boot applies them",
			"node", n.UUID, "settings", staged)
	}
	return staged
}
