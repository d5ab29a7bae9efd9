package ironic

import (
	"context"
	"maps"
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
	var staged []string
	for name, value := range recordedBIOSSettings(info) {
		if current, ok := cached[name]; !ok || !sameBIOSValue(value, current) {
			staged = append(staged, name)
		}
	}
	slices.Sort(staged)
	return staged
}

// recordedBIOSSettings returns the settings, by name, that the record in info says were sent to
// the BMC and not yet checked after a reboot (nil when there is no such record, or it names no
// settings: a factory reset's).
func recordedBIOSSettings(info map[string]any) map[string]any {
	state, _ := info[infoRedfishBIOSState].(map[string]any)
	if requested, _ := state[infoRebootRequested].(bool); !requested {
		return nil
	}
	attrs, _ := state[infoRequestedBIOSAttr].(map[string]any)
	if len(attrs) == 0 {
		attrs, _ = info[infoRequestedBIOSAttr].(map[string]any)
	}
	return attrs
}

// A record on a node that is not in the middle of that BIOS step is stale, and Ironic takes it for
// its own: the next BIOS step of any request runs as the check after the reboot (it compares the
// recorded settings, sends nothing, and drops the record: the request's settings are not applied,
// and the step fails or, when a boot has applied the recorded ones since, succeeds), and the BIOS
// periodic task, which visits every waiting node with a record, ends any step that waits on the
// node as soon as the recorded settings show applied (a firmware update's wait included: a
// servicing whose firmware update failed ended active, reported done; found in `make test`; an
// automated cleaning's erase and a deployment's wait for the agent end early the same way). So a
// node with a stale record is first serviced (active: before a servicing or an undeploy) or
// cleaned (manageable: before a preparation or a provide) with that check alone
// (staleRecordCheck: a bios.apply_configuration of the recorded settings, which sends nothing and
// drops the record; when they are not applied yet it fails, as a retry after a failed reboot does),
// and then the operation goes on. Put in front of the request's steps instead, a failed check
// would leave the node in service failed, and in maintenance, while Ironic goes on with the next
// step.

// staleRecordCheck returns the step that makes Ironic check and drop the stale record in info,
// when there is one.
func staleRecordCheck(info map[string]any) (nodes.ServiceStep, bool) {
	attrs := recordedBIOSSettings(info)
	if len(attrs) == 0 {
		return nodes.ServiceStep{}, false
	}
	list := make([]map[string]any, 0, len(attrs))
	for _, name := range slices.Sorted(maps.Keys(attrs)) {
		list = append(list, map[string]any{"name": name, "value": attrs[name]}) // typed as Ironic sent them
	}
	return nodes.ServiceStep{Interface: nodes.InterfaceBIOS, Step: "apply_configuration", Args: map[string]any{"settings": list}}, true
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
	if len(recordedBIOSSettings(full.DriverInternalInfo)) == 0 { // no record: no second request
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

// What a servicing or manual cleaning start does about a stale record (staleRecordAction).
type staleRecordAct int

const (
	noRecord          staleRecordAct = iota // the node holds none: the request starts
	checkRecord                             // the check goes first
	recordCheckFailed                       // the check ran and failed, the record still there: the request starts
)

// recordCheckPrefix starts the fingerprint of a check in the node's extra, so that the check's
// failure is told from the request's once Ironic has dropped the record it was computed from.
const recordCheckPrefix = "bios-record-check:"

// ranRecordCheck says whether the last operation started under key (extraServiced or
// extraPrepared) was a check.
func ranRecordCheck(n *nodes.Node, key string) bool {
	v, _ := n.Extra[key].(string)
	return strings.HasPrefix(v, recordCheckPrefix)
}

// staleRecordAction decides, for a node about to be serviced or cleaned (info its
// driver_internal_info), whether the check goes first, and returns its step and fingerprint; ran
// says whether the check under a fingerprint was the last operation started on the node. A check
// that ran to its step dropped the record; one that failed before it (Ironic could not validate
// the BMC, say: the node in service failed or clean failed, or manageable again after that) and
// left the record is not started again: the request starts as asked, so that a lasting failure is
// the request's, reported to the host, and not an endless round of checks.
func staleRecordAction(n *nodes.Node, info map[string]any, ran func(fp string) bool) (nodes.CleanStep, string, staleRecordAct) {
	check, ok := staleRecordCheck(info)
	if !ok {
		return nodes.CleanStep{}, "", noRecord
	}
	fp := recordCheckPrefix + fingerprint("stale BIOS record", check)
	switch state(n) {
	case nodes.ServiceFail, nodes.CleanFail, nodes.Manageable:
		if ran(fp) {
			return nodes.CleanStep{}, "", recordCheckFailed
		}
	}
	return check, fp, checkRecord
}

// recordCheckFor says, through staleRecordAction with the fingerprints under key (extraServiced,
// extraPrepared), whether the check of the stale record in full (n read in full) is to start as an
// operation of its own (what: "servicing", "manual cleaning"), with its step and fingerprint; it
// logs what it decided.
func (p *Provisioner) recordCheckFor(ctx context.Context, n, full *nodes.Node, key, what string) (nodes.CleanStep, string, bool) {
	check, checkFP, act := staleRecordAction(n, full.DriverInternalInfo, func(fp string) bool { return p.finished(n, key, fp) })
	if act == noRecord {
		return nodes.CleanStep{}, "", false
	}
	settings := slices.Sorted(maps.Keys(recordedBIOSSettings(full.DriverInternalInfo)))
	if act == recordCheckFailed {
		p.logger(ctx).Info("The "+what+" that drops Ironic's record of an unfinished BIOS step failed before its step: going on as asked",
			"node", n.UUID, "settings", settings, "lastError", sanitize(n.LastError))
		return nodes.CleanStep{}, "", false
	}
	p.logger(ctx).Info("Ironic still holds the record of a BIOS step that did not finish: a "+what+" of its own drops it first",
		"node", n.UUID, "settings", settings)
	return check, checkFP, true
}
