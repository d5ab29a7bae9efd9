package host

import (
	"fmt"
	"slices"
	"testing"
	"time"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner/fixture"
	"github.com/metalforge/metalforge/internal/test/poll"
)

// TestServicingEditedWhileRunning: a firmware update added while a live update runs is not
// applied by it, nor does it make the provisioner run the live update again once it finished (the
// BIOS would be flashed twice): the host records the update that ran, and the added one waits for
// the next reboot.
func TestServicingEditedWhileRunning(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	op := startWithFirmware(t, ns, fix)
	provisionedWithFirmware(t, ns, "h", &metal3.HostUpdatePolicySpec{FirmwareUpdates: onReboot})

	bios := metal3.FirmwareUpdate{Component: "bios", URL: "http://fw.example/bios-2.20.0.bin"}
	bmc := metal3.FirmwareUpdate{Component: "bmc", URL: "http://fw.example/bmc.bin?version=8.0"}
	fix.SetLatency(fixture.OpService, time.Hour)
	setUpdates(t, ns, "h", bios)
	reboot(t, ns, "h")
	poll.Until(t, "the live update running", func() (bool, string) {
		n, _ := fix.Node(ns, "h")
		return n.Busy == fixture.OpService, fmt.Sprintf("busy %q", n.Busy)
	})
	setUpdates(t, ns, "h", bios, bmc)
	op.waitSeen(t, ns, "h", annotate(t, ns, "h", "touch", "1"), 1) // the host asked with both
	fix.SetLatency(fixture.OpService, 0)

	h := servicedOK(t, ns, "h", fix, 1)
	if v := firmwareVersion(t, fix, ns, "h", "bmc"); v != "7.10.30.00" || firmwareVersion(t, fix, ns, "h", "bios") != "2.20.0" {
		t.Fatalf("after the live update: bios %s, bmc %s; want only the bios flashed", firmwareVersion(t, fix, ns, "h", "bios"), v)
	}
	hfc := waitHFC(t, ns, "h", "the applied update recorded", func(hfc *metal3.HostFirmwareComponents) bool { return len(hfc.Status.Updates) > 0 })
	if !slices.Equal(hfc.Status.Updates, []metal3.FirmwareUpdate{bios}) {
		t.Fatalf("status.updates %v, want only the update that ran (%v)", hfc.Status.Updates, bios)
	}
	waitEvent(t, ns, "h", reasonServicingComplete)
	if notes := eventsFor(t, ns, "h", true); !slices.Contains(notes, "ServicingComplete: Live update complete: firmware update of bios") {
		t.Fatalf("events %v, want the live update to say what it applied", notes)
	}
	op.waitSeen(t, ns, "h", annotate(t, ns, "h", "touch", "2"), 1)
	if n := fix.Count(ns, "h", fixture.OpService); n != 1 {
		t.Fatalf("serviced %d times, want once: the added update waits for the next reboot (%s)", n, describe(h))
	}

	reboot(t, ns, "h")
	servicedOK(t, ns, "h", fix, 2)
	if v := firmwareVersion(t, fix, ns, "h", "bmc"); v != "8.0" {
		t.Fatalf("bmc %s after the next reboot, want 8.0", v)
	}
	poll.Until(t, "the second live update's event", func() (bool, string) {
		notes := eventsFor(t, ns, "h", true)
		return slices.Contains(notes, "ServicingComplete: Live update complete: firmware update of bmc"), fmt.Sprint(notes)
	})
}

// TestServicingPartialFailureKeepsItsCount: a live update failed after applying part of its
// settings. The settings shown stay as they were while the host is in servicing error, so the
// request does not shrink by itself: the failure is retried after its backoff, counted, rather
// than taken for a request the user changed (started again at once, errorCount back to 0).
func TestServicingPartialFailureKeepsItsCount(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	op := startWithFirmware(t, ns, fix, func(c *Config) { c.Backoff = func(int) time.Duration { return time.Hour } })
	provisionedWithFirmware(t, ns, "h", &metal3.HostUpdatePolicySpec{FirmwareSettings: onReboot})

	fix.FailNextFor(ns, "h", fixture.OpService, 1)
	setSettings(t, ns, "h", map[string]string{"ProcTurboMode": "Disabled", "LogicalProc": "Disabled"})
	reboot(t, ns, "h")
	waitHost(t, ns, "h", "servicing error", func(h *metal3.BareMetalHost) bool {
		return h.Status.ErrorType == metal3.ServicingError && h.Status.ErrorCount == 1
	})
	fix.SetBIOS(ns, "h", "ProcTurboMode", "Disabled") // what the failed live update applied
	// A spec edit that asks nothing new, judged: the settings controller has looked since.
	setSettings(t, ns, "h", map[string]string{"ProcTurboMode": "Disabled", "LogicalProc": "Disabled", "ProcVirtualization": "Enabled"})
	op.waitSeen(t, ns, "h", annotate(t, ns, "h", "touch", "1"), 1)
	h := getHost(t, ns, "h")
	if n := fix.Count(ns, "h", fixture.OpService); n != 1 || h.Status.ErrorCount != 1 || h.Status.ErrorType != metal3.ServicingError {
		t.Fatalf("after the partial failure was read: %s, serviced %d times; want the failure kept for its backoff", describe(h), n)
	}
}

// preparingBIOSUpdate creates an available host (no image) and has it prepare a BIOS update, held
// in the fixture until releasePreparation; it returns the update and how many preparations the
// host had before. Manual cleaning takes more than a second, as on real hardware (see
// TestPreparingAppliesFirmwareChanges).
func preparingBIOSUpdate(t *testing.T, ns string) (*fixture.Fixture, *operator, metal3.FirmwareUpdate, int) {
	t.Helper()
	fix := fixture.New(fixture.Config{Latency: map[fixture.Op]time.Duration{fixture.OpPrepare: 1100 * time.Millisecond}})
	op := startWithFirmware(t, ns, fix)
	h := newHost(ns, "h").Build()
	h.Spec.Image = nil
	createHost(t, h)
	waitState(t, ns, "h", metal3.StateAvailable)
	waitHFS(t, ns, "h", "filled in", func(hfs *metal3.HostFirmwareSettings) bool { return len(hfs.Status.Settings) > 0 })
	waitHFC(t, ns, "h", "filled in", func(hfc *metal3.HostFirmwareComponents) bool { return len(hfc.Status.Components) > 0 })
	prepared := fix.Count(ns, "h", fixture.OpPrepare)

	bios := metal3.FirmwareUpdate{Component: "bios", URL: "http://fw.example/bios-2.20.0.bin"}
	fix.SetLatency(fixture.OpPrepare, time.Hour)
	setUpdates(t, ns, "h", bios)
	poll.Until(t, "the preparation running", func() (bool, string) {
		n, _ := fix.Node(ns, "h")
		return n.Busy == fixture.OpPrepare, fmt.Sprintf("busy %q", n.Busy)
	})
	return fix, op, bios, prepared
}

// releasePreparation lets the held preparation end, once the host has looked at the edits made
// meanwhile.
func releasePreparation(t *testing.T, ns string, fix *fixture.Fixture, op *operator) {
	t.Helper()
	op.waitSeen(t, ns, "h", annotate(t, ns, "h", "touch", "1"), 1)
	fix.SetLatency(fixture.OpPrepare, 1100*time.Millisecond)
}

// TestPreparingEditedWhileRunning: a firmware update and a setting added while the host prepares
// are not folded into the preparation that runs (the BIOS update it started with would be flashed
// a second time by a new manual cleaning); the preparation that ran is recorded, and what was
// added is prepared next, alone.
func TestPreparingEditedWhileRunning(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix, op, bios, prepared := preparingBIOSUpdate(t, ns)
	bmc := metal3.FirmwareUpdate{Component: "bmc", URL: "http://fw.example/bmc.bin?version=8.0"}
	setUpdates(t, ns, "h", bios, bmc)
	// A setting too, on the other object: its change is judged while the preparation runs, so
	// once the host is available it would look older than that.
	setSettings(t, ns, "h", map[string]string{"ProcTurboMode": "Disabled"})
	releasePreparation(t, ns, fix, op)

	waitHFC(t, ns, "h", "both updates recorded", func(hfc *metal3.HostFirmwareComponents) bool { return len(hfc.Status.Updates) == 2 })
	waitHFS(t, ns, "h", "the setting applied and read back", func(hfs *metal3.HostFirmwareSettings) bool {
		return hfs.Status.Settings["ProcTurboMode"] == "Disabled"
	})
	waitState(t, ns, "h", metal3.StateAvailable)
	if b, m := fix.Flashes(ns, "h", "bios"), fix.Flashes(ns, "h", "bmc"); b != 1 || m != 1 {
		t.Fatalf("bios flashed %d times, bmc %d times; want once each", b, m)
	}
	if v := biosValue(t, fix, ns, "h", "ProcTurboMode"); v != "Disabled" {
		t.Fatalf("ProcTurboMode %s, want the setting made while the preparation ran", v)
	}
	if v := firmwareVersion(t, fix, ns, "h", "bmc"); v != "8.0" || firmwareVersion(t, fix, ns, "h", "bios") != "2.20.0" {
		t.Fatalf("bios %s, bmc %s after both preparations", firmwareVersion(t, fix, ns, "h", "bios"), v)
	}
	if n := fix.Count(ns, "h", fixture.OpPrepare) - prepared; n != 2 {
		t.Fatalf("prepared %d times, want 2 (the preparation that ran, then what was added)", n)
	}
}

// TestPreparingSettingAddedWhileRunning: a setting made (and judged) while a preparation of a
// firmware update runs is prepared next, before the host becomes available: once available, the
// HostFirmwareSettings, which the preparation did not change, would look older than the host's
// availability and the setting would never be applied.
func TestPreparingSettingAddedWhileRunning(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix, op, _, prepared := preparingBIOSUpdate(t, ns)
	setSettings(t, ns, "h", map[string]string{"ProcTurboMode": "Disabled"})
	releasePreparation(t, ns, fix, op)

	waitHFS(t, ns, "h", "the setting applied and read back", func(hfs *metal3.HostFirmwareSettings) bool {
		return hfs.Status.Settings["ProcTurboMode"] == "Disabled"
	})
	waitState(t, ns, "h", metal3.StateAvailable)
	if b := fix.Flashes(ns, "h", "bios"); b != 1 {
		t.Fatalf("bios flashed %d times, want once", b)
	}
	if n := fix.Count(ns, "h", fixture.OpPrepare) - prepared; n != 2 {
		t.Fatalf("prepared %d times, want 2 (the update, then the setting)", n)
	}
}
