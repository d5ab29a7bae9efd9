package host

import (
	"strings"
	"testing"
	"time"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner/fixture"
	"github.com/metalforge/metalforge/internal/test/builder"
)

// TestRebootWithPowerOffDisabled: on a host whose power off is disabled, the one-shot reboot
// annotation reboots the host through the provisioner (never a power off, which the provisioner
// refuses) and is removed once the reboot is done; what would keep such a host off (a held
// annotation, online false) is an error naming the field, cleared when the input is fixed.
func TestRebootWithPowerOffDisabled(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{Latency: map[fixture.Op]time.Duration{fixture.OpReboot: 300 * time.Millisecond}})
	startOperator(t, ns, fix)
	createHost(t, newHost(ns, "h").WithDisablePowerOff().Build())
	waitState(t, ns, "h", metal3.StateProvisioned)

	annotate(t, ns, "h", metal3.RebootAnnotationPrefix, `{"mode":"hard"}`)
	h := waitHost(t, ns, "h", "rebooted and the annotation removed", func(h *metal3.BareMetalHost) bool {
		_, ok := h.Annotations[metal3.RebootAnnotationPrefix]
		return !ok && h.Status.PoweredOn && fix.Count(ns, "h", fixture.OpReboot) == 1
	})
	if n, _ := fix.Node(ns, "h"); !n.PoweredOn || n.LastRebootMode != metal3.RebootModeHard || fix.Count(ns, "h", fixture.OpPowerOff) != 0 {
		t.Fatalf("after the reboot: node %+v, %d power offs", n, fix.Count(ns, "h", fixture.OpPowerOff))
	}
	if h.Status.ErrorType != "" || h.Status.OperationalStatus != metal3.OperationalStatusOK {
		t.Fatalf("host after the reboot: %s", describe(h))
	}
	waitEvent(t, ns, "h", reasonRebooted)

	annotate(t, ns, "h", metal3.RebootAnnotationPrefix+"/remediation", "")
	h = waitHost(t, ns, "h", "held annotation refused", func(h *metal3.BareMetalHost) bool {
		return h.Status.ErrorType == metal3.PowerManagementError
	})
	if !strings.Contains(h.Status.ErrorMessage, "metadata.annotations") || !h.Status.PoweredOn {
		t.Fatalf("held annotation on a host whose power off is disabled: %s", describe(h))
	}
	waitEvent(t, ns, "h", errorReason(metal3.PowerManagementError))
	unannotate(t, ns, "h", metal3.RebootAnnotationPrefix+"/remediation")
	waitHost(t, ns, "h", "error cleared", func(h *metal3.BareMetalHost) bool {
		return h.Status.ErrorType == "" && h.Status.OperationalStatus == metal3.OperationalStatusOK
	})

	update(t, h, func(h *metal3.BareMetalHost) { h.Spec.Online = false }) // the webhook refuses this
	h = waitHost(t, ns, "h", "online false refused", func(h *metal3.BareMetalHost) bool {
		return h.Status.ErrorType == metal3.PowerManagementError && strings.Contains(h.Status.ErrorMessage, "spec.disablePowerOff")
	})
	update(t, h, func(h *metal3.BareMetalHost) { h.Spec.Online = true })
	waitHost(t, ns, "h", "error cleared", func(h *metal3.BareMetalHost) bool {
		return h.Status.ErrorType == "" && h.Status.PoweredOn
	})
	if n := fix.Count(ns, "h", fixture.OpPowerOff); n != 0 || fix.Count(ns, "h", fixture.OpReboot) != 1 {
		t.Fatalf("%d power offs, %d reboots; want none and the one asked", n, fix.Count(ns, "h", fixture.OpReboot))
	}
}

// TestLiveUpdateWithPowerOffDisabled: a host whose power off is disabled is never off, so the
// reboot annotation itself starts its live update; servicing reboots the host, so the operator
// asks for no reboot (and no power off) of its own.
func TestLiveUpdateWithPowerOffDisabled(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{Latency: map[fixture.Op]time.Duration{fixture.OpService: 300 * time.Millisecond}})
	startWithFirmware(t, ns, fix)
	provisionedWithFirmware(t, ns, "h", &metal3.HostUpdatePolicySpec{FirmwareSettings: onReboot},
		func(b *builder.BareMetalHostBuilder) { b.WithDisablePowerOff() })
	setSettings(t, ns, "h", map[string]string{"ProcTurboMode": "Disabled"})
	reboot(t, ns, "h")
	waitHost(t, ns, "h", "servicing", func(h *metal3.BareMetalHost) bool {
		return h.Status.OperationalStatus == metal3.OperationalStatusServicing
	})
	servicedOK(t, ns, "h", fix, 1)
	if got := biosValue(t, fix, ns, "h", "ProcTurboMode"); got != "Disabled" {
		t.Errorf("ProcTurboMode %s after the live update, want Disabled", got)
	}
	if offs, reboots := fix.Count(ns, "h", fixture.OpPowerOff), fix.Count(ns, "h", fixture.OpReboot); offs != 0 || reboots != 0 {
		t.Errorf("%d power offs and %d reboots besides servicing; want none", offs, reboots)
	}
}

// TestPowerFailureBacksOff: a power off the BMC refuses is asked again after the error backoff,
// not at every wake-up (Ironic's power sync wakes the host about a minute after each failure;
// here, annotation edits do): the BMC was asked once.
func TestPowerFailureBacksOff(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	op := startOperator(t, ns, fix, func(c *Config) { c.Backoff = func(int) time.Duration { return time.Hour } })
	createHost(t, newHost(ns, "h").Build())
	waitState(t, ns, "h", metal3.StateProvisioned)
	fix.FailNext(fixture.OpPowerOff, 100)
	annotate(t, ns, "h", metal3.RebootAnnotationPrefix+"/remediation", "")
	waitHost(t, ns, "h", "the power off failed", func(h *metal3.BareMetalHost) bool {
		return h.Status.ErrorType == metal3.PowerManagementError
	})
	for _, v := range []string{"1", "2", "3"} {
		rv := annotate(t, ns, "h", "example.com/nudge", v)
		op.waitSeen(t, ns, "h", rv, 1)
	}
	if n := fix.Count(ns, "h", fixture.OpPowerOff); n != 1 {
		t.Fatalf("%d power offs asked within the backoff, want 1", n)
	}
}

// TestForcedRebootShutsDownSoftly: a reboot annotation's "force" (metal3's way out for a stuck agent
// wait) does not make the power off of a provisioned host a hard one: the OS is shut down softly
// first, as metal3 does; force goes with a power failure only.
func TestForcedRebootShutsDownSoftly(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	startOperator(t, ns, fix)
	createHost(t, newHost(ns, "h").Build())
	waitState(t, ns, "h", metal3.StateProvisioned)
	before := fix.Count(ns, "h", fixture.OpPowerOff)
	annotate(t, ns, "h", metal3.RebootAnnotationPrefix, `{"force": true}`)
	waitHost(t, ns, "h", "rebooted", func(h *metal3.BareMetalHost) bool {
		_, ok := h.Annotations[metal3.RebootAnnotationPrefix]
		return !ok && h.Status.PoweredOn && fix.Count(ns, "h", fixture.OpPowerOff) == before+1
	})
	if n, _ := fix.Node(ns, "h"); n.LastPowerOffForced || n.LastPowerOffMode != metal3.RebootModeSoft {
		t.Fatalf("power off asked forced %t, mode %q; want soft, not forced", n.LastPowerOffForced, n.LastPowerOffMode)
	}
}

// TestAvailableHostTakesForcedRebootsOnly: as metal3 ("normal reboots only work in provisioned
// states"), an available host ignores a plain reboot annotation (which would power-cycle the agent
// fast track keeps running) and takes a forced one.
func TestAvailableHostTakesForcedRebootsOnly(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	op := startOperator(t, ns, fix)
	createHost(t, noImage(ns))
	h := waitState(t, ns, "h", metal3.StateAvailable)
	if !h.Status.PoweredOn {
		t.Fatalf("available host off: %s", describe(h))
	}
	before := fix.Count(ns, "h", fixture.OpPowerOff)
	rv := annotate(t, ns, "h", metal3.RebootAnnotationPrefix, "")
	op.waitSeen(t, ns, "h", rv, 2)
	rv = annotate(t, ns, "h", metal3.RebootAnnotationPrefix+"/remediation", "")
	op.waitSeen(t, ns, "h", rv, 2)
	if n := fix.Count(ns, "h", fixture.OpPowerOff); n != before {
		t.Fatalf("plain reboot annotations on an available host: %d power offs, want none", n-before)
	}
	unannotate(t, ns, "h", metal3.RebootAnnotationPrefix+"/remediation")
	annotate(t, ns, "h", metal3.RebootAnnotationPrefix, `{"force": true}`)
	waitHost(t, ns, "h", "the forced reboot done", func(h *metal3.BareMetalHost) bool {
		_, ok := h.Annotations[metal3.RebootAnnotationPrefix]
		return !ok && h.Status.PoweredOn && fix.Count(ns, "h", fixture.OpPowerOff) == before+1
	})
}
