package hostfirmwarecomponents

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner/fixture"
	"github.com/metalforge/metalforge/internal/test/companiontest"
)

// TestComponentsWithoutHost: HostFirmwareComponents a user creates under a name no host has say
// so (Valid False, InvalidComponent, naming metadata.name; one HostNotFound Event) until the host
// exists and registers, when its components are read and the spec judged as usual.
func TestComponentsWithoutHost(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	startOperator(t, env.Config, ns, fix)
	const name = "worker-typo"
	want := `metadata.name: no BareMetalHost named "worker-typo" in namespace "` + ns +
		`"; a HostFirmwareComponents applies to the host of the same name`
	hfc := &metal3.HostFirmwareComponents{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: metal3.HostFirmwareComponentsSpec{Updates: []metal3.FirmwareUpdate{update("bios", "https://firmware.example/bios-2.20.bin")}}}
	if err := env.Client.Create(context.Background(), hfc); err != nil {
		t.Fatal(err)
	}
	got := waitHFC(t, ns, name, "marked as having no host", func(hfc *metal3.HostFirmwareComponents) bool {
		return condition(hfc, metal3.HostFirmwareComponentsValid).Message == want
	})
	if c := condition(got, metal3.HostFirmwareComponentsValid); c.Status != metav1.ConditionFalse || c.Reason != "InvalidComponent" {
		t.Errorf("Valid %+v, want False InvalidComponent", c)
	}
	if len(got.Status.Components) != 0 || got.Status.LastUpdated != nil {
		t.Errorf("status %+v claims components were read", got.Status)
	}
	companiontest.WaitEvent(t, env.Client, ns, "HostFirmwareComponents", name, "HostNotFound: "+want)

	companiontest.NewHost(t, env.Client, fix, ns, name)
	got = waitHFC(t, ns, name, "the host's components read", func(hfc *metal3.HostFirmwareComponents) bool {
		return current(hfc) && len(hfc.Status.Components) > 0
	})
	if c := condition(got, metal3.HostFirmwareComponentsValid); c.Status != metav1.ConditionTrue {
		t.Errorf("Valid %+v once the host exists", c)
	}
	if c := condition(got, metal3.HostFirmwareComponentsChangeDetected); c.Status != metav1.ConditionTrue {
		t.Errorf("ChangeDetected %+v once the host exists, want True (a BIOS update is pending)", c)
	}
}

// TestComponentsBeforeUnregisteredHost: HostFirmwareComponents created before their host stop
// saying that no host has their name once it exists, though it is not registered (its BMC
// credentials refused: it may never be); Valid is left unjudged until the first reading.
func TestComponentsBeforeUnregisteredHost(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	startOperator(t, env.Config, ns, fix)
	const name = "early"
	hfc := &metal3.HostFirmwareComponents{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: metal3.HostFirmwareComponentsSpec{Updates: []metal3.FirmwareUpdate{update("bios", "https://firmware.example/bios-2.20.bin")}}}
	if err := env.Client.Create(context.Background(), hfc); err != nil {
		t.Fatal(err)
	}
	waitHFC(t, ns, name, "marked as having no host", func(hfc *metal3.HostFirmwareComponents) bool {
		return strings.HasPrefix(condition(hfc, metal3.HostFirmwareComponentsValid).Message, "metadata.name: no BareMetalHost")
	})

	h := companiontest.NewHost(t, env.Client, nil, ns, name)
	companiontest.SetHostStatus(t, env.Client, h, func(st *metal3.BareMetalHostStatus) {
		st.Provisioning.State, st.OperationalStatus = metal3.StateRegistering, metal3.OperationalStatusError
		st.ErrorType, st.ErrorMessage = metal3.RegistrationError, "the BMC refused the credentials"
	})
	got := waitHFC(t, ns, name, "the mark gone once the host exists", func(hfc *metal3.HostFirmwareComponents) bool {
		return condition(hfc, metal3.HostFirmwareComponentsValid).Type == ""
	})
	if len(got.Status.Components) != 0 || got.Status.LastUpdated != nil {
		t.Errorf("status %+v claims components were read from an unregistered host", got.Status)
	}

	companiontest.SetHostStatus(t, env.Client, h, func(st *metal3.BareMetalHostStatus) { st.ErrorType, st.ErrorMessage = "", "" })
	companiontest.Register(t, env.Client, fix, h)
	got = waitHFC(t, ns, name, "the host's components read", func(hfc *metal3.HostFirmwareComponents) bool {
		return current(hfc) && len(hfc.Status.Components) > 0
	})
	if c := condition(got, metal3.HostFirmwareComponentsValid); c.Status != metav1.ConditionTrue {
		t.Errorf("Valid %+v once the host registered", c)
	}
}
