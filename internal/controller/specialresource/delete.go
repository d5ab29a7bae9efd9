package specialresource

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/controller/cacheview"
	"github.com/metalforge/metalforge/internal/controller/conditions"
	"github.com/metalforge/metalforge/internal/controller/patch"
	"github.com/metalforge/metalforge/internal/sro/message"
	"github.com/metalforge/metalforge/internal/sro/naming"
	"github.com/metalforge/metalforge/internal/sro/recipe"
)

// workloadKinds run pods; they go first on deletion, and the rest waits until their pods are
// gone: a driver pod unloads its modules when it stops, and needs its ServiceAccount, RBAC and
// entrypoint ConfigMap (and its namespace) to do so (kernel-module-management's deadlock lesson).
// Every kind of podTemplateKinds is here: its pods carry our label, so deletion waits for them,
// and would wait for ever while their workload stays.
var workloadKinds = []schema.GroupVersionKind{
	{Group: "apps", Version: "v1", Kind: "DaemonSet"},
	{Group: "apps", Version: "v1", Kind: "Deployment"},
	{Group: "apps", Version: "v1", Kind: "StatefulSet"},
	{Group: "apps", Version: "v1", Kind: "ReplicaSet"},
	{Group: "batch", Version: "v1", Kind: "Job"},
	{Version: "v1", Kind: "Pod"},
}

// otherKinds are always looked at on deletion besides the recipe's kinds.
var otherKinds = []schema.GroupVersionKind{
	{Version: "v1", Kind: "ConfigMap"},
	{Version: "v1", Kind: "ServiceAccount"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleBinding"},
}

// finalize removes what the SpecialResource created, in order (removeOwned): workloads (then
// wait for their pods), everything else of ours, the namespaces we created (spec.namespace's, and
// one a move has not finished leaving: move.go), our node labels; then the finalizer. Every object
// also has the SpecialResource as owner, so the garbage collector catches kinds this list does
// not know.
func (r *Reconciler) finalize(ctx context.Context, sr *sro.SpecialResource) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(sr, sro.Finalizer) {
		return ctrl.Result{}, nil
	}
	wait, lost, err := r.removeOwned(ctx, sr, everywhere)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(wait) > 0 {
		msg := fmt.Sprintf("waiting for %d driver pods to stop", len(wait))
		if len(lost) > 0 {
			msg += "; " + notWaitedFor(lost)
		}
		return ctrl.Result{RequeueAfter: r.Config.WaitPoll}, r.markDeleting(ctx, sr, message.Sanitize(msg))
	}
	if len(lost) > 0 {
		r.Recorder.Eventf(sr, nil, corev1.EventTypeWarning, reasonPodsNotWaitedFor, "Delete", "%s", message.Sanitize(notWaitedFor(lost)))
	}
	created, err := r.namespacesCreatedFor(ctx, sr)
	if err != nil {
		return ctrl.Result{}, err
	}
	names := []string{sr.TargetNamespace()}
	for _, ns := range created {
		names = append(names, ns.Name)
	}
	slices.Sort(names)
	if _, err := r.deleteNamespaces(ctx, sr, slices.Compact(names)); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.removeStateLabels(ctx, sr); err != nil {
		return ctrl.Result{}, err
	}
	r.Recorder.Eventf(sr, nil, corev1.EventTypeNormal, reasonRemoved, "Delete", "%s", "Removed the driver and what the SpecialResource created")
	forgetMetrics(sr.Name)
	r.nodeWrites.forget(sr.Name)
	err = patch.Metadata(ctx, r.Client, sr, func() { controllerutil.RemoveFinalizer(sr, sro.Finalizer) }, &r.tracker)
	if apierrors.IsNotFound(err) {
		err = nil
	}
	return ctrl.Result{}, err
}

// namespaceScope is where a removal looks: everywhere (every namespace and the cluster-scoped
// objects), as on deletion; or only the namespaces named, as when a move leaves the namespaces
// spec.namespace no longer names (inNamespaces; cluster-scoped objects stay the plan's). A struct,
// not a slice whose nil means everywhere: a move with no namespace to leave must remove nothing.
type namespaceScope struct {
	all   bool
	names []string
}

// everywhere is the scope of a deletion.
var everywhere = namespaceScope{all: true}

// inNamespaces is the scope of the named namespaces only.
func inNamespaces(names []string) namespaceScope { return namespaceScope{names: names} }

// listOptions are one list per namespace of the scope (one for everywhere).
func (ns namespaceScope) listOptions() [][]client.ListOption {
	if ns.all {
		return [][]client.ListOption{nil}
	}
	out := make([][]client.ListOption, 0, len(ns.names))
	for _, n := range ns.names {
		out = append(out, []client.ListOption{client.InNamespace(n)})
	}
	return out
}

// removeOwned is one step of removing what sr created in scope, in the order a driver needs: its
// workloads are deleted first; while their pods have not stopped (podsToStop), wait lists them and
// nothing else is deleted (they unload the modules, and need their ServiceAccount, ConfigMap and
// namespace to); then everything else of ours goes. lost are the pods not waited for, and why.
// Deletion runs it over every namespace, a move over the namespaces it leaves (move.go).
func (r *Reconciler) removeOwned(ctx context.Context, sr *sro.SpecialResource, scope namespaceScope) (wait []string, lost map[string]string, err error) {
	for _, gvk := range workloadKinds {
		if err := r.deleteOwned(ctx, sr, gvk, scope); err != nil {
			return nil, nil, err
		}
	}
	if wait, lost, err = r.podsToStop(ctx, sr, scope); err != nil || len(wait) > 0 {
		return wait, lost, err
	}
	for _, gvk := range r.kindsToDelete(ctx, sr) {
		if err := r.deleteOwned(ctx, sr, gvk, scope); err != nil {
			return nil, nil, err
		}
	}
	return nil, lost, nil
}

// podsToStop lists our pods in scope and splits them as podsToWaitFor does.
func (r *Reconciler) podsToStop(ctx context.Context, sr *sro.SpecialResource, scope namespaceScope) (wait []string, lost map[string]string, err error) {
	sel := client.MatchingLabels{sro.OwnedLabel: naming.OwnerValue(sr.Name)}
	var pods []corev1.Pod
	for _, opts := range scope.listOptions() {
		var list corev1.PodList
		if err := r.Client.List(ctx, &list, append(opts, sel)...); err != nil {
			return nil, nil, fmt.Errorf("listing driver pods of %s: %w", sr.Name, err)
		}
		pods = append(pods, list.Items...)
	}
	nodes, err := r.nodesOf(ctx, pods)
	if err != nil {
		return nil, nil, err
	}
	wait, lost = podsToWaitFor(pods, nodes)
	return wait, lost, nil
}

// markDeleting says in the status what the deletion waits for.
func (r *Reconciler) markDeleting(ctx context.Context, sr *sro.SpecialResource, msg string) error {
	h := patch.NewHelper(r.Client, sr, &r.tracker)
	now := r.now()
	for _, t := range conditionTypes {
		c := conditions.False(t, sro.ReasonMarkedForDeletion, "")
		if t == sro.ConditionProgressing {
			c = conditions.True(t, sro.ReasonMarkedForDeletion, msg)
		}
		conditions.Set(&sr.Status.Conditions, c, sr.Generation, now)
	}
	_, err := h.PatchStatus(ctx, sr)
	return err
}

// kindsToDelete are the recipe's kinds (rendered for a sample kernel, so that kernel-affine ones
// are included), the kinds applied before (kinds.go) and the usual ones; a recipe that cannot be
// read gives the others only.
func (r *Reconciler) kindsToDelete(ctx context.Context, sr *sro.SpecialResource) []schema.GroupVersionKind {
	kinds := map[schema.GroupVersionKind]bool{}
	for _, k := range otherKinds {
		kinds[k] = true
	}
	kinds[buildKind(r)] = true
	for _, k := range recordedKinds(sr) {
		kinds[k] = true
	}
	s := &scope{ctx: ctx, cfg: &r.Config, sr: sr}
	if _, stop, err := r.loadRecipe(s); err == nil && !stop {
		vals := recipe.Sample(sr)
		if states, err := recipe.Render(s.in.recipe, vals, map[string]recipe.Values{vals.KernelFullVersion: vals}); err == nil {
			for _, st := range states {
				for _, o := range st.Objects {
					kinds[o.Obj.GroupVersionKind()] = true
				}
			}
		}
	}
	return slices.SortedFunc(maps.Keys(kinds), func(a, b schema.GroupVersionKind) int { return cmpString(a.String(), b.String()) })
}

func buildKind(r *Reconciler) schema.GroupVersionKind {
	if r.Builder != nil && r.Builder.Kind() == "Build" {
		return schema.GroupVersionKind{Group: "build.openshift.io", Version: "v1", Kind: "Build"}
	}
	return schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}
}

// deleteOwned deletes our objects of one kind in scope (ownedIn).
func (r *Reconciler) deleteOwned(ctx context.Context, sr *sro.SpecialResource, gvk schema.GroupVersionKind, scope namespaceScope) error {
	items, err := r.ownedIn(ctx, sr, gvk, scope)
	if err != nil {
		return err
	}
	for _, u := range items {
		if err := r.Client.Delete(ctx, u, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting %s %s: %w", gvk.Kind, objName(keyOf(u)), err)
		}
		r.applied.forget(u)
	}
	return nil
}

// ownedIn lists our objects of one kind in scope that are not being deleted yet. A kind the
// cluster does not serve has none, and so has one the operator's RBAC does not let it list: it
// could not have applied any either (the role grants the built-in recipe's kinds; ReplicaSets,
// say, only when a recipe needs them), and the garbage collector removes whatever the
// SpecialResource owns once it is gone. A cluster-scoped kind has none in a scope of namespaces.
func (r *Reconciler) ownedIn(ctx context.Context, sr *sro.SpecialResource, gvk schema.GroupVersionKind, scope namespaceScope) ([]*unstructured.Unstructured, error) {
	m, err := r.Client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil || (!scope.all && m.Scope.Name() != meta.RESTScopeNameNamespace) {
		return nil, nil
	}
	sel := client.MatchingLabels{sro.OwnedLabel: naming.OwnerValue(sr.Name)}
	var out []*unstructured.Unstructured
	for _, opts := range scope.listOptions() {
		items, err := r.list(ctx, gvk, append(opts, sel)...)
		if apierrors.IsForbidden(err) {
			return nil, nil
		} else if err != nil {
			return nil, err
		}
		for _, u := range items {
			if ownedBy(u, sr) && u.GetDeletionTimestamp().IsZero() {
				out = append(out, u)
			}
		}
	}
	return out, nil
}

// ownedBy: the object's controller is this SpecialResource (same UID), so that a SpecialResource
// recreated under the same name does not delete the new one's objects.
func ownedBy(u *unstructured.Unstructured, sr *sro.SpecialResource) bool {
	for _, o := range u.GetOwnerReferences() {
		if o.Kind == "SpecialResource" && o.UID == sr.UID {
			return true
		}
	}
	return false
}

// deleteNamespaces deletes those of the named namespaces this SpecialResource created (it is their
// controlling owner) and that are not being deleted yet; a namespace that existed before is left
// alone. It returns the names it deleted.
func (r *Reconciler) deleteNamespaces(ctx context.Context, sr *sro.SpecialResource, names []string) (deleted []string, err error) {
	for _, name := range names {
		ns := &corev1.Namespace{}
		if err := r.Client.Get(ctx, client.ObjectKey{Name: name}, ns); apierrors.IsNotFound(err) {
			continue
		} else if err != nil {
			return deleted, fmt.Errorf("reading namespace %s: %w", name, err)
		}
		owner := metav1.GetControllerOf(ns)
		if owner == nil || owner.UID != sr.UID || !ns.DeletionTimestamp.IsZero() {
			continue
		}
		if err := r.Client.Delete(ctx, ns); apierrors.IsNotFound(err) {
			continue
		} else if err != nil {
			return deleted, fmt.Errorf("deleting namespace %s: %w", name, err)
		}
		deleted = append(deleted, name)
	}
	return deleted, nil
}

// namespacesCreatedFor lists the namespaces the operator created for sr (newNamespace: labelled
// with its owner value; controlled by it, which the callers check).
func (r *Reconciler) namespacesCreatedFor(ctx context.Context, sr *sro.SpecialResource) ([]corev1.Namespace, error) {
	var list corev1.NamespaceList
	if err := r.Client.List(ctx, &list, client.MatchingLabels{sro.OwnedLabel: naming.OwnerValue(sr.Name)}, cacheview.ReadOnly); err != nil {
		return nil, fmt.Errorf("listing the namespaces created for %s: %w", sr.Name, err)
	}
	return list.Items, nil
}

// removeStateLabels takes this SpecialResource's state labels off every node.
func (r *Reconciler) removeStateLabels(ctx context.Context, sr *sro.SpecialResource) error {
	var nodes corev1.NodeList
	if err := r.Client.List(ctx, &nodes, cacheview.ReadOnly); err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	prefix := naming.StateLabelPrefix(sr.Name)
	changes := map[string]map[string]*string{}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if c := stateLabelChanges(nodeLabels{name: n.Name, labels: n.Labels}, prefix, nil); c != nil {
			changes[n.Name] = c
		}
	}
	return r.patchNodeLabels(ctx, sr.Name, changes)
}

// nodesOf reads the nodes of the terminating pods (nil: the node is gone) through the API
// reader: the cache keeps no node conditions.
func (r *Reconciler) nodesOf(ctx context.Context, pods []corev1.Pod) (map[string]*corev1.Node, error) {
	nodes := map[string]*corev1.Node{}
	for _, p := range pods {
		name := p.Spec.NodeName
		if p.DeletionTimestamp.IsZero() || name == "" {
			continue
		}
		if _, seen := nodes[name]; seen {
			continue
		}
		n := &corev1.Node{}
		if err := r.APIReader.Get(ctx, client.ObjectKey{Name: name}, n); apierrors.IsNotFound(err) {
			n = nil
		} else if err != nil {
			return nil, fmt.Errorf("reading node %s: %w", name, err)
		}
		nodes[name] = n
	}
	return nodes, nil
}

// podsToWaitFor splits our pods into those deletion waits for and those it does not: a pod
// already terminating on a node that is gone, or whose Ready condition is not True (powered
// off, unreachable), stays Terminating until its node comes back (no kubelet confirms it
// stopped): waiting for it would hold the deletion for as long. lost maps each such pod
// (namespace/name) to why.
func podsToWaitFor(pods []corev1.Pod, nodes map[string]*corev1.Node) (wait []string, lost map[string]string) {
	lost = map[string]string{}
	for _, p := range pods {
		key := p.Namespace + "/" + p.Name
		if p.DeletionTimestamp.IsZero() || p.Spec.NodeName == "" {
			wait = append(wait, key)
			continue
		}
		n, known := nodes[p.Spec.NodeName]
		switch {
		case !known:
			wait = append(wait, key)
		case n == nil:
			lost[key] = "node " + p.Spec.NodeName + " is gone"
		case !nodeReady(n):
			lost[key] = "node " + p.Spec.NodeName + " is not Ready"
		default:
			wait = append(wait, key)
		}
	}
	return wait, lost
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// notWaitedFor says which pods deletion does not wait for, and why.
func notWaitedFor(lost map[string]string) string {
	parts := make([]string, 0, len(lost))
	for _, key := range slices.Sorted(maps.Keys(lost)) {
		parts = append(parts, key+" ("+lost[key]+")")
	}
	return "not waiting for pods on unreachable nodes: " + strings.Join(parts, ", ")
}
