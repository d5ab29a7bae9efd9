package host

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner/fixture"
	"github.com/metalforge/metalforge/internal/test/builder"
	"github.com/metalforge/metalforge/internal/test/poll"
)

// TestUnmanagedThenRegistered: no BMC details → unmanaged (discovered); BMC added → available.
func TestUnmanagedThenRegistered(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	startOperator(t, ns, fixture.New(fixture.Config{}))
	h := newHost(ns, "h").Build()
	h.Spec.BMC, h.Spec.Image = metal3.BMCDetails{}, nil
	create(t, h)
	h = waitState(t, ns, "h", metal3.StateUnmanaged)
	if h.Status.OperationalStatus != metal3.OperationalStatusDiscovered {
		t.Fatalf("unmanaged host: %s", describe(h))
	}
	waitEvent(t, ns, "h", reasonDiscovered)
	create(t, builder.BMCSecret(ns, "bmc-h", "admin", "password"))
	update(t, h, func(h *metal3.BareMetalHost) {
		h.Spec.BMC = metal3.BMCDetails{Address: testBMC, CredentialsName: "bmc-h"}
	})
	h = waitState(t, ns, "h", metal3.StateAvailable)
	if h.Status.OperationalStatus != metal3.OperationalStatusOK {
		t.Fatalf("available host: %s", describe(h))
	}
}

// TestExternallyProvisioned: registering → externally provisioned; cleared → provisioned without
// deprovisioning; and available → externally provisioned.
func TestExternallyProvisioned(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	startOperator(t, ns, fix)
	createHost(t, newHost(ns, "ext").WithExternallyProvisioned().Build())
	h := waitHost(t, ns, "ext", "externally provisioned and on", func(h *metal3.BareMetalHost) bool {
		return h.Status.Provisioning.State == metal3.StateExternallyProvisioned && h.Status.PoweredOn
	})
	if c := condition(h, metal3.ReadyCondition); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("Ready: %+v", c)
	}
	update(t, h, func(h *metal3.BareMetalHost) { h.Spec.ExternallyProvisioned = false })
	h = waitState(t, ns, "ext", metal3.StateProvisioned)
	if h.Status.Provisioning.Image.URL != testImage || fix.Count(ns, "ext", fixture.OpProvision) != 0 ||
		fix.Count(ns, "ext", fixture.OpDeprovision) != 0 {
		t.Fatalf("clearing externallyProvisioned provisioned or deprovisioned: %+v", h.Status.Provisioning)
	}

	avail := newHost(ns, "avail").Build()
	avail.Spec.Image = nil
	createHost(t, avail)
	h = waitState(t, ns, "avail", metal3.StateAvailable)
	update(t, h, func(h *metal3.BareMetalHost) { h.Spec.ExternallyProvisioned = true })
	waitState(t, ns, "avail", metal3.StateExternallyProvisioned)
	// The test's last step: the reconcile that wrote the state must also have counted it before
	// the operator stops (a stop in between cancels the status call after the API server applied
	// it, and the state table's coverage check misses the transition).
	waitTransitionCounted(t, metal3.StateAvailable, metal3.StateExternallyProvisioned)
}

// waitTransitionCounted waits until the operator counted a transition (metricStateChanges).
func waitTransitionCounted(t *testing.T, from, to metal3.ProvisioningState) {
	t.Helper()
	poll.Until(t, fmt.Sprintf("%s → %s counted", from, to), func() (bool, string) {
		n := testutil.ToFloat64(metricStateChanges.WithLabelValues(string(from), string(to)))
		return n > 0, fmt.Sprint(n)
	})
}

// TestInspectionDisabledUsesHardwareDetailsAnnotation: registering → preparing without
// inspection; the hardwaredetails annotation lands in status and HardwareData and is removed.
func TestInspectionDisabledUsesHardwareDetailsAnnotation(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	startOperator(t, ns, fix)
	h := newHost(ns, "h").WithInspectionMode(metal3.InspectionModeDisabled).
		WithAnnotation(metal3.HardwareDetailsAnnotation, `{"cpu":{"arch":"aarch64","count":64},"hostname":"from-annotation"}`).Build()
	h.Spec.Image = nil
	createHost(t, h)
	waitState(t, ns, "h", metal3.StateAvailable)
	// Removed right after the status write that took it in (a failed write leaves it to be
	// taken in again).
	h = waitHost(t, ns, "h", "hardwaredetails annotation removed", func(h *metal3.BareMetalHost) bool {
		_, ok := h.Annotations[metal3.HardwareDetailsAnnotation]
		return !ok
	})
	if fix.Count(ns, "h", fixture.OpInspect) != 0 {
		t.Fatal("inspected although inspection is disabled")
	}
	if h.Status.HardwareDetails == nil || h.Status.HardwareDetails.Hostname != "from-annotation" {
		t.Fatalf("status.hardware: %+v", h.Status.HardwareDetails)
	}
	hd, err := getHardwareData(ns, "h")
	if err != nil || hd.Spec.HardwareDetails.CPU.Arch != "aarch64" {
		t.Fatalf("hardware data: %v %+v", err, hd)
	}
	waitEvent(t, ns, "h", reasonHardwareDetails)
}

// TestEmptyHardwareDetailsAnnotation: an empty hardwaredetails annotation (the webhook admits it;
// metal3 takes it as no details) is removed without a warning about bad JSON.
func TestEmptyHardwareDetailsAnnotation(t *testing.T) {
	t.Parallel()
	ns, _ := availableWithoutInspection(t)
	annotate(t, ns, "h", metal3.HardwareDetailsAnnotation, "")
	waitHost(t, ns, "h", "the empty hardwaredetails annotation removed", func(h *metal3.BareMetalHost) bool {
		_, ok := h.Annotations[metal3.HardwareDetailsAnnotation]
		return !ok
	})
	// Events leave in order: once a later annotation's event is there, a warning about the
	// empty one would be too.
	annotate(t, ns, "h", metal3.HardwareDetailsAnnotation, `{"hostname":"later"}`)
	waitEvent(t, ns, "h", reasonHardwareDetails)
	if evs := hostEvents(t, ns, "h", reasonBadAnnotation); len(evs) != 0 {
		t.Fatalf("a warning for an empty annotation: %s", evs[0].Message)
	}
}

// TestInspectAnnotationWithInspectionDisabled: the inspect annotation on an available host whose
// spec disables inspection is answered by skipping it, once: the annotation is removed, nothing is
// inspected, and the host provisions (it went round available → inspecting → preparing for ever).
func TestInspectAnnotationWithInspectionDisabled(t *testing.T) {
	t.Parallel()
	ns, fix := availableWithoutInspection(t)
	annotate(t, ns, "h", metal3.InspectAnnotationPrefix, "")
	waitHost(t, ns, "h", "the inspect annotation removed", func(h *metal3.BareMetalHost) bool {
		_, ok := h.Annotations[metal3.InspectAnnotationPrefix]
		return !ok
	})
	update(t, getHost(t, ns, "h"), func(h *metal3.BareMetalHost) {
		h.Spec.Image = &metal3.Image{URL: testImage, Checksum: "d41d8cd98f00b204e9800998ecf8427e", ChecksumType: metal3.MD5}
	})
	waitState(t, ns, "h", metal3.StateProvisioned)
	if n := fix.Count(ns, "h", fixture.OpInspect); n != 0 {
		t.Fatalf("inspected %d times although inspection is disabled", n)
	}
}

// TestReinspection: the inspect annotation on an available host inspects again and is removed;
// "disabled" does not.
func TestReinspection(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	startOperator(t, ns, fix)
	h := newHost(ns, "h").Build()
	h.Spec.Image = nil
	createHost(t, h)
	waitState(t, ns, "h", metal3.StateAvailable)
	annotate(t, ns, "h", metal3.InspectAnnotationPrefix, "")
	waitHost(t, ns, "h", "re-inspected and annotation removed", func(h *metal3.BareMetalHost) bool {
		_, ok := h.Annotations[metal3.InspectAnnotationPrefix]
		return !ok && h.Status.Provisioning.State == metal3.StateAvailable && fix.Count(ns, "h", fixture.OpInspect) == 2
	})
	annotate(t, ns, "h", metal3.InspectAnnotationPrefix, metal3.InspectAnnotationValueDisabled)
	annotate(t, ns, "h", "touch", "1") // a later reconcile must still not inspect
	waitTransition(t, ns, "h", metal3.StateInspecting)
	if h := getHost(t, ns, "h"); h.Annotations[metal3.InspectAnnotationPrefix] != metal3.InspectAnnotationValueDisabled ||
		fix.Count(ns, "h", fixture.OpInspect) != 2 {
		t.Fatalf("inspect: disabled was acted on: %v, %d inspections", h.Annotations, fix.Count(ns, "h", fixture.OpInspect))
	}
}

// TestReinspectionWaitsForCapacity: the inspect annotation on an available host while the
// provisioner has no capacity holds the host (delayed) and stays: the inspection happens once
// there is capacity, and only then is the annotation removed.
func TestReinspectionWaitsForCapacity(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	startOperator(t, ns, fix)
	createHost(t, noImageHost(ns, "h"))
	waitState(t, ns, "h", metal3.StateAvailable)
	fix.SetLatency(fixture.OpInspect, hold)
	createHost(t, noImageHost(ns, "busy"))
	waitState(t, ns, "busy", metal3.StateInspecting)
	fix.SetCapacity(1)

	annotate(t, ns, "h", metal3.InspectAnnotationPrefix, "")
	h := waitHost(t, ns, "h", "delayed", func(h *metal3.BareMetalHost) bool {
		return h.Status.OperationalStatus == metal3.OperationalStatusDelayed
	})
	if _, ok := h.Annotations[metal3.InspectAnnotationPrefix]; !ok || h.Status.Provisioning.State != metal3.StateAvailable {
		t.Fatalf("held back for capacity: %s, annotations %v; want available with the request kept", describe(h), h.Annotations)
	}
	fix.SetLatency(fixture.OpInspect, 0)
	fix.SetCapacity(0)
	waitHost(t, ns, "h", "re-inspected and annotation removed", func(h *metal3.BareMetalHost) bool {
		_, ok := h.Annotations[metal3.InspectAnnotationPrefix]
		return !ok && h.Status.Provisioning.State == metal3.StateAvailable && fix.Count(ns, "h", fixture.OpInspect) == 2
	})
}

func noImageHost(ns, name string) *metal3.BareMetalHost {
	h := newHost(ns, name).Build()
	h.Spec.Image = nil
	return h
}

// TestPreparingForRootDeviceHints: a root device hints change on an available host prepares it
// again; the applied hints land in status.
func TestPreparingForRootDeviceHints(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	startOperator(t, ns, fix)
	h := newHost(ns, "h").Build()
	h.Spec.Image = nil
	createHost(t, h)
	h = waitState(t, ns, "h", metal3.StateAvailable)
	fix.SetLatency(fixture.OpPrepare, 500*1e6)
	update(t, h, func(h *metal3.BareMetalHost) {
		h.Spec.RootDeviceHints = &metal3.RootDeviceHints{DeviceName: "/dev/nvme0n1"}
	})
	waitState(t, ns, "h", metal3.StatePreparing)
	h = waitState(t, ns, "h", metal3.StateAvailable)
	if h.Status.Provisioning.RootDeviceHints == nil || h.Status.Provisioning.RootDeviceHints.DeviceName != "/dev/nvme0n1" ||
		fix.Count(ns, "h", fixture.OpPrepare) != 1 {
		t.Fatalf("root device hints not applied: %+v, %d preparations", h.Status.Provisioning.RootDeviceHints, fix.Count(ns, "h", fixture.OpPrepare))
	}
}

// TestCustomDeployAddedWhileProvisioningCancels: a custom deploy added to the image being
// provisioned is a new request: the attempt is cancelled (deprovisioning) and the host provisioned
// with both, so that status records what ran (the attempt's image alone would have been recorded
// with the custom deploy that never ran).
func TestCustomDeployAddedWhileProvisioningCancels(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	fix.SetLatency(fixture.OpProvision, time.Hour)
	startOperator(t, ns, fix)
	createHost(t, newHost(ns, "h").Build())
	h := waitState(t, ns, "h", metal3.StateProvisioning)
	update(t, h, func(h *metal3.BareMetalHost) { h.Spec.CustomDeploy = &metal3.CustomDeploy{Method: "install-x"} })
	waitTransition(t, ns, "h", metal3.StateDeprovisioning)
	fix.SetLatency(fixture.OpProvision, 0)
	h = waitState(t, ns, "h", metal3.StateProvisioned)
	if c := h.Status.Provisioning.CustomDeploy; c == nil || c.Method != "install-x" || h.Status.Provisioning.Image.URL != testImage {
		t.Fatalf("provisioned %+v / %+v, want the image and the custom deploy", h.Status.Provisioning.Image, c)
	}
	if d := fix.Count(ns, "h", fixture.OpDeprovision); d != 1 {
		t.Fatalf("deprovisioned %d times, want the cancelled attempt once", d)
	}
}

// TestImageChangeReprovisions: provisioned → deprovisioning → available → provisioning →
// provisioned with the new image.
func TestImageChangeReprovisions(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	startOperator(t, ns, fix)
	createHost(t, newHost(ns, "h").Build())
	h := waitState(t, ns, "h", metal3.StateProvisioned)
	const newImage = "http://images.example/fedora-42.qcow2"
	update(t, h, func(h *metal3.BareMetalHost) { h.Spec.Image.URL = newImage })
	waitHost(t, ns, "h", "provisioned with the new image", func(h *metal3.BareMetalHost) bool {
		return h.Status.Provisioning.State == metal3.StateProvisioned && h.Status.Provisioning.Image.URL == newImage
	})
	if n, d := fix.Count(ns, "h", fixture.OpProvision), fix.Count(ns, "h", fixture.OpDeprovision); n != 2 || d != 1 {
		t.Fatalf("provisioned %d times, deprovisioned %d times; want 2 and 1", n, d)
	}
	waitTransition(t, ns, "h", metal3.StateDeprovisioning)
}

// availableWithoutInspection starts an operator for a new namespace and a host "h" whose
// inspection is disabled, and waits for it to be available.
func availableWithoutInspection(t *testing.T) (string, *fixture.Fixture) {
	t.Helper()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	startOperator(t, ns, fix)
	h := newHost(ns, "h").WithInspectionMode(metal3.InspectionModeDisabled).Build()
	h.Spec.Image = nil
	createHost(t, h)
	waitState(t, ns, "h", metal3.StateAvailable)
	return ns, fix
}
