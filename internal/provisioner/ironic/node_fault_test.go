package ironic

import (
	"context"
	"strings"
	"testing"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner"
)

// TestFaultWaitSaysWhy: a node in maintenance with a fault Ironic clears itself (a power failure,
// at its next successful power sync) takes no state change, and the provisioner waits. The host
// shows what it waits for from the result's Waiting: the fault must be named there (until this
// test the wait said nothing, and the host showed only the step it was on). The text must not
// change between calls, or the host's status would be written on every poll.
func TestFaultWaitSaysWhy(t *testing.T) {
	const uuid = "0b3c9c3e-5d1a-4c1e-9a57-6b1f1f2f0201"
	f := &fakeOneNodeIronic{state: "clean failed", maintenance: true, fault: "power failure"}
	p := f.provisioner(t, uuid)
	host := provisioner.Host{Namespace: "ns", Name: "h", NodeID: uuid, BMCAddress: "redfish+http://127.0.0.1:1/redfish/v1/Systems/1",
		AutomatedCleaningMode: metal3.CleaningModeDisabled}
	var first string
	for i := range 2 {
		res, err := p.Deprovision(context.Background(), host, true)
		if err != nil || !res.Busy {
			t.Fatalf("deprovisioning a node with a power failure: %s, %v; want a wait", describe(res), err)
		}
		if !strings.Contains(res.Waiting, `"power failure"`) || !strings.Contains(res.Waiting, uuid) {
			t.Fatalf("waiting for %q; want the fault and the node named", res.Waiting)
		}
		if i == 0 {
			first = res.Waiting
		} else if res.Waiting != first {
			t.Errorf("the wait's text changed between polls: %q, then %q", first, res.Waiting)
		}
	}
	if got := f.asked(); len(got) != 0 {
		t.Errorf("states asked %v; want none while the fault stands", got)
	}
}
