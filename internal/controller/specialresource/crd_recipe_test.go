package specialresource

import (
	"context"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/test/poll"
)

// TestRecipeInstallsCRDThenUsesIt: a recipe ConfigMap whose state 0000 installs a CRD (waited
// for) and whose state 1000 is an object of the CRD's kind. The kind is unknown to the cluster
// until state 0000 is applied: the object waits for it instead of failing the whole recipe (which
// kept state 0000 from ever being applied). The CRD is created, then the object, and the
// SpecialResource becomes Ready without a RecipeFailure on the way; deleting it removes both,
// although the kind is gone before its objects are listed for deletion.
func TestRecipeInstallsCRDThenUsesIt(t *testing.T) {
	h := start(t)
	h.node("x", kernelX, true)
	group := h.id + ".metalforge.test"
	crdName := "widgets." + group
	ns := h.recipeNamespace()
	h.recipeConfigMap(ns, "widgets", map[string]string{
		"0000-crd.yaml": `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: ` + crdName + `
  annotations:
    specialresource.openshift.io/wait: "true"
spec:
  group: ` + group + `
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`,
		"1000-widget.yaml": `apiVersion: ` + group + `/v1
kind: Widget
metadata:
  name: '{{.SpecialResource.Name}}-widget'
spec:
  size: 1
`,
	})
	sr := h.specialResource("widgets")
	sr.Spec.DriverContainer = sro.SpecialResourceDriverContainer{}
	sr.Spec.Recipe = sro.SpecialResourceRecipe{ConfigMap: &sro.RecipeConfigMap{Namespace: ns, Name: "widgets"}}
	crd := &unstructured.Unstructured{}
	crd.SetAPIVersion("apiextensions.k8s.io/v1")
	crd.SetKind("CustomResourceDefinition")
	crd.SetName(crdName)
	// Registered before create's clean-up, so it runs after it (the operator deletes the CRD with
	// the SpecialResource; this only guards against a failed test leaving it behind).
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), crd) })
	h.create(sr)

	poll.Until(t, "CRD "+crdName+" created", func() (bool, string) {
		err := env.Client.Get(context.Background(), client.ObjectKey{Name: crdName}, crd.DeepCopy())
		return err == nil, fmt.Sprintf("%v; %s", err, describe(h.get(sr.Name)))
	})
	widget := &unstructured.Unstructured{}
	widget.SetAPIVersion(group + "/v1")
	widget.SetKind("Widget")
	key := client.ObjectKey{Namespace: sr.Name, Name: sr.Name + "-widget"}
	poll.Until(t, "Widget "+key.String()+" created", func() (bool, string) {
		err := env.Client.Get(context.Background(), key, widget)
		return err == nil, fmt.Sprintf("%v; %s", err, describe(h.get(sr.Name)))
	})
	if got := widget.GetLabels()[sro.OwnedLabel]; got == "" {
		t.Errorf("the Widget has no %s label: %v", sro.OwnedLabel, widget.GetLabels())
	}
	h.waitSR(sr.Name, "Ready", isTrue(sro.ConditionReady, sro.ReasonSuccess))
	// Waiting for the CRD's kind is not a recipe failure: no Warning on the way (the Ready event
	// comes after any earlier one).
	h.waitEvent(sr.Name, sro.ConditionReady, "")
	if got := h.events(sr.Name, sro.ReasonRecipeFailure); len(got) > 0 {
		t.Errorf("RecipeFailure events while the CRD's kind was not served yet: %q", got)
	}

	h.deleteAndWait(sr.Name)
	poll.Until(t, "the CRD deleted with the SpecialResource", func() (bool, string) {
		cur := crd.DeepCopy()
		err := env.Client.Get(context.Background(), client.ObjectKey{Name: crdName}, cur)
		return apierrors.IsNotFound(err) || (err == nil && !cur.GetDeletionTimestamp().IsZero()), fmt.Sprint(err)
	})
}
