package recipe

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
)

// TestMakeAffineLongName: a SpecialResource name longer than a label value (names go up to 253
// characters) gets the kernel copy's shortened name in every "app" label the recipe set to it,
// the DaemonSet's own included: the API server refused the object when only the selector's and
// the pod template's followed.
func TestMakeAffineLongName(t *testing.T) {
	name := strings.Repeat("driver", 12) // 72 characters
	labels := map[string]any{"app": name}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "DaemonSet",
		"metadata": map[string]any{"name": name, "labels": map[string]any{"app": name}},
		"spec": map[string]any{
			"selector": map[string]any{"matchLabels": map[string]any{"app": name}},
			"template": map[string]any{"metadata": map[string]any{"labels": labels}, "spec": map[string]any{}},
		},
	}}
	MakeAffine(u, "5.14.0-284.30.1.el9_2.x86_64")
	newName := u.GetName()
	for _, path := range [][]string{{"metadata", "labels"}, {"spec", "selector", "matchLabels"}, {"spec", "template", "metadata", "labels"}} {
		v, _, _ := unstructured.NestedString(u.Object, append(path, "app")...)
		if v != newName {
			t.Errorf("%s.app = %q, want the copy's name %q", strings.Join(path, "."), v, newName)
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			t.Errorf("%s.app = %q is not a label value: %v", strings.Join(path, "."), v, errs)
		}
	}
}

// TestMakeAffineKeepsFittingObjectLabel: a name that is a label value stays the object's own "app"
// label, as the recipe wrote it; the selector and the pod template get the copy's name.
func TestMakeAffineKeepsFittingObjectLabel(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "DaemonSet",
		"metadata": map[string]any{"name": "simple-kmod", "labels": map[string]any{"app": "simple-kmod"}},
		"spec": map[string]any{
			"selector": map[string]any{"matchLabels": map[string]any{"app": "simple-kmod"}},
			"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "simple-kmod"}}, "spec": map[string]any{}},
		},
	}}
	MakeAffine(u, "5.14.0-284.30.1.el9_2.x86_64")
	if v, _, _ := unstructured.NestedString(u.Object, "metadata", "labels", "app"); v != "simple-kmod" {
		t.Errorf("metadata.labels.app = %q, want simple-kmod", v)
	}
	if v, _, _ := unstructured.NestedString(u.Object, "spec", "selector", "matchLabels", "app"); v != u.GetName() {
		t.Errorf("selector app = %q, want %q", v, u.GetName())
	}
}
