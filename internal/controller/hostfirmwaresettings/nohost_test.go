package hostfirmwaresettings

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner"
	"github.com/metalforge/metalforge/internal/provisioner/fixture"
	"github.com/metalforge/metalforge/internal/test/companiontest"
)

// TestSettingsWithoutHost: HostFirmwareSettings a user creates under a name no host has say so
// (Valid False naming metadata.name, one HostNotFound Event); once the host exists and registers,
// they are the host's like any others; when that host goes, they say so again. Settings the
// controller created (owned by their host) are left to the garbage collector when it goes.
func TestSettingsWithoutHost(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	op := startOperator(t, env.Config, ns, fix)
	const name = "worker-typo"
	want := `metadata.name: no BareMetalHost named "worker-typo" in namespace "` + ns +
		`"; a HostFirmwareSettings applies to the host of the same name`
	noHost := func(hfs *metal3.HostFirmwareSettings) bool {
		c := condition(hfs, metal3.FirmwareSettingsValid)
		return c.Status == metav1.ConditionFalse && c.Message == want && c.ObservedGeneration == hfs.Generation
	}

	hfs := &metal3.HostFirmwareSettings{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: metal3.HostFirmwareSettingsSpec{Settings: metal3.DesiredSettingsMap{"ProcTurboMode": intstr.FromString("Enabled")}}}
	if err := env.Client.Create(context.Background(), hfs); err != nil {
		t.Fatal(err)
	}
	got := waitHFS(t, ns, name, "marked as having no host", noHost)
	if c := condition(got, metal3.FirmwareSettingsValid); c.Reason != "ConfigurationError" {
		t.Errorf("Valid reason %q, want ConfigurationError", c.Reason)
	}
	if got.Status.LastUpdated != nil || got.Status.FirmwareSchema != nil {
		t.Errorf("status %+v claims settings were read", got.Status)
	}
	companiontest.WaitEvent(t, env.Client, ns, "HostFirmwareSettings", name, "HostNotFound: "+want)
	// A spec edit is judged again (observedGeneration moves) without a second Event.
	gen := setSpec(t, ns, name, metal3.DesiredSettingsMap{"ProcTurboMode": intstr.FromString("Disabled")})
	waitHFS(t, ns, name, "edit judged", func(hfs *metal3.HostFirmwareSettings) bool { return hfs.Generation == gen && noHost(hfs) })
	if n := companiontest.Count(companiontest.Events(t, env.Client, ns, "HostFirmwareSettings", name), "HostNotFound"); n != 1 {
		t.Errorf("%d HostNotFound events after an edit, want 1", n)
	}

	h := newHost(t, fix, ns, name)
	got = waitHFS(t, ns, name, "the host's settings read", func(hfs *metal3.HostFirmwareSettings) bool {
		return current(hfs) && hfs.Status.LastUpdated != nil
	})
	if c := condition(got, metal3.FirmwareSettingsValid); c.Status != metav1.ConditionTrue || strings.Contains(c.Message, "BareMetalHost") {
		t.Errorf("Valid %+v once the host exists", c)
	}
	if c := condition(got, metal3.FirmwareSettingsChangeDetected); c.Status != metav1.ConditionTrue {
		t.Errorf("ChangeDetected %+v once the host exists, want True (ProcTurboMode differs)", c)
	}
	if len(got.Status.Settings) == 0 || got.Status.FirmwareSchema == nil {
		t.Errorf("status %+v, want the host's settings and schema", got.Status)
	}

	if err := env.Client.Delete(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	waitHFS(t, ns, name, "marked again once the host is gone", noHost)

	// A host's own settings: envtest runs no garbage collector, so they stay after the host is
	// deleted, and must not be marked.
	owned := newHost(t, fix, ns, "owned")
	waitHFS(t, ns, "owned", "created", current)
	key := types.NamespacedName{Namespace: ns, Name: "owned"}
	mark := op.Mark(key)
	if err := env.Client.Delete(context.Background(), owned); err != nil {
		t.Fatal(err)
	}
	op.WaitAfter(t, key, mark, 1)
	got, _ = getHFS(t, ns, "owned")
	if c := condition(got, metal3.FirmwareSettingsValid); c.Status != metav1.ConditionTrue {
		t.Errorf("the deleted host's own settings were marked: Valid %+v", c)
	}
	if n := companiontest.Count(companiontest.Events(t, env.Client, ns, "HostFirmwareSettings", "owned"), "HostNotFound"); n != 0 {
		t.Errorf("%d HostNotFound events for a deleted host's own settings", n)
	}
}

// TestSettingsBeforeHostThatPreparesAtOnce: HostFirmwareSettings created before their host, whose
// host is first seen registered while it prepares (inspection disabled: registering goes straight
// to preparing), are judged against the settings read from the provisioner, not against the empty
// list the object had while it had no host (which said "no firmware settings" and let the host
// prepare without the change).
func TestSettingsBeforeHostThatPreparesAtOnce(t *testing.T) {
	t.Parallel()
	const name = "early"
	ns, fix := settingsBeforeTheirHost(t, name)
	waitHFS(t, ns, name, "marked as having no host", func(hfs *metal3.HostFirmwareSettings) bool {
		return condition(hfs, metal3.FirmwareSettingsValid).Reason == "ConfigurationError"
	})
	h := companiontest.NewHost(t, env.Client, nil, ns, name)
	_, id, err := fix.Register(context.Background(), provisioner.Host{Namespace: ns, Name: name, BMCAddress: h.Spec.BMC.Address}, provisioner.RegisterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	setHostStatus(t, h, func(st *metal3.BareMetalHostStatus) {
		st.Provisioning.ID, st.Provisioning.State, st.OperationalStatus = id, metal3.StatePreparing, metal3.OperationalStatusOK
	})
	got := waitHFS(t, ns, name, "read for the preparing host", func(hfs *metal3.HostFirmwareSettings) bool {
		return current(hfs) && hfs.Status.LastUpdated != nil
	})
	if got.Status.Settings["ProcTurboMode"] != "Enabled" {
		t.Errorf("settings %v, want the host's as the provisioner reports them (ProcTurboMode Enabled)", got.Status.Settings)
	}
	if c := condition(got, metal3.FirmwareSettingsValid); c.Status != metav1.ConditionTrue {
		t.Errorf("Valid %+v, want True", c)
	}
	if c := condition(got, metal3.FirmwareSettingsChangeDetected); c.Status != metav1.ConditionTrue {
		t.Errorf("ChangeDetected %+v, want True (ProcTurboMode differs)", c)
	}
}

// TestSettingsBeforeUnregisteredHost: HostFirmwareSettings created before their host stop saying
// that no host has their name once it exists, though it is not registered (its BMC credentials
// refused: it may never be); Valid is left unjudged until the first reading.
func TestSettingsBeforeUnregisteredHost(t *testing.T) {
	t.Parallel()
	const name = "early"
	ns, fix := settingsBeforeTheirHost(t, name)
	waitHFS(t, ns, name, "marked as having no host", func(hfs *metal3.HostFirmwareSettings) bool {
		return strings.HasPrefix(condition(hfs, metal3.FirmwareSettingsValid).Message, "metadata.name: no BareMetalHost")
	})

	h := companiontest.NewHost(t, env.Client, nil, ns, name)
	setHostStatus(t, h, func(st *metal3.BareMetalHostStatus) {
		st.Provisioning.State, st.OperationalStatus = metal3.StateRegistering, metal3.OperationalStatusError
		st.ErrorType, st.ErrorMessage = metal3.RegistrationError, "the BMC refused the credentials"
	})
	got := waitHFS(t, ns, name, "the mark gone once the host exists", func(hfs *metal3.HostFirmwareSettings) bool {
		return condition(hfs, metal3.FirmwareSettingsValid).Type == ""
	})
	if got.Status.LastUpdated != nil || got.Status.FirmwareSchema != nil {
		t.Errorf("status %+v claims settings were read from an unregistered host", got.Status)
	}

	setHostStatus(t, h, func(st *metal3.BareMetalHostStatus) { st.ErrorType, st.ErrorMessage = "", "" })
	register(t, fix, h)
	got = waitHFS(t, ns, name, "the host's settings read", func(hfs *metal3.HostFirmwareSettings) bool {
		return current(hfs) && hfs.Status.LastUpdated != nil
	})
	if c := condition(got, metal3.FirmwareSettingsValid); c.Status != metav1.ConditionTrue {
		t.Errorf("Valid %+v once the host registered", c)
	}
}

// settingsBeforeTheirHost starts the operator in a new namespace and creates HostFirmwareSettings
// named name, asking ProcTurboMode: Disabled, before any host of that name exists.
func settingsBeforeTheirHost(t *testing.T, name string) (string, *fixture.Fixture) {
	t.Helper()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	startOperator(t, env.Config, ns, fix)
	hfs := &metal3.HostFirmwareSettings{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: metal3.HostFirmwareSettingsSpec{Settings: metal3.DesiredSettingsMap{"ProcTurboMode": intstr.FromString("Disabled")}}}
	if err := env.Client.Create(context.Background(), hfs); err != nil {
		t.Fatal(err)
	}
	return ns, fix
}
