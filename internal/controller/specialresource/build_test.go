package specialresource

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	buildv1 "github.com/openshift/api/build/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/sro/build"
	"github.com/metalforge/metalforge/internal/test/poll"
)

// buildable is a SpecialResource with a git source and a templated build argument.
func (h *harness) buildable(name string) *sro.SpecialResource {
	sr := h.specialResource(name)
	sr.Spec.DriverContainer.Source.Git = &sro.GitSource{URI: "https://git.example/vendor/kmod.git", Ref: "release-1"}
	sr.Spec.DriverContainer.BuildArgs = []sro.BuildArg{{Name: "KVER", Value: "{{.KernelFullVersion}}"}, {Name: "OS", Value: "{{.OperatingSystemMajorMinor}}"}}
	sr.Spec.DriverContainer.RunArgs = []sro.RunArg{{Name: "KPATCH", Value: "{{.KernelPatchVersion}}"}}
	return sr
}

// startBuildable starts the operator with a node on kernel X, whose image the registry has, and
// one on Y, whose image it has not, and creates a buildable SpecialResource.
func startBuildable(t *testing.T) (*harness, *sro.SpecialResource) {
	t.Helper()
	h := start(t)
	h.node("x", kernelX, true)
	h.node("y", kernelY, true)
	h.push("vendor/kmod:" + kernelX)
	sr := h.buildable("kmod")
	h.create(sr)
	return h, sr
}

// waitImageState waits until the status says kernel k's image is in state st.
func (h *harness) waitImageState(srName, k string, st sro.ImageState) *sro.SpecialResource {
	h.t.Helper()
	return h.waitSR(srName, "image of kernel "+k+" "+string(st), func(sr *sro.SpecialResource) bool {
		ks := kernelStatus(sr, k)
		return ks != nil && ks.ImageState == st
	})
}

func (h *harness) jobs(ns string) []batchv1.Job {
	h.t.Helper()
	var list batchv1.JobList
	if err := env.Client.List(context.Background(), &list, client.InNamespace(ns), client.HasLabels{build.BuildLabel}); err != nil {
		h.t.Fatal(err)
	}
	return list.Items
}

// finishJob plays the Job controller: the build Job succeeded (or failed with a message).
func (h *harness) finishJob(job batchv1.Job, succeeded bool) {
	h.t.Helper()
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	cur := &batchv1.Job{}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(&job), cur); err != nil {
		h.t.Fatal(err)
	}
	cur.Status.StartTime = &now
	if succeeded {
		cur.Status.Succeeded = 1
		cur.Status.CompletionTime = &now
		cur.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now},
		}
	} else {
		cur.Status.Failed = 2
		cur.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit", LastTransitionTime: now, LastProbeTime: now},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit", LastTransitionTime: now, LastProbeTime: now},
		}
	}
	if err := env.Client.Status().Update(context.Background(), cur); err != nil {
		h.t.Fatal(err)
	}
}

// TestPullOrBuild: the registry has kernel X's image and not Y's; the source is given: X's
// DaemonSet is deployed at once, exactly one build runs, for Y, with the build arguments of the
// first template pass (Y's kernel and OS); Y's DaemonSet waits for it. When the build pushed the
// image and succeeded, Y's DaemonSet appears and the finished build is removed.
func TestPullOrBuild(t *testing.T) {
	h, sr := startBuildable(t)

	dss := h.waitDaemonSets(sr.Name, kernelX)
	var jobs []batchv1.Job
	poll.Until(t, "one build Job", func() (bool, string) {
		jobs = h.jobs(sr.Name)
		return len(jobs) == 1, fmt.Sprint(len(jobs), " jobs")
	})
	job := jobs[0]
	args := job.Spec.Template.Spec.Containers[0].Args
	for _, want := range []string{
		"--destination=" + h.registry + "/vendor/kmod:" + kernelY,
		"--build-arg=KVER=" + kernelY,
		"--build-arg=OS=rhel9.3",
		"--build-arg=KERNEL_FULL_VERSION=" + kernelY,
		"--context=git://git.example/vendor/kmod.git#refs/heads/release-1",
	} {
		if !slices.Contains(args, want) {
			t.Errorf("build args %v lack %s", args, want)
		}
	}
	if job.Annotations[sro.KernelAnnotation] != kernelY {
		t.Fatalf("build for kernel %q, want Y", job.Annotations[sro.KernelAnnotation])
	}
	// The second pass gets first-pass values: X's DaemonSet has X's patch version.
	if env := dss[kernelX].Spec.Template.Spec.Containers[0].Env; !slices.Contains(env, corev1.EnvVar{Name: "KPATCH", Value: "5.14.0-284"}) {
		t.Errorf("DaemonSet X env %v lacks KPATCH=5.14.0-284", env)
	}
	got := h.waitImageState(sr.Name, kernelY, sro.ImageBuilding)
	if ks := kernelStatus(got, kernelX); ks == nil || ks.ImageState != sro.ImageExists {
		t.Fatalf("kernel X: %+v", ks)
	}

	h.push("vendor/kmod:" + kernelY)
	h.finishJob(job, true)
	h.waitDaemonSets(sr.Name, kernelX, kernelY)
	poll.Until(t, "the finished build removed", func() (bool, string) {
		jobs := h.jobs(sr.Name)
		return len(jobs) == 0 || !jobs[0].DeletionTimestamp.IsZero(), fmt.Sprint(len(jobs), " jobs")
	})
}

// TestFailedBuild: a failed build shows in the status naming the kernel (Errored, BuildFailed),
// as an event, and the other kernel is still served; changing a build argument starts a new
// build.
func TestFailedBuild(t *testing.T) {
	h, sr := startBuildable(t)
	dss := h.waitDaemonSets(sr.Name, kernelX)
	var jobs []batchv1.Job
	poll.Until(t, "one build Job", func() (bool, string) { jobs = h.jobs(sr.Name); return len(jobs) == 1, "" })
	h.finishJob(jobs[0], false)
	got := h.waitSR(sr.Name, "Errored BuildFailed", isTrue(sro.ConditionErrored, sro.ReasonBuildFailed))
	msg := conditionMessage(got, sro.ConditionErrored)
	if !strings.Contains(msg, kernelY) || !strings.Contains(msg, "backoff limit") || strings.Contains(msg, kernelX) {
		t.Fatalf("Errored message %q: want kernel Y and the Job's reason", msg)
	}
	if ks := kernelStatus(got, kernelY); ks == nil || ks.ImageState != sro.ImageBuildFailed {
		t.Fatalf("kernel Y status %+v", ks)
	}
	h.runDaemonSet(dss[kernelX], 1)
	h.waitSR(sr.Name, "X still served", func(sr *sro.SpecialResource) bool { return sr.Status.NodesServed == 1 })
	h.waitEvent(sr.Name, sro.ReasonBuildFailed, kernelY)
	if n := len(h.jobs(sr.Name)); n != 1 {
		t.Fatalf("%d build Jobs after the failure; the failed one is kept and none is retried", n)
	}

	failed := jobs[0].Name
	h.update(sr.Name, func(sr *sro.SpecialResource) {
		sr.Spec.DriverContainer.BuildArgs[0].Value = "{{.KernelFullVersion}}-fixed"
	})
	poll.Until(t, "a new build for the changed argument, the failed one deleted", func() (bool, string) {
		live := liveJobs(h.jobs(sr.Name))
		return len(live) == 1 && live[0] != failed, fmt.Sprint(live)
	})
	h.waitSR(sr.Name, "building again", isTrue(sro.ConditionProgressing, ""))
}

// liveJobs names the Jobs not being deleted.
func liveJobs(jobs []batchv1.Job) []string {
	var out []string
	for _, j := range jobs {
		if j.DeletionTimestamp.IsZero() {
			out = append(out, j.Name)
		}
	}
	return out
}

// TestBuildsToDelete: one row per rule of build clean-up.
func TestBuildsToDelete(t *testing.T) {
	images := map[string]kernelImage{
		"X": {state: sro.ImageExists, build: "b-x"},
		"Y": {state: sro.ImageBuilding, build: "b-y"},
		"F": {state: sro.ImageBuildFailed, build: "b-f"},
	}
	tests := map[string]struct {
		b       foundBuild
		deleted bool
	}{
		"current, succeeded, image there":     {b: foundBuild{name: "b-x", kernel: "X", succeeded: true}, deleted: true},
		"current, image there, still running": {b: foundBuild{name: "b-x", kernel: "X"}},
		"current, building":                   {b: foundBuild{name: "b-y", kernel: "Y"}},
		"current, failed: kept for its logs":  {b: foundBuild{name: "b-f", kernel: "F"}},
		"superseded by new inputs":            {b: foundBuild{name: "b-y-old", kernel: "Y"}, deleted: true},
		"kernel no node runs":                 {b: foundBuild{name: "b-z", kernel: "Z"}, deleted: true},
		"kernel a PreflightValidation names":  {b: foundBuild{name: "b-p", kernel: "P"}},
		"preflight's, succeeded, current":     {b: foundBuild{name: "b-x", kernel: "X", succeeded: true}, deleted: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := buildsToDelete([]foundBuild{tc.b}, images, map[string]bool{"P": true, "X": true})
			if (len(got) == 1) != tc.deleted {
				t.Fatalf("deleted %v, want %v", got, tc.deleted)
			}
		})
	}
}

// TestBuildCleanup: a build whose image reached the registry before the Job said it succeeded
// (a reconcile in between records the image as there) is deleted when the Job completes; a
// build for a kernel no selected node runs any more is deleted while it runs; a build a
// PreflightValidation started for a coming kernel is left alone.
func TestBuildCleanup(t *testing.T) {
	h, sr := startBuildable(t)
	var jobs []batchv1.Job
	poll.Until(t, "Y's build", func() (bool, string) { jobs = h.jobs(sr.Name); return len(jobs) == 1, fmt.Sprint(len(jobs)) })
	h.waitImageState(sr.Name, kernelY, sro.ImageBuilding)

	// kaniko pushed; a reconcile runs before the Job completes.
	h.push("vendor/kmod:" + kernelY)
	h.update(sr.Name, func(sr *sro.SpecialResource) {
		metav1.SetMetaDataAnnotation(&sr.ObjectMeta, "test.metalforge.io/poke", "1")
	})
	h.waitImageState(sr.Name, kernelY, sro.ImageExists)
	if live := liveJobs(h.jobs(sr.Name)); len(live) != 1 {
		t.Fatalf("build Jobs %v: the running build was deleted", live)
	}
	h.finishJob(jobs[0], true)
	poll.Until(t, "the completed build deleted", func() (bool, string) {
		live := liveJobs(h.jobs(sr.Name))
		return len(live) == 0, fmt.Sprint(live)
	})

	// A kernel nobody has an image for, then its node goes back to X; and a PreflightValidation's
	// build for a kernel no node runs yet.
	const kernelZ, kernelP = "5.14.0-427.13.1.el9_4.x86_64", "5.14.0-503.11.1.el9_5.x86_64"
	pv := &sro.PreflightValidation{ObjectMeta: metav1.ObjectMeta{Name: h.name("upgrade")}, Spec: sro.PreflightValidationSpec{KernelVersion: kernelP}}
	if err := env.Client.Create(context.Background(), pv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), pv) })
	owner := h.get(sr.Name)
	if err := (build.Job{Client: env.Client}).Start(context.Background(), build.Request{Owner: owner, Namespace: sr.Name, Name: h.name("preflight"),
		Kernel: kernelP, Image: h.registry + "/vendor/kmod:" + kernelP, Git: *sr.Spec.DriverContainer.Source.Git}); err != nil {
		t.Fatal(err)
	}
	h.node("z", kernelZ, true)
	var zJob string
	poll.Until(t, "Z's build", func() (bool, string) {
		for _, j := range h.jobs(sr.Name) {
			if j.Annotations[sro.KernelAnnotation] == kernelZ {
				zJob = j.Name
			}
		}
		return zJob != "", fmt.Sprint(liveJobs(h.jobs(sr.Name)))
	})
	h.setKernel("z", kernelX)
	poll.Until(t, "Z's build deleted, the preflight's kept", func() (bool, string) {
		live := liveJobs(h.jobs(sr.Name))
		return !slices.Contains(live, zJob) && slices.Equal(live, []string{h.name("preflight")}), fmt.Sprint(live)
	})
}

// TestOpenShiftBuild: where the cluster has build.openshift.io, the build is a BuildConfig and a
// Build (Docker strategy, git source, build arguments, output image); its phase drives the
// kernel's image state.
func TestOpenShiftBuild(t *testing.T) {
	h := start(t, withOpenShiftBuilds)
	h.node("y", kernelY, true)
	sr := h.buildable("kmod")
	h.create(sr)
	var builds buildv1.BuildList
	poll.Until(t, "one Build", func() (bool, string) {
		if err := env.Client.List(context.Background(), &builds, client.InNamespace(sr.Name)); err != nil {
			return false, err.Error()
		}
		return len(builds.Items) == 1, fmt.Sprint(len(builds.Items))
	})
	b := builds.Items[0]
	bc := &buildv1.BuildConfig{}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(&b), bc); err != nil {
		t.Fatalf("BuildConfig: %v", err)
	}
	if b.Spec.Output.To.Name != h.registry+"/vendor/kmod:"+kernelY || b.Spec.Source.Git.URI != "https://git.example/vendor/kmod.git" ||
		!slices.Contains(b.Spec.Strategy.DockerStrategy.BuildArgs, corev1.EnvVar{Name: "KVER", Value: kernelY}) || b.Labels[buildv1.BuildConfigLabel] != bc.Name {
		t.Fatalf("Build spec %+v", b.Spec)
	}
	b.Status.Phase, b.Status.Message = buildv1.BuildPhaseFailed, "Docker build strategy has failed."
	if err := env.Client.Status().Update(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	got := h.waitSR(sr.Name, "Errored BuildFailed", isTrue(sro.ConditionErrored, sro.ReasonBuildFailed))
	if msg := conditionMessage(got, sro.ConditionErrored); !strings.Contains(msg, "Docker build strategy has failed") || !strings.Contains(msg, kernelY) {
		t.Fatalf("message %q", msg)
	}
}

func conditionMessage(sr *sro.SpecialResource, t string) string {
	for _, c := range sr.Status.Conditions {
		if c.Type == t {
			return c.Message
		}
	}
	return ""
}

// waitEvent waits for an event about the SpecialResource with the reason and a note containing
// text, and returns it.
func (h *harness) waitEvent(srName, reason, text string) *corev1.Event {
	h.t.Helper()
	var found *corev1.Event
	poll.Until(h.t, "event "+reason+" on "+srName, func() (bool, string) {
		var list corev1.EventList
		if err := env.Client.List(context.Background(), &list); err != nil {
			return false, err.Error()
		}
		var seen []string
		for i, e := range list.Items {
			if e.InvolvedObject.Name != srName || e.InvolvedObject.Kind != "SpecialResource" {
				continue
			}
			seen = append(seen, e.Reason+": "+e.Message)
			if e.Reason == reason && strings.Contains(e.Message, text) {
				found = &list.Items[i]
				return true, ""
			}
		}
		return false, fmt.Sprint(seen)
	})
	return found
}
