package hostfirmwarecomponents

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner"
	"github.com/metalforge/metalforge/internal/provisioner/fixture"
	"github.com/metalforge/metalforge/internal/test/apicount"
	"github.com/metalforge/metalforge/internal/test/companiontest"
)

func update(component, url string) metal3.FirmwareUpdate {
	return metal3.FirmwareUpdate{Component: component, URL: url}
}

// TestComponentsOfRegisteredHosts: a registered host whose provisioner reports components gets
// its HostFirmwareComponents with them; one whose provisioner reports none gets nothing.
func TestComponentsOfRegisteredHosts(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	seen := startOperator(t, env.Config, ns, fix)
	h := companiontest.NewHost(t, env.Client, fix, ns, "h")
	hfc := waitHFC(t, ns, "h", "status filled", current)
	if refs := hfc.OwnerReferences; len(refs) != 1 || refs[0].UID != h.UID || refs[0].Controller == nil || !*refs[0].Controller {
		t.Errorf("owner references %+v, want the host as controller", refs)
	}
	want := map[string]string{"bios": "2.19.1", "bmc": "7.10.30.00", "nic:NIC.Slot.1": "20.5.13"}
	if len(hfc.Status.Components) != len(want) {
		t.Fatalf("components %+v, want %v", hfc.Status.Components, want)
	}
	for _, c := range hfc.Status.Components {
		if want[c.Component] != c.CurrentVersion || c.InitialVersion != c.CurrentVersion {
			t.Errorf("component %+v, want version %s", c, want[c.Component])
		}
	}
	if c := condition(hfc, metal3.HostFirmwareComponentsValid); c.Status != metav1.ConditionTrue || c.Reason != "OK" {
		t.Errorf("Valid %+v", c)
	}
	if c := condition(hfc, metal3.HostFirmwareComponentsChangeDetected); c.Status != metav1.ConditionFalse || c.Reason != "OK" {
		t.Errorf("ChangeDetected %+v", c)
	}

	fix.SetFirmwareInterface(false)
	key := types.NamespacedName{Namespace: ns, Name: "bare"}
	mark := seen.Mark(key)
	companiontest.NewHost(t, env.Client, fix, ns, "bare")
	seen.WaitAfter(t, key, mark, 1)
	if _, ok := getHFC(t, ns, "bare"); ok {
		t.Error("a host without firmware components got HostFirmwareComponents")
	}
}

// TestDeletedComponentsComeBack: HostFirmwareComponents deleted by hand while the host is
// registered are created again at once, not at the next periodic re-read.
func TestDeletedComponentsComeBack(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	startOperator(t, env.Config, ns, fix, func(c *Config) { c.Resync, c.ChangeResync = time.Hour, time.Hour })
	companiontest.NewHost(t, env.Client, fix, ns, "h")
	old := waitHFC(t, ns, "h", "created", current)
	if err := env.Client.Delete(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	again := waitHFC(t, ns, "h", "created again", func(hfc *metal3.HostFirmwareComponents) bool {
		return hfc.UID != old.UID && current(hfc)
	})
	if len(again.Status.Components) != len(old.Status.Components) {
		t.Errorf("created again with components %+v, want %+v", again.Status.Components, old.Status.Components)
	}
}

// TestUpdateValidation: each rule an update can break gives Valid=False (InvalidComponent) with a
// message naming the field and the rule, and one ValidationFailed Event.
func TestUpdateValidation(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	startOperator(t, env.Config, ns, fix)
	companiontest.NewHost(t, env.Client, fix, ns, "h")
	waitHFC(t, ns, "h", "created", current)
	const img = "http://fw.example/bios-2.20.0.bin"
	rules := []struct {
		name    string
		updates []metal3.FirmwareUpdate
		want    string
	}{
		{"not a component", []metal3.FirmwareUpdate{update("cpld", img)},
			`spec.updates[0].component: "cpld" is not a firmware component; use bios, bmc or nic:<id>`},
		{"unknown NIC", []metal3.FirmwareUpdate{update("nic:NIC.Slot.9", img)},
			`spec.updates[0].component: "nic:NIC.Slot.9" is not among the host's components (bios, bmc, nic:NIC.Slot.1)`},
		{"no URL", []metal3.FirmwareUpdate{update("bmc", "")}, "spec.updates[0].url: missing: the URL of the firmware image"},
		{"URL scheme", []metal3.FirmwareUpdate{update("bmc", "ftp://fw.example/bmc.bin")},
			`spec.updates[0].url: "ftp://fw.example/bmc.bin" is not an http, https or file URL`},
		// Condition and Event are readable by anyone who can read the object: no credentials.
		{"URL with credentials", []metal3.FirmwareUpdate{update("bmc", "ftp://admin:hunter2@fw.example/bmc.bin")},
			`spec.updates[0].url: "ftp://***@fw.example/bmc.bin" is not an http, https or file URL`},
	}
	for _, rule := range rules {
		gen := setUpdates(t, ns, "h", rule.updates...)
		hfc := waitHFC(t, ns, "h", rule.name+" judged", func(hfc *metal3.HostFirmwareComponents) bool {
			return current(hfc) && hfc.Generation == gen
		})
		valid := condition(hfc, metal3.HostFirmwareComponentsValid)
		if valid.Status != metav1.ConditionFalse || valid.Reason != "InvalidComponent" || valid.Message != "Invalid Firmware Components: "+rule.want {
			t.Errorf("%s: Valid %s %s %q, want False InvalidComponent %q", rule.name, valid.Status, valid.Reason, valid.Message, rule.want)
		}
		companiontest.WaitEvent(t, env.Client, ns, "HostFirmwareComponents", "h", "ValidationFailed: Invalid Firmware Components: "+rule.want)
	}
}

// TestAppliedUpdates: a valid update is detected; once applied (the fixture flashed it and the
// host controller recorded it in status.updates) the new version shows and ChangeDetected clears.
// Re-reads of unchanged versions write nothing.
func TestAppliedUpdates(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	writes := &apicount.Writes{}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(writes.Wrap)
	seen := startOperator(t, cfg, ns, fix)
	h := companiontest.NewHost(t, env.Client, fix, ns, "h")
	key := client.ObjectKeyFromObject(h)
	first := waitHFC(t, ns, "h", "created", current)
	for _, rv := range seen.WaitAfter(t, key, seen.Mark(key), 5) {
		if rv != first.ResourceVersion {
			t.Fatalf("a re-read of unchanged versions wrote: %s → %s (writes %v)", first.ResourceVersion, rv, writes.All())
		}
	}

	u := update("bios", "http://fw.example/bios-2.20.0.bin")
	gen := setUpdates(t, ns, "h", u)
	hfc := waitHFC(t, ns, "h", "the update detected", func(hfc *metal3.HostFirmwareComponents) bool {
		return hfc.Generation == gen && current(hfc)
	})
	if c := condition(hfc, metal3.HostFirmwareComponentsChangeDetected); c.Status != metav1.ConditionTrue || c.Message != "Updates not applied yet: bios" {
		t.Fatalf("ChangeDetected %+v", c)
	}
	if c := condition(hfc, metal3.HostFirmwareComponentsValid); c.Status != metav1.ConditionTrue {
		t.Fatalf("Valid %+v", c)
	}

	res, err := fix.Service(context.Background(), provisioner.Host{Namespace: ns, Name: "h", NodeID: h.Status.Provisioning.ID},
		provisioner.ServiceData{FirmwareUpdates: []metal3.FirmwareUpdate{u}})
	if err != nil || res.Busy || res.Failed() {
		t.Fatalf("flashing in the fixture: %+v %v", res, err)
	}
	// What the host controller writes when servicing finished: status.updates only.
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{"updates": []metal3.FirmwareUpdate{u}}})
	if err := env.Client.Status().Patch(context.Background(), hfc, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	hfc = waitHFC(t, ns, "h", "the new version read", func(hfc *metal3.HostFirmwareComponents) bool {
		return hfc.Status.Components[0].CurrentVersion == "2.20.0" &&
			condition(hfc, metal3.HostFirmwareComponentsChangeDetected).Status == metav1.ConditionFalse
	})
	if c := hfc.Status.Components[0]; c.InitialVersion != "2.19.1" || c.LastVersionFlashed != "2.20.0" || c.UpdatedAt.IsZero() {
		t.Errorf("bios after the update: %+v", c)
	}
}

// TestUpdatesOfHostWithoutFirmwareInterface: HostFirmwareComponents a user created for a host whose
// BMC type has no firmware interface (IPMI) are not Valid: each listed update is named, with the
// reason, instead of a preparation that fails in Ironic. Nothing listed is valid.
func TestUpdatesOfHostWithoutFirmwareInterface(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	fix.SetFirmwareInterface(false)
	startOperator(t, env.Config, ns, fix)
	hfc := &metal3.HostFirmwareComponents{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ipmi"},
		Spec: metal3.HostFirmwareComponentsSpec{Updates: []metal3.FirmwareUpdate{update("bios", "https://firmware.example/bios-2.20.bin")}}}
	if err := env.Client.Create(context.Background(), hfc); err != nil {
		t.Fatal(err)
	}
	companiontest.NewHost(t, env.Client, fix, ns, "ipmi")
	want := `spec.updates[0].component: "bios" cannot be updated: ` + provisioner.ErrFirmwareUpdateUnsupported.Error()
	got := waitHFC(t, ns, "ipmi", "judged for the host", current)
	if c := condition(got, metal3.HostFirmwareComponentsValid); c.Status != metav1.ConditionFalse || c.Reason != "InvalidComponent" ||
		c.Message != "Invalid Firmware Components: "+want {
		t.Errorf("Valid %s %s %q, want False InvalidComponent %q", c.Status, c.Reason, c.Message, want)
	}
	if len(got.Status.Components) != 0 {
		t.Errorf("components %+v of a host that reports none", got.Status.Components)
	}
	companiontest.WaitEvent(t, env.Client, ns, "HostFirmwareComponents", "ipmi", "ValidationFailed: Invalid Firmware Components: "+want)

	gen := setUpdates(t, ns, "ipmi", []metal3.FirmwareUpdate{}...)
	got = waitHFC(t, ns, "ipmi", "judged with no updates", func(hfc *metal3.HostFirmwareComponents) bool {
		return current(hfc) && hfc.Generation == gen
	})
	if c := condition(got, metal3.HostFirmwareComponentsValid); c.Status != metav1.ConditionTrue {
		t.Errorf("Valid %+v with nothing listed", c)
	}
}
