package hostfirmwaresettings

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

// schemaRefField indexes HostFirmwareSettings by the FirmwareSchema their status names.
const schemaRefField = ".metalforge.status.schema.name"

func schemaRefOf(o client.Object) []string {
	hfs, ok := o.(*metal3.HostFirmwareSettings)
	if !ok || hfs.Status.FirmwareSchema == nil || hfs.Status.FirmwareSchema.Name == "" {
		return nil
	}
	return []string{hfs.Status.FirmwareSchema.Name}
}

// cleaner deletes the FirmwareSchemas it names (schemaNamePrefix) that no HostFirmwareSettings of
// their namespace names. It looks
// at a schema when it appears (and for every schema when the operator starts), and when a
// HostFirmwareSettings stops naming it (deleted with its host, or now naming another schema after
// a firmware update). Counting the users is a lookup in the cache's index, no API request.
type cleaner struct {
	client  client.Client
	schemas *schemas
	now     func() time.Time
	checked func(key types.NamespacedName, deleted bool) // Config.SchemaChecked
}

// +kubebuilder:rbac:groups=metal3.io,resources=firmwareschemas,verbs=get;list;watch;delete

func setupCleaner(mgr ctrl.Manager, c *cleaner, skipNameValidation bool) error {
	err := ctrl.NewControllerManagedBy(mgr).
		Named("firmwareschema-cleanup").
		For(&metal3.FirmwareSchema{}, builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(ctrlevent.UpdateEvent) bool { return false },
			DeleteFunc: func(ctrlevent.DeleteEvent) bool { return false },
		})).
		Watches(&metal3.HostFirmwareSettings{}, droppedSchemas()).
		WithOptions(controller.Options{MaxConcurrentReconciles: 1, SkipNameValidation: &skipNameValidation}).
		Complete(c)
	if err != nil {
		return fmt.Errorf("setting up the firmware schema cleanup: %w", err)
	}
	return nil
}

// droppedSchemas maps a HostFirmwareSettings event to the schema it stopped naming: the old one
// when its status names another, the last one when it is deleted.
func droppedSchemas() handler.EventHandler {
	enqueue := func(q workqueue.TypedRateLimitingInterface[reconcile.Request], o client.Object) {
		for _, name := range schemaRefOf(o) {
			q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}})
		}
	}
	return handler.Funcs{
		UpdateFunc: func(_ context.Context, e ctrlevent.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			old, cur := schemaRefOf(e.ObjectOld), schemaRefOf(e.ObjectNew)
			if len(old) == 1 && (len(cur) == 0 || cur[0] != old[0]) {
				enqueue(q, e.ObjectOld)
			}
		},
		DeleteFunc: func(_ context.Context, e ctrlevent.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(q, e.Object)
		},
	}
}

// Reconcile deletes the schema when nothing names it, unless it is new (its first user has not
// written its status yet): then it looks again when the grace period ends.
func (c *cleaner) Reconcile(ctx context.Context, req reconcile.Request) (ctrl.Result, error) {
	fs := &metal3.FirmwareSchema{}
	if err := c.client.Get(ctx, req.NamespacedName, fs); apierrors.IsNotFound(err) {
		return ctrl.Result{}, nil
	} else if err != nil {
		return ctrl.Result{}, fmt.Errorf("reading firmware schema %s: %w", req.NamespacedName, err)
	}
	if !fs.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	var users metal3.HostFirmwareSettingsList
	if err := c.client.List(ctx, &users, client.InNamespace(req.Namespace), client.MatchingFields{schemaRefField: req.Name}); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing the users of firmware schema %s: %w", req.NamespacedName, err)
	}
	deleted := false
	if c.checked != nil {
		defer func() { c.checked(req.NamespacedName, deleted) }()
	}
	if len(users.Items) > 0 || !strings.HasPrefix(req.Name, schemaNamePrefix) {
		// Only schemas under the names hosts' schemas get ("schema-…": this controller's
		// content-addressed names, and metal3's) are the cleaner's: one a user or another tool
		// made under another name is not, although no host uses it.
		return ctrl.Result{}, nil
	}
	grace := c.schemas.grace
	if age := c.now().Sub(fs.CreationTimestamp.Time); age < grace || c.schemas.recentlyCreated(req.NamespacedName) {
		return ctrl.Result{RequeueAfter: max(grace-age, grace/10, 10*time.Millisecond)}, nil
	}
	ctrl.LoggerFrom(ctx).Info("Deleting a firmware schema no host uses", "schema", req.NamespacedName)
	err := c.client.Delete(ctx, fs, client.Preconditions{UID: &fs.UID})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return ctrl.Result{}, fmt.Errorf("deleting firmware schema %s: %w", req.NamespacedName, err)
	}
	c.schemas.forget(req.NamespacedName)
	deleted = true
	return ctrl.Result{}, nil
}

// usersOfDeletedSchema maps a FirmwareSchema's deletion to the HostFirmwareSettings whose status
// still names it, so that they create it again at once rather than at their next re-read (up to
// Resync later). It is deleted by hand, or by the cleaner in the moment a new host of the same
// hardware found it in the cache and named it.
func (r *Reconciler) usersOfDeletedSchema() handler.EventHandler {
	return handler.Funcs{
		DeleteFunc: func(ctx context.Context, e ctrlevent.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			// Gone for the API: the memory of having created it a moment ago (which stops a
			// create the cache does not show yet) would keep its users from creating it again.
			r.schemas.forget(client.ObjectKeyFromObject(e.Object))
			var users metal3.HostFirmwareSettingsList
			if err := r.Client.List(ctx, &users, client.InNamespace(e.Object.GetNamespace()),
				client.MatchingFields{schemaRefField: e.Object.GetName()}); err != nil {
				ctrl.LoggerFrom(ctx).Error(err, "Listing the users of a deleted firmware schema", "schema", e.Object.GetName())
				return
			}
			for _, u := range users.Items {
				q.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&u)})
			}
		},
	}
}
