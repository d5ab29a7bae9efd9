package cacheview

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

func TestOptions(t *testing.T) {
	dropData := func(obj any) (any, error) {
		if cm, ok := obj.(*corev1.ConfigMap); ok {
			cm.Data = nil
		}
		return obj, nil
	}
	views := []View{
		{Object: &corev1.Secret{}, Owner: "a", Label: labels.SelectorFromSet(labels.Set{"x": "y"}), Reduced: "unlabelled Secrets"},
		{Object: &corev1.ConfigMap{}, Owner: "b", Transform: dropData, Reduced: "data"},
		{Object: &corev1.Pod{}, Owner: "c", Uncached: true, Reduced: "everything: not cached"},
	}
	co, cl, err := Options([]string{"ns1", "ns2"}, views...)
	if err != nil {
		t.Fatal(err)
	}
	if len(co.ByObject) != 2 || len(cl.Cache.DisableFor) != 1 || len(co.DefaultNamespaces) != 2 {
		t.Fatalf("byObject %d, disableFor %d, namespaces %d", len(co.ByObject), len(cl.Cache.DisableFor), len(co.DefaultNamespaces))
	}
	for obj, by := range co.ByObject {
		if _, ok := obj.(*corev1.ConfigMap); !ok {
			continue
		}
		in := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}}, Data: map[string]string{"k": "v"}}
		out, err := by.Transform(in)
		if err != nil {
			t.Fatal(err)
		}
		got := out.(*corev1.ConfigMap)
		if got.Data != nil || got.ManagedFields != nil {
			t.Errorf("transform kept data %v or managedFields %v", got.Data, got.ManagedFields)
		}
	}
	lines := Describe(views...)
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "ConfigMap (b): data") {
		t.Errorf("Describe = %q", lines)
	}
}

func TestOptionsRefusesAmbiguousViews(t *testing.T) {
	for name, views := range map[string][]View{
		"same kind twice":  {{Object: &corev1.Secret{}, Owner: "a"}, {Object: &corev1.Secret{}, Owner: "b"}},
		"silent reduction": {{Object: &corev1.Secret{}, Owner: "a", Uncached: true}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, _, err := Options(nil, views...); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}
