package specialresource

import (
	"context"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/controller/patch"
	"github.com/metalforge/metalforge/internal/sro/recipe"
)

// The SpecialResource remembers the kinds it applied (sro.AppliedKindsAnnotation): pruning lists
// our objects kind by kind, and a kind the recipe no longer renders (a state dropped from a
// recipe ConfigMap, or a switch to another recipe) would otherwise never be listed again, its
// objects left running until the SpecialResource is deleted.

// recordedKinds are the kinds the annotation names (entries that do not parse are skipped).
func recordedKinds(sr *sro.SpecialResource) []schema.GroupVersionKind {
	var out []schema.GroupVersionKind
	for _, e := range strings.Split(sr.Annotations[sro.AppliedKindsAnnotation], ",") {
		i := strings.LastIndex(e, "/")
		if i <= 0 || i == len(e)-1 {
			continue
		}
		gv, err := schema.ParseGroupVersion(e[:i])
		if err != nil {
			continue
		}
		out = append(out, gv.WithKind(e[i+1:]))
	}
	return out
}

// appliedKinds is the annotation's new value: the kinds rendered now, and those of our objects
// that remain (not pruned now, not being deleted); kinds are sorted, each group/version/Kind.
func appliedKinds(rendered []recipe.RenderedState, owned, pruned []*unstructured.Unstructured) string {
	kinds := map[string]bool{}
	add := func(gvk schema.GroupVersionKind) { kinds[gvk.GroupVersion().String()+"/"+gvk.Kind] = true }
	for _, st := range rendered {
		for _, o := range st.Objects {
			add(o.Obj.GroupVersionKind())
		}
	}
	gone := map[objKey]bool{}
	for _, u := range pruned {
		gone[keyOf(u)] = true
	}
	for _, u := range owned {
		if !gone[keyOf(u)] && u.GetDeletionTimestamp().IsZero() {
			add(u.GroupVersionKind())
		}
	}
	return strings.Join(slices.Sorted(maps.Keys(kinds)), ",")
}

// unionKinds is the union of two values of the annotation, sorted.
func unionKinds(a, b string) string {
	kinds := map[string]bool{}
	for _, e := range strings.Split(a+","+b, ",") {
		if e != "" {
			kinds[e] = true
		}
	}
	return strings.Join(slices.Sorted(maps.Keys(kinds)), ",")
}

// recordKinds writes the annotation when it changed (after the objects and prunes are written,
// so that it never forgets a kind whose objects are still there).
func (r *Reconciler) recordKinds(ctx context.Context, s *scope) error {
	// The objects a move has yet to remove count: their kinds must stay known until they are gone.
	value := appliedKinds(s.in.rendered, slices.Concat(s.in.owned, s.in.left), s.plan.prune)
	if s.plan.hold {
		// hold skips the kinds the operator may not list (observeOwned), whose objects may well
		// remain: it adds kinds (those a failed write applied first), never forgets one; the next
		// full reconcile does.
		value = unionKinds(s.sr.Annotations[sro.AppliedKindsAnnotation], value)
	}
	if s.sr.Annotations[sro.AppliedKindsAnnotation] == value {
		return nil
	}
	return patch.Metadata(ctx, r.Client, s.sr, func() {
		if value == "" {
			delete(s.sr.Annotations, sro.AppliedKindsAnnotation)
			return
		}
		if s.sr.Annotations == nil {
			s.sr.Annotations = map[string]string{}
		}
		s.sr.Annotations[sro.AppliedKindsAnnotation] = value
	}, &r.tracker)
}
