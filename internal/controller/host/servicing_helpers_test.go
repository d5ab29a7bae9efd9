package host

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	ctrl "sigs.k8s.io/controller-runtime"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/hostfirmwarecomponents"
	"github.com/metalforge/metalforge/internal/controller/hostfirmwaresettings"
	"github.com/metalforge/metalforge/internal/provisioner"
	"github.com/metalforge/metalforge/internal/provisioner/fixture"
	"github.com/metalforge/metalforge/internal/test/builder"
	"github.com/metalforge/metalforge/internal/test/companiontest"
)

// startWithFirmware runs the host controller with the HostFirmwareSettings and
// HostFirmwareComponents controllers in the same manager, as main wires them.
func startWithFirmware(t *testing.T, ns string, fix *fixture.Fixture, tune ...func(*Config)) *operator {
	t.Helper()
	return startManager(t, env.Config, ns, fix, firmwareControllers(fix), tune...)
}

// firmwareControllers adds the HostFirmwareSettings and HostFirmwareComponents controllers to a
// manager, with short resyncs.
func firmwareControllers(fix *fixture.Fixture) func(mgr ctrl.Manager) error {
	return func(mgr ctrl.Manager) error {
		hfs := &hostfirmwaresettings.Reconciler{Provisioner: fix, Config: hostfirmwaresettings.Config{
			Resync: time.Second, ChangeResync: 200 * time.Millisecond, SchemaGrace: time.Second, Concurrency: 4}}
		hfs.SkipNameValidation()
		if err := hfs.SetupWithManager(context.Background(), mgr); err != nil {
			return err
		}
		hfc := &hostfirmwarecomponents.Reconciler{Provisioner: fix, Config: hostfirmwarecomponents.Config{
			Resync: time.Second, ChangeResync: 200 * time.Millisecond, Concurrency: 4}}
		hfc.SkipNameValidation()
		return hfc.SetupWithManager(mgr)
	}
}

// provisionedWithFirmware creates a host (changed by tune), waits until it is provisioned and its
// HostFirmwareSettings and HostFirmwareComponents are filled in, and gives it a HostUpdatePolicy
// when policy is set.
func provisionedWithFirmware(t *testing.T, ns, name string, policy *metal3.HostUpdatePolicySpec, tune ...func(*builder.BareMetalHostBuilder)) {
	t.Helper()
	b := newHost(ns, name)
	for _, f := range tune {
		f(b)
	}
	h := b.Build()
	h.Spec.BMC.CredentialsName = "bmc-" + name
	createHost(t, h)
	waitState(t, ns, name, metal3.StateProvisioned)
	waitHFS(t, ns, name, "filled in", func(hfs *metal3.HostFirmwareSettings) bool { return len(hfs.Status.Settings) > 0 })
	waitHFC(t, ns, name, "filled in", func(hfc *metal3.HostFirmwareComponents) bool { return len(hfc.Status.Components) > 0 })
	if policy != nil {
		create(t, &metal3.HostUpdatePolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: *policy})
	}
}

var (
	onReboot    = metal3.HostUpdatePolicyOnReboot
	onPreparing = metal3.HostUpdatePolicyOnPreparing
)

func waitHFS(t *testing.T, ns, name, what string, cond func(*metal3.HostFirmwareSettings) bool) *metal3.HostFirmwareSettings {
	t.Helper()
	hfs := &metal3.HostFirmwareSettings{}
	companiontest.Wait(t, env.Client, ns, name, what, hfs, func() bool { return cond(hfs) })
	return hfs
}

func waitHFC(t *testing.T, ns, name, what string, cond func(*metal3.HostFirmwareComponents) bool) *metal3.HostFirmwareComponents {
	t.Helper()
	hfc := &metal3.HostFirmwareComponents{}
	companiontest.Wait(t, env.Client, ns, name, what, hfc, func() bool { return cond(hfc) })
	return hfc
}

var judged = companiontest.Judged

// setSettings replaces the HostFirmwareSettings' spec and waits until its controller judged it.
func setSettings(t *testing.T, ns, name string, settings map[string]string) *metal3.HostFirmwareSettings {
	t.Helper()
	desired := metal3.DesiredSettingsMap{}
	for k, v := range settings {
		desired[k] = intstr.FromString(v)
	}
	update(t, &metal3.HostFirmwareSettings{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, func(hfs *metal3.HostFirmwareSettings) {
		hfs.Spec.Settings = desired
	})
	return waitHFS(t, ns, name, "spec judged", func(hfs *metal3.HostFirmwareSettings) bool { return judged(hfs.Status.Conditions, hfs.Generation) })
}

// setUpdates replaces the HostFirmwareComponents' spec.updates and waits until it is judged.
func setUpdates(t *testing.T, ns, name string, updates ...metal3.FirmwareUpdate) *metal3.HostFirmwareComponents {
	t.Helper()
	update(t, &metal3.HostFirmwareComponents{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, func(hfc *metal3.HostFirmwareComponents) {
		hfc.Spec.Updates = updates
	})
	return waitHFC(t, ns, name, "spec judged", func(hfc *metal3.HostFirmwareComponents) bool { return judged(hfc.Status.Conditions, hfc.Generation) })
}

// biosValue is the host's current BIOS setting in the fixture.
func biosValue(t *testing.T, fix *fixture.Fixture, ns, name, setting string) string {
	t.Helper()
	settings, _, err := fix.FirmwareSettings(context.Background(), provisioner.Host{Namespace: ns, Name: name}, false)
	if err != nil {
		t.Fatal(err)
	}
	return settings[setting]
}

// firmwareVersion is a component's current version in the fixture.
func firmwareVersion(t *testing.T, fix *fixture.Fixture, ns, name, component string) string {
	t.Helper()
	list, err := fix.FirmwareComponents(context.Background(), provisioner.Host{Namespace: ns, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range list {
		if c.Component == component {
			return c.CurrentVersion
		}
	}
	return ""
}

// reboot adds the one-shot reboot annotation and returns the resourceVersion of that write.
func reboot(t *testing.T, ns, name string) string {
	t.Helper()
	return annotate(t, ns, name, metal3.RebootAnnotationPrefix, "")
}

// servicedOK waits until the host ran a live update and is back: OK, powered on, provisioned, no
// reboot annotation left.
func servicedOK(t *testing.T, ns, name string, fix *fixture.Fixture, services int) *metal3.BareMetalHost {
	t.Helper()
	return waitHost(t, ns, name, fmt.Sprintf("serviced %d time(s) and OK", services), func(h *metal3.BareMetalHost) bool {
		_, rebooting := h.Annotations[metal3.RebootAnnotationPrefix]
		return fix.Count(ns, name, fixture.OpService) == services && h.Status.OperationalStatus == metal3.OperationalStatusOK &&
			h.Status.PoweredOn && h.Status.Provisioning.State == metal3.StateProvisioned && !rebooting
	})
}

// turboLiveUpdateFailing asks host h for a live update of ProcTurboMode (Disabled) whose next
// failures servicings fail, and reboots it.
func turboLiveUpdateFailing(t *testing.T, ns string, fix *fixture.Fixture, failures int) {
	t.Helper()
	fix.FailNextFor(ns, "h", fixture.OpService, failures)
	setSettings(t, ns, "h", map[string]string{"ProcTurboMode": "Disabled"})
	reboot(t, ns, "h")
}

func objectKey(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}

func intstrS(v string) intstr.IntOrString { return intstr.FromString(v) }

// availableWithFirmware starts the operator with the firmware controllers and brings host "h",
// with no image, to available with its HostFirmwareSettings filled in.
func availableWithFirmware(t *testing.T, ns string, fix *fixture.Fixture) {
	t.Helper()
	startWithFirmware(t, ns, fix)
	h := newHost(ns, "h").Build()
	h.Spec.Image = nil
	createHost(t, h)
	waitState(t, ns, "h", metal3.StateAvailable)
	waitHFS(t, ns, "h", "filled in", func(hfs *metal3.HostFirmwareSettings) bool { return len(hfs.Status.Settings) > 0 })
}
