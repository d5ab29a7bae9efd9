package nodekernel

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/sro/kernel"
	"github.com/metalforge/metalforge/internal/sro/naming"
)

// Reconciler keeps each node's kernel label right.
type Reconciler struct {
	Client client.Client
	// Concurrency is how many nodes are labelled at once.
	Concurrency int
	// SkipNameValidation lets tests run several managers (each with this controller) in one
	// process.
	SkipNameValidation bool
}

// SetupWithManager watches nodes whose kernel or kernel label changed.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil {
		r.Client = mgr.GetClient()
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("nodekernel").
		For(&corev1.Node{}, builder.WithPredicates(kernelChanged())).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(1, r.Concurrency), SkipNameValidation: &r.SkipNameValidation}).
		Complete(r)
}

// kernelChanged passes new nodes, and nodes whose kernel or kernel label changed (not the
// heartbeats that update a node every few seconds).
func kernelChanged() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, okO := e.ObjectOld.(*corev1.Node)
		n, okN := e.ObjectNew.(*corev1.Node)
		return !okO || !okN || kernel.OfNode(o) != kernel.OfNode(n) || o.Labels[sro.KernelLabel] != n.Labels[sro.KernelLabel]
	}}
}

// Reconcile sets or removes the node's kernel label when it is not what the node reports.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (ctrl.Result, error) {
	node := &corev1.Node{}
	if err := r.Client.Get(ctx, req.NamespacedName, node); apierrors.IsNotFound(err) {
		return ctrl.Result{}, nil
	} else if err != nil {
		return ctrl.Result{}, fmt.Errorf("reading node %s: %w", req.Name, err)
	}
	want, change := Desired(node)
	if !change {
		return ctrl.Result{}, nil
	}
	ctrl.LoggerFrom(ctx).V(2).Info("Labelling node with its kernel", "kernel", kernel.OfNode(node))
	// A merge patch of this one label, without a lock: other writers' labels are untouched.
	data, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]*string{sro.KernelLabel: want}}})
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("encoding the kernel label of node %s: %w", node.Name, err)
	}
	patchTarget := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node.Name}}
	if err := r.Client.Patch(ctx, patchTarget, client.RawPatch(types.MergePatchType, data)); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("labelling node %s with its kernel: %w", node.Name, err)
	}
	return ctrl.Result{}, nil
}

// Desired is the kernel label the node should carry (nil: none, as it reports no kernel), and
// whether that differs from what it carries.
func Desired(node *corev1.Node) (*string, bool) {
	k := kernel.OfNode(node)
	current, has := node.Labels[sro.KernelLabel]
	if k == "" {
		return nil, has
	}
	want := naming.LabelValue(k)
	return &want, !has || current != want
}
