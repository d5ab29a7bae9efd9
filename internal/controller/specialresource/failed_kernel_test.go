package specialresource

import (
	"context"
	"fmt"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/sro/naming"
	"github.com/metalforge/metalforge/internal/test/poll"
)

// pluginRecipe is a recipe ConfigMap with a shared state 0000, the kernel-affine driver
// DaemonSet in 1000 (waited for), and a shared device plugin in 2000 on the nodes state 1000
// serves; it returns the ConfigMap's namespace and name.
func (h *harness) pluginRecipe() *sro.RecipeConfigMap {
	h.t.Helper()
	ns := h.recipeNamespace()
	h.recipeConfigMap(ns, "plugin", map[string]string{
		"0000-config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: '{{.SpecialResource.Name}}-config'\ndata:\n  kernel-affine: 'no'\n",
		"1000-driver.yaml": driverStateYAML(`specialresource.openshift.io/wait: "true"`),
		"2000-plugin.yaml": pluginStateYAML,
	})
	return &sro.RecipeConfigMap{Namespace: ns, Name: "plugin"}
}

// TestFailedBuildServesOthersLaterStates: nodes on kernels X (its image in the registry) and Y
// (built). While Y's build runs, the device plugin (a later shared state) waits for it, though X's
// driver serves. Once Y's build failed, Y's image cannot come without the user: the plugin is
// applied for X, whose node is labelled through the plugin's state, and Y's node keeps only the
// label of the state before the driver.
func TestFailedBuildServesOthersLaterStates(t *testing.T) {
	h := start(t)
	h.node("x", kernelX, true)
	h.node("y", kernelY, true)
	h.push("vendor/kmod:" + kernelX)
	sr := h.buildable("kmod")
	sr.Spec.Recipe = sro.SpecialResourceRecipe{ConfigMap: h.pluginRecipe()}
	h.create(sr)

	ds := h.waitDaemonSets(sr.Name, kernelX)[kernelX]
	var jobs []batchv1.Job
	poll.Until(t, "one build Job", func() (bool, string) { jobs = h.jobs(sr.Name); return len(jobs) == 1, fmt.Sprint(len(jobs), " jobs") })
	h.runDaemonSet(ds, 1)
	l0, l1, l2 := naming.StateLabel(sr.Name, "0000"), naming.StateLabel(sr.Name, "1000"), naming.StateLabel(sr.Name, "2000")
	// The reconcile that labels x with the driver's state would have applied the plugin before.
	poll.Until(t, "x labelled with the driver's state", func() (bool, string) {
		l := h.nodeNamed("x").Labels
		return l[l1] == "Ready", fmt.Sprint(l)
	})
	if h.plugin(sr.Name) != nil {
		t.Fatal("the plugin applied while kernel Y's build runs")
	}

	h.finishJob(jobs[0], false)
	h.waitImageState(sr.Name, kernelY, sro.ImageBuildFailed)
	h.servedThroughPlugin(sr.Name, l0, l1, l2)
	h.waitSR(sr.Name, "Errored BuildFailed", isTrue(sro.ConditionErrored, sro.ReasonBuildFailed))
}

// TestRefusedBuildServesOthersLaterStates: as TestFailedBuildServesOthersLaterStates with a build
// the builder refuses (OpenShift builds and host paths): the builder says so only when asked to
// start it, after the plan took Y's image for one being built; the plugin is applied for X all the
// same.
func TestRefusedBuildServesOthersLaterStates(t *testing.T) {
	h := start(t, withOpenShiftBuilds)
	h.node("x", kernelX, true)
	h.node("y", kernelY, true)
	h.push("vendor/kmod:" + kernelX)
	sr := h.buildable("kmod")
	sr.Spec.DriverContainer.Artifacts.HostPaths = []sro.HostPathArtifact{{SourcePath: "/run/vendor/src", DestinationDir: "/usr/src/"}}
	sr.Spec.Recipe = sro.SpecialResourceRecipe{ConfigMap: h.pluginRecipe()}
	h.create(sr)

	ds := h.waitDaemonSets(sr.Name, kernelX)[kernelX]
	h.runDaemonSet(ds, 1)
	h.waitImageState(sr.Name, kernelY, sro.ImageMissing)
	h.servedThroughPlugin(sr.Name, naming.StateLabel(sr.Name, "0000"), naming.StateLabel(sr.Name, "1000"), naming.StateLabel(sr.Name, "2000"))
	h.waitSR(sr.Name, "Errored RecipeFailure", isTrue(sro.ConditionErrored, sro.ReasonRecipeFailure))
	if n := h.openShiftBuilds(sr.Name)(); n != 0 {
		t.Fatalf("%d build objects of a refused build", n)
	}
}

// TestBuildTheAPIServerRefusesServesOthers: as TestRefusedBuildServesOthersLaterStates with a
// build Job the API server refuses (a ResourceQuota of the namespace allows no Job): kernel X is
// served through the plugin's state all the same, and the SpecialResource says why Y's is not.
func TestBuildTheAPIServerRefusesServesOthers(t *testing.T) {
	h := start(t)
	h.node("x", kernelX, true)
	h.node("y", kernelY, true)
	h.push("vendor/kmod:" + kernelX)
	sr := h.buildable("kmod")
	sr.Spec.Recipe = sro.SpecialResourceRecipe{ConfigMap: h.pluginRecipe()}
	ctx := context.Background()
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: sr.TargetNamespace()}}); err != nil {
		t.Fatal(err)
	}
	noJobs := corev1.ResourceList{"count/jobs.batch": resource.MustParse("0")}
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: sr.TargetNamespace(), Name: "no-jobs"}, Spec: corev1.ResourceQuotaSpec{Hard: noJobs}}
	if err := env.Client.Create(ctx, quota); err != nil {
		t.Fatal(err)
	}
	// What the quota controller (not running here) would write: the admission plugin judges by it.
	quota.Status = corev1.ResourceQuotaStatus{Hard: noJobs, Used: noJobs}
	if err := env.Client.Status().Update(ctx, quota); err != nil {
		t.Fatal(err)
	}
	h.create(sr)

	ds := h.waitDaemonSets(sr.Name, kernelX)[kernelX]
	h.runDaemonSet(ds, 1)
	h.servedThroughPlugin(sr.Name, naming.StateLabel(sr.Name, "0000"), naming.StateLabel(sr.Name, "1000"), naming.StateLabel(sr.Name, "2000"))
	got := h.waitSR(sr.Name, "Errored RecipeFailure", isTrue(sro.ConditionErrored, sro.ReasonRecipeFailure))
	if c := meta.FindStatusCondition(got.Status.Conditions, sro.ConditionErrored); !strings.Contains(c.Message, "exceeded quota") {
		t.Errorf("Errored message %q does not say the quota refused the build", c.Message)
	}
	if jobs := h.jobs(sr.Name); len(jobs) != 0 {
		t.Fatalf("%d build Jobs despite the quota", len(jobs))
	}
}

// servedThroughPlugin waits until the plugin exists and node x has every state's label (l0, l1,
// l2), and checks that node y, whose kernel has no driver image, has only l0.
func (h *harness) servedThroughPlugin(srName, l0, l1, l2 string) {
	h.t.Helper()
	poll.Until(h.t, "the plugin applied for kernel X", func() (bool, string) { return h.plugin(srName) != nil, "" })
	poll.Until(h.t, "x labelled through the plugin's state", func() (bool, string) {
		l := h.nodeNamed("x").Labels
		return l[l0] == "Ready" && l[l1] == "Ready" && l[l2] == "Ready", fmt.Sprint(l)
	})
	poll.Until(h.t, "y labelled with the state before the driver", func() (bool, string) {
		l := h.nodeNamed("y").Labels
		return l[l0] == "Ready", fmt.Sprint(l)
	})
	if l := h.nodeNamed("y").Labels; l[l1] != "" || l[l2] != "" {
		h.t.Fatalf("node y, without a driver, labelled %v; want only %s", l, l0)
	}
}

// driverStateYAML is a recipe state with the kernel-affine driver DaemonSet, waited for as
// waitAnnotation says (a "key: value" annotation line).
func driverStateYAML(waitAnnotation string) string {
	return `apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: '{{.SpecialResource.Name}}'
  annotations:
    specialresource.openshift.io/kernel-affine: "true"
    ` + waitAnnotation + `
spec:
  selector: {matchLabels: {app: '{{.SpecialResource.Name}}'}}
  template:
    metadata: {labels: {app: '{{.SpecialResource.Name}}'}}
    spec:
      nodeSelector: {{toJson .SpecialResource.Spec.NodeSelector}}
      containers: [{name: driver, image: '{{.Image}}'}]
`
}

// pluginStateYAML is a recipe state with a shared device plugin DaemonSet on the nodes the
// driver's state 1000 serves.
const pluginStateYAML = `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: '{{.SpecialResource.Name}}-plugin'}
spec:
  selector: {matchLabels: {app: plugin}}
  template:
    metadata: {labels: {app: plugin}}
    spec:
      nodeSelector: {'specialresource.openshift.io/state-{{.SpecialResource.Name}}-1000': Ready}
      containers: [{name: plugin, image: registry.example/plugin:1}]
`
