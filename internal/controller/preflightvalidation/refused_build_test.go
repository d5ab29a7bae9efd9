package preflightvalidation

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	buildv1 "github.com/openshift/api/build/v1"
	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/controller/sroclusteroperator"
	"github.com/metalforge/metalforge/internal/test/poll"
)

// TestPreflightRefusedBuild: with OpenShift builds, a SpecialResource whose build would mount
// spec.driverContainer.artifacts.hostPaths cannot be built. Its check is an Error naming the
// field, the upgrade is blocked as failed (not pending), one RecipeFailure warning is emitted
// and no BuildStarted, no Build exists, and the build is not asked for again while nothing
// changes: not by time, nor when the PreflightValidation looks again for another
// SpecialResource's build. A SpecialResource built on v's image fails its check too, naming v
// and the field (waiting would be pending for ever, looked at every retry delay). Removing the
// host paths lets the build start, and the dependent waits for it.
func TestPreflightRefusedBuild(t *testing.T) {
	w := startWorld(t, true)
	v := w.specialResource("v", true, func(sr *sro.SpecialResource) {
		sr.Spec.DriverContainer.Artifacts.HostPaths = []sro.HostPathArtifact{{SourcePath: "/run/vendor/src", DestinationDir: "/usr/src/"}}
	})
	d := w.specialResource("d", true, func(sr *sro.SpecialResource) {
		sr.Spec.DependsOn = []sro.SpecialResourceDependency{{Name: v.Name, ImageReference: "true"}}
	})
	pv := &sro.PreflightValidation{ObjectMeta: metav1.ObjectMeta{Name: "upgrade-" + v.Name}, Spec: sro.PreflightValidationSpec{KernelVersion: kernelZ}}
	if err := env.Client.Create(context.Background(), pv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), pv) })

	const field = "spec.driverContainer.artifacts.hostPaths"
	w.waitUpgradeable(configv1.ConditionFalse, sroclusteroperator.ReasonPreflightFailed, v.Name, field)
	if got := verification(getPV(t, pv.Name), v.Name); got.VerificationStatus != sro.VerificationError || !strings.Contains(got.StatusReason, field) {
		t.Fatalf("v: %+v", got)
	}
	poll.Until(t, "d fails its check, naming v and the field", func() (bool, string) {
		got := verification(getPV(t, pv.Name), d.Name)
		return got.VerificationStatus == sro.VerificationError && strings.Contains(got.StatusReason, "dependencies failed their check for kernel "+kernelZ+": "+v.Name+" (") &&
			strings.Contains(got.StatusReason, field), fmt.Sprintf("%+v", got)
	})
	poll.Until(t, "a RecipeFailure event naming the field", func() (bool, string) {
		evs := pvEvents(t, pv.Name, sro.ReasonRecipeFailure)
		return len(evs) == 1 && strings.Contains(evs[0].Note, field) && strings.Contains(evs[0].Note, v.Name), fmt.Sprint(len(evs))
	})

	// Ten retry delays pass with nothing to wait for but a change: a controller that retried
	// by time (for v, or for d waiting on v) would check v about ten times; stray wake-ups are
	// allowed a few.
	_, checked := w.builder.counts(v.Spec.Namespace)
	time.Sleep(10 * 200 * time.Millisecond)
	if _, now := w.builder.counts(v.Spec.Namespace); now-checked >= 5 {
		t.Errorf("v checked %d times in ten retry delays with nothing changed", now-checked)
	}
	// Another SpecialResource builds: the PreflightValidation looks again every retry delay,
	// checks v each time, and still does not ask for v's build again.
	p := w.specialResource("p", true)
	_, checked = w.builder.counts(v.Spec.Namespace)
	poll.Until(t, "five more checks of v while p builds", func() (bool, string) {
		_, now := w.builder.counts(v.Spec.Namespace)
		return now-checked >= 5, fmt.Sprint(now - checked)
	})
	if starts, _ := w.builder.counts(v.Spec.Namespace); starts != 1 {
		t.Errorf("the refused build was asked for %d times, want 1", starts)
	}
	if starts, _ := w.builder.counts(p.Spec.Namespace); starts != 1 {
		t.Errorf("p's build was asked for %d times, want 1", starts)
	}
	if evs := pvEvents(t, pv.Name, sro.ReasonRecipeFailure); len(evs) != 1 || evs[0].Series != nil {
		t.Errorf("RecipeFailure events %+v, want one, once", evs)
	}
	if evs := pvEvents(t, pv.Name, reasonBuildStarted); len(evs) != 1 || !strings.Contains(evs[0].Note, p.Name) {
		t.Errorf("BuildStarted events %+v, want p's only", evs)
	}
	var builds buildv1.BuildList
	if err := env.Client.List(context.Background(), &builds, client.InNamespace(v.Spec.Namespace)); err != nil || len(builds.Items) != 0 {
		t.Fatalf("Builds of v: %d (%v)", len(builds.Items), err)
	}

	cur := &sro.SpecialResource{}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(v), cur); err != nil {
		t.Fatal(err)
	}
	cur.Spec.DriverContainer.Artifacts.HostPaths = nil
	if err := env.Client.Update(context.Background(), cur); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "a Build once the host paths are gone", func() (bool, string) {
		if err := env.Client.List(context.Background(), &builds, client.InNamespace(v.Spec.Namespace)); err != nil {
			return false, err.Error()
		}
		return len(builds.Items) == 1, fmt.Sprint(len(builds.Items))
	})
	w.waitUpgradeable(configv1.ConditionFalse, sroclusteroperator.ReasonPreflightPending, v.Name, "building (Build ")
	if got := verification(getPV(t, pv.Name), d.Name); got.VerificationStatus != sro.VerificationUnknown || !strings.Contains(got.StatusReason, "waiting for dependencies: "+v.Name) {
		t.Errorf("d while v builds: %+v", got)
	}
	poll.Until(t, "a BuildStarted event for v", func() (bool, string) {
		for _, e := range pvEvents(t, pv.Name, reasonBuildStarted) {
			if strings.Contains(e.Note, v.Name+" ") {
				return true, ""
			}
		}
		return false, ""
	})
}

// pvEvents are the events about the PreflightValidation with the reason.
func pvEvents(t *testing.T, pvName, reason string) []eventsv1.Event {
	t.Helper()
	var list eventsv1.EventList
	if err := env.Client.List(context.Background(), &list); err != nil {
		t.Fatal(err)
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Kind == "PreflightValidation" && e.Regarding.Name == pvName && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// TestPreflightDockercfgSecret: with Job builds, a SpecialResource whose pull Secret is a legacy
// kubernetes.io/dockercfg Secret cannot be built (the Job's pod could never mount its
// .dockerconfigjson). Its check is an Error naming spec.driverContainer.pullSecret, the upgrade is
// blocked as failed, one RecipeFailure warning is emitted and no BuildStarted, and no Job exists.
// Secrets are not watched, so the check is looked at again every retry delay, without asking for
// the build again while the Secret keeps its format; a kubernetes.io/dockerconfigjson Secret in
// its place lets the build start.
func TestPreflightDockercfgSecret(t *testing.T) {
	w := startWorld(t)
	var legacy *corev1.Secret
	v := w.specialResource("v", true, func(sr *sro.SpecialResource) {
		sr.Spec.DriverContainer.PullSecret = "pull"
		legacy = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: sr.Spec.Namespace, Name: "pull"}, Type: corev1.SecretTypeDockercfg,
			Data: map[string][]byte{corev1.DockerConfigKey: fmt.Appendf(nil, `{%q:{"auth":"dXNlcjpwdw=="}}`, w.registry)}}
		if err := env.Client.Create(context.Background(), legacy); err != nil {
			t.Fatal(err)
		}
	})
	ns := v.Spec.Namespace
	pv := &sro.PreflightValidation{ObjectMeta: metav1.ObjectMeta{Name: "upgrade-" + v.Name}, Spec: sro.PreflightValidationSpec{KernelVersion: kernelZ}}
	if err := env.Client.Create(context.Background(), pv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), pv) })

	want := fmt.Sprintf("spec.driverContainer.pullSecret: Secret %s/pull has no .dockerconfigjson key", ns)
	w.waitUpgradeable(configv1.ConditionFalse, sroclusteroperator.ReasonPreflightFailed, v.Name, want)
	if got := verification(getPV(t, pv.Name), v.Name); got.VerificationStatus != sro.VerificationError || !strings.Contains(got.StatusReason, want) {
		t.Fatalf("v: %+v", got)
	}
	_, checked := w.builder.counts(ns)
	poll.Until(t, "v checked five more times", func() (bool, string) {
		_, now := w.builder.counts(ns)
		return now-checked >= 5, fmt.Sprint(now - checked)
	})
	if starts, _ := w.builder.counts(ns); starts != 1 {
		t.Errorf("the refused build was asked for %d times, want 1", starts)
	}
	if evs := pvEvents(t, pv.Name, sro.ReasonRecipeFailure); len(evs) != 1 || !strings.Contains(evs[0].Note, want) {
		t.Errorf("RecipeFailure events %+v, want one naming the Secret", evs)
	}
	if evs := pvEvents(t, pv.Name, reasonBuildStarted); len(evs) != 0 {
		t.Errorf("BuildStarted events %+v of a refused build", evs)
	}
	if jobs := w.buildJobs(ns); len(jobs) != 0 {
		t.Fatalf("%d build Jobs of a refused build", len(jobs))
	}

	// The type of a Secret cannot change: replace it.
	if err := env.Client.Delete(context.Background(), legacy); err != nil {
		t.Fatal(err)
	}
	auth := base64.StdEncoding.EncodeToString([]byte("user:pw"))
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pull"}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: fmt.Appendf(nil, `{"auths":{%q:{"auth":%q}}}`, w.registry, auth)}}
	if err := env.Client.Create(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "a build Job once the Secret is a dockerconfigjson one", func() (bool, string) {
		jobs := w.buildJobs(ns)
		return len(jobs) == 1, fmt.Sprint(len(jobs))
	})
	poll.Until(t, "a BuildStarted event for v", func() (bool, string) {
		evs := pvEvents(t, pv.Name, reasonBuildStarted)
		return len(evs) == 1 && strings.Contains(evs[0].Note, v.Name), fmt.Sprint(len(evs))
	})
}
