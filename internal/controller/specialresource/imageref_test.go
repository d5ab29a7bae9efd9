package specialresource

import (
	"fmt"
	"testing"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/sro/naming"
	"github.com/metalforge/metalforge/internal/test/poll"
)

// TestImageNotAReferenceForKernel: node p runs a kernel with a '+', which its kernel mapping's
// image puts in the tag: not an image reference (the webhook checked a sample kernel only). Not a
// registry to wait for: the SpecialResource is Errored/InvalidSpec naming the mapping's field and
// the kernel, with a Warning, that kernel's entry is Unknown with the message, and the other
// kernel is served as when a kernel's image failed (its DaemonSet, its node labelled through the
// driver's state), p getting no driver label.
func TestImageNotAReferenceForKernel(t *testing.T) {
	const kernelPlus = "6.1.21-v8+"
	h := start(t)
	h.node("x", kernelX, true)
	h.node("p", kernelPlus, true)
	h.push("vendor/kmod:" + kernelX)
	sr := h.specialResource("kmod")
	sr.Spec.DriverContainer.KernelMappings = []sro.KernelMapping{{Regexp: `.*\+`, Image: h.registry + "/vendor/kmod-rpi:{{.KernelFullVersion}}"}}
	h.create(sr)

	want := fmt.Sprintf(`spec.driverContainer.kernelMappings[0].image: renders to "%s/vendor/kmod-rpi:%s" for kernel %s, which is not a valid image reference with a tag or digest`,
		h.registry, kernelPlus, kernelPlus)
	got := h.waitSR(sr.Name, "Errored InvalidSpec", isTrue(sro.ConditionErrored, sro.ReasonInvalidSpec))
	if msg := conditionMessage(got, sro.ConditionErrored); msg != want {
		t.Fatalf("message %q, want %q", msg, want)
	}
	if ks := kernelStatus(got, kernelPlus); ks == nil || ks.ImageState != sro.ImageUnknown || ks.Message != want {
		t.Fatalf("kernel %s: %+v, want Unknown with the message", kernelPlus, ks)
	}
	h.waitWarning(sr.Name, sro.ReasonInvalidSpec, want)

	h.runDaemonSet(h.waitDaemonSets(sr.Name, kernelX)[kernelX], 1)
	l1 := naming.StateLabel(sr.Name, "1000")
	poll.Until(t, "x labelled with the driver's state, p not", func() (bool, string) {
		x, p := h.stateLabels("x", sr.Name), h.stateLabels("p", sr.Name)
		return x[l1] == "Ready" && p[l1] == "", fmt.Sprintf("x %v, p %v", x, p)
	})
	if got := h.get(sr.Name); !isTrue(sro.ConditionErrored, sro.ReasonInvalidSpec)(got) {
		t.Fatalf("%s, want still Errored InvalidSpec", describe(got))
	}
}
