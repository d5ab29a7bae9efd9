package main

import (
	"context"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/test/hostfleet"
)

// The live update of stepServiced: one BIOS setting that differs from bmcsim's default, asked for
// in each host's HostFirmwareSettings and applied by servicing on the host's next reboot.
const liveSetting, liveValue = "ProcTurboMode", "Disabled"

// liveUpdate runs metal3's live update workflow on one host: a HostUpdatePolicy allowing settings
// on reboot, the setting in its HostFirmwareSettings, and, once the controller judged the change
// valid (a reboot before that would be a plain reboot), the reboot annotation.
func (cp *campaign) liveUpdate(ctx context.Context, name string) error {
	if r, _ := cp.tr.get(name); r.servicing[stepServiced] {
		return nil // a retry after the annotation took (its answer lost to an API server restart)
	}
	if err := hostfleet.AllowLiveSettings(ctx, cp.c, namespace, name); err != nil {
		return err
	}
	if err := hostfleet.SetFirmwareSetting(ctx, cp.c, namespace, name, liveSetting, liveValue); err != nil {
		return err
	}
	key := types.NamespacedName{Namespace: namespace, Name: name}
	for start := time.Now(); ; {
		hfs := &metal3.HostFirmwareSettings{}
		if err := cp.c.Get(ctx, key, hfs); err != nil {
			return err
		}
		if hostfleet.ChangeJudged(hfs) {
			break
		}
		if time.Since(start) > cp.o.stuckAfter {
			// The host is then reported stuck: it never goes servicing.
			cp.logf("the change of %s was not judged in %s; no reboot annotation", name, cp.o.stuckAfter)
			return nil
		}
		if !sleep(ctx, time.Second) {
			return ctx.Err()
		}
	}
	return hostfleet.Reboot(ctx, cp.c, namespace, name)
}

// liveUpdateDone: bmcsim's server has the setting, and the host's HostFirmwareSettings shows it.
func (cp *campaign) liveUpdateDone(ctx context.Context, name string) bool {
	d, err := cp.sim.Control.Server(cp.serverOf(name))
	if err != nil || d.State.BIOS[liveSetting] != liveValue {
		return false
	}
	hfs := &metal3.HostFirmwareSettings{}
	if err := cp.c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, hfs); err != nil {
		return false
	}
	return hfs.Status.Settings[liveSetting] == liveValue
}

// serverOf is the name of the bmcsim server of host name.
func (cp *campaign) serverOf(name string) string { return cp.sim.Hosts()[hostIndex(name)].Name }

// interruptions counts the servicings of a node that Ironic failed between from and to for a
// reason that was not the request's: a conductor restart in the middle, or an abort (of a lost
// agent's wait), read from the node's history ("" node: 0).
func (cp *campaign) interruptions(ctx context.Context, nodeID string, from, to time.Time) int {
	if nodeID == "" {
		return 0
	}
	var body struct {
		History []struct {
			CreatedAt string `json:"created_at"`
			Severity  string `json:"severity"`
			Event     string `json:"event"`
		} `json:"history"`
	}
	if _, err := cp.nodes.Get(ctx, cp.nodes.ServiceURL("nodes", nodeID, "history"), &body, nil); err != nil {
		cp.logf("reading the history of node %s: %v", nodeID, firstLine(err))
		return 0
	}
	n := 0
	for _, e := range body.History {
		at, err := time.Parse(time.RFC3339Nano, e.CreatedAt)
		if err != nil || at.Before(from) || at.After(to) || e.Severity != "ERROR" {
			continue
		}
		if strings.Contains(e.Event, "can't be resumed by conductor") || strings.Contains(e.Event, "was aborted") {
			n++
		}
	}
	return n
}
