package specialresource

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/sro/naming"
	"github.com/metalforge/metalforge/internal/test/poll"
)

// TestStoppedReconcileUndoes: kmod is served on kernel X by nodes x0 and x1, both labelled. Then
// something keeps its reconciles from reaching the plan (a phase stops them) or from writing it
// (an object refused), while x0 and then x1 reboot into Y. Every reconcile still undoes what no
// longer holds, as while waiting for a dependency: x0 loses kmod's state labels once X's driver
// left it while x1, whose driver still serves, keeps them (nothing that works is torn down for
// the breakage); no Y DaemonSet is made; X's DaemonSet goes once no node runs X, and x1's labels
// with it; kmod stays Errored with the case's reason throughout.
func TestStoppedReconcileUndoes(t *testing.T) {
	tests := map[string]struct {
		// breakIt makes kmod's reconciles stop (or fail) with reason; recipe is its recipe.
		breakIt func(h *harness, kmod string, recipe *sro.RecipeConfigMap)
		reason  string
	}{
		"recipe ConfigMap deleted": {reason: sro.ReasonRecipeFailure, breakIt: func(h *harness, _ string, recipe *sro.RecipeConfigMap) {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: recipe.Namespace, Name: recipe.Name}}
			if err := env.Client.Delete(context.Background(), cm); err != nil {
				h.t.Fatal(err)
			}
		}},
		"recipe ConfigMap broken": {reason: sro.ReasonRecipeFailure, breakIt: func(h *harness, _ string, recipe *sro.RecipeConfigMap) {
			h.editRecipe(recipe, func(data map[string]string) {
				data["9000-broken.yaml"] = "metadata: {name: '{{.SpecialResource.Name'}\n"
			})
		}},
		"spec invalid": {reason: sro.ReasonInvalidSpec, breakIt: func(h *harness, kmod string, _ *sro.RecipeConfigMap) {
			h.update(kmod, func(sr *sro.SpecialResource) { sr.Spec.DriverContainer.Modules = []string{"not a module"} })
		}},
		// It selects no node: judged by it, every driver would go although no node changed.
		"node selector invalid": {reason: sro.ReasonInvalidSpec, breakIt: func(h *harness, kmod string, _ *sro.RecipeConfigMap) {
			h.update(kmod, func(sr *sro.SpecialResource) { sr.Spec.NodeSelector["not a label key!"] = "x" })
		}},
		// envtest runs no namespace controller: it stays Terminating, its objects with it.
		"namespace being deleted": {reason: sro.ReasonNamespaceConflict, breakIt: func(h *harness, kmod string, _ *sro.RecipeConfigMap) {
			if err := env.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kmod}}); err != nil {
				h.t.Fatal(err)
			}
		}},
		// A state before the driver's: every reconcile applies it first, and the API server
		// refuses it (a label value with blanks).
		"object refused": {reason: sro.ReasonRecipeFailure, breakIt: func(h *harness, _ string, recipe *sro.RecipeConfigMap) {
			h.editRecipe(recipe, func(data map[string]string) {
				data["0500-refused.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: '{{.SpecialResource.Name}}-refused'\n  labels: {example.com/bad: 'not a label value'}\n"
			})
		}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := start(t)
			sr, recipe, dsX := h.servedOnTwoNodes()
			l0, l1 := naming.StateLabel(sr.Name, "0000"), naming.StateLabel(sr.Name, "1000")
			broken := isTrue(sro.ConditionErrored, tc.reason)
			tc.breakIt(h, sr.Name, recipe)
			h.waitSR(sr.Name, "Errored "+tc.reason, broken)

			h.setKernel("x0", kernelY)
			h.runDaemonSet(dsX, 1) // the DaemonSet controller: x0 left kernel X
			poll.Until(t, "x0 without kmod's labels, x1 with them", func() (bool, string) {
				x0, x1 := h.stateLabels("x0", sr.Name), h.stateLabels("x1", sr.Name)
				return len(x0) == 0 && x1[l0] == "Ready" && x1[l1] == "Ready", fmt.Sprintf("x0 %v, x1 %v", x0, x1)
			})
			if dss := h.daemonSets(sr.Name); len(dss) != 1 || dss[kernelX].Name == "" {
				t.Fatalf("DaemonSets for kernels %v, want X's only", slices.Sorted(maps.Keys(dss)))
			}

			h.setKernel("x1", kernelY)
			h.drain(dsX)
			poll.Until(t, "X's DaemonSet deleted, x1 without kmod's labels", func() (bool, string) {
				dss, x1 := h.daemonSets(sr.Name), h.stateLabels("x1", sr.Name)
				return len(dss) == 0 && len(x1) == 0, fmt.Sprintf("DaemonSets for %v, x1 %v", slices.Sorted(maps.Keys(dss)), x1)
			})
			if got := h.get(sr.Name); !broken(got) {
				t.Fatalf("kmod: %s, want still Errored %s", describe(got), tc.reason)
			}
		})
	}
}

// servedOnTwoNodes creates kmod, with the built-in recipe from a ConfigMap, served on nodes x0
// and x1 running kernel X (the registry has Y's image too), and waits until it is Ready and both
// nodes carry its state labels. It returns kmod, its recipe and X's DaemonSet.
func (h *harness) servedOnTwoNodes() (*sro.SpecialResource, *sro.RecipeConfigMap, appsv1.DaemonSet) {
	h.t.Helper()
	h.node("x0", kernelX, true)
	h.node("x1", kernelX, true)
	h.push("vendor/kmod:" + kernelX)
	h.push("vendor/kmod:" + kernelY)
	recipe := &sro.RecipeConfigMap{Namespace: h.recipeNamespace(), Name: "recipe"}
	h.recipeConfigMap(recipe.Namespace, recipe.Name, builtinRecipeData(h.t))
	sr := h.specialResource("kmod")
	sr.Spec.Recipe = sro.SpecialResourceRecipe{ConfigMap: recipe}
	h.create(sr)
	ds := h.waitDaemonSets(sr.Name, kernelX)[kernelX]
	h.runDaemonSet(ds, 2)
	h.waitSR(sr.Name, "Ready", isTrue(sro.ConditionReady, ""))
	l1 := naming.StateLabel(sr.Name, "1000")
	poll.Until(h.t, "both nodes labelled", func() (bool, string) {
		return h.nodeNamed("x0").Labels[l1] == "Ready" && h.nodeNamed("x1").Labels[l1] == "Ready", ""
	})
	return sr, recipe, ds
}

// drain plays the DaemonSet controller once no node runs the DaemonSet's kernel: its pods go and
// its status counts none (what wakes the operator in a cluster, whatever the node selector),
// unless the operator deleted it first.
func (h *harness) drain(ds appsv1.DaemonSet) {
	h.t.Helper()
	h.runPods(ds, 0)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &appsv1.DaemonSet{}
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(&ds), cur); err != nil {
			return err
		}
		cur.Status = appsv1.DaemonSetStatus{ObservedGeneration: cur.Generation}
		return env.Client.Status().Update(context.Background(), cur)
	})
	if err != nil && !apierrors.IsNotFound(err) {
		h.t.Fatal(err)
	}
}

// stateLabels are the state labels of SpecialResource srName on the node.
func (h *harness) stateLabels(node, srName string) map[string]string {
	h.t.Helper()
	out := map[string]string{}
	for key, v := range h.nodeNamed(node).Labels {
		if naming.IsStateLabelOf(key, srName) {
			out[key] = v
		}
	}
	return out
}

// editRecipe changes a recipe ConfigMap's data.
func (h *harness) editRecipe(recipe *sro.RecipeConfigMap, mutate func(data map[string]string)) {
	h.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm := &corev1.ConfigMap{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: recipe.Namespace, Name: recipe.Name}, cm); err != nil {
			return err
		}
		mutate(cm.Data)
		return env.Client.Update(context.Background(), cm)
	})
	if err != nil {
		h.t.Fatal(err)
	}
}
