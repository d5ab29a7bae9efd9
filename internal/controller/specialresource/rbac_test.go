package specialresource

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/test/poll"
)

// TestRecipeKindForbidden: a recipe ConfigMap renders a kind the operator's RBAC lacks (a Service,
// which its API reader may not read here): the SpecialResource is Errored/RecipeFailure naming the
// kind and what to add to the operator's role, as for a refused apply, with a Warning, not an
// internal error; once the role grants it, the recipe is applied. Deleting the SpecialResource
// then is not held up by the ReplicaSets the reader may not list either.
func TestRecipeKindForbidden(t *testing.T) {
	user := "sro-reader-" + strings.ToLower(t.Name())
	h := start(t, withReaderAs(user))
	h.grant(user, "recipe", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps", "nodes"}, Verbs: []string{"get", "list"}})
	h.node("x", kernelX, true)
	h.push("vendor/kmod:" + kernelX)
	ns := h.recipeNamespace()
	data := builtinRecipeData(t)
	data["0500-metrics.yaml"] = "apiVersion: v1\nkind: Service\nmetadata:\n  name: '{{.SpecialResource.Name}}-metrics'\nspec:\n  ports: [{port: 9100}]\n"
	h.recipeConfigMap(ns, "metrics", data)
	sr := h.specialResource("kmod")
	sr.Spec.Recipe = sro.SpecialResourceRecipe{ConfigMap: &sro.RecipeConfigMap{Namespace: ns, Name: "metrics"}}
	h.create(sr)

	want := fmt.Sprintf("reading Service %s/%s-metrics: ", sr.Name, sr.Name)
	const rbac = `(the operator's ClusterRole needs get, list, create, patch and delete on "services" in API group "": config/sro/rbac/role.yaml)`
	got := h.waitSR(sr.Name, "Errored RecipeFailure", isTrue(sro.ConditionErrored, sro.ReasonRecipeFailure))
	if msg := conditionMessage(got, sro.ConditionErrored); !strings.HasPrefix(msg, want) || !strings.Contains(msg, "forbidden") || !strings.HasSuffix(msg, rbac) {
		t.Fatalf("message %q, want %q…forbidden…%q", msg, want, rbac)
	}
	h.waitWarning(sr.Name, sro.ReasonRecipeFailure, want)

	h.grant(user, "services", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"get", "list"}})
	h.waitDaemonSets(sr.Name, kernelX)
	poll.Until(t, "the recipe's Service", func() (bool, string) {
		err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: sr.Name, Name: sr.Name + "-metrics"}, &corev1.Service{})
		return err == nil, fmt.Sprint(err)
	})
	h.deleteAndWait(sr.Name)
}

// grant gives user the rules, cluster-wide (a ClusterRole and its binding, named after the test
// and what).
func (h *harness) grant(user, what string, rules ...rbacv1.PolicyRule) {
	h.t.Helper()
	name := h.name(what)
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}}
	for _, o := range []client.Object{role, binding} {
		if err := env.Client.Create(context.Background(), o); err != nil {
			h.t.Fatal(err)
		}
		h.t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
}
