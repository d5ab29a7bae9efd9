package ironic

import (
	"context"
	"testing"
	"time"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner"
)

// TestDeployRefusedWithUnreadableHostConfig: a user data Secret lost while the node was cleaned for
// the deployment (provide takes minutes): the deployment is not started with the rest, which
// would deploy the host without its user data and say nothing; it fails naming the field.
func TestDeployRefusedWithUnreadableHostConfig(t *testing.T) {
	now := time.Date(2026, 12, 7, 3, 0, 0, 0, time.UTC)
	f, p, host := newServiceFake(t, now, 0)
	f.set(p, "available", "", "")
	data := provisioner.ProvisionData{
		Image:           &metal3.Image{URL: "http://images.example/os.qcow2", Checksum: "d41d8cd98f00b204e9800998ecf8427e", ChecksumType: metal3.MD5},
		HostConfigError: `spec.userData: secret "h-user-data" not found`,
	}
	res, err := p.Provision(context.Background(), host, data, false)
	if err != nil || !res.Failed() || res.ErrorMessage != data.HostConfigError {
		t.Fatalf("deploying without the user data: %+v, %v; want the failure naming the field", res, err)
	}
	if got := f.requests(); got != "" {
		t.Fatalf("requests %q: want nothing written or started", got)
	}
}
