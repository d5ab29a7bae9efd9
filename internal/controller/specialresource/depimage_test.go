package specialresource

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/client-go/util/retry"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/test/poll"
)

// TestDependencyImageMissingForKernel: a uses b's image (imageReference "true") in a build
// argument. b is Ready but serves only node x (kernel X), so its status has no image for kernel Y,
// which a's node y runs: a waits for b, naming the kernel, and starts no build (its argument would
// be empty). Once b serves y too and is Ready again, a's build for Y gets b's image for Y.
func TestDependencyImageMissingForKernel(t *testing.T) {
	h := start(t)
	h.node("x", kernelX, true)
	h.node("y", kernelY, true)
	const depLabel = "test.metalforge.io/dep"
	h.labelNode("x", depLabel, h.id)
	h.push("vendor/b:" + kernelX)
	h.push("vendor/b:" + kernelY)
	h.push("vendor/a:" + kernelX)
	b := h.specialResource("b")
	b.Spec.NodeSelector = map[string]string{depLabel: h.id}
	t.Cleanup(func() { h.deleteAndWait(b.Name) }) // after a is gone
	if err := env.Client.Create(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	h.runDaemonSet(h.waitDaemonSets(b.Name, kernelX)[kernelX], 1)
	h.waitSR(b.Name, "b Ready", isTrue(sro.ConditionReady, ""))

	a := h.buildable("a")
	a.Spec.DependsOn = []sro.SpecialResourceDependency{{Name: b.Name, ImageReference: "true"}}
	a.Spec.DriverContainer.BuildArgs = append(a.Spec.DriverContainer.BuildArgs, sro.BuildArg{Name: "DEP", Value: fmt.Sprintf("{{(index .Dependencies %q).Image}}", b.Name)})
	h.create(a)
	want := b.Name + " (no driver image for kernel " + kernelY + " yet)"
	h.waitSR(a.Name, "a waits for b's image for Y", func(sr *sro.SpecialResource) bool {
		return isTrue(sro.ConditionProgressing, sro.ReasonWaitingForDependency)(sr) && strings.Contains(conditionMessage(sr, sro.ConditionProgressing), want)
	})
	if jobs := h.jobs(a.Name); len(jobs) != 0 {
		t.Fatalf("build Jobs %v while b has no image for kernel Y", liveJobs(jobs))
	}

	h.labelNode("y", depLabel, h.id)
	h.runDaemonSet(h.waitDaemonSets(b.Name, kernelX, kernelY)[kernelY], 1)
	h.waitSR(b.Name, "b Ready on X and Y", func(sr *sro.SpecialResource) bool {
		return isTrue(sro.ConditionReady, "")(sr) && len(sr.Status.Kernels) == 2
	})
	var jobs []batchv1.Job
	poll.Until(t, "a's build for Y", func() (bool, string) {
		jobs = h.jobs(a.Name)
		return len(jobs) == 1, fmt.Sprint(len(jobs), " jobs")
	})
	if arg := "--build-arg=DEP=" + h.registry + "/vendor/b:" + kernelY; !slices.Contains(jobs[0].Spec.Template.Spec.Containers[0].Args, arg) {
		t.Fatalf("build args %v lack %s", jobs[0].Spec.Template.Spec.Containers[0].Args, arg)
	}
}

// labelNode sets a label on a node.
func (h *harness) labelNode(name, key, value string) {
	h.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n := h.nodeNamed(name)
		n.Labels[key] = value
		return env.Client.Update(context.Background(), n)
	})
	if err != nil {
		h.t.Fatal(err)
	}
}

// TestMissingDependencyImages: a kernel the dependency's status does not list with an existing
// image is waited for; one listed with an empty image (a dependency that uses none) is not.
func TestMissingDependencyImages(t *testing.T) {
	kernels := []kernelGroup{{kernel: "X"}, {kernel: "Y"}}
	for name, tc := range map[string]struct {
		images map[string]string
		want   string
	}{
		"every kernel listed":          {images: map[string]string{"X": "r/b:X", "Y": "r/b:Y"}},
		"no image used (listed empty)": {images: map[string]string{"X": "", "Y": ""}},
		"kernel Y not listed":          {images: map[string]string{"X": "r/b:X"}, want: "b (no driver image for kernel Y yet)"},
		"none listed":                  {want: "b (no driver image for kernel X, Y yet)"},
	} {
		t.Run(name, func(t *testing.T) {
			got := strings.Join(missingDependencyImages("b", kernels, tc.images), "; ")
			if got != tc.want {
				t.Errorf("waiting %q, want %q", got, tc.want)
			}
		})
	}
}
