package ironic

import (
	"context"
	"slices"
	"testing"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/metalforge/metalforge/internal/provisioner"
)

// TestAbortRefusedAsBusyIsAskedAgain: an abort Ironic answers 409 (the node locked, by a vendor
// passthru or virtual media call talking to a slow BMC) was remembered as asked, and the next
// calls waited for its effect without asking again: a node waiting for a silent agent, which
// nothing moves, sat until Ironic's 30-minute timeout. The next call asks again.
func TestAbortRefusedAsBusyIsAskedAgain(t *testing.T) {
	const uuid = "a3b0d1f2-9f4e-4c1e-8a4b-0c2d3e4f5a6b"
	f := &fakeOneNodeIronic{state: "inspect wait", target: "manageable", busy: 1}
	p := f.provisioner(t, uuid)
	host := provisioner.Host{Namespace: "ns", Name: "h", NodeID: uuid}
	ctx := context.Background()

	for i := range 2 {
		if _, err := p.StopForDeletion(ctx, host); err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
		p.watch.Forget(uuid)
	}
	if got := f.asked(); !slices.Equal(got, []string{"abort", "abort"}) {
		t.Fatalf("provision state changes asked %v, want the abort Ironic answered busy asked again", got)
	}
	// Taken, it is not asked a third time while the node has not moved.
	if _, err := p.StopForDeletion(ctx, host); err != nil {
		t.Fatal(err)
	}
	if got := f.asked(); len(got) != 2 {
		t.Fatalf("provision state changes asked %v after the abort was taken, want no third", got)
	}
}

// TestForcedRebootRefusedAsBusyIsNotReported: a forced reboot whose abort Ironic answered busy is
// no reboot: the result does not say the inspection restarts (the host would drop its reboot
// annotation and tell so), and the next call asks again.
func TestForcedRebootRefusedAsBusyIsNotReported(t *testing.T) {
	const uuid = "c4d5e6f7-0a1b-4c2d-9e3f-4a5b6c7d8e9f"
	f := &fakeOneNodeIronic{state: "inspect wait", target: "manageable", busy: 1}
	res, accepted, err := forcedRebootOf(t, f, uuid)
	if err != nil || accepted || res.ForcedReboot {
		t.Fatalf("abort answered busy: forced reboot %t, taken %t, error %v; want neither", res.ForcedReboot, accepted, err)
	}
	res, accepted, err = forcedRebootOf(t, f, uuid)
	if err != nil || !accepted || !res.ForcedReboot {
		t.Fatalf("abort taken: forced reboot %t, taken %t, error %v; want both", res.ForcedReboot, accepted, err)
	}
}

func forcedRebootOf(t *testing.T, f *fakeOneNodeIronic, uuid string) (provisioner.Result, bool, error) {
	t.Helper()
	p := f.provisioner(t, uuid)
	ctx := context.Background()
	s, n, err := p.getNode(ctx, provisioner.Host{Namespace: "ns", Name: "h", NodeID: uuid})
	if err != nil {
		t.Fatal(err)
	}
	res, accepted, err := p.startAbort(ctx, s, n, "inspection (forced reboot)")
	res, err = forcedReboot(res, accepted, err)
	return res, accepted, err
}

// TestLostAgentWaitsOutAFault: a quiet node Ironic keeps in maintenance for a fault it clears
// itself (a power failure) cannot be aborted until then: it is neither read in full nor logged
// at every poll for as long as the fault lasts (each poll was a GET and three log lines once a
// busy abort stopped using up the hour's one). The fake Ironic fails the test on any node request.
func TestLostAgentWaitsOutAFault(t *testing.T) {
	const uuid = "d1e2f3a4-b5c6-4d7e-8f90-a1b2c3d4e5f6"
	f := &fakeOneNodeIronic{state: "clean wait", target: "available", maintenance: true, fault: "power failure"}
	p := f.provisioner(t, uuid)
	ctx := context.Background()
	s, err := p.session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	reads := f.reads()
	n := &nodes.Node{UUID: uuid, ProvisionState: "clean wait", TargetProvisionState: "available", Maintenance: true,
		Fault: "power failure", ProvisionUpdatedAt: p.now().Add(-2 * p.cfg.AgentLostAfter)}
	if _, handled, err := p.abortLostAgent(ctx, s, n, "cleaning"); handled || err != nil {
		t.Fatalf("handled %t, error %v; want the normal wait", handled, err)
	}
	if got := f.reads() - reads; got != 0 {
		t.Fatalf("%d reads of the node while its fault lasts, want none", got)
	}
}
