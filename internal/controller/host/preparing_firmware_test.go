package host

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner/fixture"
	"github.com/metalforge/metalforge/internal/test/companiontest"
)

// TestDeprovisionedHostPreparesForChangesMadeWhileProvisioned: with no HostUpdatePolicy (changes
// wait for the next preparation, as metal3's default), a setting and an update asked while the
// host is provisioned are applied by the preparation that follows its deprovisioning, once, before
// it provisions again. They were judged before the host became available again, after its last
// preparation: the host must not take them for ones that preparation applied.
func TestDeprovisionedHostPreparesForChangesMadeWhileProvisioned(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	// Cleaning takes more than a second, as on real hardware: the API's times are seconds, and
	// a deprovisioning that ended in the second the change was judged would hide what is tested.
	fix := fixture.New(fixture.Config{Latency: map[fixture.Op]time.Duration{
		fixture.OpPrepare: 1100 * time.Millisecond, fixture.OpDeprovision: 1100 * time.Millisecond}})
	startWithFirmware(t, ns, fix)
	provisionedWithFirmware(t, ns, "h", nil)
	prepared := fix.Count(ns, "h", fixture.OpPrepare)
	setSettings(t, ns, "h", map[string]string{"ProcTurboMode": "Disabled"})
	setUpdates(t, ns, "h", metal3.FirmwareUpdate{Component: "bmc", URL: "http://fw.example/bmc-8.1.bin"})
	if n := fix.Count(ns, "h", fixture.OpPrepare) - prepared; n != 0 || biosValue(t, fix, ns, "h", "ProcTurboMode") == "Disabled" {
		t.Fatalf("a provisioned host with no policy was prepared %d times (ProcTurboMode %s)", n, biosValue(t, fix, ns, "h", "ProcTurboMode"))
	}

	h := waitState(t, ns, "h", metal3.StateProvisioned)
	update(t, h, func(h *metal3.BareMetalHost) { h.Spec.Image = nil })
	waitHFC(t, ns, "h", "the update recorded", func(hfc *metal3.HostFirmwareComponents) bool { return len(hfc.Status.Updates) == 1 })
	waitHFS(t, ns, "h", "the setting applied and read back", func(hfs *metal3.HostFirmwareSettings) bool {
		return hfs.Status.Settings["ProcTurboMode"] == "Disabled" &&
			companiontest.Condition(hfs.Status.Conditions, metal3.FirmwareSettingsChangeDetected).Status == metav1.ConditionFalse
	})
	h = waitState(t, ns, "h", metal3.StateAvailable)
	if n := fix.Count(ns, "h", fixture.OpPrepare) - prepared; n != 1 || firmwareVersion(t, fix, ns, "h", "bmc") != "8.1" {
		t.Fatalf("after deprovisioning: prepared %d times (want 1), bmc %s", n, firmwareVersion(t, fix, ns, "h", "bmc"))
	}

	update(t, h, func(h *metal3.BareMetalHost) {
		h.Spec.Image = &metal3.Image{URL: testImage, Checksum: "d41d8cd98f00b204e9800998ecf8427e", ChecksumType: metal3.MD5}
	})
	waitState(t, ns, "h", metal3.StateProvisioned)
	if n := fix.Count(ns, "h", fixture.OpPrepare) - prepared; n != 1 {
		t.Fatalf("prepared %d times in all, want 1", n)
	}
}

// TestDeprovisionedAdoptedHostPreparesForChangesMadeBefore: the same for a host adopted as
// externally provisioned, which never went through provisioning here: the changes made while it
// was externally provisioned are applied once it comes back from deprovisioning, before it
// provisions again.
func TestDeprovisionedAdoptedHostPreparesForChangesMadeBefore(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{Latency: map[fixture.Op]time.Duration{
		fixture.OpPrepare: 1100 * time.Millisecond, fixture.OpDeprovision: 1100 * time.Millisecond}})
	startWithFirmware(t, ns, fix)
	h := newHost(ns, "h").WithExternallyProvisioned().Build()
	h.Spec.BMC.CredentialsName = "bmc-h"
	createHost(t, h)
	waitState(t, ns, "h", metal3.StateExternallyProvisioned)
	waitHFS(t, ns, "h", "filled in", func(hfs *metal3.HostFirmwareSettings) bool { return len(hfs.Status.Settings) > 0 })
	waitHFC(t, ns, "h", "filled in", func(hfc *metal3.HostFirmwareComponents) bool { return len(hfc.Status.Components) > 0 })
	setSettings(t, ns, "h", map[string]string{"ProcTurboMode": "Disabled"})
	setUpdates(t, ns, "h", metal3.FirmwareUpdate{Component: "bmc", URL: "http://fw.example/bmc-8.1.bin"})
	waitHFC(t, ns, "h", "the update judged", func(hfc *metal3.HostFirmwareComponents) bool {
		return companiontest.Condition(hfc.Status.Conditions, metal3.HostFirmwareComponentsChangeDetected).Status == metav1.ConditionTrue
	})

	h = waitState(t, ns, "h", metal3.StateExternallyProvisioned)
	update(t, h, func(h *metal3.BareMetalHost) { h.Spec.ExternallyProvisioned = false })
	h = waitState(t, ns, "h", metal3.StateProvisioned)
	update(t, h, func(h *metal3.BareMetalHost) { h.Spec.Image = nil })
	waitHFC(t, ns, "h", "the update recorded", func(hfc *metal3.HostFirmwareComponents) bool { return len(hfc.Status.Updates) == 1 })
	waitState(t, ns, "h", metal3.StateAvailable)
	if n := fix.Count(ns, "h", fixture.OpPrepare); n != 1 || firmwareVersion(t, fix, ns, "h", "bmc") != "8.1" ||
		biosValue(t, fix, ns, "h", "ProcTurboMode") != "Disabled" {
		t.Fatalf("after deprovisioning: prepared %d times (want 1), bmc %s, ProcTurboMode %s", n,
			firmwareVersion(t, fix, ns, "h", "bmc"), biosValue(t, fix, ns, "h", "ProcTurboMode"))
	}
}

// TestAvailableHostPreparesForAChangeMadeWhileInError: a setting changed while an available host
// shows an error (its credentials Secret lost its password, so nothing else happens to it) is
// applied once the error is fixed. The host's AvailableForProvisioning condition turned False at
// the error and True again at the fix: the time the host became available is not when the error
// cleared, and the change made in between is not one its last preparation had.
func TestAvailableHostPreparesForAChangeMadeWhileInError(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	availableWithFirmware(t, ns, fix)
	prepared := fix.Count(ns, "h", fixture.OpPrepare)

	secret := getSecret(t, ns, "bmc-h")
	password := secret.Data["password"]
	update(t, secret, func(s *corev1.Secret) { delete(s.Data, "password") })
	waitHost(t, ns, "h", "the missing password named", func(h *metal3.BareMetalHost) bool {
		return strings.Contains(h.Status.ErrorMessage, "has no password")
	})
	setSettings(t, ns, "h", map[string]string{"ProcTurboMode": "Disabled"})
	waitHFS(t, ns, "h", "the change judged", func(hfs *metal3.HostFirmwareSettings) bool {
		return companiontest.Condition(hfs.Status.Conditions, metal3.FirmwareSettingsChangeDetected).Status == metav1.ConditionTrue
	})
	time.Sleep(1100 * time.Millisecond) // the API's times are seconds: the fix comes a second later
	update(t, getSecret(t, ns, "bmc-h"), func(s *corev1.Secret) { s.Data["password"] = password })
	waitHFS(t, ns, "h", "the setting applied and read back", func(hfs *metal3.HostFirmwareSettings) bool {
		return hfs.Status.Settings["ProcTurboMode"] == "Disabled"
	})
	if n := fix.Count(ns, "h", fixture.OpPrepare) - prepared; n != 1 || biosValue(t, fix, ns, "h", "ProcTurboMode") != "Disabled" {
		t.Fatalf("prepared %d times for the setting (want 1), ProcTurboMode %s", n, biosValue(t, fix, ns, "h", "ProcTurboMode"))
	}
}

// TestPreparationEndsOnceAfterAFailedStatusWrite: the API server fails the status write that
// ends a preparation (of a setting and an update). The update is recorded in
// HostFirmwareComponents by then, so asking the provisioner again would be another request: a
// second manual cleaning. The next reconcile ends the preparation from memory instead.
func TestPreparationEndsOnceAfterAFailedStatusWrite(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{Latency: map[fixture.Op]time.Duration{fixture.OpPrepare: 1100 * time.Millisecond}})
	// The first status write that makes the host available: the end of its first preparation.
	fault := &statusWriteFault{path: "/namespaces/" + ns + "/baremetalhosts/h/status", body: `"state":"available"`}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(fault.wrap)
	op := startManager(t, cfg, ns, fix, firmwareControllers(fix))
	// Both changes exist before the host: its first preparation applies them together.
	create(t, &metal3.HostFirmwareSettings{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h"},
		Spec: metal3.HostFirmwareSettingsSpec{Settings: metal3.DesiredSettingsMap{"ProcTurboMode": intstrS("Disabled")}}})
	create(t, &metal3.HostFirmwareComponents{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h"},
		Spec: metal3.HostFirmwareComponentsSpec{Updates: []metal3.FirmwareUpdate{{Component: "bmc", URL: "http://fw.example/bmc-8.1.bin"}}}})
	h := newHost(ns, "h").Build()
	h.Spec.Image = nil
	createHost(t, h)
	waitHFC(t, ns, "h", "the update recorded", func(hfc *metal3.HostFirmwareComponents) bool { return len(hfc.Status.Updates) == 1 })
	waitHFS(t, ns, "h", "the setting applied and read back", func(hfs *metal3.HostFirmwareSettings) bool {
		return hfs.Status.Settings["ProcTurboMode"] == "Disabled" &&
			companiontest.Condition(hfs.Status.Conditions, metal3.FirmwareSettingsChangeDetected).Status == metav1.ConditionFalse
	})
	h = waitState(t, ns, "h", metal3.StateAvailable)
	if !fault.fired() {
		t.Fatal("the status write that ends the preparation was never failed: the test tested nothing")
	}
	op.waitSeen(t, ns, "h", h.ResourceVersion, 2)
	if n := fix.Count(ns, "h", fixture.OpPrepare); n != 1 || firmwareVersion(t, fix, ns, "h", "bmc") != "8.1" {
		t.Fatalf("prepared %d times (want 1), bmc %s", n, firmwareVersion(t, fix, ns, "h", "bmc"))
	}
}
