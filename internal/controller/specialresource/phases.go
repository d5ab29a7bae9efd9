package specialresource

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/controller/cacheview"
	"github.com/metalforge/metalforge/internal/controller/conditions"
	"github.com/metalforge/metalforge/internal/sro/kernel"
	"github.com/metalforge/metalforge/internal/sro/message"
	"github.com/metalforge/metalforge/internal/sro/naming"
	"github.com/metalforge/metalforge/internal/sro/recipe"
	"github.com/metalforge/metalforge/internal/sro/validation"
)

// phase is one step of a reconcile. It returns stop=true with the outcome when the reconcile
// cannot go further; an error is unexpected (the API server failed, say).
type phase struct {
	name string
	run  func(r *Reconciler, s *scope) (out outcome, stop bool, err error)
}

// phases run in this order (see doc.go).
var phases = []phase{
	{"validate", (*Reconciler).validate},
	{"recipe", (*Reconciler).loadRecipe},
	{"namespace", (*Reconciler).ensureNamespace},
	{"nodes", (*Reconciler).observeNodes},
	{"dependencies", (*Reconciler).dependencies},
	{"images", (*Reconciler).images},
	{"builds", (*Reconciler).collectBuilds},
	{"render", (*Reconciler).render},
	{"objects", (*Reconciler).observeObjects},
	{"move", (*Reconciler).moveOut},
	{"plan", (*Reconciler).planPhase},
}

// run runs the phases until one stops; the last phase's outcome is the reconcile's.
func (r *Reconciler) run(s *scope) (outcome, error) {
	for _, p := range phases {
		out, stop, err := p.run(r, s)
		if err != nil {
			return outcome{}, fmt.Errorf("%s phase of SpecialResource %s: %w", p.name, s.sr.Name, err)
		}
		if stop {
			return out, nil
		}
	}
	return outcome{}, fmt.Errorf("SpecialResource %s: the plan phase did not decide", s.sr.Name)
}

// validate refuses what the webhook would have refused, and dependency cycles.
func (r *Reconciler) validate(s *scope) (outcome, bool, error) {
	errs := validation.Spec(s.sr)
	if len(errs) > 0 {
		return errored(sro.ReasonInvalidSpec, message.Sanitize(errs.ToAggregate().Error()), r.Config.Resync), true, nil
	}
	var all sro.SpecialResourceList
	if err := r.Client.List(s.ctx, &all, cacheview.ReadOnly); err != nil {
		return outcome{}, false, fmt.Errorf("listing SpecialResources: %w", err)
	}
	byName := map[string]*sro.SpecialResource{}
	for i := range all.Items {
		byName[all.Items[i].Name] = &all.Items[i]
	}
	if ferr := validation.Cycle(s.sr, func(n string) (*sro.SpecialResource, bool) { sr, ok := byName[n]; return sr, ok }); ferr != nil {
		return errored(sro.ReasonDependencyCycle, message.Sanitize(ferr.Error()), r.Config.Resync), true, nil
	}
	return outcome{}, false, nil
}

// loadRecipe reads the built-in recipe or the ConfigMap's (directly from the API server: the
// manager caches only the operator's own ConfigMaps). Editing or creating the ConfigMap wakes the
// SpecialResource (recipewatch.go), so a broken recipe waits for that (or Resync); a missing one
// is also looked for again after RetryDelay.
func (r *Reconciler) loadRecipe(s *scope) (outcome, bool, error) {
	ref := s.sr.RecipeOrDefault()
	if ref.ConfigMap == nil {
		rec, err := recipe.Builtin(ref.Name)
		if err != nil {
			return errored(sro.ReasonRecipeFailure, message.Sanitize(err.Error()), r.Config.Resync), true, nil
		}
		s.in.recipe = rec
		return outcome{}, false, nil
	}
	cm := &corev1.ConfigMap{}
	key := client.ObjectKey{Namespace: ref.ConfigMap.Namespace, Name: ref.ConfigMap.Name}
	if err := r.APIReader.Get(s.ctx, key, cm); apierrors.IsNotFound(err) {
		return errored(sro.ReasonRecipeFailure, fmt.Sprintf("spec.recipe.configMap: ConfigMap %s not found", key), r.Config.RetryDelay), true, nil
	} else if err != nil {
		return outcome{}, false, fmt.Errorf("reading recipe ConfigMap %s: %w", key, err)
	}
	rec, err := recipe.FromConfigMap("ConfigMap "+key.String(), cm.Data)
	if err != nil {
		return errored(sro.ReasonRecipeFailure, message.Sanitize(err.Error()), r.Config.Resync), true, nil
	}
	s.in.recipe = rec
	return outcome{}, false, nil
}

// ensureNamespace uses spec.namespace, creating it (owned by the SpecialResource, so that it
// goes with it) when it does not exist.
func (r *Reconciler) ensureNamespace(s *scope) (outcome, bool, error) {
	name := s.sr.TargetNamespace()
	s.in.namespace = name
	ns := &corev1.Namespace{}
	err := r.Client.Get(s.ctx, client.ObjectKey{Name: name}, ns)
	switch {
	case apierrors.IsNotFound(err):
		s.fx.createNamespace = newNamespace(s.sr, name)
		return outcome{}, false, nil
	case err != nil:
		return outcome{}, false, fmt.Errorf("reading namespace %s: %w", name, err)
	case !ns.DeletionTimestamp.IsZero():
		return errored(sro.ReasonNamespaceConflict, fmt.Sprintf("namespace %s is being deleted; waiting until it is gone", name), r.Config.RetryDelay), true, nil
	}
	if owner := metav1.GetControllerOf(ns); owner != nil && owner.Kind == "SpecialResource" && owner.UID != s.sr.UID {
		return errored(sro.ReasonNamespaceConflict, fmt.Sprintf("namespace %s belongs to SpecialResource %s", name, owner.Name), r.Config.Resync), true, nil
	}
	return outcome{}, false, nil
}

// newNamespace is the namespace the operator creates: owned by the SpecialResource, allowed to
// run privileged pods, and monitored on OpenShift (as the special-resource-operator made it).
func newNamespace(sr *sro.SpecialResource, name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: name,
		Labels: map[string]string{
			sro.OwnedLabel:                                   naming.OwnerValue(sr.Name),
			"pod-security.kubernetes.io/enforce":             "privileged",
			"pod-security.kubernetes.io/audit":               "privileged",
			"pod-security.kubernetes.io/warn":                "privileged",
			"openshift.io/cluster-monitoring":                "true",
			"security.openshift.io/scc.podSecurityLabelSync": "false",
		},
		OwnerReferences: []metav1.OwnerReference{ownerRef(sr)},
	}}
}

func ownerRef(sr *sro.SpecialResource) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: sro.GroupVersion.String(), Kind: "SpecialResource", Name: sr.Name, UID: sr.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
}

// observeNodes reads the cluster's version (for templates) and the nodes (listNodes).
func (r *Reconciler) observeNodes(s *scope) (outcome, bool, error) {
	v, err := r.ClusterVersion(s.ctx)
	if err != nil {
		return outcome{}, false, err
	}
	s.in.clusterVersion = v
	return outcome{}, false, r.listNodes(s)
}

// listNodes lists the selected nodes and groups them by kernel; it also keeps every node's labels
// for the state labels of nodes no longer selected. Once per reconcile: hold lists them when the
// reconcile ended before the nodes phase.
func (r *Reconciler) listNodes(s *scope) error {
	if s.in.nodesListed {
		return nil
	}
	var nodes corev1.NodeList
	if err := r.Client.List(s.ctx, &nodes, cacheview.ReadOnly); err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	sel := labels.SelectorFromSet(s.sr.Spec.NodeSelector)
	groups := map[string]*kernelGroup{}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		k := kernel.OfNode(n)
		s.in.allNodes = append(s.in.allNodes, nodeLabels{name: n.Name, kernel: k, labels: n.Labels, resourceVersion: n.ResourceVersion})
		if !sel.Matches(labels.Set(n.Labels)) {
			continue
		}
		s.in.nodesMatching++
		if k == "" {
			s.in.nodesNoKernel++
			continue
		}
		g := groups[k]
		if g == nil {
			g = &kernelGroup{kernel: k}
			groups[k] = g
		}
		if g.osNode == "" || kernel.OSSourceBefore(k, n.Name, n.Labels, g.osNode, g.nodeLabels) {
			g.osNode, g.nodeLabels = n.Name, n.Labels
		}
		g.nodes = append(g.nodes, n.Name)
		if n.Labels[sro.KernelLabel] == naming.LabelValue(k) {
			g.labelled++
		}
	}
	for _, k := range slices.Sorted(maps.Keys(groups)) {
		s.in.kernels = append(s.in.kernels, *groups[k])
	}
	s.in.nodesListed = true
	return nil
}

// dependencies creates missing dependsOn SpecialResources and waits until each is Ready. A
// missing dependency whose recipe ConfigMap is missing or broken is Errored (the user's to fix,
// naming the field): the ConfigMap watch wakes the SpecialResource when it is created or fixed,
// and it looks again after RetryDelay anyway.
func (r *Reconciler) dependencies(s *scope) (outcome, bool, error) {
	s.in.deps, s.in.depImages = map[string]recipe.Dependency{}, map[string]map[string]string{}
	var waiting, problems []string
	for i, d := range s.sr.Spec.DependsOn {
		dep := &sro.SpecialResource{}
		err := r.Client.Get(s.ctx, client.ObjectKey{Name: d.Name}, dep)
		switch {
		case apierrors.IsNotFound(err):
			created, why, problem, err := r.newDependency(s, i, d)
			if err != nil {
				return outcome{}, false, err
			}
			if problem != "" {
				problems = append(problems, problem)
				continue
			}
			if created != nil {
				// Announced by write, once the API server took it: it may refuse it.
				s.fx.createDeps = append(s.fx.createDeps, dependencyToCreate{sr: created, field: fmt.Sprintf("spec.dependsOn[%d].recipe", i)})
			}
			waiting = append(waiting, d.Name+" ("+why+")")
			continue
		case err != nil:
			return outcome{}, false, fmt.Errorf("reading dependency %s: %w", d.Name, err)
		}
		s.in.deps[d.Name] = recipe.Dependency{Namespace: dep.TargetNamespace()}
		s.in.depImages[d.Name] = map[string]string{}
		for _, k := range dep.Status.Kernels {
			if k.ImageState == sro.ImageExists {
				s.in.depImages[d.Name][k.KernelVersion] = k.Image
			}
		}
		if !conditions.IsCurrent(dep.Status.Conditions, sro.ConditionReady, dep.Generation) {
			waiting = append(waiting, d.Name)
			continue
		}
		if recipe.UsesImage(d) {
			waiting = append(waiting, missingDependencyImages(d.Name, s.in.kernels, s.in.depImages[d.Name])...)
		}
	}
	if len(waiting) > 0 || len(problems) > 0 {
		// Nothing new until the dependencies are Ready, but what no longer holds is undone.
		if err := r.hold(s); err != nil {
			return outcome{}, false, err
		}
		if len(problems) > 0 {
			return errored(sro.ReasonRecipeFailure, message.Sanitize(strings.Join(problems, "; ")), r.Config.RetryDelay), true, nil
		}
		return progressing(sro.ReasonWaitingForDependency, "waiting for dependencies to be Ready: "+strings.Join(waiting, ", "), "", 0), true, nil
	}
	return outcome{}, false, nil
}

// missingDependencyImages says for which kernels of the selected nodes dependency name has no
// image that exists (images, from its status), as waiting entries. A dependency can be Ready
// without one: its status does not list a kernel a node rebooted into until it reconciled, or its
// own nodes run other kernels. Templates would see an empty image (a build argument DEP="", a
// driver without its dependency); as the preflight check does, wait instead.
func missingDependencyImages(name string, kernels []kernelGroup, images map[string]string) []string {
	var missing []string
	for _, g := range kernels {
		// Listed as existing, the image counts even when empty: a dependency that uses no image.
		if _, ok := images[g.kernel]; !ok {
			missing = append(missing, g.kernel)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return []string{fmt.Sprintf("%s (no driver image for kernel %s yet)", name, message.List(missing))}
}

// newDependency is the SpecialResource to create for missing dependency i: the recipe's default
// (its specialresource.yaml) when it has one, else the recipe with the defaults. It returns nil,
// with the reason, when there is no recipe to create it from; and a problem (the status message,
// naming the field) when its recipe ConfigMap is missing or cannot be parsed.
func (r *Reconciler) newDependency(s *scope, i int, d sro.SpecialResourceDependency) (dep *sro.SpecialResource, why, problem string, err error) {
	if d.Recipe == nil {
		return nil, recipe.MissingDependency(d), "", nil
	}
	dep = &sro.SpecialResource{}
	if d.Recipe.ConfigMap != nil {
		field := fmt.Sprintf("spec.dependsOn[%d].recipe.configMap", i)
		cm := &corev1.ConfigMap{}
		key := client.ObjectKey{Namespace: d.Recipe.ConfigMap.Namespace, Name: d.Recipe.ConfigMap.Name}
		if err := r.APIReader.Get(s.ctx, key, cm); apierrors.IsNotFound(err) {
			return nil, "", fmt.Sprintf("%s: ConfigMap %s not found", field, key), nil
		} else if err != nil {
			return nil, "", "", fmt.Errorf("reading recipe ConfigMap %s: %w", key, err)
		}
		rec, err := recipe.FromConfigMap("ConfigMap "+key.String(), cm.Data)
		if err != nil {
			return nil, "", message.Sanitize(field + ": " + err.Error()), nil
		}
		if rec.Default != nil {
			dep.Spec = rec.Default.Spec
		}
	}
	dep.Name = d.Name
	dep.Labels = map[string]string{sro.CreatedForLabel: naming.OwnerValue(s.sr.Name)}
	if dep.Spec.Recipe.Name == "" && dep.Spec.Recipe.ConfigMap == nil {
		if errs := validation.DependencyRecipe(d, field.NewPath("spec", "dependsOn").Index(i).Child("recipe")); len(errs) > 0 {
			// The API server would refuse it; said without trying.
			return nil, "", message.Sanitize(errs.ToAggregate().Error()), nil
		}
		dep.Spec.Recipe = *d.Recipe
	}
	return dep, "created", "", nil
}
