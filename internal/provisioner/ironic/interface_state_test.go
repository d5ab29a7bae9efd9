package ironic

import (
	"context"
	"slices"
	"testing"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner"
)

// TestInterfaceChangesTakeAStateIronicAllows: Ironic changes a node's interfaces only in enroll,
// manageable and available (and inspection and maintenance): in deploy failed and inspect failed
// the PATCH answers InvalidState, a 409 that looked busy and was retried every few seconds for
// ever, the host showing nothing. A live ISO asked after a failed direct deploy undeploys first
// (then deploys from available); a fast inspection asked after a failed agent one manages first
// (then inspects from manageable). Neither sends the PATCH (the fake answers none: any PATCH
// fails the test).
func TestInterfaceChangesTakeAStateIronicAllows(t *testing.T) {
	const uuid = "0b3c9c3e-5d1a-4c1e-9a57-6b1f1f2f0301"
	host := provisioner.Host{Namespace: "ns", Name: "h", NodeID: uuid, BMCAddress: "redfish-virtualmedia+http://127.0.0.1:1/redfish/v1/Systems/1",
		AutomatedCleaningMode: metal3.CleaningModeDisabled, BootMode: metal3.UEFI}

	f := &fakeOneNodeIronic{state: "deploy failed"}
	p := f.provisioner(t, uuid)
	liveISO := metal3.DiskFormatLiveISO
	data := provisioner.ProvisionData{Image: &metal3.Image{URL: "http://images/live.iso", DiskFormat: &liveISO}, BootMode: metal3.UEFI}
	res, err := p.Provision(context.Background(), host, data, true)
	if err != nil || res.Failed() {
		t.Fatalf("provisioning a live ISO after a failed deploy: %s, %v", describe(res), err)
	}
	if got := f.asked(); !slices.Equal(got, []string{"deleted"}) {
		t.Errorf("states asked %v after a failed direct deploy, live ISO now; want [deleted]", got)
	}

	f = &fakeOneNodeIronic{state: "inspect failed"}
	p = f.provisioner(t, uuid)
	fast := host
	fast.InspectionMode = metal3.InspectionModeFast
	res, _, err = p.Inspect(context.Background(), fast, provisioner.InspectOptions{RestartOnFailure: true})
	if err != nil || res.Failed() {
		t.Fatalf("fast inspection after a failed agent inspection: %s, %v", describe(res), err)
	}
	if got := f.asked(); !slices.Equal(got, []string{"manage"}) {
		t.Errorf("states asked %v after a failed agent inspection, fast now; want [manage]", got)
	}
}
