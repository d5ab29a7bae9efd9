package specialresource

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/controller/cacheview"
	"github.com/metalforge/metalforge/internal/controller/patch"
	"github.com/metalforge/metalforge/internal/sro/build"
	"github.com/metalforge/metalforge/internal/sro/naming"
)

// daemonSetGVK is listed for pruning even when the recipe renders none any more.
var daemonSetGVK = appsv1.SchemeGroupVersion.WithKind("DaemonSet")

// observeObjects reads the existing copies of the rendered objects, the logs of wait-for-logs
// DaemonSets' pods, and every object labelled as ours (of the kinds the recipe renders, and of
// pruneKinds), for pruning.
func (r *Reconciler) observeObjects(s *scope) (outcome, bool, error) {
	s.in.observed = map[objKey]*unstructured.Unstructured{}
	s.in.stale = map[objKey]bool{}
	s.in.logs = map[objKey]logState{}
	for _, st := range s.in.rendered {
		for _, o := range st.Objects {
			key := keyOf(o.Obj)
			if _, unserved := s.in.unserved[key]; unserved {
				continue // nothing of a kind the cluster does not serve can exist
			}
			obs, err := r.get(s.ctx, key)
			if err != nil {
				return outcome{}, false, err
			}
			if obs == nil {
				continue
			}
			s.in.observed[key] = obs
			s.in.stale[key] = r.applied.stale(key, obs)
			// Read before the DaemonSet is ready too: nodes are judged one by one (servedOn), and a
			// node whose new pod logged its line is served while other nodes' pods still roll.
			if o.WaitForLogs != nil && key.gvk == daemonSetGVK && obs.GetAnnotations()[sro.HashAnnotation] == o.Obj.GetAnnotations()[sro.HashAnnotation] {
				ls, err := r.podLogs(s, obs, o.WaitForLogs)
				if err != nil {
					return outcome{}, false, err
				}
				s.in.logs[key] = ls
			}
		}
	}
	if err := r.findOldNamespaces(s); err != nil {
		return outcome{}, false, err
	}
	// A kind the operator may not list is the recipe's problem (RecipeFailure, as a refused read).
	if refused, err := r.observeOwned(s, listedKinds(s), s.in.oldNamespaces); err != nil || refused != nil {
		return outcome{}, false, cmp.Or(err, refused)
	}
	return outcome{}, false, r.observeDriverPods(s)
}

// observeDriverPods finds, for each kernel's driver (its first kernel-affine DaemonSet in state
// order, as plan picks it; for a kernel the selected nodes run that was not rendered, the driver
// an earlier reconcile applied, which prune keeps), the nodes where it serves (servedOn).
func (r *Reconciler) observeDriverPods(s *scope) error {
	s.in.driverPods = map[string]map[string]bool{}
	notRendered := map[string]bool{}
	for _, g := range s.in.kernels {
		notRendered[g.kernel] = s.in.images[g.kernel].state != sro.ImageExists
	}
	s.in.heldDrivers = pickDrivers(s.in.owned, statusDrivers(s.sr), func(k string) bool { return notRendered[k] })
	for k, ds := range s.in.heldDrivers {
		nodes, err := r.servedOn(s.ctx, ds)
		if err != nil {
			return err
		}
		s.in.driverPods[k] = nodes
	}
	for _, st := range s.in.rendered {
		for _, o := range st.Objects {
			if o.Kernel == "" || o.Obj.GetKind() != "DaemonSet" {
				continue
			}
			if _, seen := s.in.driverPods[o.Kernel]; seen {
				continue
			}
			s.in.driverPods[o.Kernel] = map[string]bool{}
			ds := s.in.observed[keyOf(o.Obj)]
			if ds == nil {
				continue
			}
			nodes, err := r.servedOn(s.ctx, ds)
			if err != nil {
				return err
			}
			s.in.driverPods[o.Kernel] = nodes
		}
	}
	return nil
}

// servedOn lists the nodes where the driver DaemonSet serves: an available pod of it runs there
// (Ready, not being deleted) and, when the DaemonSet waits for its pods' logs, the pod's log
// matched (in this operator's memory, or as the pod's annotation says).
func (r *Reconciler) servedOn(ctx context.Context, ds *unstructured.Unstructured) (map[string]bool, error) {
	sel, _, _ := unstructured.NestedStringMap(ds.Object, "spec", "selector", "matchLabels")
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(ds.GetNamespace()), client.MatchingLabels(sel), cacheview.ReadOnly); err != nil {
		return nil, fmt.Errorf("listing pods of DaemonSet %s/%s: %w", ds.GetNamespace(), ds.GetName(), err)
	}
	logs := ds.GetAnnotations()[sro.WaitForLogsAnnotation] != ""
	nodes := map[string]bool{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if !p.DeletionTimestamp.IsZero() || p.Spec.NodeName == "" || !podAvailable(p) {
			continue
		}
		if logs && !r.logs.matched(p.UID) && p.Annotations[sro.LogsMatchedAnnotation] != "true" {
			continue
		}
		nodes[p.Spec.NodeName] = true
	}
	return nodes, nil
}

// statusDrivers names each kernel's driver DaemonSet as the last full reconcile found it
// (status.kernels[].daemonSet).
func statusDrivers(sr *sro.SpecialResource) map[string]string {
	out := map[string]string{}
	for _, k := range sr.Status.Kernels {
		if k.DaemonSet != "" {
			out[k.KernelVersion] = k.DaemonSet
		}
	}
	return out
}

// pickDrivers picks, from our objects, the driver DaemonSet of each kernel want accepts (not
// being deleted): the one the status names (named), else the first by name.
func pickDrivers(owned []*unstructured.Unstructured, named map[string]string, want func(k string) bool) map[string]*unstructured.Unstructured {
	out := map[string]*unstructured.Unstructured{}
	for _, u := range owned {
		k := u.GetAnnotations()[sro.KernelAnnotation]
		if k == "" || u.GetKind() != "DaemonSet" || !u.GetDeletionTimestamp().IsZero() || !want(k) {
			continue
		}
		if cur := out[k]; cur == nil || (cur.GetName() != named[k] && (u.GetName() == named[k] || u.GetName() < cur.GetName())) {
			out[k] = u
		}
	}
	return out
}

func podAvailable(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// listedKinds are the kinds our objects are listed from: the rendered ones and pruneKinds.
func listedKinds(s *scope) map[schema.GroupVersionKind]bool {
	kinds := pruneKinds(s.sr)
	for _, st := range s.in.rendered {
		for _, o := range st.Objects {
			kinds[o.Obj.GroupVersionKind()] = true
		}
	}
	return kinds
}

// pruneKinds are the kinds listed for pruning besides the rendered ones: DaemonSets, and the
// kinds applied before (kinds.go). A kind the cluster no longer serves is left out.
func pruneKinds(sr *sro.SpecialResource) map[schema.GroupVersionKind]bool {
	kinds := map[schema.GroupVersionKind]bool{daemonSetGVK: true}
	for _, gvk := range recordedKinds(sr) {
		kinds[gvk] = true
	}
	return kinds
}

// observeOwned lists our objects of the given kinds (builds excepted: they have their own
// clean-up) into s.in.owned, for pruning, but those in the namespaces a move leaves (leaving) into
// s.in.left: the move removes them, workloads first (move.go). A kind the operator's RBAC does not
// let it list is skipped (its objects are not pruned); refused is the first such refusal
// (readError).
func (r *Reconciler) observeOwned(s *scope, kinds map[schema.GroupVersionKind]bool, leaving []string) (refused, err error) {
	sel := client.MatchingLabels{sro.OwnedLabel: naming.OwnerValue(s.sr.Name)}
	for _, gvk := range slices.SortedFunc(maps.Keys(kinds), func(a, b schema.GroupVersionKind) int { return cmpString(a.String(), b.String()) }) {
		if _, err := r.Client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			continue // not served (a CRD removed, an annotation edited): nothing of it to prune
		}
		items, err := r.list(s.ctx, gvk, sel)
		if apierrors.IsForbidden(err) {
			refused = cmp.Or(refused, err)
			continue
		} else if err != nil {
			return refused, err
		}
		for _, u := range items {
			if _, isBuild := u.GetLabels()[build.BuildLabel]; isBuild {
				continue
			}
			if !appliedBy(u, s.sr) {
				continue
			}
			if slices.Contains(leaving, u.GetNamespace()) {
				s.in.left = append(s.in.left, u)
				continue
			}
			s.in.owned = append(s.in.owned, u)
		}
	}
	return refused, nil
}

// appliedBy says whether the plan applied u for sr: it carries the hash the plan writes and sr
// controls it. The owner label alone is not enough: decorate puts it on pod templates too, so
// every pod of a recipe's DaemonSet or Job carries it, and so does the namespace the operator
// creates for sr. Once a recipe renders a Pod or a Namespace, those kinds are listed for
// pruning, and taking the label for ours deleted the driver pods (modules unloaded, the
// DaemonSet making them again, in a loop) or sr's own namespace.
func appliedBy(u *unstructured.Unstructured, sr *sro.SpecialResource) bool {
	_, hashed := u.GetAnnotations()[sro.HashAnnotation]
	return hashed && ownedBy(u, sr)
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// get reads an object as unstructured, nil when it does not exist: from the cache for the
// kinds the operator caches (typed, sharing the informer the watches use), else from the API
// server (a recipe's other kinds: caching them would cache every object of the kind).
func (r *Reconciler) get(ctx context.Context, key objKey) (*unstructured.Unstructured, error) {
	ck := client.ObjectKey{Namespace: key.namespace, Name: key.name}
	reader := r.reader(key.gvk)
	if typed, err := r.Client.Scheme().New(key.gvk); err == nil {
		obj, ok := typed.(client.Object)
		if ok {
			if err := reader.Get(ctx, ck, obj); apierrors.IsNotFound(err) {
				return nil, nil
			} else if err != nil {
				return nil, r.readError("reading", key.gvk, objName(key), err)
			}
			return toUnstructured(obj, key.gvk)
		}
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(key.gvk)
	if err := reader.Get(ctx, ck, u); apierrors.IsNotFound(err) {
		return nil, nil
	} else if err != nil {
		return nil, r.readError("reading", key.gvk, objName(key), err)
	}
	return u, nil
}

// readError says what failed to read. The API server refusing it (Forbidden) is the operator's
// RBAC lacking a kind a recipe renders (its role covers the built-in recipe's kinds; users add
// others): reported like a refused apply, RecipeFailure naming the kind and what to add, looked
// at again after RetryDelay (RBAC is not watched), not as an internal error retried at once.
func (r *Reconciler) readError(action string, gvk schema.GroupVersionKind, name string, err error) error {
	obj := strings.TrimSpace(gvk.Kind + " " + name)
	if apierrors.IsForbidden(err) {
		return &applyError{action: action, obj: obj, err: r.withRBAC(gvk, err), permanent: true}
	}
	return fmt.Errorf("%s %s: %w", action, obj, err)
}

// withRBAC adds to the API server's refusal what the operator's role must grant on the kind: get
// and list (observing, pruning), create and patch (server-side apply), delete (pruning, removal).
func (r *Reconciler) withRBAC(gvk schema.GroupVersionKind, err error) error {
	resource := strings.ToLower(gvk.Kind)
	if m, merr := r.Client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); merr == nil {
		resource = m.Resource.Resource
	}
	return fmt.Errorf("%w (the operator's ClusterRole needs get, list, create, patch and delete on %q in API group %q: config/sro/rbac/role.yaml)", err, resource, gvk.Group)
}

// reader is the cache for the kinds the operator caches, else the API reader.
func (r *Reconciler) reader(gvk schema.GroupVersionKind) client.Reader {
	if cachedGVKs[gvk] {
		return r.Client
	}
	return r.APIReader
}

// list lists objects of a kind (from the cache or the API server, as get), as unstructured. A
// list the API server answers NotFound is of a kind it no longer serves (a recipe's CRD deleted,
// by the SpecialResource's own removal or pruning, say): nothing of it is left. The REST mapper
// keeps a kind it once found, so that is the only way to tell; an error would stop the deletion
// (or every reconcile) for ever.
func (r *Reconciler) list(ctx context.Context, gvk schema.GroupVersionKind, opts ...client.ListOption) ([]*unstructured.Unstructured, error) {
	listGVK := gvk.GroupVersion().WithKind(gvk.Kind + "List")
	reader := r.reader(gvk)
	if typed, err := r.Client.Scheme().New(listGVK); err == nil {
		if list, ok := typed.(client.ObjectList); ok {
			if err := reader.List(ctx, list, opts...); apierrors.IsNotFound(err) {
				return nil, nil
			} else if err != nil {
				return nil, r.readError("listing", gvk, "", err)
			}
			objs, err := meta.ExtractList(list)
			if err != nil {
				return nil, fmt.Errorf("reading a %s: %w", listGVK.Kind, err)
			}
			out := make([]*unstructured.Unstructured, 0, len(objs))
			for _, o := range objs {
				u, err := toUnstructured(o, gvk)
				if err != nil {
					return nil, err
				}
				out = append(out, u)
			}
			return out, nil
		}
	}
	ul := &unstructured.UnstructuredList{}
	ul.SetGroupVersionKind(listGVK)
	if err := reader.List(ctx, ul, opts...); apierrors.IsNotFound(err) {
		return nil, nil
	} else if err != nil {
		return nil, r.readError("listing", gvk, "", err)
	}
	out := make([]*unstructured.Unstructured, 0, len(ul.Items))
	for i := range ul.Items {
		out = append(out, &ul.Items[i])
	}
	return out, nil
}

func toUnstructured(obj runtime.Object, gvk schema.GroupVersionKind) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("converting %s: %w", gvk.Kind, err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

// podLogs matches the end of the log of every pod of a DaemonSet against re. A pod whose log
// matched once is not read again: it is remembered, and marked (sro.LogsMatchedAnnotation) so
// that a restarted operator knows it too.
func (r *Reconciler) podLogs(s *scope, ds *unstructured.Unstructured, re *regexp.Regexp) (logState, error) {
	sel, _, _ := unstructured.NestedStringMap(ds.Object, "spec", "selector", "matchLabels")
	var pods corev1.PodList
	if err := r.Client.List(s.ctx, &pods, client.InNamespace(ds.GetNamespace()), client.MatchingLabels(sel), cacheview.ReadOnly); err != nil {
		return logState{}, fmt.Errorf("listing pods of DaemonSet %s/%s: %w", ds.GetNamespace(), ds.GetName(), err)
	}
	var st logState
	for i := range pods.Items {
		p := &pods.Items[i]
		if !p.DeletionTimestamp.IsZero() || len(p.Spec.Containers) == 0 {
			continue
		}
		st.pods++
		if r.logs.matched(p.UID) || p.Annotations[sro.LogsMatchedAnnotation] == "true" {
			st.matched++
			continue
		}
		if p.Status.Phase != corev1.PodRunning {
			continue
		}
		text, err := r.Logs(s.ctx, p.Namespace, p.Name, p.Spec.Containers[0].Name, r.Config.LogTailLines)
		if err != nil {
			// A kubelet that cannot be reached now may answer later: not a reconcile error.
			continue
		}
		if re.MatchString(text) {
			r.logs.record(p.UID)
			s.fx.logsMatched = append(s.fx.logsMatched, types.NamespacedName{Namespace: p.Namespace, Name: p.Name})
			st.matched++
		}
	}
	return st, nil
}

// logCache remembers the pods whose logs matched (by UID: a new pod is read again).
type logCache struct {
	mu   sync.Mutex
	seen map[types.UID]struct{}
}

// maxLogCache bounds the cache; past it, it starts over (pods are read once more).
const maxLogCache = 200000

// reset forgets every pod (what a restart does).
func (c *logCache) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen = nil
}

func (c *logCache) matched(uid types.UID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.seen[uid]
	return ok
}

func (c *logCache) record(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil || len(c.seen) >= maxLogCache {
		c.seen = map[types.UID]struct{}{}
	}
	c.seen[uid] = struct{}{}
}

// appliedTracker remembers our last write of each applied object, per kind (patch.Tracker keys
// by namespace and name only).
type appliedTracker struct {
	mu    sync.Mutex
	kinds map[schema.GroupVersionKind]*patch.Tracker
}

func (a *appliedTracker) tracker(gvk schema.GroupVersionKind) *patch.Tracker {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.kinds == nil {
		a.kinds = map[schema.GroupVersionKind]*patch.Tracker{}
	}
	t := a.kinds[gvk]
	if t == nil {
		t = &patch.Tracker{}
		a.kinds[gvk] = t
	}
	return t
}

func (a *appliedTracker) record(u *unstructured.Unstructured) {
	a.tracker(u.GroupVersionKind()).Record(u)
}

// forget drops the memory of a deleted object: one entry per object ever applied (a DaemonSet
// per kernel, every kernel upgrade) otherwise stayed for the life of the process.
func (a *appliedTracker) forget(u *unstructured.Unstructured) {
	a.tracker(u.GroupVersionKind()).Forget(client.ObjectKeyFromObject(u))
}

func (a *appliedTracker) stale(key objKey, obs *unstructured.Unstructured) bool {
	return a.tracker(key.gvk).Stale(obs)
}
