package hostfirmwaresettings

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner"
	"github.com/metalforge/metalforge/internal/provisioner/fixture"
	"github.com/metalforge/metalforge/internal/test/apicount"
	"github.com/metalforge/metalforge/internal/test/companiontest"
	"github.com/metalforge/metalforge/internal/test/poll"
)

func schemasIn(t *testing.T, ns string) []metal3.FirmwareSchema {
	t.Helper()
	var list metal3.FirmwareSchemaList
	if err := env.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// TestSettingsAndOneSharedSchema: every registered host gets its HostFirmwareSettings (owned by
// it, the host's settings without passwords, both conditions), and identical hardware shares one
// FirmwareSchema, created once, with no owner references. Created before any of its hosts was
// inspected (hosts register before inspection), it gets their vendor and model in one patch once
// they are, and is never written again.
func TestSettingsAndOneSharedSchema(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	writes := &apicount.Writes{}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(writes.Wrap)
	op := startOperator(t, cfg, ns, fix)

	const n = 4
	var schema string
	hosts := make([]*metal3.BareMetalHost, n)
	for i := range n {
		name := fmt.Sprintf("h%d", i)
		h := newHost(t, fix, ns, name)
		hosts[i] = h
		hfs := waitHFS(t, ns, name, "status filled", func(hfs *metal3.HostFirmwareSettings) bool {
			return hfs.Status.FirmwareSchema != nil && current(hfs)
		})
		if refs := hfs.OwnerReferences; len(refs) != 1 || refs[0].UID != h.UID || refs[0].Controller == nil || !*refs[0].Controller {
			t.Errorf("%s: owner references %+v, want the host as controller", name, refs)
		}
		if len(hfs.Status.Settings) != 8 || hfs.Status.Settings["ProcTurboMode"] != "Enabled" || hfs.Status.Settings["PowerOnDelaySeconds"] != "0" {
			t.Errorf("%s: settings %v, want the fixture's eight (no password)", name, hfs.Status.Settings)
		}
		for _, password := range []string{"AdminPassword", "SetupPwd"} {
			if _, ok := hfs.Status.Settings[password]; ok {
				t.Errorf("%s: the password setting %s is in status", name, password)
			}
		}
		if c := condition(hfs, metal3.FirmwareSettingsValid); c.Status != metav1.ConditionTrue || c.Reason != "Success" {
			t.Errorf("%s: Valid %+v", name, c)
		}
		if c := condition(hfs, metal3.FirmwareSettingsChangeDetected); c.Status != metav1.ConditionFalse || c.Reason != "Success" {
			t.Errorf("%s: ChangeDetected %+v", name, c)
		}
		if hfs.Status.LastUpdated == nil || hfs.Status.FirmwareSchema.Namespace != ns {
			t.Errorf("%s: lastUpdated %v, schema %+v", name, hfs.Status.LastUpdated, hfs.Status.FirmwareSchema)
		}
		if schema == "" {
			schema = hfs.Status.FirmwareSchema.Name
		} else if hfs.Status.FirmwareSchema.Name != schema {
			t.Errorf("%s: schema %s, want the shared %s", name, hfs.Status.FirmwareSchema.Name, schema)
		}
	}
	list := schemasIn(t, ns)
	if len(list) != 1 {
		t.Fatalf("%d FirmwareSchemas, want one shared", len(list))
	}
	fs := list[0]
	if fs.Name != schema || len(fs.OwnerReferences) != 0 || fs.Generation != 1 || fs.Spec.HardwareVendor != "" {
		t.Errorf("schema %s: owners %v, generation %d, vendor %q; want %s, none, 1, none (no host inspected)",
			fs.Name, fs.OwnerReferences, fs.Generation, fs.Spec.HardwareVendor, schema)
	}

	// Inspection ends on every host at once: one of them names the schema's hardware.
	for _, h := range hosts {
		setHostStatus(t, h, func(st *metal3.BareMetalHostStatus) {
			st.HardwareDetails = &metal3.HardwareDetails{Hostname: h.Name,
				SystemVendor: metal3.HardwareSystemVendor{Manufacturer: "Metalforge", ProductName: "Fixture R740", SerialNumber: h.Name}}
		})
	}
	named := &metal3.FirmwareSchema{}
	companiontest.Wait(t, env.Client, ns, schema, "the schema to name its hardware", named, func() bool { return named.Spec.HardwareVendor != "" })
	if named.Spec.HardwareVendor != "Metalforge" || named.Spec.HardwareModel != "Fixture R740" || named.Generation != 2 {
		t.Errorf("schema vendor/model %q/%q, generation %d; want the hosts' status.hardware, 2", named.Spec.HardwareVendor, named.Spec.HardwareModel, named.Generation)
	}
	// Every host looks again (resync) with the schema named: none writes it.
	for _, h := range hosts {
		key := client.ObjectKeyFromObject(h)
		op.WaitAfter(t, key, op.Mark(key), 2)
	}
	turbo := fs.Spec.Schema["ProcTurboMode"]
	delay := fs.Spec.Schema["PowerOnDelaySeconds"]
	if len(fs.Spec.Schema) != 8 || turbo.AttributeType != "Enumeration" || len(turbo.AllowableValues) != 2 ||
		delay.UpperBound == nil || *delay.UpperBound != 300 || fs.Spec.Schema["SystemModelName"].ReadOnly == nil {
		t.Errorf("schema content %+v", fs.Spec.Schema)
	}
	if c := writes.Count("firmwareschemas create"); c != 1 {
		t.Errorf("%d FirmwareSchema creates, want 1 (writes: %v)", c, writes.All())
	}
	if c := writes.Count("firmwareschemas update") + writes.Count("firmwareschemas patch"); c != 1 {
		t.Errorf("the shared FirmwareSchema was written %d more times, want once (its hardware)", c)
	}
}

// TestOnlyRegisteredHosts: a host not registered, paused or detached gets nothing; it gets its
// HostFirmwareSettings once registered.
func TestOnlyRegisteredHosts(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	op := startOperator(t, env.Config, ns, fix)
	key := types.NamespacedName{Namespace: ns, Name: "h"}
	mark := op.Mark(key)
	h := newHost(t, nil, ns, "h")
	op.WaitAfter(t, key, mark, 1)
	if _, ok := getHFS(t, ns, "h"); ok {
		t.Fatal("an unregistered host got HostFirmwareSettings")
	}
	for _, annotation := range []string{metal3.PausedAnnotation, metal3.DetachedAnnotation} {
		h.Annotations = map[string]string{annotation: ""}
		if err := env.Client.Update(context.Background(), h); err != nil {
			t.Fatal(err)
		}
		mark := op.Mark(key)
		register(t, fix, h)
		op.WaitAfter(t, key, mark, 1)
		if _, ok := getHFS(t, ns, "h"); ok {
			t.Fatalf("a host with the %s annotation got HostFirmwareSettings", annotation)
		}
		mark = op.Mark(key)
		// Back to unregistered, node ID cleared: a change that wakes the controller (HostChanges).
		setHostStatus(t, h, func(st *metal3.BareMetalHostStatus) {
			st.Provisioning.ID, st.Provisioning.State = "", metal3.StateRegistering
		})
		op.WaitAfter(t, key, mark, 1)
	}
	h.Annotations = nil
	if err := env.Client.Update(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	register(t, fix, h)
	waitHFS(t, ns, "h", "created once registered", current)
}

// TestValidationRules: each rule a spec setting can break gives Valid=False with the
// ConfigurationError reason, a message naming the setting and the rule, and one ValidationFailed
// Event; a valid change gives Valid and ChangeDetected.
func TestValidationRules(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	op := startOperator(t, env.Config, ns, fix)
	newHost(t, fix, ns, "h")
	waitHFS(t, ns, "h", "created", current)
	str, num := intstr.FromString, intstr.FromInt32
	rules := []struct {
		name    string
		setting string
		value   intstr.IntOrString
		want    string
	}{
		{"unknown name", "NoSuchSetting", str("1"), "spec.settings.NoSuchSetting: unknown setting: the host's firmware has no setting of this name"},
		{"read-only", "SystemModelName", str("X"), "spec.settings.SystemModelName: read-only setting: the host's firmware does not allow changing it"},
		{"password", "AdminPassword", str("hunter2"), "spec.settings.AdminPassword: password settings cannot be set through HostFirmwareSettings"},
		{"password by type", "SetupPwd", str("hunter2"), "spec.settings.SetupPwd: password settings cannot be set through HostFirmwareSettings"},
		{"wrong type: integer", "PowerOnDelaySeconds", str("soon"), `spec.settings.PowerOnDelaySeconds: "soon" is not an integer`},
		{"wrong type: boolean", "SerialConsole", str("yes"), `spec.settings.SerialConsole: "yes" is not a boolean (true or false)`},
		{"out of range", "PowerOnDelaySeconds", num(301), "spec.settings.PowerOnDelaySeconds: 301 is out of range [0, 300]"},
		{"too long", "AssetTag", str("a-very-long-asset-tag"), "spec.settings.AssetTag: \"a-very-long-asset-tag\" is 21 characters long, the length must be in [0, 16]"},
		{"value not allowed", "ProcTurboMode", str("Off"), `spec.settings.ProcTurboMode: "Off" is not an allowed value; allowed: Enabled, Disabled`},
	}
	for _, rule := range rules {
		gen := setSpec(t, ns, "h", metal3.DesiredSettingsMap{rule.setting: rule.value})
		hfs := waitHFS(t, ns, "h", rule.name+" judged", func(hfs *metal3.HostFirmwareSettings) bool {
			return current(hfs) && hfs.Generation == gen
		})
		valid := condition(hfs, metal3.FirmwareSettingsValid)
		if valid.Status != metav1.ConditionFalse || valid.Reason != "ConfigurationError" || valid.Message != "Invalid BIOS setting: "+rule.want {
			t.Errorf("%s: Valid %s %s %q, want False ConfigurationError %q", rule.name, valid.Status, valid.Reason, valid.Message, rule.want)
		}
		companiontest.WaitEvent(t, env.Client, ns, "HostFirmwareSettings", "h", "ValidationFailed: Invalid BIOS setting: "+rule.want)
	}
	// Re-reads of the same invalid spec neither write nor emit again.
	key := types.NamespacedName{Namespace: ns, Name: "h"}
	op.WaitAfter(t, key, op.Mark(key), 3)
	if n := companiontest.Count(companiontest.Events(t, env.Client, ns, "HostFirmwareSettings", "h"), "Invalid BIOS setting: "+rules[len(rules)-1].want); n != 1 {
		t.Errorf("%d events for the last rule after re-reads, want 1", n)
	}

	gen := setSpec(t, ns, "h", metal3.DesiredSettingsMap{"ProcTurboMode": str("Disabled"), "PowerOnDelaySeconds": num(30)})
	hfs := waitHFS(t, ns, "h", "a valid change judged", func(hfs *metal3.HostFirmwareSettings) bool {
		return current(hfs) && hfs.Generation == gen
	})
	if c := condition(hfs, metal3.FirmwareSettingsValid); c.Status != metav1.ConditionTrue || c.Reason != "Success" {
		t.Errorf("valid change: Valid %+v", c)
	}
	if c := condition(hfs, metal3.FirmwareSettingsChangeDetected); c.Status != metav1.ConditionTrue ||
		c.Message != "Settings that differ from the host's: PowerOnDelaySeconds, ProcTurboMode" {
		t.Errorf("valid change: ChangeDetected %+v", c)
	}

	// A spec that copies the host's settings, a read-only one included, asks for no change: it is
	// not judged (metal3 validates only a spec that differs), so GitOps copies of status stay Valid.
	model := hfs.Status.Settings["SystemModelName"]
	if model == "" {
		t.Fatalf("the host reports no SystemModelName: %v", hfs.Status.Settings)
	}
	gen = setSpec(t, ns, "h", metal3.DesiredSettingsMap{"SystemModelName": str(model), "ProcTurboMode": str(hfs.Status.Settings["ProcTurboMode"])})
	hfs = waitHFS(t, ns, "h", "a copy of the host's settings judged", func(hfs *metal3.HostFirmwareSettings) bool {
		return current(hfs) && hfs.Generation == gen
	})
	if c := condition(hfs, metal3.FirmwareSettingsValid); c.Status != metav1.ConditionTrue || c.Reason != "Success" {
		t.Errorf("a copy of the host's settings: Valid %+v", c)
	}
	if c := condition(hfs, metal3.FirmwareSettingsChangeDetected); c.Status != metav1.ConditionFalse {
		t.Errorf("a copy of the host's settings: ChangeDetected %+v", c)
	}

	// One setting of that copy changed: the read-only copy still asks for nothing, and is not
	// judged; the change is.
	turbo := "Disabled"
	if hfs.Status.Settings["ProcTurboMode"] == turbo {
		turbo = "Enabled"
	}
	gen = setSpec(t, ns, "h", metal3.DesiredSettingsMap{"SystemModelName": str(model), "ProcTurboMode": str(turbo)})
	hfs = waitHFS(t, ns, "h", "a copy with one setting changed judged", func(hfs *metal3.HostFirmwareSettings) bool {
		return current(hfs) && hfs.Generation == gen
	})
	if c := condition(hfs, metal3.FirmwareSettingsValid); c.Status != metav1.ConditionTrue {
		t.Errorf("a copy with one setting changed: Valid %+v, want True (the read-only copy is no change)", c)
	}
	if c := condition(hfs, metal3.FirmwareSettingsChangeDetected); c.Status != metav1.ConditionTrue || c.Message != "Settings that differ from the host's: ProcTurboMode" {
		t.Errorf("a copy with one setting changed: ChangeDetected %+v, want True naming ProcTurboMode only", c)
	}
}

// TestRereadsWriteOnlyChanges: periodic re-reads of unchanged settings write nothing; a setting
// the host changed (preparing or servicing applied it) reaches status and clears ChangeDetected.
func TestRereadsWriteOnlyChanges(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	writes := &apicount.Writes{}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(writes.Wrap)
	op := startOperator(t, cfg, ns, fix, func(c *Config) { c.Resync, c.ChangeResync = 20*time.Millisecond, 20*time.Millisecond })
	h := newHost(t, fix, ns, "h")
	key := client.ObjectKeyFromObject(h)
	first := waitHFS(t, ns, "h", "created", current)
	for _, rv := range op.WaitAfter(t, key, op.Mark(key), 10) {
		if rv != first.ResourceVersion {
			t.Fatalf("a re-read of unchanged settings wrote: resourceVersion %s → %s (writes %v)", first.ResourceVersion, rv, writes.All())
		}
	}
	if n := writes.Count("hostfirmwaresettings/status update") + writes.Count("hostfirmwaresettings/status patch"); n != 1 {
		t.Errorf("%d status writes, want 1 (writes %v)", n, writes.All())
	}

	gen := setSpec(t, ns, "h", metal3.DesiredSettingsMap{"ProcTurboMode": intstr.FromString("Disabled")})
	waitHFS(t, ns, "h", "the change detected", func(hfs *metal3.HostFirmwareSettings) bool {
		return hfs.Generation == gen && current(hfs) && condition(hfs, metal3.FirmwareSettingsChangeDetected).Status == metav1.ConditionTrue
	})
	res, err := fix.Service(context.Background(), provisioner.Host{Namespace: ns, Name: "h", NodeID: h.Status.Provisioning.ID},
		provisioner.ServiceData{FirmwareSettings: metal3.DesiredSettingsMap{"ProcTurboMode": intstr.FromString("Disabled")}})
	if err != nil || res.Busy || res.Failed() {
		t.Fatalf("applying the setting in the fixture: %+v %v", res, err)
	}
	hfs := waitHFS(t, ns, "h", "the applied setting read", func(hfs *metal3.HostFirmwareSettings) bool {
		return hfs.Status.Settings["ProcTurboMode"] == "Disabled"
	})
	if c := condition(hfs, metal3.FirmwareSettingsChangeDetected); c.Status != metav1.ConditionFalse {
		t.Errorf("after the change was applied: ChangeDetected %+v", c)
	}
	if !hfs.Status.LastUpdated.After(first.Status.LastUpdated.Time) && !hfs.Status.LastUpdated.Equal(first.Status.LastUpdated) {
		t.Errorf("lastUpdated went back: %v → %v", first.Status.LastUpdated, hfs.Status.LastUpdated)
	}
}

// TestSettingsKeptWhileApplying: while the host is preparing or a live update runs, the settings
// Ironic shows part-way (one step applied, another still running) are not published: the pending
// change stays detected, so the host's request does not shrink mid-way; a spec edit is still
// judged. Once the host leaves that step the applied values show and the change is gone.
func TestSettingsKeptWhileApplying(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	op := startOperator(t, env.Config, ns, fix, func(c *Config) { c.Resync, c.ChangeResync = 20*time.Millisecond, 20*time.Millisecond })
	for _, tc := range []struct {
		name          string
		apply, finish func(*metal3.BareMetalHostStatus)
	}{
		{"servicing",
			func(st *metal3.BareMetalHostStatus) { st.OperationalStatus = metal3.OperationalStatusServicing },
			func(st *metal3.BareMetalHostStatus) { st.OperationalStatus = metal3.OperationalStatusOK }},
		{"preparing",
			func(st *metal3.BareMetalHostStatus) { st.Provisioning.State = metal3.StatePreparing },
			func(st *metal3.BareMetalHostStatus) { st.Provisioning.State = metal3.StateAvailable }},
	} {
		h := newHost(t, fix, ns, tc.name)
		key := client.ObjectKeyFromObject(h)
		waitHFS(t, ns, tc.name, "created", current)
		gen := setSpec(t, ns, tc.name, metal3.DesiredSettingsMap{"ProcTurboMode": intstr.FromString("Disabled")})
		waitHFS(t, ns, tc.name, "the change detected", func(hfs *metal3.HostFirmwareSettings) bool {
			return hfs.Generation == gen && current(hfs) && condition(hfs, metal3.FirmwareSettingsChangeDetected).Status == metav1.ConditionTrue
		})
		setHostStatus(t, h, tc.apply)
		// A reconcile that reads the host from before the step would rightly publish the value.
		op.waitHostCached(t, h, tc.name+" seen by the controller", func(cached *metal3.BareMetalHost) bool {
			return cached.Status.Provisioning.State == h.Status.Provisioning.State && cached.Status.OperationalStatus == h.Status.OperationalStatus
		})
		// and one still running may have read it before: the second reconcile that ends from now
		// on started after the first ended, so with the host as it is.
		op.WaitAfter(t, key, op.Mark(key), 2)
		fix.SetBIOS(ns, tc.name, "ProcTurboMode", "Disabled") // the provisioner applied it part-way
		op.WaitAfter(t, key, op.Mark(key), 5)
		hfs, _ := getHFS(t, ns, tc.name)
		if hfs.Status.Settings["ProcTurboMode"] != "Enabled" || condition(hfs, metal3.FirmwareSettingsChangeDetected).Status != metav1.ConditionTrue {
			t.Errorf("%s: while applying, ProcTurboMode %q and ChangeDetected %+v; want the values from before (Enabled) and the change still detected",
				tc.name, hfs.Status.Settings["ProcTurboMode"], condition(hfs, metal3.FirmwareSettingsChangeDetected))
		}
		gen = setSpec(t, ns, tc.name, metal3.DesiredSettingsMap{"NoSuchSetting": intstr.FromString("x")})
		waitHFS(t, ns, tc.name, "an edit judged while applying", func(hfs *metal3.HostFirmwareSettings) bool {
			return hfs.Generation == gen && current(hfs) && condition(hfs, metal3.FirmwareSettingsValid).Status == metav1.ConditionFalse
		})
		setSpec(t, ns, tc.name, metal3.DesiredSettingsMap{"ProcTurboMode": intstr.FromString("Disabled")})
		setHostStatus(t, h, tc.finish)
		waitHFS(t, ns, tc.name, "the applied value once the step ended", func(hfs *metal3.HostFirmwareSettings) bool {
			return current(hfs) && hfs.Status.Settings["ProcTurboMode"] == "Disabled" &&
				condition(hfs, metal3.FirmwareSettingsChangeDetected).Status == metav1.ConditionFalse
		})
	}
}

// TestDeletedSettingsComeBack: HostFirmwareSettings deleted by hand while the host is registered
// are created again at once (not at the next periodic re-read), with the settings read anew and the
// user's spec gone with the deleted object.
func TestDeletedSettingsComeBack(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	// No periodic re-read: only the deletion can bring the object back within the test.
	startOperator(t, env.Config, ns, fix, func(c *Config) { c.Resync, c.ChangeResync = time.Hour, time.Hour })
	newHost(t, fix, ns, "h")
	old := waitHFS(t, ns, "h", "created", current)
	setSpec(t, ns, "h", metal3.DesiredSettingsMap{"ProcTurboMode": intstr.FromString("Disabled")})
	waitHFS(t, ns, "h", "change detected", func(hfs *metal3.HostFirmwareSettings) bool {
		return current(hfs) && condition(hfs, metal3.FirmwareSettingsChangeDetected).Status == metav1.ConditionTrue
	})
	deleteHFS(t, ns, "h")
	again := waitHFS(t, ns, "h", "created again", func(hfs *metal3.HostFirmwareSettings) bool {
		return hfs.UID != old.UID && current(hfs)
	})
	if len(again.Spec.Settings) != 0 || len(again.Status.Settings) != len(old.Status.Settings) ||
		again.Status.FirmwareSchema.Name != old.Status.FirmwareSchema.Name {
		t.Errorf("created again with spec %v, %d settings, schema %q; want an empty spec, %d settings, schema %q",
			again.Spec.Settings, len(again.Status.Settings), again.Status.FirmwareSchema.Name,
			len(old.Status.Settings), old.Status.FirmwareSchema.Name)
	}
	if c := condition(again, metal3.FirmwareSettingsChangeDetected); c.Status != metav1.ConditionFalse {
		t.Errorf("ChangeDetected %+v after re-creation, want False", c)
	}
}

// TestUnusedSchemaIsDeleted: a schema stays while any HostFirmwareSettings names it and goes once
// none does; a host that needs it again creates it again under the same name.
func TestUnusedSchemaIsDeleted(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	op := startOperator(t, env.Config, ns, fix, func(c *Config) { c.Resync, c.ChangeResync = time.Hour, time.Hour })
	a := newHost(t, fix, ns, "a")
	b := newHost(t, fix, ns, "b")
	waitHFS(t, ns, "a", "created", current)
	schema := waitHFS(t, ns, "b", "created", current).Status.FirmwareSchema.Name
	key := types.NamespacedName{Namespace: ns, Name: schema}

	// A paused host's HostFirmwareSettings, once deleted, stay deleted (as they would once its
	// host is deleted: the garbage collector, which envtest lacks, would delete them).
	mark := len(op.checks(key))
	op.pause(t, a, true)
	deleteHFS(t, ns, "a")
	// The deletion makes the cleaner look at the schema; b still names it, so it stays.
	poll.Until(t, "the cleaner to look at the schema", func() (bool, string) { return len(op.checks(key)) > mark, "" })
	if got := op.checks(key)[mark]; got || len(schemasIn(t, ns)) != 1 {
		t.Fatalf("the schema was deleted (%v) while host b still uses it", got)
	}
	op.pause(t, b, true)
	deleteHFS(t, ns, "b")
	poll.Until(t, "the unused schema deleted", func() (bool, string) {
		return len(schemasIn(t, ns)) == 0, fmt.Sprintf("%d schemas", len(schemasIn(t, ns)))
	})

	// Host a is unpaused: its HostFirmwareSettings and schema come back.
	op.pause(t, a, false)
	again := waitHFS(t, ns, "a", "created again", current)
	if again.Status.FirmwareSchema.Name != schema || len(schemasIn(t, ns)) != 1 {
		t.Fatalf("schema %s after re-creation, %d schemas; want %s again", again.Status.FirmwareSchema.Name, len(schemasIn(t, ns)), schema)
	}
}

// TestSchemaMadeElsewhereStays: a FirmwareSchema no host uses is deleted only when its name is one
// the controller gives (content-addressed, "schema-…"); one a user or another tool made stays.
func TestSchemaMadeElsewhereStays(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	op := startOperator(t, env.Config, ns, fixture.New(fixture.Config{}))
	handMade := &metal3.FirmwareSchema{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hand-made"},
		Spec: metal3.FirmwareSchemaSpec{Schema: map[string]metal3.SettingSchema{"X": {AttributeType: "String"}}}}
	unused := handMade.DeepCopy()
	unused.Name = schemaNamePrefix + "0123456789abcdef"
	for _, fs := range []*metal3.FirmwareSchema{handMade, unused} {
		if err := env.Client.Create(context.Background(), fs); err != nil {
			t.Fatal(err)
		}
	}
	poll.Until(t, "the unused schema of the controller's naming deleted", func() (bool, string) {
		n := len(schemasIn(t, ns))
		return n == 1, fmt.Sprintf("%d schemas", n)
	})
	key := types.NamespacedName{Namespace: ns, Name: handMade.Name}
	poll.Until(t, "the cleaner to look at the hand-made schema past its grace", func() (bool, string) {
		return len(op.checks(key)) > 0 && time.Since(handMade.CreationTimestamp.Time) > 2*testConfig().SchemaGrace, ""
	})
	if list := schemasIn(t, ns); len(list) != 1 || list[0].Name != handMade.Name || slices.Contains(op.checks(key), true) {
		t.Fatalf("schemas %v, cleaner's decisions on the hand-made one %v: want it kept", list, op.checks(key))
	}
}

// pause sets or removes the host's paused annotation and waits until the controller sees it
// (deleting the HostFirmwareSettings before that would rightly bring them back at once).
func (o *operator) pause(t *testing.T, h *metal3.BareMetalHost, paused bool) {
	t.Helper()
	h.Annotations = nil
	if paused {
		h.Annotations = map[string]string{metal3.PausedAnnotation: ""}
	}
	if err := env.Client.Update(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	o.waitHostCached(t, h, fmt.Sprintf("paused=%v seen by the controller", paused), func(cached *metal3.BareMetalHost) bool {
		_, ok := cached.Annotations[metal3.PausedAnnotation]
		return ok == paused
	})
}

func deleteHFS(t *testing.T, ns, name string) {
	t.Helper()
	hfs := &metal3.HostFirmwareSettings{}
	hfs.Namespace, hfs.Name = ns, name
	if err := env.Client.Delete(context.Background(), hfs); err != nil {
		t.Fatal(err)
	}
}

// TestDeletedSchemaComesBack: a FirmwareSchema deleted while a host's HostFirmwareSettings name it
// (by hand, or by the cleaner in the moment a new host of the same hardware found it in the cache)
// is created again at once, under the same name, not at the host's next re-read.
func TestDeletedSchemaComesBack(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	// No periodic re-read: only the deletion can bring the schema back within the test.
	startOperator(t, env.Config, ns, fix, func(c *Config) { c.Resync, c.ChangeResync = time.Hour, time.Hour })
	newHost(t, fix, ns, "h")
	name := waitHFS(t, ns, "h", "created", current).Status.FirmwareSchema.Name
	old := schemasIn(t, ns)
	if len(old) != 1 || old[0].Name != name {
		t.Fatalf("schemas %v, want %s", old, name)
	}
	// Within the grace period of its creation: the memory of having created it a moment ago
	// (which stops a second create the cache does not show yet) goes with the deletion.
	if err := env.Client.Delete(context.Background(), &old[0]); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the schema created again", func() (bool, string) {
		s := schemasIn(t, ns)
		return len(s) == 1 && s[0].Name == name && s[0].UID != old[0].UID, fmt.Sprintf("%d schemas", len(s))
	})
}
