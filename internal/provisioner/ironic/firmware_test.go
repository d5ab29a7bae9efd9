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
