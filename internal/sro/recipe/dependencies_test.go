package recipe

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
)

// TestDependencyFor: templates get the dependency's namespace (spec.namespace, else its name)
// and its image only when imageReference is "true".
func TestDependencyFor(t *testing.T) {
	withNS := &sro.SpecialResource{ObjectMeta: metav1.ObjectMeta{Name: "base"}, Spec: sro.SpecialResourceSpec{Namespace: "base-ns"}}
	noNS := &sro.SpecialResource{ObjectMeta: metav1.ObjectMeta{Name: "base"}}
	for _, tc := range []struct {
		name string
		d    sro.SpecialResourceDependency
		dep  *sro.SpecialResource
		want Dependency
	}{
		{"image reference", sro.SpecialResourceDependency{Name: "base", ImageReference: "true"}, withNS, Dependency{Namespace: "base-ns", Image: "r/base:k"}},
		{"no image reference", sro.SpecialResourceDependency{Name: "base"}, withNS, Dependency{Namespace: "base-ns"}},
		{"image reference false", sro.SpecialResourceDependency{Name: "base", ImageReference: "false"}, noNS, Dependency{Namespace: "base"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := DependencyFor(tc.d, tc.dep, "r/base:k"); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestMissingDependency: without a recipe the user must create the dependency; with one the
// controller will.
func TestMissingDependency(t *testing.T) {
	if got := MissingDependency(sro.SpecialResourceDependency{Name: "base"}); got != "does not exist; create it, or give dependsOn a recipe" {
		t.Errorf("no recipe: %q", got)
	}
	withRecipe := sro.SpecialResourceDependency{Name: "base", Recipe: &sro.SpecialResourceRecipe{Name: "driver-container"}}
	if got := MissingDependency(withRecipe); got == MissingDependency(sro.SpecialResourceDependency{Name: "base"}) {
		t.Errorf("with a recipe: %q", got)
	}
}
