package specialresource

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/test/poll"
)

// TestRefusedDependencyNotAnnounced: A depends on B, missing, whose recipe ConfigMap's
// specialresource.yaml the API server refuses (an imageReference its schema does not allow). A is
// Errored/RecipeFailure naming the dependency and the refusal (not an internal error), and no
// DependencyCreated event is emitted, after retries too. Once the ConfigMap is fixed, B is created
// and announced.
func TestRefusedDependencyNotAnnounced(t *testing.T) {
	h := start(t)
	h.node("x", kernelX, true)
	cmNS := h.recipeNamespace()
	dep := h.specialResource("b")
	defaultSR := func(imageReference string) string {
		return fmt.Sprintf("apiVersion: sro.openshift.io/v1beta1\nkind: SpecialResource\nmetadata:\n  name: ignored\nspec:\n"+
			"  nodeSelector: {test.metalforge.io/hw: %s}\n  driverContainer:\n    image: %q\n    modules: [b]\n"+
			"  dependsOn: [{name: %s, imageReference: %q}]\n", h.id, dep.Spec.DriverContainer.Image, h.name("c"), imageReference)
	}
	data := builtinRecipeData(t)
	data["specialresource.yaml"] = defaultSR("yes")
	h.recipeConfigMap(cmNS, "b-recipe", data)

	a := h.specialResource("a")
	a.Spec.DependsOn = []sro.SpecialResourceDependency{{Name: dep.Name,
		Recipe: &sro.SpecialResourceRecipe{ConfigMap: &sro.RecipeConfigMap{Name: "b-recipe", Namespace: cmNS}}}}
	// Registered first, so it runs after A is gone (while A exists, a deleted B comes back).
	t.Cleanup(func() {
		if err := env.Client.Get(context.Background(), client.ObjectKey{Name: dep.Name}, &sro.SpecialResource{}); !apierrors.IsNotFound(err) {
			h.deleteAndWait(dep.Name)
		}
	})
	h.create(a)

	// The controller asks again: wait until it has, twice more, and for the Warning of its first
	// refusal, then look. A reconcile's events go out in order after its status write (a
	// DependencyCreated it queued, then the Warning).
	h.waitSR(a.Name, "Errored", isTrue(sro.ConditionErrored, ""))
	poll.Until(t, "the dependency asked for again", func() (bool, string) {
		n := h.dependencyCreates(dep.Name)
		return n >= 3, fmt.Sprintf("%d creates", n)
	})
	poll.Until(t, "a Warning about "+a.Name, func() (bool, string) {
		var list corev1.EventList
		if err := env.Client.List(context.Background(), &list); err != nil {
			return false, err.Error()
		}
		for _, e := range list.Items {
			if e.InvolvedObject.Kind == "SpecialResource" && e.InvolvedObject.Name == a.Name && e.Type == corev1.EventTypeWarning {
				return true, ""
			}
		}
		return false, "none"
	})
	if got := h.events(a.Name, reasonDependencyCreated); len(got) > 0 {
		t.Fatalf("DependencyCreated announced although the API server refused it: %q", got)
	}
	want := "creating dependency SpecialResource " + dep.Name + " (spec.dependsOn[0].recipe): "
	got := h.waitSR(a.Name, "Errored RecipeFailure", isTrue(sro.ConditionErrored, sro.ReasonRecipeFailure))
	if msg := conditionMessage(got, sro.ConditionErrored); !strings.HasPrefix(msg, want) || !strings.Contains(msg, `"yes"`) {
		t.Fatalf("message %q, want %q… naming the refused value", msg, want)
	}

	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm := &corev1.ConfigMap{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: cmNS, Name: "b-recipe"}, cm); err != nil {
			return err
		}
		cm.Data["specialresource.yaml"] = defaultSR("true")
		return env.Client.Update(context.Background(), cm)
	})
	if err != nil {
		t.Fatal(err)
	}
	h.waitEvent(a.Name, reasonDependencyCreated, "Created SpecialResource "+dep.Name)
	if created := h.get(dep.Name); created.Labels[sro.CreatedForLabel] != a.Name {
		t.Fatalf("dependency labels %v, want %s=%s", created.Labels, sro.CreatedForLabel, a.Name)
	}
}
