package host

import (
	"encoding/json"
	"testing"
	"time"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner/fixture"
	"github.com/metalforge/metalforge/internal/test/poll"
)

// TestPaused: a paused host is not touched; unpaused, it proceeds.
func TestPaused(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	op := startOperator(t, ns, fix)
	createHost(t, newHost(ns, "h").WithAnnotation(metal3.PausedAnnotation, "metal3.io/capm3").Build())
	op.waitSeen(t, ns, "h", annotate(t, ns, "h", "touch", "1"), 1)
	if h := getHost(t, ns, "h"); h.Status.LastUpdated != nil || len(h.Finalizers) != 0 {
		t.Fatalf("paused host was reconciled: %s, finalizers %v", describe(h), h.Finalizers)
	}
	unannotate(t, ns, "h", metal3.PausedAnnotation)
	waitState(t, ns, "h", metal3.StateProvisioned)
}

// TestDetachAndReattach: detaching removes the node and keeps the state; removing the annotation
// registers and adopts the host without provisioning it again.
func TestDetachAndReattach(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	startOperator(t, ns, fix)
	createHost(t, newHost(ns, "h").Build())
	waitState(t, ns, "h", metal3.StateProvisioned)
	annotate(t, ns, "h", metal3.DetachedAnnotation, "")
	h := waitHost(t, ns, "h", "detached", func(h *metal3.BareMetalHost) bool {
		return h.Status.OperationalStatus == metal3.OperationalStatusDetached
	})
	if _, ok := fix.Node(ns, "h"); ok || h.Status.Provisioning.State != metal3.StateProvisioned {
		t.Fatalf("detached host: node still there or state changed: %s", describe(h))
	}
	if c := condition(h, metal3.ReadyCondition); c == nil || c.Reason != metal3.DetachedReason {
		t.Fatalf("Ready condition of a detached host: %+v", c)
	}
	waitEvent(t, ns, "h", reasonDetached)
	unannotate(t, ns, "h", metal3.DetachedAnnotation)
	waitHost(t, ns, "h", "attached again", func(h *metal3.BareMetalHost) bool {
		return h.Status.OperationalStatus == metal3.OperationalStatusOK && h.Status.Provisioning.State == metal3.StateProvisioned
	})
	if n, ok := fix.Node(ns, "h"); !ok || !n.Provisioned || fix.Count(ns, "h", fixture.OpProvision) != 1 || fix.Count(ns, "h", fixture.OpAdopt) != 1 {
		t.Fatalf("reattached node %+v; provisioned %d times, adopted %d times", n, fix.Count(ns, "h", fixture.OpProvision), fix.Count(ns, "h", fixture.OpAdopt))
	}
	waitEvent(t, ns, "h", reasonAttached)
}

// TestFailedDetachWithdrawn: a detach that fails shows a detach error; removing the annotation
// withdraws the request and clears the error, the host stays attached and provisioned.
func TestFailedDetachWithdrawn(t *testing.T) {
	t.Parallel()
	ns, fix, op := provisionedWithHourBackoff(t)
	fix.FailNext(fixture.OpDetach, 100)
	annotate(t, ns, "h", metal3.DetachedAnnotation, "")
	waitHost(t, ns, "h", "detach error", func(h *metal3.BareMetalHost) bool { return h.Status.ErrorType == metal3.DetachError })
	rv := unannotate(t, ns, "h", metal3.DetachedAnnotation)
	op.waitSeen(t, ns, "h", rv, 1)
	h := waitHost(t, ns, "h", "error cleared", func(h *metal3.BareMetalHost) bool { return h.Status.ErrorType == "" })
	if h.Status.OperationalStatus != metal3.OperationalStatusOK || h.Status.Provisioning.State != metal3.StateProvisioned {
		t.Fatalf("after withdrawing a failed detach: %s", describe(h))
	}
	if _, ok := fix.Node(ns, "h"); !ok {
		t.Fatal("the node is gone although the detach failed")
	}
}

// TestDetachNeedsForceOutsideSteadyStates: a detached annotation on an inspecting host waits for
// a steady state unless it says force.
func TestDetachNeedsForceOutsideSteadyStates(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{PollInterval: 50 * time.Millisecond})
	fix.SetLatency(fixture.OpInspect, hold)
	op := startOperator(t, ns, fix)
	createHost(t, noImage(ns))
	waitState(t, ns, "h", metal3.StateInspecting)
	op.waitSeen(t, ns, "h", annotate(t, ns, "h", metal3.DetachedAnnotation, ""), 2)
	if h := getHost(t, ns, "h"); h.Status.OperationalStatus == metal3.OperationalStatusDetached {
		t.Fatal("detached an inspecting host without force")
	}
	annotate(t, ns, "h", metal3.DetachedAnnotation, `{"force":true}`)
	waitHost(t, ns, "h", "force-detached while inspecting", func(h *metal3.BareMetalHost) bool {
		return h.Status.OperationalStatus == metal3.OperationalStatusDetached && h.Status.Provisioning.State == metal3.StateInspecting
	})
}

// TestStatusAnnotationRestoresStatus: a host moved with its status in the annotation continues as
// provisioned (adopted, not provisioned again) and the annotation is removed.
func TestStatusAnnotationRestoresStatus(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	startOperator(t, ns, fix)
	h := newHost(ns, "h").Build()
	status := metal3.BareMetalHostStatus{
		OperationalStatus: metal3.OperationalStatusOK,
		Provisioning:      metal3.ProvisionStatus{State: metal3.StateProvisioned, ID: "moved-node", Image: *h.Spec.Image},
		PoweredOn:         true,
		HardwareDetails:   &metal3.HardwareDetails{Hostname: "moved"},
	}
	raw, _ := json.Marshal(status)
	h.Annotations = map[string]string{metal3.StatusAnnotation: string(raw)}
	createHost(t, h)
	h = waitHost(t, ns, "h", "restored and annotation removed", func(h *metal3.BareMetalHost) bool {
		_, ok := h.Annotations[metal3.StatusAnnotation]
		return !ok && h.Status.Provisioning.State == metal3.StateProvisioned && h.Status.PoweredOn
	})
	waitEvent(t, ns, "h", reasonStatusRestored)
	poll.Until(t, "host adopted", func() (bool, string) {
		n, ok := fix.Node(ns, "h")
		return ok && n.Provisioned, "not adopted yet"
	})
	if fix.Count(ns, "h", fixture.OpProvision) != 0 || fix.Count(ns, "h", fixture.OpInspect) != 0 {
		t.Fatal("a restored host was inspected or provisioned again")
	}
	if h.Status.HardwareDetails == nil || h.Status.HardwareDetails.Hostname != "moved" {
		t.Fatalf("hardware from the annotation lost: %+v", h.Status.HardwareDetails)
	}
}

// TestRebootAnnotations: the one-shot annotation powers off, is removed, and the host comes back;
// a suffixed one keeps it off until removed; any hard mode wins.
func TestRebootAnnotations(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	op := startOperator(t, ns, fix)
	createHost(t, newHost(ns, "h").Build())
	waitState(t, ns, "h", metal3.StateProvisioned)

	annotate(t, ns, "h", metal3.RebootAnnotationPrefix, "")
	waitHost(t, ns, "h", "one-shot reboot done", func(h *metal3.BareMetalHost) bool {
		_, ok := h.Annotations[metal3.RebootAnnotationPrefix]
		return !ok && h.Status.PoweredOn && fix.Count(ns, "h", fixture.OpPowerOff) == 1 && fix.Count(ns, "h", fixture.OpPowerOn) == 1
	})
	if n, _ := fix.Node(ns, "h"); !n.PoweredOn || n.LastPowerOffMode != metal3.RebootModeSoft {
		t.Fatalf("after one-shot reboot: %+v", n)
	}
	waitEvent(t, ns, "h", reasonPoweredOff)

	annotate(t, ns, "h", metal3.RebootAnnotationPrefix+"/remediation", `{"mode":"hard"}`)
	annotate(t, ns, "h", metal3.RebootAnnotationPrefix+"/other", `{"mode":"soft"}`)
	waitHost(t, ns, "h", "held off", func(h *metal3.BareMetalHost) bool { return !h.Status.PoweredOn })
	if n, _ := fix.Node(ns, "h"); n.PoweredOn || n.LastPowerOffMode != metal3.RebootModeHard {
		t.Fatalf("held reboot: %+v", n)
	}
	op.waitSeen(t, ns, "h", unannotate(t, ns, "h", metal3.RebootAnnotationPrefix+"/remediation"), 2)
	if h := getHost(t, ns, "h"); h.Status.PoweredOn {
		t.Fatal("host powered on while a held reboot annotation remains")
	}
	unannotate(t, ns, "h", metal3.RebootAnnotationPrefix+"/other")
	waitHost(t, ns, "h", "back on", func(h *metal3.BareMetalHost) bool { return h.Status.PoweredOn })
}

// TestHeldRebootAnnotationOutlivesTheDeployment: a reboot.metal3.io/<owner> annotation is its
// owner's to remove (metal3 since its PR #3342; it removed them at a deployment before): the host
// it holds off is deprovisioned and deployed again with it in place, and kept off until the owner
// removes it. (The one-shot reboot.metal3.io is removed there: TestHeldRebootAnnotationSurvivesADeployment.)
func TestHeldRebootAnnotationOutlivesTheDeployment(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	startOperator(t, ns, fix)
	createHost(t, newHost(ns, "h").Build())
	waitState(t, ns, "h", metal3.StateProvisioned)
	held := metal3.RebootAnnotationPrefix + "/remediation"
	annotate(t, ns, "h", held, "")
	waitHost(t, ns, "h", "held off", func(h *metal3.BareMetalHost) bool { return !h.Status.PoweredOn })

	update(t, getHost(t, ns, "h"), func(h *metal3.BareMetalHost) { h.Spec.Image = nil })
	waitHost(t, ns, "h", "available, still held", func(h *metal3.BareMetalHost) bool {
		_, ok := h.Annotations[held]
		return h.Status.Provisioning.State == metal3.StateAvailable && ok
	})
	update(t, getHost(t, ns, "h"), func(h *metal3.BareMetalHost) { h.Spec.Image = newHost(ns, "h").Build().Spec.Image })
	waitHost(t, ns, "h", "provisioned again, kept off while held", func(h *metal3.BareMetalHost) bool {
		_, ok := h.Annotations[held]
		return h.Status.Provisioning.State == metal3.StateProvisioned && !h.Status.PoweredOn && ok
	})
	unannotate(t, ns, "h", held)
	waitHost(t, ns, "h", "on once released", func(h *metal3.BareMetalHost) bool { return h.Status.PoweredOn })
}

// TestOnlineFollowsSpec: online false powers a provisioned host off, true on again; a power
// change behind the operator's back is corrected at the next poll.
func TestOnlineFollowsSpec(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	startOperator(t, ns, fix)
	createHost(t, newHost(ns, "h").Build())
	h := waitState(t, ns, "h", metal3.StateProvisioned)
	update(t, h, func(h *metal3.BareMetalHost) { h.Spec.Online = false })
	waitHost(t, ns, "h", "off", func(h *metal3.BareMetalHost) bool { return !h.Status.PoweredOn })
	update(t, h, func(h *metal3.BareMetalHost) { h.Spec.Online = true })
	waitHost(t, ns, "h", "on", func(h *metal3.BareMetalHost) bool { return h.Status.PoweredOn })
	fix.SetPower(ns, "h", false)
	poll.Until(t, "power restored by the poll", func() (bool, string) {
		n, _ := fix.Node(ns, "h")
		return n.PoweredOn, "still off"
	})
}

// TestDetachedArgs: a detached annotation that is not a JSON object, or one with a field of the
// wrong type, counts as the defaults as a whole: no half-decoded delay (metal3 does not delay
// then either).
func TestDetachedArgs(t *testing.T) {
	for value, want := range map[string]metal3.DetachedAnnotationArguments{
		"":                                      {},
		"capm3":                                 {},
		`{"deleteAction":"delay"}`:              {DeleteAction: metal3.DetachedDeleteActionDelay},
		`{"deleteAction":"delay","force":true}`: {DeleteAction: metal3.DetachedDeleteActionDelay, Force: true},
		`{"deleteAction":"delay","force":"true"}`: {},
	} {
		h := &metal3.BareMetalHost{}
		h.Annotations = map[string]string{metal3.DetachedAnnotation: value}
		s := &hostScope{host: h}
		if got, annotated := s.detachedArgs(); got != want || !annotated {
			t.Errorf("%q: %+v (annotated %v), want %+v", value, got, annotated, want)
		}
	}
}
