package specialresource

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
)

// TestRecipeConfigMapWatched: a SpecialResource whose recipe ConfigMap is missing is Errored
// (RecipeFailure, a Warning); the ConfigMap created with a broken template is a new problem of the
// same reason, with its own Warning; fixing the ConfigMap wakes the SpecialResource at once (the
// Resync here is an hour: without the ConfigMap watch the test times out).
func TestRecipeConfigMapWatched(t *testing.T) {
	h := start(t, withResync(time.Hour))
	h.node("x", kernelX, true)
	h.push("vendor/kmod:" + kernelX)
	ns := h.recipeNamespace()
	sr := h.specialResource("kmod")
	sr.Spec.Recipe = sro.SpecialResourceRecipe{ConfigMap: &sro.RecipeConfigMap{Name: "late", Namespace: ns}}
	h.create(sr)

	notFound := fmt.Sprintf("spec.recipe.configMap: ConfigMap %s/late not found", ns)
	h.waitSR(sr.Name, "Errored, not found", func(sr *sro.SpecialResource) bool {
		return isTrue(sro.ConditionErrored, sro.ReasonRecipeFailure)(sr) && conditionMessage(sr, sro.ConditionErrored) == notFound
	})
	h.waitWarning(sr.Name, sro.ReasonRecipeFailure, notFound)

	data := builtinRecipeData(t)
	data["9000-broken.yaml"] = "metadata: {name: '{{.SpecialResource.Name'}\n"
	h.recipeConfigMap(ns, "late", data)
	h.waitSR(sr.Name, "Errored, broken template", func(sr *sro.SpecialResource) bool {
		return isTrue(sro.ConditionErrored, sro.ReasonRecipeFailure)(sr) && strings.Contains(conditionMessage(sr, sro.ConditionErrored), "9000-broken.yaml")
	})
	h.waitWarning(sr.Name, sro.ReasonRecipeFailure, "9000-broken.yaml")

	cm := &corev1.ConfigMap{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "late"}, cm); err != nil {
		t.Fatal(err)
	}
	delete(cm.Data, "9000-broken.yaml")
	if err := env.Client.Update(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	h.waitDaemonSets(sr.Name, kernelX)
	h.waitSR(sr.Name, "no longer Errored", func(sr *sro.SpecialResource) bool {
		return !isTrue(sro.ConditionErrored, "")(sr)
	})
}

// TestDependencyRecipeConfigMap: a missing dependency whose recipe ConfigMap is missing, then
// broken, is Errored (RecipeFailure), naming spec.dependsOn[0].recipe.configMap, with a Warning
// each time; once the ConfigMap is right the dependency is created and waited for.
func TestDependencyRecipeConfigMap(t *testing.T) {
	h := start(t)
	h.node("x", kernelX, true)
	h.push("vendor/a:" + kernelX)
	cmNS := h.recipeNamespace()
	dep := h.specialResource("b")
	a := h.specialResource("a")
	a.Spec.DependsOn = []sro.SpecialResourceDependency{{Name: dep.Name,
		Recipe: &sro.SpecialResourceRecipe{ConfigMap: &sro.RecipeConfigMap{Name: "b-recipe", Namespace: cmNS}}}}
	t.Cleanup(func() { h.deleteAndWait(dep.Name) }) // after a is gone
	h.create(a)

	notFound := fmt.Sprintf("spec.dependsOn[0].recipe.configMap: ConfigMap %s/b-recipe not found", cmNS)
	h.waitSR(a.Name, "Errored, not found", func(sr *sro.SpecialResource) bool {
		return isTrue(sro.ConditionErrored, sro.ReasonRecipeFailure)(sr) && conditionMessage(sr, sro.ConditionErrored) == notFound
	})
	h.waitWarning(a.Name, sro.ReasonRecipeFailure, notFound)

	data := builtinRecipeData(t)
	data["specialresource.yaml"] = fmt.Sprintf("apiVersion: sro.openshift.io/v1beta1\nkind: SpecialResource\nmetadata:\n  name: ignored\nspec:\n  nodeSelector: {test.metalforge.io/hw: %s}\n  driverContainer:\n    image: %q\n", h.id, dep.Spec.DriverContainer.Image)
	data["not-a-state"] = "x"
	h.recipeConfigMap(cmNS, "b-recipe", data)
	broken := fmt.Sprintf(`spec.dependsOn[0].recipe.configMap: ConfigMap %s/b-recipe: key "not-a-state" is not a state`, cmNS)
	h.waitSR(a.Name, "Errored, broken", func(sr *sro.SpecialResource) bool {
		return isTrue(sro.ConditionErrored, sro.ReasonRecipeFailure)(sr) && strings.HasPrefix(conditionMessage(sr, sro.ConditionErrored), broken)
	})
	h.waitWarning(a.Name, sro.ReasonRecipeFailure, broken)

	cm := &corev1.ConfigMap{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: cmNS, Name: "b-recipe"}, cm); err != nil {
		t.Fatal(err)
	}
	delete(cm.Data, "not-a-state")
	if err := env.Client.Update(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	h.waitSR(a.Name, "waiting for b", isTrue(sro.ConditionProgressing, sro.ReasonWaitingForDependency))
	if created := h.get(dep.Name); created.Labels[sro.CreatedForLabel] != a.Name {
		t.Fatalf("dependency %s labels %v, want created for %s", created.Name, created.Labels, a.Name)
	}
}

// waitWarning waits for a Warning event (see waitEvent).
func (h *harness) waitWarning(srName, reason, text string) *corev1.Event {
	h.t.Helper()
	e := h.waitEvent(srName, reason, text)
	if e.Type != corev1.EventTypeWarning {
		h.t.Fatalf("event %s %q is %s, want Warning", e.Reason, e.Message, e.Type)
	}
	return e
}
