package specialresource

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/sro/build"
)

// fieldOwner is the server-side apply field manager of everything the operator applies.
const fieldOwner = "special-resource-operator"

// applyError is a failure to write a rendered object or to start a build. permanent: the API
// server refused the object itself (invalid, unknown kind), or the builder the build
// (build.Refused): a problem of the spec to report, not to retry at once.
type applyError struct {
	// action is what failed: "applying", "cannot start".
	action    string
	obj       string
	err       error
	permanent bool
}

func (e *applyError) Error() string { return e.action + " " + e.obj + ": " + e.err.Error() }
func (e *applyError) Unwrap() error { return e.err }

// write applies the effects in an order that keeps status truthful: the namespace before what
// goes in it, dependencies, builds, the objects state by state (the first failure stops them, and
// only what no longer holds is undone then: writePlan), prunes, node labels, then what a move
// removes from the namespaces it leaves (move.go). The status is
// written by the driver afterwards. A build the builder or the API server refuses is reported
// (the returned error) only once the rest is written: one kernel's refused build must not keep
// the other kernels' drivers or later shared states from being applied, stale objects from being
// pruned, or nodes' labels from following. When the namespace, a dependency or a build cannot
// be created otherwise, nothing is applied, but what no longer holds is undone all the same
// (hold), as after a failure before the plan (runAndWrite).
func (r *Reconciler) write(ctx context.Context, s *scope) error {
	refused, err := r.writeBeforePlan(ctx, s)
	if err != nil {
		if herr := r.hold(s); herr != nil {
			return errors.Join(err, herr)
		}
		return errors.Join(err, r.pruneAndLabel(ctx, s))
	}
	if refused != nil && s.plan != nil && !s.plan.hold {
		// The plan took the refused kernels for kernels being built, whose image will come and
		// which hold back the later shared states; none will come until the user acts, so the
		// other kernels are served without them (plan's failed kernels). Only the builder can
		// say it refuses, and only when asked to start: plan again, still before any object is
		// written. The outcome is the refusal's (Reconcile), whatever the first plan decided.
		s.plan = plan(r.planInput(s))
		r.skipInFlightLabels(s)
	}
	// The move goes on even when the plan's write failed: the old namespaces' workloads are gone
	// by then (moveOut), and what remains there serves nothing.
	if err := errors.Join(r.writePlan(ctx, s), r.leaveOldNamespaces(ctx, s)); err != nil {
		// Reported instead of the refusal (which the kernel's status still shows): a failed
		// write is retried with backoff, a refusal only after RetryDelay.
		return err
	}
	return refused
}

// writeBeforePlan creates the namespace and the dependencies and starts the builds: what the
// plan's objects need first. refused is a build refusal (startBuilds).
func (r *Reconciler) writeBeforePlan(ctx context.Context, s *scope) (refused, err error) {
	if ns := s.fx.createNamespace; ns != nil {
		if err := r.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating namespace %s: %w", ns.Name, err)
		} else if err == nil {
			s.fx.events.Normal(reasonNamespaceCreated, "CreateNamespace", "Created namespace "+ns.Name)
		}
	}
	for _, dep := range s.fx.createDeps {
		err := r.Client.Create(ctx, dep.sr)
		switch {
		case err == nil:
			// Only now: a refused Create is asked for again, and would be announced each time.
			s.fx.events.Normal(reasonDependencyCreated, "CreateDependency", "Created SpecialResource "+dep.sr.Name+", which "+s.sr.Name+" depends on")
		case apierrors.IsAlreadyExists(err):
			// Created meanwhile by someone else: not ours to announce.
		case apiRefused(err):
			// The API server or the webhook refuses the spec the recipe gives the dependency (its
			// specialresource.yaml): the user's to fix, reported naming the field and looked at again
			// after RetryDelay (and when the ConfigMap changes), not an internal error retried at once.
			return nil, &applyError{action: "creating", obj: "dependency SpecialResource " + dep.sr.Name + " (" + dep.field + ")", err: err, permanent: true}
		default:
			return nil, fmt.Errorf("creating dependency SpecialResource %s: %w", dep.sr.Name, err)
		}
	}
	return r.startBuilds(ctx, s)
}

// apiRefused: the API server, an admission webhook or policy, a quota or the operator's RBAC
// refused the object itself; asking again at once would get the same answer.
func apiRefused(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsForbidden(err)
}

// startBuilds starts the builds the images phase asked for. Every build is tried: a refusal of
// one kernel's build does not hold the others'. A refusal is the builder's (build.Refused) or
// the API server's (a quota, an admission policy, RBAC without the build kind): the kernel's to
// report, asked again after RetryDelay. It returns the first refusal (a permanent applyError);
// each refused kernel is recorded in s.fx.refusedBuilds.
func (r *Reconciler) startBuilds(ctx context.Context, s *scope) (refused error, err error) {
	for _, req := range s.fx.startBuilds {
		if err := r.Builder.Start(ctx, req); build.Refused(err) || (err != nil && apiRefused(err)) {
			applyErr := &applyError{action: "cannot start", obj: r.Builder.Kind() + " " + req.Name, err: err, permanent: true}
			if s.fx.refusedBuilds == nil {
				s.fx.refusedBuilds = map[string]string{}
			}
			s.fx.refusedBuilds[req.Kernel] = applyErr.Error()
			refused = cmp.Or(refused, error(applyErr))
			continue
		} else if err != nil {
			return refused, err
		}
		// Only now: a build refused or failing to start is asked for again every RetryDelay,
		// and would be announced and counted each time although it never runs.
		s.fx.buildsStarted++
		s.fx.events.Normal(reasonBuildStarted, "Build", fmt.Sprintf("Building %s for kernel %s (%s %s)", req.Image, req.Kernel, r.Builder.Kind(), req.Name))
	}
	return refused, nil
}

// writePlan writes what the plan decided, after the pods whose logs matched and the builds no
// longer needed.
func (r *Reconciler) writePlan(ctx context.Context, s *scope) error {
	for _, key := range s.fx.logsMatched {
		if err := r.markLogsMatched(ctx, key); err != nil {
			return err
		}
	}
	for _, name := range s.fx.deleteBuilds {
		if err := r.Builder.Delete(ctx, s.in.namespace, name); err != nil {
			return err
		}
	}
	if s.plan == nil {
		return nil
	}
	if err := r.applyPlan(ctx, s); err != nil {
		// The states stop at the first failure (a later state never goes before an earlier
		// one), and the plan's prunes and labels took every object for written: what no longer
		// holds is undone instead, as while waiting for a dependency (hold).
		if herr := r.hold(s); herr != nil {
			return errors.Join(err, herr)
		}
		return errors.Join(err, r.pruneAndLabel(ctx, s))
	}
	return r.pruneAndLabel(ctx, s)
}

// applyPlan applies the plan's objects in state order; the first failure stops it.
func (r *Reconciler) applyPlan(ctx context.Context, s *scope) error {
	for _, u := range s.plan.apply {
		if err := r.apply(ctx, u); err != nil {
			return err
		}
		if k := u.GetAnnotations()[sro.KernelAnnotation]; k != "" && u.GetKind() == "DaemonSet" && s.in.observed[keyOf(u)] == nil {
			s.fx.events.Normal(reasonKernelAdded, "CreateDaemonSet", fmt.Sprintf("DaemonSet %s serves kernel %s", u.GetName(), k))
		}
	}
	return nil
}

// pruneAndLabel deletes what the plan prunes, records the kinds that remain (kinds.go), and
// changes the nodes' state labels.
func (r *Reconciler) pruneAndLabel(ctx context.Context, s *scope) error {
	for _, u := range s.plan.prune {
		if err := r.Client.Delete(ctx, u, client.PropagationPolicy("Background")); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting %s %s: %w", u.GetKind(), objName(keyOf(u)), err)
		}
		r.applied.forget(u)
		if k := u.GetAnnotations()[sro.KernelAnnotation]; k != "" && u.GetKind() == "DaemonSet" {
			s.fx.events.Normal(reasonKernelRemoved, "DeleteDaemonSet", fmt.Sprintf("Deleted DaemonSet %s: no selected node runs kernel %s any more", u.GetName(), k))
		}
	}
	if err := r.recordKinds(ctx, s); err != nil {
		return err
	}
	return r.patchNodeLabels(ctx, s.sr.Name, s.plan.nodeLabels)
}

// apply writes a rendered object with server-side apply: the operator owns the fields it
// renders, so a field dropped from the recipe is removed, and fields others set stay.
func (r *Reconciler) apply(ctx context.Context, u *unstructured.Unstructured) error {
	obj := u.DeepCopy()
	err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(fieldOwner), client.ForceOwnership)
	if err != nil {
		// NotFound: the object's namespace does not exist (a typo, or a Namespace the recipe
		// creates in a later manifest): the recipe's to fix, not retried at once as internal.
		permanent := apiRefused(err) || apierrors.IsNotFound(err)
		if apierrors.IsForbidden(err) {
			err = r.withRBAC(u.GroupVersionKind(), err)
		}
		return &applyError{action: "applying", obj: u.GetKind() + " " + objName(keyOf(u)), err: err, permanent: permanent}
	}
	r.applied.record(obj)
	return nil
}

// patchNodeLabels changes our state labels on nodes with merge patches of those labels only (no
// optimistic lock: every SpecialResource writes its own keys, so concurrent patches of one node
// never conflict), several nodes at once.
func (r *Reconciler) patchNodeLabels(ctx context.Context, srName string, changes map[string]map[string]*string) error {
	names := slices.Sorted(maps.Keys(changes))
	workers := max(1, r.Config.NodeLabelWorkers)
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
		next = make(chan string)
	)
	for range min(workers, len(names)) {
		wg.Go(func() {
			for name := range next {
				if err := r.patchNode(ctx, srName, name, changes[name]); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for _, n := range names {
		next <- n
	}
	close(next)
	wg.Wait()
	return errors.Join(errs...)
}

func (r *Reconciler) patchNode(ctx context.Context, srName, name string, labels map[string]*string) error {
	data, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	if err != nil {
		return fmt.Errorf("encoding labels of node %s: %w", name, err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := r.Client.Patch(ctx, node, client.RawPatch(types.MergePatchType, data)); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("labelling node %s: %w", name, err)
	}
	r.nodeWrites.record(srName, name, node.ResourceVersion, labels)
	return nil
}

// nodeWrites remembers, per SpecialResource and node, the label change last written and the
// node's resourceVersion after it. A reconcile that runs before the cache has the write would
// compute the same change from the old copy and write it again (seen as 12 % more node patches
// at 300 nodes); it skips it instead.
type nodeWrites struct {
	mu sync.Mutex
	m  map[string]map[string]nodeWrite
}

type nodeWrite struct {
	rv     uint64
	change string
}

func changeKey(labels map[string]*string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		b.WriteString(k)
		if v := labels[k]; v != nil {
			b.WriteString("=" + *v)
		}
		b.WriteByte(0)
	}
	return b.String()
}

func (w *nodeWrites) record(sr, node, rv string, labels map[string]*string) {
	v, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[string]map[string]nodeWrite{}
	}
	if w.m[sr] == nil {
		w.m[sr] = map[string]nodeWrite{}
	}
	w.m[sr][node] = nodeWrite{rv: v, change: changeKey(labels)}
}

// inFlight: the same change was written for this node after the cached copy's version.
func (w *nodeWrites) inFlight(sr, node, cachedRV string, labels map[string]*string) bool {
	v, err := strconv.ParseUint(cachedRV, 10, 64)
	if err != nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	last, ok := w.m[sr][node]
	return ok && v < last.rv && last.change == changeKey(labels)
}

// forget drops a deleted SpecialResource's entries.
func (w *nodeWrites) forget(sr string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.m, sr)
}

// markLogsMatched annotates a driver pod whose log matched (see sro.LogsMatchedAnnotation). A pod
// gone since is nothing to mark.
func (r *Reconciler) markLogsMatched(ctx context.Context, key types.NamespacedName) error {
	patch := []byte(`{"metadata":{"annotations":{"` + sro.LogsMatchedAnnotation + `":"true"}}}`)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	if err := r.Client.Patch(ctx, pod, client.RawPatch(types.MergePatchType, patch)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("marking pod %s as matched by its logs: %w", key, err)
	}
	return nil
}
