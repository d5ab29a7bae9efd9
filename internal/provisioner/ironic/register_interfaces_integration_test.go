package ironic

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/metalforge/metalforge/internal/provisioner"
)

// TestRegisterAddressFixedToAnotherType: a host registered with a BMC address of the wrong type
// and port (redfish-uefihttp on a port where nothing answers) fails verification and stays in
// enroll; the address fixed (redfish-virtualmedia, the right port) registers the node with the
// boot interface of the new type. Until Register changed interfaces too, the node kept
// redfish-https and booted the agent's ISO by UEFI HTTP on a virtual-media host.
func TestRegisterAddressFixedToAnotherType(t *testing.T) {
	e := integration(t)
	t.Parallel()
	p := e.provisioner(t)
	host := testHost(t, e.host(t))
	good := host.BMCAddress
	u, err := url.Parse(good)
	if err != nil {
		t.Fatal(err)
	}
	u.Scheme, u.Host = strings.Replace(u.Scheme, "redfish-virtualmedia", "redfish-uefihttp", 1), "127.0.0.1:1"
	host.BMCAddress = u.String()

	res := drive(t, "register with the wrong address", 3*time.Minute, func(ctx context.Context) (provisioner.Result, error) {
		res, id, err := p.Register(ctx, host, provisioner.RegisterOptions{})
		host.NodeID = id
		return res, err
	})
	if !res.Failed() {
		t.Fatalf("registration with nothing at the BMC address: %s, want failed", describe(res))
	}
	n := waitNode(t, p, host, "the node in enroll", func(n *nodes.Node) bool { return n.ProvisionState == "enroll" })
	if n.BootInterface != "redfish-https" {
		t.Fatalf("boot interface %q after enrolling a redfish-uefihttp address, want redfish-https", n.BootInterface)
	}

	host.BMCAddress = good
	mustDone(t, "register with the fixed address", 3*time.Minute, func(ctx context.Context) (provisioner.Result, error) {
		res, _, err := p.Register(ctx, host, provisioner.RegisterOptions{RestartOnFailure: true})
		return res, err
	})
	s, err := p.session(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	full, err := p.fetchNode(context.Background(), s, host.NodeID)
	if err != nil {
		t.Fatal(err)
	}
	if full.ProvisionState != "manageable" || full.BootInterface != "redfish-virtual-media" || full.Driver != "redfish" {
		t.Errorf("node %s, driver %s, boot interface %q; want manageable, redfish, redfish-virtual-media",
			full.ProvisionState, full.Driver, full.BootInterface)
	}
}
