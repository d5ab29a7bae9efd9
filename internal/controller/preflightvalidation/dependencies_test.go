package preflightvalidation

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/controller/sroclusteroperator"
	"github.com/metalforge/metalforge/internal/test/poll"
)

// TestPreflightDependencies: SpecialResource a uses its dependency base's image and namespace
// in its build arguments ({{.Dependencies.<base>.Image}}, .Namespace). While base does not
// exist, a's check waits (Unknown, naming base as the SpecialResource controller does) and the
// upgrade is pending, not failed. Once base exists its own check builds it, and a still waits;
// when base's image for the kernel is in the registry, a is rendered with that image and base's
// namespace and built; when a's image is pushed, the upgrade may go.
func TestPreflightDependencies(t *testing.T) {
	w := startWorld(t)
	baseNS := env.Namespace(t)
	// A name without dashes, so that templates can write .Dependencies.<name>.Image.
	baseName := "base" + strings.ReplaceAll(baseNS[len(baseNS)-6:], "-", "")
	a := w.specialResource("a", true, func(sr *sro.SpecialResource) {
		sr.Spec.DependsOn = []sro.SpecialResourceDependency{{Name: baseName, ImageReference: "true"}}
		sr.Spec.DriverContainer.BuildArgs = []sro.BuildArg{
			{Name: "BASE", Value: "{{.Dependencies." + baseName + ".Image}}"},
			{Name: "BASE_NAMESPACE", Value: "{{.Dependencies." + baseName + ".Namespace}}"},
		}
	})
	pv := &sro.PreflightValidation{ObjectMeta: metav1.ObjectMeta{Name: "upgrade-" + a.Name}, Spec: sro.PreflightValidationSpec{KernelVersion: kernelZ}}
	if err := env.Client.Create(context.Background(), pv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), pv) })

	w.waitUpgradeable(configv1.ConditionFalse, sroclusteroperator.ReasonPreflightPending, a.Name, baseName+" (does not exist; create it, or give dependsOn a recipe)")
	if v := verification(getPV(t, pv.Name), a.Name); v.VerificationStatus != sro.VerificationUnknown || !strings.Contains(v.StatusReason, "waiting for dependencies: "+baseName) {
		t.Fatalf("a without its dependency: %+v", v)
	}

	base := &sro.SpecialResource{ObjectMeta: metav1.ObjectMeta{Name: baseName}, Spec: sro.SpecialResourceSpec{
		Namespace: baseNS,
		DriverContainer: sro.SpecialResourceDriverContainer{
			Image: w.registry + "/vendor/base:{{.KernelFullVersion}}", Modules: []string{"base"},
			Source: sro.DriverContainerSource{Git: &sro.GitSource{URI: "https://git.example/base.git"}},
		},
	}}
	if err := env.Client.Create(context.Background(), base); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), base) })
	var baseJobs []batchv1.Job
	poll.Until(t, "one build for base", func() (bool, string) { baseJobs = w.buildJobs(baseNS); return len(baseJobs) == 1, "" })
	poll.Until(t, "a waits for base's image", func() (bool, string) {
		v := verification(getPV(t, pv.Name), a.Name)
		return v.VerificationStatus == sro.VerificationUnknown && strings.Contains(v.StatusReason, baseName+" (no driver image for kernel "+kernelZ), fmt.Sprintf("%+v", v)
	})
	if jobs := w.buildJobs(a.Spec.Namespace); len(jobs) != 0 {
		t.Fatalf("a built before base's image exists: %d builds", len(jobs))
	}
	if c := upgradeable(w.clusterOperator()); c == nil || c.Reason != sroclusteroperator.ReasonPreflightPending {
		t.Fatalf("Upgradeable while base builds: %+v", c)
	}

	w.push("vendor/base:" + kernelZ)
	finishJob(t, baseJobs[0], true)
	var jobs []batchv1.Job
	poll.Until(t, "one build for a", func() (bool, string) {
		jobs = w.buildJobs(a.Spec.Namespace)
		return len(jobs) == 1, fmt.Sprint(len(jobs))
	})
	args := jobs[0].Spec.Template.Spec.Containers[0].Args
	for _, want := range []string{"--build-arg=BASE=" + w.registry + "/vendor/base:" + kernelZ, "--build-arg=BASE_NAMESPACE=" + baseNS} {
		if !slices.Contains(args, want) {
			t.Fatalf("a's build args %v lack %s", args, want)
		}
	}
	// a builds as soon as base's image is in the registry; base's own check may still show its
	// build running until the Job's end reaches the controller.
	poll.Until(t, "base verified", func() (bool, string) {
		v := verification(getPV(t, pv.Name), baseName)
		return v.VerificationStatus == sro.VerificationTrue, fmt.Sprintf("%+v", v)
	})

	w.push("vendor/a:" + kernelZ)
	finishJob(t, jobs[0], true)
	w.waitUpgradeable(configv1.ConditionTrue, sroclusteroperator.ReasonPreflightSucceeded)
	if v := verification(getPV(t, pv.Name), a.Name); v.VerificationStatus != sro.VerificationTrue || v.Image != w.registry+"/vendor/a:"+kernelZ {
		t.Fatalf("a: %+v", v)
	}
}
