package ironic

import (
	"context"
	"errors"
	"testing"

	"github.com/metalforge/metalforge/internal/provisioner"
)

// TestFirmwareComponentsOfIPMIHost: a host whose BMC type has no firmware interface answers
// ErrFirmwareUpdateUnsupported, told from its address without asking Ironic (whose empty list
// reads the same as a BMC that reports no versions). The fake Ironic fails the test on any
// request for the node's firmware.
func TestFirmwareComponentsOfIPMIHost(t *testing.T) {
	const uuid = "5c3a5a43-7c34-4c54-9d6b-64d0c6a4f2a1"
	f := &fakeOneNodeIronic{state: "active"}
	p := f.provisioner(t, uuid)
	for _, address := range []string{"ipmi://192.0.2.10", "192.0.2.10:623", "libvirt://192.0.2.1:6230/"} {
		host := provisioner.Host{Namespace: "ns", Name: "h", NodeID: uuid, BMCAddress: address}
		list, err := p.FirmwareComponents(context.Background(), host)
		if !errors.Is(err, provisioner.ErrFirmwareUpdateUnsupported) || list != nil {
			t.Errorf("%s: components %v, error %v; want ErrFirmwareUpdateUnsupported", address, list, err)
		}
	}
}

// TestFirmwareOfNodeNotVerifiedYet: Ironic caches a node's BIOS settings and firmware versions when
// it verifies it, so an empty list from a node still in enroll or verifying (a host registered
// again on a new node) is no reading: ErrNeedsRegistration, and the reader looks again. The same
// empty lists from a verified node are the BMC's answer.
func TestFirmwareOfNodeNotVerifiedYet(t *testing.T) {
	const uuid = "0b1f4f0e-3a53-4d6e-9a5e-2f1f6c1d8e10"
	f := &fakeOneNodeIronic{state: "verifying", lists: true}
	p := f.provisioner(t, uuid)
	host := provisioner.Host{Namespace: "ns", Name: "h", NodeID: uuid, BMCAddress: "redfish-virtualmedia://192.0.2.10/redfish/v1/Systems/1"}
	ctx := context.Background()

	settings, _, err := p.FirmwareSettings(ctx, host, true)
	if !errors.Is(err, provisioner.ErrNeedsRegistration) {
		t.Errorf("BIOS settings of a verifying node: %v, error %v; want ErrNeedsRegistration", settings, err)
	}
	components, err := p.FirmwareComponents(ctx, host)
	if !errors.Is(err, provisioner.ErrNeedsRegistration) {
		t.Errorf("firmware components of a verifying node: %v, error %v; want ErrNeedsRegistration", components, err)
	}

	f.set("manageable")
	p.watch.Forget(uuid)
	if settings, _, err := p.FirmwareSettings(ctx, host, true); err != nil || len(settings) != 0 {
		t.Errorf("BIOS settings of a verified node that reports none: %v, error %v; want none", settings, err)
	}
	if components, err := p.FirmwareComponents(ctx, host); err != nil || len(components) != 0 {
		t.Errorf("firmware components of a verified node that reports none: %v, error %v; want none", components, err)
	}
}
