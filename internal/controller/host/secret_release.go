package host

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

// secretReleaser removes the secret finalizer from a Secret being deleted that no host names.
//
// The host controller releases a Secret when its host is deleted, or when the host's new BMC
// credentials worked; a Secret a host stopped naming any other way (spec.userData pointed at
// another Secret, spec.metaData removed, ...) kept the finalizer, and deleting it left it
// Terminating for ever, even after the host was gone (metal3 has the same flaw). A second
// reconciler, but in this package: the finalizer (secrets.get), the index of hosts by Secret
// (secretNamesField) and the label-filtered Secret cache it works from are the host controller's,
// and SetupWithManager registers both. It writes only to Secrets being deleted.
type secretReleaser struct {
	client client.Client
	// reconciled is Config.SecretReconciled (a test seam).
	reconciled func(key types.NamespacedName, resourceVersion string)
}

func (r *secretReleaser) setup(mgr ctrl.Manager, skipNameValidation bool) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("baremetalhost-secrets").
		For(&corev1.Secret{}, builder.WithPredicates(predicate.NewPredicateFuncs(deletingAndHeld))).
		Watches(&metal3.BareMetalHost{}, secretsLetGo()).
		WithOptions(controller.Options{SkipNameValidation: &skipNameValidation}).
		Complete(r)
}

// deletingAndHeld: a Secret being deleted that carries our finalizer (the cache holds only
// labelled Secrets, so only those the hosts read).
func deletingAndHeld(o client.Object) bool {
	return !o.GetDeletionTimestamp().IsZero() && controllerutil.ContainsFinalizer(o, metal3.SecretsFinalizer)
}

// secretsLetGo looks again at the Secrets a host no longer names (a spec change, or the host
// gone): one of them may be waiting, deleted, for its last user to let go. Reconciling a Secret
// that is not being deleted is a cache read.
func secretsLetGo() handler.Funcs {
	enqueue := func(q workqueue.TypedRateLimitingInterface[reconcile.Request], ns string, names []string) {
		for _, name := range names {
			q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
		}
	}
	return handler.Funcs{
		UpdateFunc: func(_ context.Context, e ctrlevent.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			old, ok := e.ObjectOld.(*metal3.BareMetalHost)
			now, ok2 := e.ObjectNew.(*metal3.BareMetalHost)
			if !ok || !ok2 {
				return
			}
			still := secretNames(now)
			enqueue(q, old.Namespace, slices.DeleteFunc(secretNames(old), func(name string) bool { return slices.Contains(still, name) }))
		},
		DeleteFunc: func(_ context.Context, e ctrlevent.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if h, ok := e.Object.(*metal3.BareMetalHost); ok {
				enqueue(q, h.Namespace, secretNames(h))
			}
		},
	}
}

// Reconcile releases a deleted Secret once no host in its namespace names it. Only our finalizer
// is removed (dropSecretFinalizer), behind an optimistic lock: should the Secret have changed since
// the cached copy, the patch fails and the next try reads it again.
func (r *secretReleaser) Reconcile(ctx context.Context, req reconcile.Request) (ctrl.Result, error) {
	secret := &corev1.Secret{}
	if err := r.client.Get(ctx, req.NamespacedName, secret); apierrors.IsNotFound(err) {
		return ctrl.Result{}, nil
	} else if err != nil {
		return ctrl.Result{}, fmt.Errorf("reading secret %s: %w", req.NamespacedName, err)
	}
	if r.reconciled != nil {
		defer r.reconciled(req.NamespacedName, secret.ResourceVersion)
	}
	if !deletingAndHeld(secret) {
		return ctrl.Result{}, nil
	}
	if used, err := namedByAnotherHost(ctx, r.client, req.Namespace, req.Name, ""); err != nil || used {
		return ctrl.Result{}, err // a host that stops naming it brings it back (secretsLetGo)
	}
	if err := dropSecretFinalizer(ctx, r.client, secret); err != nil {
		return ctrl.Result{}, err
	}
	ctrl.LoggerFrom(ctx).Info("Released a deleted Secret that no host names", "secret", klog.KObj(secret))
	return ctrl.Result{}, nil
}
