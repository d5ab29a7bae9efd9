package specialresource

import (
	"context"
	"fmt"
	"strings"
	"testing"

	buildv1 "github.com/openshift/api/build/v1"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/test/poll"
)

// TestRefusedBuildNotAnnounced: with OpenShift builds, a SpecialResource whose build would mount
// spec.driverContainer.artifacts.hostPaths cannot be built. It is Errored/RecipeFailure naming the
// field, no Build or BuildConfig exists, and the build is neither announced (BuildStarted) nor
// counted (sro_builds_total{result="started"}), also after the controller asked for it again
// every RetryDelay. Without the host paths the build starts, announced and counted once.
func TestRefusedBuildNotAnnounced(t *testing.T) {
	h := start(t, withOpenShiftBuilds)
	h.node("y", kernelY, true)
	sr := h.buildable("kmod")
	sr.Spec.DriverContainer.Artifacts.HostPaths = []sro.HostPathArtifact{{SourcePath: "/run/vendor/src", DestinationDir: "/usr/src/"}}
	h.create(sr)

	builds := h.openShiftBuilds(sr.Name) // the namespace is named after the SpecialResource
	h.refusedBuild(sr.Name, sr.Name, "spec.driverContainer.artifacts.hostPaths", builds)

	h.update(sr.Name, func(sr *sro.SpecialResource) { sr.Spec.DriverContainer.Artifacts.HostPaths = nil })
	h.startedOnce(sr.Name, builds)
}

// TestDockercfgSecretRefusedForJobBuild: a Job build mounts the pull Secret's .dockerconfigjson as
// kaniko's config.json; with a kubernetes.io/dockercfg Secret (which registry lookups accept) the
// Job's pod would never mount it and the Job would run for ever. The build is refused instead:
// Errored/RecipeFailure naming spec.driverContainer.pullSecret and the Secret, no Job, no
// BuildStarted event, nothing counted, after retries too. A kubernetes.io/dockerconfigjson Secret
// in its place (Secrets are not watched: seen at the next RetryDelay) lets the build start.
// Meanwhile kernel X, whose image the registry has, is served: the refusal of Y's build holds
// back no other kernel's DaemonSet.
func TestDockercfgSecretRefusedForJobBuild(t *testing.T) {
	h := start(t)
	h.node("y", kernelY, true)
	h.node("x", kernelX, true)
	h.push("vendor/kmod:" + kernelX)
	ns := h.recipeNamespace()
	legacy := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pull"}, Type: corev1.SecretTypeDockercfg,
		Data: map[string][]byte{corev1.DockerConfigKey: fmt.Appendf(nil, `{%q:{"auth":"dXNlcjpwdw=="}}`, h.registry)}}
	if err := env.Client.Create(context.Background(), legacy); err != nil {
		t.Fatal(err)
	}
	sr := h.buildable("kmod")
	sr.Spec.Namespace = ns
	sr.Spec.DriverContainer.PullSecret = "pull"
	h.create(sr)

	want := fmt.Sprintf("spec.driverContainer.pullSecret: Secret %s/pull has no .dockerconfigjson key (only .dockercfg): "+
		"a Job (kaniko) build needs a kubernetes.io/dockerconfigjson Secret", ns)
	jobs := func() int { return len(h.jobs(ns)) }
	h.refusedBuild(sr.Name, ns, want, jobs)
	h.waitDaemonSets(sr.Name, kernelX)

	// The type of a Secret cannot change: replace it.
	if err := env.Client.Delete(context.Background(), legacy); err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pull"}, Type: corev1.SecretTypeDockerConfigJson,
		Data: dockerConfig(h.registry, "user", "pw")}
	if err := env.Client.Create(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	h.startedOnce(sr.Name, jobs)
}

// refusedBuild waits until the SpecialResource is Errored/RecipeFailure with a message containing
// want (its kernel's image Missing with that message, not Building) and the builder was asked for
// the build three times (the first reconcile and two retries after RetryDelay), then checks that
// no build object exists (count), and that the build was neither announced nor counted.
func (h *harness) refusedBuild(srName, ns, want string, count func() int) {
	h.t.Helper()
	got := h.waitSR(srName, "Errored RecipeFailure", isTrue(sro.ConditionErrored, sro.ReasonRecipeFailure))
	if msg := conditionMessage(got, sro.ConditionErrored); !strings.Contains(msg, want) {
		h.t.Fatalf("Errored message %q, want it to contain %q", msg, want)
	}
	if ks := kernelStatus(got, kernelY); ks == nil || ks.ImageState != sro.ImageMissing || !strings.Contains(ks.Message, want) {
		h.t.Errorf("status.kernels[%s] = %+v, want imageState Missing with a message containing %q", kernelY, ks, want)
	}
	h.waitWarning(srName, sro.ReasonRecipeFailure, want)
	poll.Until(h.t, "the build asked for again twice", func() (bool, string) {
		n := h.builder.started(ns)
		return n >= 3, fmt.Sprint(n)
	})
	if n := count(); n != 0 {
		h.t.Errorf("%d build objects of a refused build", n)
	}
	if evs := h.events(srName, reasonBuildStarted); len(evs) != 0 {
		h.t.Errorf("BuildStarted events of a refused build: %v", evs)
	}
	if n := testutil.ToFloat64(metricBuilds.WithLabelValues(srName, "started")); n != 0 {
		h.t.Errorf(`sro_builds_total{result="started"} = %v for a refused build, want 0`, n)
	}
}

// startedOnce waits until the build exists (count) and was announced, and checks that it was
// counted once.
func (h *harness) startedOnce(srName string, count func() int) {
	h.t.Helper()
	poll.Until(h.t, "the build started", func() (bool, string) {
		n := count()
		return n > 0, fmt.Sprint(n)
	})
	h.waitEvent(srName, reasonBuildStarted, "for kernel "+kernelY)
	h.waitImageState(srName, kernelY, sro.ImageBuilding)
	if n := testutil.ToFloat64(metricBuilds.WithLabelValues(srName, "started")); n != 1 {
		h.t.Errorf(`sro_builds_total{result="started"} = %v, want 1`, n)
	}
}

// openShiftBuilds counts the Builds and BuildConfigs in the namespace.
func (h *harness) openShiftBuilds(ns string) func() int {
	return func() int {
		var builds buildv1.BuildList
		var configs buildv1.BuildConfigList
		if err := env.Client.List(context.Background(), &builds, client.InNamespace(ns)); err != nil {
			h.t.Fatal(err)
		}
		if err := env.Client.List(context.Background(), &configs, client.InNamespace(ns)); err != nil {
			h.t.Fatal(err)
		}
		return len(builds.Items) + len(configs.Items)
	}
}

// events are the events about the SpecialResource with the reason, as "reason: message".
func (h *harness) events(srName, reason string) []string {
	h.t.Helper()
	var list corev1.EventList
	if err := env.Client.List(context.Background(), &list); err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == "SpecialResource" && e.InvolvedObject.Name == srName && e.Reason == reason {
			out = append(out, e.Reason+": "+e.Message)
		}
	}
	return out
}
