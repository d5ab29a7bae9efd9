package specialresource

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/sro/naming"
	"github.com/metalforge/metalforge/internal/sro/recipe"
	"github.com/metalforge/metalforge/internal/test/poll"
)

// TestInvalidSpecReported: objects admitted while no webhook ran get the webhook's messages as
// an Errored condition naming the field (and an event); fixing the spec recovers.
func TestInvalidSpecReported(t *testing.T) {
	h := start(t)
	tests := map[string]struct {
		mutate func(*sro.SpecialResource)
		reason string
		msg    string
	}{
		"bad-template": {mutate: func(sr *sro.SpecialResource) { sr.Spec.DriverContainer.Image = "r/x:{{.KernelFullVerion}}" },
			reason: sro.ReasonInvalidSpec, msg: "spec.driverContainer.image"},
		"unknown-recipe": {mutate: func(sr *sro.SpecialResource) { sr.Spec.Recipe.Name = "gpu-operator" },
			reason: sro.ReasonInvalidSpec, msg: `spec.recipe.name: Unsupported value: "gpu-operator"`},
		"missing-recipe-configmap": {mutate: func(sr *sro.SpecialResource) {
			sr.Spec.Recipe.ConfigMap = &sro.RecipeConfigMap{Name: "nope", Namespace: "default"}
		}, reason: sro.ReasonRecipeFailure, msg: "spec.recipe.configMap: ConfigMap default/nope not found"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			sr := h.specialResource(name)
			tc.mutate(sr)
			h.create(sr)
			got := h.waitSR(sr.Name, "Errored "+tc.reason, isTrue(sro.ConditionErrored, tc.reason))
			if msg := conditionMessage(got, sro.ConditionErrored); !strings.Contains(msg, tc.msg) {
				t.Fatalf("message %q, want %q", msg, tc.msg)
			}
			h.waitEvent(sr.Name, tc.reason, tc.msg)
		})
	}

	// A valid spec recovers.
	name := h.name("bad-template")
	h.update(name, func(sr *sro.SpecialResource) {
		sr.Spec.DriverContainer.Image = h.registry + "/vendor/kmod:{{.KernelFullVersion}}"
	})
	h.waitSR(name, "Ready (no nodes)", isTrue(sro.ConditionReady, ""))
}

// TestDependencies: A depends on B (missing; created from its recipe, with the ConfigMap's
// default SpecialResource) and waits until B is Ready; only then are A's objects created. A
// dependency cycle is Errored, naming the chain.
func TestDependencies(t *testing.T) {
	h := start(t)
	h.node("x", kernelX, true)
	h.push("vendor/a:" + kernelX)
	h.push("vendor/b:" + kernelX)
	cmNS := h.recipeNamespace()
	depSR := h.specialResource("b")
	defaultSR := fmt.Sprintf("apiVersion: sro.openshift.io/v1beta1\nkind: SpecialResource\nmetadata:\n  name: ignored\nspec:\n  nodeSelector: {test.metalforge.io/hw: %s}\n  driverContainer:\n    image: %q\n    modules: [b]\n", h.id, depSR.Spec.DriverContainer.Image)
	builtin := builtinRecipeData(t)
	builtin["specialresource.yaml"] = defaultSR
	h.recipeConfigMap(cmNS, "b-recipe", builtin)

	a := h.specialResource("a")
	a.Spec.DependsOn = []sro.SpecialResourceDependency{{Name: depSR.Name, ImageReference: "true",
		Recipe: &sro.SpecialResourceRecipe{ConfigMap: &sro.RecipeConfigMap{Name: "b-recipe", Namespace: cmNS}}}}
	// Registered first, so it runs after A is gone (while A exists, a deleted B comes back).
	t.Cleanup(func() { h.deleteAndWait(depSR.Name) })
	h.create(a)
	h.waitSR(a.Name, "waiting for b", isTrue(sro.ConditionProgressing, sro.ReasonWaitingForDependency))
	created := h.waitSR(depSR.Name, "b created and progressing", isTrue(sro.ConditionProgressing, ""))
	if created.Labels[sro.CreatedForLabel] != a.Name || created.Spec.DriverContainer.Modules[0] != "b" {
		t.Fatalf("dependency %+v: want the recipe's default, labelled for %s", created, a.Name)
	}
	if dss := h.daemonSets(a.Name); len(dss) != 0 {
		t.Fatalf("A deployed before its dependency was Ready: %v", dss)
	}
	h.runDaemonSet(h.waitDaemonSets(depSR.Name, kernelX)[kernelX], 1)
	h.waitSR(depSR.Name, "b Ready", isTrue(sro.ConditionReady, ""))
	h.waitDaemonSets(a.Name, kernelX)

	// Cycle: c → d → c.
	c, d := h.specialResource("c"), h.specialResource("d")
	c.Spec.DependsOn = []sro.SpecialResourceDependency{{Name: d.Name}}
	d.Spec.DependsOn = []sro.SpecialResourceDependency{{Name: c.Name}}
	h.create(c)
	h.create(d)
	got := h.waitSR(d.Name, "cycle", isTrue(sro.ConditionErrored, sro.ReasonDependencyCycle))
	want := fmt.Sprintf("dependency cycle: %s → %s → %s", d.Name, c.Name, d.Name)
	if msg := conditionMessage(got, sro.ConditionErrored); !strings.Contains(msg, want) || !strings.Contains(msg, "spec.dependsOn[0].name") {
		t.Fatalf("message %q, want %q at spec.dependsOn[0].name", msg, want)
	}
}

// TestDeletion: deleting a SpecialResource removes its DaemonSets, its other objects, its
// namespace (which it created) and its node labels, then lets it go. A namespace that existed
// before is kept.
func TestDeletion(t *testing.T) {
	h := start(t)
	h.node("x", kernelX, true)
	h.push("vendor/kmod:" + kernelX)
	h.push("vendor/kept:" + kernelX)
	owned := h.specialResource("kmod")
	h.create(owned)
	existing := h.recipeNamespace()
	kept := h.specialResource("kept")
	kept.Spec.Namespace = existing
	h.create(kept)
	for _, sr := range []*sro.SpecialResource{owned, kept} {
		h.runDaemonSet(h.waitDaemonSets(sr.Name, kernelX)[kernelX], 1)
		h.waitSR(sr.Name, "Ready", isTrue(sro.ConditionReady, ""))
	}
	poll.Until(t, "state labels of both", func() (bool, string) {
		l := h.nodeNamed("x").Labels
		return l[naming.StateLabel(owned.Name, "1000")] == "Ready" && l[naming.StateLabel(kept.Name, "1000")] == "Ready", fmt.Sprint(l)
	})

	for _, sr := range []*sro.SpecialResource{owned, kept} {
		h.deleteAndWait(sr.Name)
		if dss := h.daemonSets(sr.Name); len(dss) != 0 {
			t.Errorf("%s: DaemonSets left: %v", sr.Name, dss)
		}
		var cms corev1.ConfigMapList
		if err := env.Client.List(context.Background(), &cms, client.MatchingLabels{sro.OwnedLabel: sr.Name}); err != nil {
			t.Fatal(err)
		}
		for _, cm := range cms.Items {
			if cm.DeletionTimestamp.IsZero() {
				t.Errorf("%s: ConfigMap %s left", sr.Name, cm.Name)
			}
		}
		for key := range h.nodeNamed("x").Labels {
			if naming.IsStateLabelOf(key, sr.Name) {
				t.Errorf("%s: node label %s left", sr.Name, key)
			}
		}
	}
	ns := &corev1.Namespace{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: owned.Name}, ns); err == nil && ns.DeletionTimestamp.IsZero() {
		t.Errorf("namespace %s created for the SpecialResource was not deleted", owned.Name)
	} else if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: existing}, ns); err != nil || !ns.DeletionTimestamp.IsZero() {
		t.Errorf("namespace %s, which existed before, was deleted (%v)", existing, err)
	}
}

// TestWaitStatesAndLogs: a ConfigMap recipe with three states: 0000 (not waited for), 1000 a
// kernel-affine DaemonSet waiting for its pods' logs, 2000 a DaemonSet selecting the nodes by
// state 1000's label. State 2000 is applied only once the logs match; the log is read from the
// pods (canned here: envtest has no kubelet).
func TestWaitStatesAndLogs(t *testing.T) {
	h := start(t)
	h.node("x", kernelX, true)
	h.push("vendor/kmod:" + kernelX)
	ns := h.recipeNamespace()
	h.recipeConfigMap(ns, "logs", map[string]string{
		"0000-config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: '{{.SpecialResource.Name}}-config'\ndata:\n  cluster: '{{.ClusterVersionMajorMinor}}'\n",
		"1000-driver.yaml": driverStateYAML(`specialresource.openshift.io/wait-for-logs: "driver loaded for kernel [0-9.]+"`),
		"2000-plugin.yaml": pluginStateYAML,
	})
	sr := h.specialResource("kmod")
	sr.Spec.Recipe = sro.SpecialResourceRecipe{ConfigMap: &sro.RecipeConfigMap{Name: "logs", Namespace: ns}}
	h.create(sr)
	ds := h.waitDaemonSets(sr.Name, kernelX)[kernelX]
	cm := &corev1.ConfigMap{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: sr.Name, Name: sr.Name + "-config"}, cm); err != nil || cm.Data["cluster"] != "4.14" {
		t.Fatalf("state 0000 ConfigMap: %v %v", cm.Data, err)
	}
	h.runDaemonSet(ds, 1)
	pod := h.driverPod(ds)
	got := h.waitSR(sr.Name, "waiting for the logs", func(sr *sro.SpecialResource) bool {
		return isTrue(sro.ConditionProgressing, sro.ReasonHandlingState)(sr) && strings.Contains(conditionMessage(sr, sro.ConditionProgressing), "logs match")
	})
	if got.Status.State != "1000-driver.yaml" {
		t.Fatalf("state %q", got.Status.State)
	}
	if h.plugin(sr.Name) != nil {
		t.Fatal("state 2000 applied before state 1000's logs matched")
	}
	h.setLog(pod.Name, "specialresource: loading simple-kmod\nspecialresource: driver loaded for kernel 5.14.0\n")
	poll.Until(t, "state 2000's DaemonSet", func() (bool, string) { return h.plugin(sr.Name) != nil, "" })
	poll.Until(t, "node labelled with state 1000", func() (bool, string) {
		l := h.nodeNamed("x").Labels
		return l[naming.StateLabel(sr.Name, "1000")] == "Ready", fmt.Sprint(l)
	})
	poll.Until(t, "the pod marked as matched", func() (bool, string) {
		p := &corev1.Pod{}
		err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(pod), p)
		return err == nil && p.Annotations[sro.LogsMatchedAnnotation] == "true", fmt.Sprint(p.Annotations, err)
	})

	// A restarted operator (its memory gone) whose driver logged on since: the line is no longer
	// at the end of the log, and the state stays ready.
	h.reconciler.logs.reset()
	h.setLog(pod.Name, strings.Repeat("specialresource: heartbeat\n", 30))
	h.update(sr.Name, func(sr *sro.SpecialResource) { sr.Annotations = map[string]string{"test.metalforge.io/poke": "1"} })
	// Without the mark, the next reconciles read the log again and take the label off within a
	// few hundred milliseconds; watch for a second.
	for range 5 {
		time.Sleep(200 * time.Millisecond)
		if l := h.nodeNamed("x").Labels; l[naming.StateLabel(sr.Name, "1000")] != "Ready" {
			t.Fatalf("state 1000's label removed after a restart: %v", l)
		}
	}
}

// TestLogsReadBeforeTheDaemonSetIsReady: wait-for-logs is judged node by node: a node whose
// driver pod logged its line gets the state's label while another node's pod is not ready (a
// roll-out, an image pull failing), which keeps the DaemonSet from being ready.
func TestLogsReadBeforeTheDaemonSetIsReady(t *testing.T) {
	h := start(t)
	h.node("x", kernelX, true)
	h.node("x2", kernelX, true)
	h.push("vendor/kmod:" + kernelX)
	ns := h.recipeNamespace()
	h.recipeConfigMap(ns, "logs", map[string]string{
		"1000-driver.yaml": driverStateYAML(`specialresource.openshift.io/wait-for-logs: "driver loaded"`),
	})
	sr := h.specialResource("kmod")
	sr.Spec.Recipe = sro.SpecialResourceRecipe{ConfigMap: &sro.RecipeConfigMap{Name: "logs", Namespace: ns}}
	h.create(sr)
	ds := h.waitDaemonSets(sr.Name, kernelX)[kernelX]
	h.runPods(ds, 2)
	ctx := context.Background()
	var pods corev1.PodList
	if err := env.Client.List(ctx, &pods, client.InNamespace(ds.Namespace), client.MatchingLabels(ds.Spec.Selector.MatchLabels)); err != nil || len(pods.Items) != 2 {
		t.Fatalf("pods %d %v", len(pods.Items), err)
	}
	var onX, onX2 *corev1.Pod
	for i := range pods.Items {
		if pods.Items[i].Spec.NodeName == h.name("x2") {
			onX2 = &pods.Items[i]
		} else {
			onX = &pods.Items[i]
		}
	}
	onX2.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
	if err := env.Client.Status().Update(ctx, onX2); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "DaemonSet status written", func() (bool, string) {
		cur := &appsv1.DaemonSet{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(&ds), cur); err != nil {
			return false, err.Error()
		}
		cur.Status = appsv1.DaemonSetStatus{ObservedGeneration: cur.Generation, DesiredNumberScheduled: 2, CurrentNumberScheduled: 2,
			NumberReady: 1, NumberAvailable: 1, NumberUnavailable: 1, UpdatedNumberScheduled: 2}
		err := env.Client.Status().Update(ctx, cur)
		return err == nil, fmt.Sprint(err)
	})
	h.setLog(onX.Name, "specialresource: driver loaded\n")
	label := naming.StateLabel(sr.Name, "1000")
	poll.Until(t, "x labelled with the driver's state", func() (bool, string) {
		l := h.nodeNamed("x").Labels
		return l[label] == "Ready", fmt.Sprint(l)
	})
	if l := h.nodeNamed("x2").Labels; l[label] != "" {
		t.Errorf("x2, whose pod is not ready, labelled %v", l)
	}
}

// TestVersionRollsDriver: a new version (or build argument) changes the DaemonSet's pod
// template, so the driver rolls out again; the image tag that names the version is pulled anew.
func TestVersionRollsDriver(t *testing.T) {
	h := start(t)
	h.node("x", kernelX, true)
	h.push("vendor/kmod:" + kernelX + "-1")
	h.push("vendor/kmod:" + kernelX + "-2")
	sr := h.specialResource("kmod")
	sr.Spec.Version = "1"
	sr.Spec.DriverContainer.Image = h.registry + "/vendor/kmod:{{.KernelFullVersion}}-{{.SpecialResource.Spec.Version}}"
	h.create(sr)
	before := h.waitDaemonSets(sr.Name, kernelX)[kernelX]
	h.update(sr.Name, func(sr *sro.SpecialResource) { sr.Spec.Version = "2" })
	var after appsv1.DaemonSet
	poll.Until(t, "the DaemonSet updated", func() (bool, string) {
		after = h.daemonSets(sr.Name)[kernelX]
		return after.Generation > before.Generation, fmt.Sprint(after.Generation)
	})
	key := "specialresource.openshift.io/driver-hash"
	if after.Name != before.Name || after.Spec.Template.Annotations[key] == before.Spec.Template.Annotations[key] ||
		after.Spec.Template.Spec.Containers[0].Image != h.registry+"/vendor/kmod:"+kernelX+"-2" {
		t.Fatalf("before %s %v %s; after %s %v %s", before.Name, before.Spec.Template.Annotations, before.Spec.Template.Spec.Containers[0].Image,
			after.Name, after.Spec.Template.Annotations, after.Spec.Template.Spec.Containers[0].Image)
	}
}

// recipeNamespace is a namespace (for recipe ConfigMaps, or as an existing target namespace).
func (h *harness) recipeNamespace() string {
	return env.Namespace(h.t)
}

func (h *harness) recipeConfigMap(ns, name string, data map[string]string) {
	h.t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}
	if err := env.Client.Create(context.Background(), cm); err != nil {
		h.t.Fatal(err)
	}
}

// builtinRecipeData is the built-in recipe as ConfigMap data.
func builtinRecipeData(t *testing.T) map[string]string {
	t.Helper()
	entries, err := recipe.BuiltinFiles(sro.DriverContainerRecipe)
	if err != nil {
		t.Fatal(err)
	}
	return entries
}

// driverPod is the one pod runDaemonSet made for the DaemonSet.
func (h *harness) driverPod(ds appsv1.DaemonSet) *corev1.Pod {
	h.t.Helper()
	var pods corev1.PodList
	if err := env.Client.List(context.Background(), &pods, client.InNamespace(ds.Namespace), client.MatchingLabels(ds.Spec.Selector.MatchLabels)); err != nil {
		h.t.Fatal(err)
	}
	if len(pods.Items) != 1 {
		h.t.Fatalf("DaemonSet %s has %d pods, want 1", ds.Name, len(pods.Items))
	}
	return &pods.Items[0]
}

func (h *harness) setLog(pod, text string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.logs[pod] = text
}

func (h *harness) plugin(srName string) *appsv1.DaemonSet {
	h.t.Helper()
	ds := &appsv1.DaemonSet{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: srName, Name: srName + "-plugin"}, ds); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		h.t.Fatal(err)
	}
	return ds
}
