package specialresource

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/sro/recipe"
	"github.com/metalforge/metalforge/internal/test/poll"
)

// TestAppliedKinds: the annotation keeps the kinds rendered and those of our objects that
// remain; a kind whose last object is pruned now is forgotten; bad entries are skipped on read.
func TestAppliedKinds(t *testing.T) {
	svc := &unstructured.Unstructured{}
	svc.SetAPIVersion("v1")
	svc.SetKind("Service")
	svc.SetNamespace("ns")
	svc.SetName("metrics")
	tests := map[string]struct {
		rendered []*unstructured.Unstructured
		owned    []*unstructured.Unstructured
		pruned   []*unstructured.Unstructured
		want     string
	}{
		"rendered":                 {rendered: []*unstructured.Unstructured{rbac.Obj, dsX.Obj}, want: "apps/v1/DaemonSet,v1/ConfigMap"},
		"no longer rendered, left": {rendered: []*unstructured.Unstructured{dsX.Obj}, owned: []*unstructured.Unstructured{svc}, want: "apps/v1/DaemonSet,v1/Service"},
		"pruned now: forgotten":    {rendered: []*unstructured.Unstructured{dsX.Obj}, owned: []*unstructured.Unstructured{svc}, pruned: []*unstructured.Unstructured{svc}, want: "apps/v1/DaemonSet"},
		"nothing":                  {want: ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var objs []recipe.Object
			for _, u := range tc.rendered {
				objs = append(objs, recipe.Object{State: "0000-a.yaml", Obj: u})
			}
			got := appliedKinds(states(objs...), tc.owned, tc.pruned)
			if got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			sr := &sro.SpecialResource{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{sro.AppliedKindsAnnotation: got + ",bad,/x,a/b/c/"}}}
			var back []string
			for _, gvk := range recordedKinds(sr) {
				back = append(back, gvk.GroupVersion().String()+"/"+gvk.Kind)
			}
			if strings.Join(back, ",") != tc.want {
				t.Errorf("read back %v, want %q", back, tc.want)
			}
		})
	}
}

// TestUnionKinds: what hold records keeps every kind recorded before.
func TestUnionKinds(t *testing.T) {
	tests := map[string]struct{ before, now, want string }{
		"a kind added":        {before: "apps/v1/DaemonSet", now: "apps/v1/DaemonSet,v1/Service", want: "apps/v1/DaemonSet,v1/Service"},
		"none forgotten":      {before: "apps/v1/DaemonSet,v1/Service", now: "apps/v1/DaemonSet", want: "apps/v1/DaemonSet,v1/Service"},
		"nothing before":      {now: "v1/ConfigMap", want: "v1/ConfigMap"},
		"nothing now or then": {want: ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := unionKinds(tc.before, tc.now); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestPruneKindNoLongerRendered: a recipe ConfigMap with a state holding a Service (a kind the
// built-in recipe does not render); switching the SpecialResource to the built-in recipe deletes
// the Service.
func TestPruneKindNoLongerRendered(t *testing.T) {
	h := start(t)
	h.node("x", kernelX, true)
	h.push("vendor/kmod:" + kernelX)
	ns := h.recipeNamespace()
	data := builtinRecipeData(t)
	data["3000-metrics.yaml"] = "apiVersion: v1\nkind: Service\nmetadata: {name: '{{.SpecialResource.Name}}-metrics'}\nspec:\n  clusterIP: None\n  selector: {app: metrics}\n"
	h.recipeConfigMap(ns, "with-metrics", data)
	sr := h.specialResource("kmod")
	sr.Spec.Recipe = sro.SpecialResourceRecipe{ConfigMap: &sro.RecipeConfigMap{Name: "with-metrics", Namespace: ns}}
	h.create(sr)
	h.runDaemonSet(h.waitDaemonSets(sr.Name, kernelX)[kernelX], 1)
	key := client.ObjectKey{Namespace: sr.Name, Name: sr.Name + "-metrics"}
	poll.Until(t, "the Service of state 3000", func() (bool, string) {
		err := env.Client.Get(context.Background(), key, &corev1.Service{})
		return err == nil, fmt.Sprint(err)
	})
	h.waitSR(sr.Name, "Ready, the Service's kind recorded", func(sr *sro.SpecialResource) bool {
		return isTrue(sro.ConditionReady, "")(sr) && slices.Contains(strings.Split(sr.Annotations[sro.AppliedKindsAnnotation], ","), "v1/Service")
	})

	h.update(sr.Name, func(sr *sro.SpecialResource) { sr.Spec.Recipe = sro.SpecialResourceRecipe{} })
	poll.Until(t, "the Service deleted", func() (bool, string) {
		svc := &corev1.Service{}
		err := env.Client.Get(context.Background(), key, svc)
		return apierrors.IsNotFound(err) || (err == nil && !svc.DeletionTimestamp.IsZero()), fmt.Sprint(err)
	})
	h.waitSR(sr.Name, "Service's kind forgotten", func(sr *sro.SpecialResource) bool {
		return !slices.Contains(strings.Split(sr.Annotations[sro.AppliedKindsAnnotation], ","), "v1/Service")
	})
}

// TestPruneKeepsWhatThePlanDidNotApply: a recipe that renders a Pod and a Namespace makes both
// kinds listed for pruning. The driver DaemonSet's pods carry the owner label (it is on the pod
// template) and so does the namespace the operator created for the SpecialResource, but the plan
// applied neither: both stay.
func TestPruneKeepsWhatThePlanDidNotApply(t *testing.T) {
	h := start(t)
	h.node("x", kernelX, true)
	h.push("vendor/kmod:" + kernelX)
	ns := h.recipeNamespace()
	data := builtinRecipeData(t)
	data["3000-monitoring.yaml"] = "apiVersion: v1\nkind: Namespace\nmetadata: {name: '{{.SpecialResource.Name}}-mon'}\n"
	data["4000-check.yaml"] = "apiVersion: v1\nkind: Pod\nmetadata: {name: '{{.SpecialResource.Name}}-check'}\n" +
		"spec:\n  containers: [{name: check, image: busybox}]\n"
	h.recipeConfigMap(ns, "with-pod", data)
	sr := h.specialResource("kmod")
	sr.Spec.Recipe = sro.SpecialResourceRecipe{ConfigMap: &sro.RecipeConfigMap{Name: "with-pod", Namespace: ns}}
	h.create(sr)
	ds := h.waitDaemonSets(sr.Name, kernelX)[kernelX]
	h.runDaemonSet(ds, 1)
	driver := h.driverPod(ds)
	h.waitSR(sr.Name, "Ready, the Pod and Namespace kinds recorded", func(sr *sro.SpecialResource) bool {
		kinds := strings.Split(sr.Annotations[sro.AppliedKindsAnnotation], ",")
		return isTrue(sro.ConditionReady, "")(sr) && slices.Contains(kinds, "v1/Pod") && slices.Contains(kinds, "v1/Namespace")
	})
	// Reconciles after the kinds were recorded list Pods and Namespaces for pruning: poke a few.
	for i := range 5 {
		h.update(sr.Name, func(sr *sro.SpecialResource) { sr.Annotations["test.metalforge.io/poke"] = fmt.Sprint(i) })
		time.Sleep(200 * time.Millisecond)
	}
	p := &corev1.Pod{}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(driver), p); err != nil || !p.DeletionTimestamp.IsZero() {
		t.Fatalf("driver pod %s pruned: %v, deletion %v", driver.Name, err, p.DeletionTimestamp)
	}
	own := &corev1.Namespace{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: sr.Name}, own); err != nil || !own.DeletionTimestamp.IsZero() {
		t.Fatalf("the SpecialResource's namespace pruned: %v, deletion %v", err, own.DeletionTimestamp)
	}
	// What the plan applied is still pruned once the recipe drops it.
	delete(data, "4000-check.yaml")
	cm := &corev1.ConfigMap{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "with-pod"}, cm); err != nil {
		t.Fatal(err)
	}
	cm.Data = data
	if err := env.Client.Update(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the recipe's Pod pruned", func() (bool, string) {
		err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: sr.Name, Name: sr.Name + "-check"}, p)
		return apierrors.IsNotFound(err) || (err == nil && !p.DeletionTimestamp.IsZero()), fmt.Sprint(err)
	})
}
