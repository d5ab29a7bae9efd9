package specialresource

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/sro/message"
	"github.com/metalforge/metalforge/internal/sro/naming"
	"github.com/metalforge/metalforge/internal/sro/recipe"
)

// render renders the recipe (two passes): the manifests that are not kernel-affine once, the
// kernel-affine ones for each kernel whose image exists; then decorates every object of a kind
// the cluster serves (the others are s.in.unserved: see the loop).
func (r *Reconciler) render(s *scope) (outcome, bool, error) {
	base := r.values(s, nil)
	first, err := recipe.FirstPass(s.sr, base)
	if err != nil {
		return errored(sro.ReasonRecipeFailure, message.Sanitize(err.Error()), r.Config.Resync), true, nil
	}
	base.SpecialResource = first
	perKernel := map[string]recipe.Values{}
	for i := range s.in.kernels {
		g := &s.in.kernels[i]
		ki := s.in.images[g.kernel]
		if ki.state != sro.ImageExists {
			continue
		}
		v := r.values(s, g)
		v.SpecialResource = s.in.firstPass[g.kernel]
		v.Image = ki.image
		v.DriverHash = driverHash(v.SpecialResource)
		perKernel[g.kernel] = v
	}
	states, err := recipe.Render(s.in.recipe, base, perKernel)
	if err != nil {
		return errored(sro.ReasonRecipeFailure, message.Sanitize(s.in.recipe.Source+": "+err.Error()), r.Config.Resync), true, nil
	}
	if len(perKernel) == 0 && len(s.in.kernels) > 0 {
		s.in.affine = affineWithoutImages(s.in.recipe, base, s.in.kernels[0].kernel)
	}
	s.in.unserved = map[objKey]string{}
	for i := range states {
		for j := range states[i].Objects {
			o := &states[i].Objects[j]
			namespaced, err := r.Client.IsObjectNamespaced(o.Obj)
			if err != nil {
				// The kind may be a CustomResourceDefinition's that an earlier state (or this one)
				// installs: the cluster serves it only once that state is applied. Failing the
				// recipe here kept that state from ever being applied; the plan decides instead
				// (an object waits for its turn, then for a CRD of the recipe that defines its
				// kind, and only then is an unknown kind the recipe's problem). The mapper looks
				// the kind up again at every reconcile: a miss is not remembered.
				s.in.unserved[keyOf(o.Obj)] = unservedWhy(o.Obj, err)
				continue
			}
			if err := r.decorate(s, o, namespaced); err != nil {
				return errored(sro.ReasonRecipeFailure, message.Sanitize(fmt.Sprintf("%s: state %s: %s %s: %v", s.in.recipe.Source, o.State, o.Obj.GetKind(), o.Obj.GetName(), err)), r.Config.Resync), true, nil
			}
		}
	}
	s.in.rendered = states
	return outcome{}, false, nil
}

// unservedWhy says why an object's kind could not be resolved: the cluster does not serve it, or
// its API group's discovery failed (an aggregated API down, say).
func unservedWhy(u *unstructured.Unstructured, err error) string {
	gvk := u.GroupVersionKind()
	if meta.IsNoMatchError(err) {
		return fmt.Sprintf("the cluster does not serve kind %s in %s", gvk.Kind, gvk.GroupVersion())
	}
	return message.Sanitize(fmt.Sprintf("looking kind %s in %s up: %v", gvk.Kind, gvk.GroupVersion(), err))
}

// affineWithoutImages says which states of the recipe have kernel-affine manifests when no
// kernel has its image yet, and so none was rendered: without it a recipe whose driver is
// kernel-affine would be taken for one without (its nodes labelled as served, its later shared
// states applied, with no driver anywhere). The recipe is rendered for one kernel with the shared
// values, as the shared pass already executed every template with them (delete.go also renders
// for a sample kernel to learn the kinds).
func affineWithoutImages(rec *recipe.Recipe, base recipe.Values, k string) []bool {
	states, err := recipe.Render(rec, base, map[string]recipe.Values{k: base})
	if err != nil {
		return nil // the shared pass succeeded with the same values: not expected
	}
	return affineStates(planInput{states: states})
}

// decorate makes a rendered object ours: the namespace for namespaced kinds without one, the
// owner label (also on pod templates, so that the operator's cache sees the pods), the
// SpecialResource as controlling owner, and the hash of the result.
func (r *Reconciler) decorate(s *scope, o *recipe.Object, namespaced bool) error {
	u := o.Obj
	if namespaced && u.GetNamespace() == "" {
		u.SetNamespace(s.in.namespace)
	}
	if !namespaced {
		u.SetNamespace("")
	}
	owner := naming.OwnerValue(s.sr.Name)
	l := u.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	l[sro.OwnedLabel] = owner
	u.SetLabels(l)
	if _, ok := podTemplateKinds[u.GetKind()]; ok {
		_ = unstructured.SetNestedField(u.Object, owner, "spec", "template", "metadata", "labels", sro.OwnedLabel)
	}
	u.SetOwnerReferences(append(u.GetOwnerReferences(), ownerRef(s.sr)))
	a := u.GetAnnotations()
	delete(a, sro.HashAnnotation)
	u.SetAnnotations(a)
	h, err := hashObject(u)
	if err != nil {
		return err
	}
	if a == nil {
		a = map[string]string{}
	}
	a[sro.HashAnnotation] = h
	u.SetAnnotations(a)
	return nil
}

// podTemplateKinds keep a pod template at spec.template.
var podTemplateKinds = map[string]struct{}{"DaemonSet": {}, "Deployment": {}, "StatefulSet": {}, "ReplicaSet": {}, "Job": {}}

// hashObject is a short hash of an object's content (JSON with sorted keys).
func hashObject(u *unstructured.Unstructured) (string, error) {
	data, err := json.Marshal(u.Object)
	if err != nil {
		return "", fmt.Errorf("hashing %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8]), nil
}
