package specialresource

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// finalize removes what the SpecialResource created, in order: workloads (then wait for their
// pods), everything else of ours, the namespace if we created it, our node labels; then the
// finalizer. Every object also has the SpecialResource as owner, so the garbage collector
// catches kinds this list does not know.
func (r *Reconciler) finalize(ctx context.Context, sr *sro.SpecialResource) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(sr, sro.Finalizer) {
		return ctrl.Result{}, nil
	}
	sel := client.MatchingLabels{sro.OwnedLabel: naming.OwnerValue(sr.Name)}
	for _, gvk := range workloadKinds {
		if err := r.deleteOwned(ctx, sr, gvk, sel); err != nil {
			return ctrl.Result{}, err
		}
	}
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, sel); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing driver pods of %s: %w", sr.Name, err)
	}
	nodes, err := r.nodesOf(ctx, pods.Items)
	if err != nil {
		return ctrl.Result{}, err
	}
	wait, lost := podsToWaitFor(pods.Items, nodes)
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
	for _, gvk := range r.kindsToDelete(ctx, sr) {
		if err := r.deleteOwned(ctx, sr, gvk, sel); err != nil {
			return ctrl.Result{}, err
		}
	}
	if err := r.deleteNamespace(ctx, sr); err != nil {
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

// deleteOwned deletes our objects of one kind. A kind the cluster does not serve is skipped, and
// so is one the operator's RBAC does not let it list: it could not have applied any either (the
// role grants the built-in recipe's kinds; ReplicaSets, say, only when a recipe needs them), and
// the garbage collector removes whatever the SpecialResource owns once it is gone.
func (r *Reconciler) deleteOwned(ctx context.Context, sr *sro.SpecialResource, gvk schema.GroupVersionKind, sel client.MatchingLabels) error {
	if _, err := r.Client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
		return nil
	}
	items, err := r.list(ctx, gvk, sel)
	if apierrors.IsForbidden(err) {
		return nil
	} else if err != nil {
		return err
	}
	for _, u := range items {
		if !ownedBy(u, sr) || !u.GetDeletionTimestamp().IsZero() {
			continue
		}
		if err := r.Client.Delete(ctx, u, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting %s %s: %w", gvk.Kind, objName(keyOf(u)), err)
		}
	}
	return nil
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

// deleteNamespace deletes the namespace only if this SpecialResource created it (it is its
// controlling owner); a namespace that existed before is left alone.
func (r *Reconciler) deleteNamespace(ctx context.Context, sr *sro.SpecialResource) error {
	ns := &corev1.Namespace{}
	name := sr.TargetNamespace()
	if err := r.Client.Get(ctx, client.ObjectKey{Name: name}, ns); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("reading namespace %s: %w", name, err)
	}
	owner := metav1.GetControllerOf(ns)
	if owner == nil || owner.UID != sr.UID || !ns.DeletionTimestamp.IsZero() {
		return nil
	}
	if err := r.Client.Delete(ctx, ns); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting namespace %s: %w", name, err)
	}
	return nil
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
