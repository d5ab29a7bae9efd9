package ironic_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/noauth"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/metalforge/metalforge/internal/test/ironicenv"
)

// stuckNodes is more than Ironic's default [conductor] periodic_max_workers (8), the number of
// nodes per state its start used to fail.
const stuckNodes = 20

// TestRestartFailsEveryStuckNode reproduces the fault campaign's first N=100 finding
// (docs/fault-campaign.md): Ironic SIGKILLed while a rack cleans leaves its nodes in "cleaning" and
// "deleting" with no conductor. A starting conductor fails such nodes so that their hosts can
// retry, but with Ironic's default configuration only 8 per state; the others stayed in their
// state for good and their hosts waited forever. The database is edited while Ironic is down to
// put 20 nodes in each of both states with no reservation (as the killed conductor left them);
// after the start with our configuration every one must have failed.
func TestRestartFailsEveryStuckNode(t *testing.T) {
	ironic := startInstance(t, "gotest-restart", "", false)
	client, err := noauth.NewBareMetalNoAuth(noauth.EndpointOpts{IronicEndpoint: ironic.Endpoint()})
	if err != nil {
		t.Fatal(err)
	}
	client.Microversion = microversion
	ctx := context.Background()

	// Enrolled nodes need no BMC: nothing contacts this address before the test ends.
	for i := range 2 * stuckNodes {
		if _, err := nodes.Create(ctx, client, nodes.CreateOpts{
			Name: fmt.Sprintf("stuck-%02d", i), Driver: "redfish",
			DriverInfo: map[string]any{"redfish_address": "http://127.0.0.1:9", "redfish_system_id": "/redfish/v1/Systems/x",
				"redfish_username": "u", "redfish_password": "p"},
		}).Extract(); err != nil {
			t.Fatal(err)
		}
	}
	if err := ironic.Kill(); err != nil {
		t.Fatal(err)
	}
	// What a killed conductor leaves: the working state, the target, no reservation (a
	// restarting conductor clears its own), an update time in the past.
	setStuck(t, ironic, `UPDATE nodes SET provision_state = CASE WHEN name < 'stuck-20' THEN 'cleaning' ELSE 'deleting' END,
		target_provision_state = 'available', reservation = NULL, provision_updated_at = datetime('now', '-1 minute')`)
	if err := ironic.Resume(); err != nil {
		t.Fatal(err)
	}

	// The conductor fails stuck nodes as it starts; the API answers once it has started.
	var counts map[string]int
	for range 60 {
		counts = map[string]int{}
		all, err := listAll(ctx, client)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range all {
			counts[n.ProvisionState]++
		}
		if counts["cleaning"]+counts["deleting"] == 0 {
			break
		}
		time.Sleep(time.Second)
	}
	// A failed clean is "clean failed"; a failed undeploy is "error". Both are states the
	// operator acts on (the host retries).
	if counts["clean failed"] != stuckNodes || counts["error"] != stuckNodes {
		t.Errorf("after the restart: %v, want %d clean failed and %d error (nodes left in a working state with no conductor stay there for good)",
			counts, stuckNodes, stuckNodes)
	}
}

func listAll(ctx context.Context, client *gophercloud.ServiceClient) ([]nodes.Node, error) {
	pages, err := nodes.List(client, nodes.ListOpts{Fields: []string{"uuid", "provision_state"}}).AllPages(ctx)
	if err != nil {
		return nil, err
	}
	return nodes.ExtractNodes(pages)
}

// setStuck runs SQL on the stopped instance's database and checks it changed every stuck node.
func setStuck(t *testing.T, ironic *ironicenv.Instance, sql string) {
	t.Helper()
	n, err := ironic.ExecSQL(sql)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2*stuckNodes {
		t.Fatalf("the update changed %d rows, want %d", n, 2*stuckNodes)
	}
}
