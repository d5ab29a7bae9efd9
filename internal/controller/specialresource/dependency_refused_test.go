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
	"github.com/metalforge/metalforge/internal/controller/conditions"
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

// TestDependencyRecipeOnlyForMissing: a dependency whose recipe is the built-in driver-container
// (which a dependency created with nothing but its recipe cannot use) is fine when the user
// created the dependency: a, which depends on b so, goes on to Ready (a SpecialResource valid
// before stays valid). A missing one is said, naming the field, without a create the API server
// would refuse.
func TestDependencyRecipeOnlyForMissing(t *testing.T) {
	h := start(t)
	h.node("x", kernelX, true)
	for _, img := range []string{"a", "b"} {
		h.push("vendor/" + img + ":" + kernelX)
	}
	b := h.specialResource("b")
	a := h.specialResource("a")
	a.Spec.DependsOn = []sro.SpecialResourceDependency{{Name: b.Name, Recipe: &sro.SpecialResourceRecipe{Name: sro.DriverContainerRecipe}}}
	t.Cleanup(func() { h.deleteAndWait(b.Name) }) // after a is gone
	if err := env.Client.Create(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	h.create(a)
	h.runDaemonSet(h.waitDaemonSets(b.Name, kernelX)[kernelX], 1)
	h.waitSR(b.Name, "b Ready", isTrue(sro.ConditionReady, ""))
	h.runDaemonSet(h.waitDaemonSets(a.Name, kernelX)[kernelX], 1)
	h.waitSR(a.Name, "a Ready with the dependency the user made", isTrue(sro.ConditionReady, ""))

	c := h.specialResource("c")
	c.Spec.DependsOn = []sro.SpecialResourceDependency{{Name: h.name("missing"), Recipe: &sro.SpecialResourceRecipe{Name: sro.DriverContainerRecipe}}}
	h.create(c)
	got := h.waitSR(c.Name, "the missing dependency's recipe said", func(sr *sro.SpecialResource) bool {
		cond := conditions.Get(sr.Status.Conditions, sro.ConditionErrored)
		return isTrue(sro.ConditionErrored, sro.ReasonRecipeFailure)(sr) && cond != nil &&
			strings.Contains(cond.Message, "spec.dependsOn[0].recipe") && strings.Contains(cond.Message, "needs spec.driverContainer.image")
	})
	if n := h.dependencyCreates(h.name("missing")); n != 0 {
		t.Fatalf("%d creates of the dependency the API server would refuse, want none (%s)", n, describe(got))
	}
}
