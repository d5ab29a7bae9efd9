package ironic

import (
	"context"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner"
)

// TestPrepareClearsHardwareRAID: hardwareRAIDVolumes: [] deletes the volumes through the BMC's RAID
// interface and empties target_raid_config ({}: Ironic refuses a list of no disks), so that the
// node no longer describes the volumes it deleted; raid: {} then asks for nothing.
func TestPrepareClearsHardwareRAID(t *testing.T) {
	e := integration(t)
	t.Parallel()
	p := e.provisioner(t)
	host := testHost(t, e.host(t))
	register(t, p, &host)
	s, err := p.session(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// A layout applied before: what the clearing must not leave behind.
	one := 1
	if err := nodes.SetRAIDConfig(context.Background(), s.sc, host.NodeID, nodes.RAIDConfigOpts{LogicalDisks: []nodes.LogicalDisk{
		{SizeGB: &one, RAIDLevel: nodes.RAID0}}}).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	cleared := &metal3.RAIDConfig{HardwareRAIDVolumes: []metal3.HardwareRAIDVolume{}}
	mustDone(t, "prepare with hardwareRAIDVolumes: []", 4*time.Minute, func(ctx context.Context) (provisioner.Result, error) {
		return p.Prepare(ctx, host, provisioner.PrepareData{TargetRAIDConfig: cleared}, false)
	})
	n, err := p.fetchNode(context.Background(), s, host.NodeID)
	if err != nil {
		t.Fatal(err)
	}
	if len(n.TargetRAIDConfig) != 0 || n.ProvisionState != "manageable" || n.Extra[extraPrepared] == nil {
		t.Errorf("after clearing: %s, target_raid_config %v, extra %v; want manageable, empty, prepared", n.ProvisionState, n.TargetRAIDConfig, n.Extra)
	}
	before := p.Calls()
	res, err := p.Prepare(context.Background(), host, provisioner.PrepareData{TargetRAIDConfig: &metal3.RAIDConfig{}, ActualRAIDConfig: cleared}, false)
	if err != nil || res.Busy || res.Failed() {
		t.Errorf("prepare with raid: {}: %s, %v; want done at once", describe(res), err)
	}
	if after := p.Calls(); after["prepare"]-before["prepare"] > 2 {
		t.Errorf("raid: {} cost %d requests; want no cleaning", after["prepare"]-before["prepare"])
	}
}
