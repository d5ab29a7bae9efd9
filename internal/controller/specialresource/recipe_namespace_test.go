package specialresource

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
)

// TestRecipeObjectInMissingNamespace: a recipe object placed in a namespace that does not exist (a
// typo, or a Namespace the recipe writes after it) is the recipe's to fix: Errored RecipeFailure
// naming the object, and a Warning, looked at again after RetryDelay, not an internal error
// retried at once; the drivers come once the namespace exists.
func TestRecipeObjectInMissingNamespace(t *testing.T) {
	h := start(t)
	h.node("x", kernelX, true)
	h.push("vendor/kmod:" + kernelX)
	ns := h.recipeNamespace()
	missing := h.name("vendor-tools")
	data := builtinRecipeData(t)
	data["0500-tools.yaml"] = fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: tools\n  namespace: %s\ndata: {a: b}\n", missing)
	h.recipeConfigMap(ns, "tools", data)
	sr := h.specialResource("kmod")
	sr.Spec.Recipe = sro.SpecialResourceRecipe{ConfigMap: &sro.RecipeConfigMap{Namespace: ns, Name: "tools"}}
	h.create(sr)

	want := fmt.Sprintf("applying ConfigMap %s/tools: ", missing)
	got := h.waitSR(sr.Name, "Errored RecipeFailure", isTrue(sro.ConditionErrored, sro.ReasonRecipeFailure))
	if msg := conditionMessage(got, sro.ConditionErrored); !strings.HasPrefix(msg, want) || !strings.Contains(msg, "not found") {
		t.Fatalf("message %q, want %q…not found", msg, want)
	}
	h.waitWarning(sr.Name, sro.ReasonRecipeFailure, want)

	if err := env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: missing}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: missing}})
	})
	h.waitDaemonSets(sr.Name, kernelX)
}
