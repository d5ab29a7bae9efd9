package specialresource

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/sro/naming"
	"github.com/metalforge/metalforge/internal/sro/recipe"
	"github.com/metalforge/metalforge/internal/test/poll"
)

// TestOldNamespaces: the namespaces a move still has to empty are read from the cluster alone
// (status.namespace, and the namespaces created for the SpecialResource), so that a restarted
// operator finishes a move; never the target, a namespace being deleted, one another
// SpecialResource of the same name controls, one a recipe object names, or, once the move is
// done, a created one it kept for the recipe ConfigMap in it.
// fromRecipe marks ns as a recipe's rendered object (decorate hashes what it renders).
func fromRecipe(ns corev1.Namespace) corev1.Namespace {
	ns.Annotations = map[string]string{sro.HashAnnotation: "h1"}
	return ns
}

func TestOldNamespaces(t *testing.T) {
	const ours = types.UID("uid-kmod")
	created := func(name string, owner types.UID, terminating bool) corev1.Namespace {
		ns := corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: sro.GroupVersion.String(), Kind: "SpecialResource", Name: "kmod", UID: owner, Controller: ptr.To(true)}}}}
		if terminating {
			ns.DeletionTimestamp = ptr.To(metav1.Now())
		}
		return ns
	}
	tests := map[string]struct {
		status, target string
		created        []corev1.Namespace
		rendered       []string
		recipeIn       string
		want           []string
	}{
		"first reconcile":                         {target: "a"},
		"namespace unchanged":                     {status: "a", target: "a", created: []corev1.Namespace{created("a", ours, false)}},
		"moved from a namespace the user created": {status: "a", target: "b", want: []string{"a"}},
		"moved from a namespace the operator created": {status: "a", target: "b",
			created: []corev1.Namespace{created("a", ours, false), created("b", ours, false)}, want: []string{"a"}},
		// An operator without moves set status.namespace at once and left the namespace it created.
		"status moved on, created namespace still there": {status: "b", target: "b",
			created: []corev1.Namespace{created("a", ours, false)}, want: []string{"a"}},
		"moved again before the first move was done": {status: "a", target: "c",
			created: []corev1.Namespace{created("b", ours, false)}, want: []string{"a", "b"}},
		"moved back before the move was done": {status: "a", target: "a",
			created: []corev1.Namespace{created("a", ours, false), created("b", ours, false)}, want: []string{"b"}},
		// The namespace controller removes what is in it.
		"created namespace being deleted": {status: "b", target: "b", created: []corev1.Namespace{created("a", ours, true)}},
		// A SpecialResource deleted and created again under the same name.
		"created for another SpecialResource of the name": {status: "b", target: "b",
			created: []corev1.Namespace{created("a", "uid-earlier-kmod", false)}},
		"a namespace a recipe object names": {status: "a", target: "b", rendered: []string{"a"}},
		// A Namespace the recipe renders has our label and owner too, and the recipe's hash: the
		// plan's, not a move's (rendered only with a kernel's image, it is absent meanwhile).
		"a Namespace the recipe renders, not rendered now": {status: "b", target: "b",
			created: []corev1.Namespace{fromRecipe(created("x", ours, false))}},
		// Emptied by the move that kept it (namespacesToDelete).
		"created namespace holding the recipe ConfigMap, status moved on": {status: "b", target: "b", recipeIn: "a",
			created: []corev1.Namespace{created("a", ours, false)}},
		"namespace holding the recipe ConfigMap, being left": {status: "a", target: "b", recipeIn: "a",
			created: []corev1.Namespace{created("a", ours, false)}, want: []string{"a"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			sr := &sro.SpecialResource{ObjectMeta: metav1.ObjectMeta{Name: "kmod", UID: ours}}
			sr.Status.Namespace = tc.status
			if tc.recipeIn != "" {
				sr.Spec.Recipe.ConfigMap = &sro.RecipeConfigMap{Namespace: tc.recipeIn, Name: "recipe"}
			}
			rendered := map[string]bool{}
			for _, ns := range tc.rendered {
				rendered[ns] = true
			}
			if got := oldNamespaces(sr, tc.target, tc.created, rendered); !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestNamespacesToDelete: a move does not delete a namespace it left while the SpecialResource
// reads a recipe ConfigMap from it (its own or a dependency's).
func TestNamespacesToDelete(t *testing.T) {
	recipeIn := func(ns string) *sro.SpecialResourceRecipe {
		return &sro.SpecialResourceRecipe{ConfigMap: &sro.RecipeConfigMap{Namespace: ns, Name: "recipe"}}
	}
	tests := map[string]struct {
		spec sro.SpecialResourceSpec
		want []string
	}{
		"built-in recipe":                    {want: []string{"a", "b"}},
		"recipe ConfigMap in a":              {spec: sro.SpecialResourceSpec{Recipe: *recipeIn("a")}, want: []string{"b"}},
		"dependency's recipe ConfigMap in b": {spec: sro.SpecialResourceSpec{DependsOn: []sro.SpecialResourceDependency{{Name: "dep", Recipe: recipeIn("b")}}}, want: []string{"a"}},
		"recipe ConfigMap elsewhere":         {spec: sro.SpecialResourceSpec{Recipe: *recipeIn("recipes")}, want: []string{"a", "b"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			old := []string{"a", "b"}
			if got := namespacesToDelete(&sro.SpecialResource{Spec: tc.spec}, old); !slices.Equal(got, tc.want) || !slices.Equal(old, []string{"a", "b"}) {
				t.Fatalf("got %v (old now %v), want %v", got, old, tc.want)
			}
		})
	}
}

// TestStatusNamespaceDuringMove: status.namespace, the record a restarted operator finishes a move
// from, names the old namespace until the move removed everything of ours from it; it names
// spec.namespace at once when nothing was recorded, or no namespace was left.
func TestStatusNamespaceDuringMove(t *testing.T) {
	tests := map[string]struct {
		recorded string
		in       inputs
		movedOut bool
		want     string
	}{
		"first reconcile":                         {in: inputs{namespace: "b"}, want: "b"},
		"stopped before the objects phase":        {recorded: "a", in: inputs{namespace: "b"}, want: "a"},
		"old namespace not emptied yet":           {recorded: "a", in: inputs{namespace: "b", oldNamespacesRead: true, oldNamespaces: []string{"a"}}, want: "a"},
		"old namespace emptied by this reconcile": {recorded: "a", in: inputs{namespace: "b", oldNamespacesRead: true, oldNamespaces: []string{"a"}}, movedOut: true, want: "b"},
		"no namespace left":                       {recorded: "a", in: inputs{namespace: "b", oldNamespacesRead: true}, want: "b"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			sr := &sro.SpecialResource{}
			sr.Status.Namespace = tc.recorded
			s := &scope{in: tc.in}
			s.fx.movedOut = tc.movedOut
			setStatus(sr, s, ready(), metav1.Now())
			if sr.Status.Namespace != tc.want {
				t.Fatalf("status.namespace %q, want %q", sr.Status.Namespace, tc.want)
			}
		})
	}
}

// TestNamespaceChangeMovesDriver: kmod is served from namespace A, which the operator created.
// Changed to B: A's driver stops first (nothing is applied in B while its pod runs: it unloads the
// modules as it stops), then kmod is served from B, what it created in A goes and so does A
// (Terminating: envtest runs no namespace controller), status.namespace names B and an event says
// so. Moved back to A while A is still terminating: NamespaceConflict, and B's driver stays.
func TestNamespaceChangeMovesDriver(t *testing.T) {
	h := start(t)
	h.node("x", kernelX, true)
	h.push("vendor/kmod:" + kernelX)
	sr := h.specialResource("kmod")
	h.create(sr)
	oldNS, newNS := sr.Name, h.name("moved")
	h.runDaemonSet(h.waitDaemonSets(sr.Name, kernelX)[kernelX], 1)
	h.waitSR(sr.Name, "Ready", isTrue(sro.ConditionReady, ""))
	if left := h.ownedIn(oldNS, sr.Name); len(left) < 5 {
		t.Fatalf("in %s before the move: %v, want the built-in recipe's objects", oldNS, left)
	}

	h.moveDriver(sr.Name, oldNS, newNS)
	if left := h.ownedIn(oldNS, sr.Name); len(left) > 0 {
		t.Errorf("left in %s: %v", oldNS, left)
	}
	ns := &corev1.Namespace{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: oldNS}, ns); err != nil || ns.DeletionTimestamp.IsZero() {
		t.Errorf("namespace %s, created for kmod, not deleted (%v)", oldNS, err)
	}
	h.waitEvent(sr.Name, reasonNamespaceChanged, "Moved to namespace "+newNS+": removed what the operator created in "+oldNS+", and namespace "+oldNS)

	l1 := naming.StateLabel(sr.Name, "1000")
	poll.Until(t, "node x labelled by the driver in "+newNS, func() (bool, string) {
		return h.nodeNamed("x").Labels[l1] == "Ready", fmt.Sprint(h.nodeNamed("x").Labels)
	})
	h.update(sr.Name, func(sr *sro.SpecialResource) { sr.Spec.Namespace = oldNS })
	got := h.waitSR(sr.Name, "NamespaceConflict", isTrue(sro.ConditionErrored, sro.ReasonNamespaceConflict))
	if ds := h.daemonSets(sr.Name)[kernelX]; ds.Namespace != newNS || got.Status.Namespace != newNS {
		t.Fatalf("while %s terminates: driver in %q, status.namespace %q; want both %s", oldNS, ds.Namespace, got.Status.Namespace, newNS)
	}
	if l := h.nodeNamed("x").Labels[l1]; l != "Ready" {
		t.Fatalf("node x lost kmod's state label while its driver in %s serves: %q", newNS, l)
	}
}

// TestNamespaceChangeKeepsUserNamespace: kmod is served from namespace A, which the user created.
// Changed first to a namespace another SpecialResource owns: NamespaceConflict, and the driver
// stays in A. Then to B: the driver moves (as in TestNamespaceChangeMovesDriver) and what the
// operator created in A goes, but A stays.
func TestNamespaceChangeKeepsUserNamespace(t *testing.T) {
	h := start(t)
	h.node("x", kernelX, true)
	h.push("vendor/kmod:" + kernelX)
	userNS, newNS := h.recipeNamespace(), h.name("moved")
	sr := h.specialResource("kmod")
	sr.Spec.Namespace = userNS
	h.create(sr)
	h.runDaemonSet(h.waitDaemonSets(sr.Name, kernelX)[kernelX], 1)
	h.waitSR(sr.Name, "Ready", isTrue(sro.ConditionReady, ""))

	taken := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: h.name("taken"), OwnerReferences: []metav1.OwnerReference{{
		APIVersion: sro.GroupVersion.String(), Kind: "SpecialResource", Name: "other", UID: "uid-other", Controller: ptr.To(true)}}}}
	if err := env.Client.Create(context.Background(), taken); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), taken) })
	h.update(sr.Name, func(sr *sro.SpecialResource) { sr.Spec.Namespace = taken.Name })
	got := h.waitSR(sr.Name, "NamespaceConflict", isTrue(sro.ConditionErrored, sro.ReasonNamespaceConflict))
	if ds := h.daemonSets(sr.Name)[kernelX]; ds.Namespace != userNS || got.Status.Namespace != userNS {
		t.Fatalf("driver in %q, status.namespace %q; want both %s", ds.Namespace, got.Status.Namespace, userNS)
	}

	h.moveDriver(sr.Name, userNS, newNS)
	if left := h.ownedIn(userNS, sr.Name); len(left) > 0 {
		t.Errorf("left in %s: %v", userNS, left)
	}
	ns := &corev1.Namespace{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: userNS}, ns); err != nil || !ns.DeletionTimestamp.IsZero() {
		t.Errorf("namespace %s, which the user created, was deleted (%v)", userNS, err)
	}
	ev := h.waitEvent(sr.Name, reasonNamespaceChanged, "Moved to namespace "+newNS+": removed what the operator created in "+userNS)
	if strings.Contains(ev.Message, "and namespace") {
		t.Errorf("event %q: the user's namespace is not the operator's to delete", ev.Message)
	}
}

// TestNamespaceChangeWaitsForThePullSecret: kmod, pulled with a pull Secret, is served from
// namespace A. Changed to B, which has no such Secret: nothing moves (the new driver could not
// pull its image): Errored/InvalidSpec naming the field and the Secret, a Warning, the driver and
// status.namespace stay in A, and B is created so that the Secret can be put there. With the
// Secret in B, the driver moves, and goes on moving when the Secret goes once A's driver is removed.
func TestNamespaceChangeWaitsForThePullSecret(t *testing.T) {
	h := start(t)
	h.node("x", kernelX, true)
	h.push("vendor/kmod:" + kernelX)
	oldNS, newNS := h.recipeNamespace(), h.name("moved")
	sr := h.servedWithPullSecret(oldNS)

	h.update(sr.Name, func(sr *sro.SpecialResource) { sr.Spec.Namespace = newNS })
	want := fmt.Sprintf("spec.driverContainer.pullSecret: Secret %s/pull not found (moving from namespace %s: the driver there keeps running until this is fixed)", newNS, oldNS)
	got := h.waitSR(sr.Name, "Errored InvalidSpec", isTrue(sro.ConditionErrored, sro.ReasonInvalidSpec))
	if msg := conditionMessage(got, sro.ConditionErrored); msg != want {
		t.Fatalf("message %q, want %q", msg, want)
	}
	h.waitWarning(sr.Name, sro.ReasonInvalidSpec, want)
	if ds := h.daemonSets(sr.Name)[kernelX]; ds.Namespace != oldNS || got.Status.Namespace != oldNS {
		t.Fatalf("while the Secret is missing in %s: driver in %q, status.namespace %q; want both %s", newNS, ds.Namespace, got.Status.Namespace, oldNS)
	}
	poll.Until(t, "namespace "+newNS+" created for the Secret", func() (bool, string) {
		err := env.Client.Get(context.Background(), client.ObjectKey{Name: newNS}, &corev1.Namespace{})
		return err == nil, fmt.Sprint(err)
	})

	if err := env.Client.Create(context.Background(), h.pullSecret(newNS)); err != nil {
		t.Fatal(err)
	}
	// Once the old driver is removed, the move goes on without the Secret: stopping there would
	// leave no driver anywhere (the new one has its image recorded, and pulls it when it runs).
	h.waitSR(sr.Name, "the move under way", func(sr *sro.SpecialResource) bool {
		return strings.Contains(conditionMessage(sr, sro.ConditionProgressing), "moving to namespace "+newNS+": waiting for 1 driver pods")
	})
	if err := env.Client.Delete(context.Background(), h.pullSecret(newNS)); err != nil {
		t.Fatal(err)
	}
	h.finishMove(sr.Name, oldNS, newNS)
}

// moveDriver changes the SpecialResource's namespace from oldNS to newNS and plays the old
// driver's stop: it waits until the SpecialResource waits for its driver pod in oldNS (its
// DaemonSet deleted, nothing applied in newNS, status.namespace still oldNS), deletes that pod
// (what the garbage collector and the kubelet do), then runs the driver in newNS and waits until
// the SpecialResource is Ready there.
func (h *harness) moveDriver(srName, oldNS, newNS string) {
	h.t.Helper()
	h.update(srName, func(sr *sro.SpecialResource) { sr.Spec.Namespace = newNS })
	h.finishMove(srName, oldNS, newNS)
}

// finishMove is moveDriver once spec.namespace names newNS.
func (h *harness) finishMove(srName, oldNS, newNS string) {
	h.t.Helper()
	got := h.waitSR(srName, "waiting for the driver in "+oldNS, func(sr *sro.SpecialResource) bool {
		return isTrue(sro.ConditionProgressing, sro.ReasonHandlingState)(sr) &&
			strings.Contains(conditionMessage(sr, sro.ConditionProgressing), "moving to namespace "+newNS+": waiting for 1 driver pods in "+oldNS+" to stop first")
	})
	if dss := h.daemonSets(srName); len(dss) != 0 || got.Status.Namespace != oldNS {
		h.t.Fatalf("while the driver in %s stops: DaemonSets %v, status.namespace %q", oldNS, dss, got.Status.Namespace)
	}
	var pods corev1.PodList
	if err := env.Client.List(context.Background(), &pods, client.InNamespace(oldNS), client.MatchingLabels{sro.OwnedLabel: naming.OwnerValue(srName)}); err != nil {
		h.t.Fatal(err)
	}
	for i := range pods.Items {
		if err := env.Client.Delete(context.Background(), &pods.Items[i], client.GracePeriodSeconds(0)); err != nil {
			h.t.Fatal(err)
		}
	}
	ds := h.waitDaemonSets(srName, kernelX)[kernelX]
	if ds.Namespace != newNS {
		h.t.Fatalf("DaemonSet %s/%s, want it in %s", ds.Namespace, ds.Name, newNS)
	}
	h.runDaemonSet(ds, 1)
	h.waitSR(srName, "Ready in "+newNS, func(sr *sro.SpecialResource) bool {
		return isTrue(sro.ConditionReady, "")(sr) && sr.Status.Namespace == newNS
	})
}

// ownedIn lists (kind/name) the SpecialResource's objects in the namespace that are not being
// deleted, of the kinds the built-in recipe creates.
func (h *harness) ownedIn(namespace, srName string) []string {
	h.t.Helper()
	var out []string
	for kind, list := range map[string]client.ObjectList{"DaemonSet": &appsv1.DaemonSetList{}, "ConfigMap": &corev1.ConfigMapList{},
		"ServiceAccount": &corev1.ServiceAccountList{}, "Role": &rbacv1.RoleList{}, "RoleBinding": &rbacv1.RoleBindingList{}} {
		if err := env.Client.List(context.Background(), list, client.InNamespace(namespace), client.MatchingLabels{sro.OwnedLabel: naming.OwnerValue(srName)}); err != nil {
			h.t.Fatal(err)
		}
		err := meta.EachListItem(list, func(o runtime.Object) error {
			if obj, ok := o.(client.Object); ok && obj.GetDeletionTimestamp().IsZero() {
				out = append(out, kind+"/"+obj.GetName())
			}
			return nil
		})
		if err != nil {
			h.t.Fatal(err)
		}
	}
	slices.Sort(out)
	return out
}

// TestRenderedNamespaces: the namespaces rendered objects are in, and a rendered Namespace itself,
// are no namespace a move left.
func TestRenderedNamespaces(t *testing.T) {
	obj := func(kind, namespace, name string) recipe.Object {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("v1")
		u.SetKind(kind)
		u.SetNamespace(namespace)
		u.SetName(name)
		return recipe.Object{Obj: u}
	}
	states := []recipe.RenderedState{{Name: "0000-ns.yaml", Objects: []recipe.Object{obj("Namespace", "", "x")}},
		{Name: "1000-driver.yaml", Objects: []recipe.Object{obj("ConfigMap", "y", "c"), obj("ClusterRole", "", "r")}}}
	got := slices.Sorted(maps.Keys(renderedNamespaces(states)))
	if !slices.Equal(got, []string{"x", "y"}) {
		t.Fatalf("rendered namespaces %v, want [x y]", got)
	}
}
