package hostfirmwaresettings

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/companion"
	"github.com/metalforge/metalforge/internal/controller/conditions"
	"github.com/metalforge/metalforge/internal/controller/patch"
	"github.com/metalforge/metalforge/internal/provisioner"
)

// Config tunes the controller. DefaultConfig has metal3's delays; tests shorten them.
type Config struct {
	// Resync is how often a host's settings are read again from the provisioner (metal3: 5 min).
	Resync time.Duration
	// ChangeResync is Resync while the spec asks for a change the host does not show yet, so
	// that status follows soon after preparing or servicing applied it (metal3: 1 min).
	ChangeResync time.Duration
	// SchemaGrace is how long a new FirmwareSchema is kept although no HostFirmwareSettings names
	// it yet: the host that created it writes its status (naming it) right after, and the cache may
	// show that write a moment later than the schema.
	SchemaGrace time.Duration
	// Concurrency is how many hosts are reconciled at once.
	Concurrency int
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Reconciled, when set, is called at the end of every reconcile (except those that found the
	// cache behind their own last write) with the HostFirmwareSettings' resourceVersion after it
	// ("" when there is none). A test seam: a test waits until the controller looked, then
	// asserts what it did (or did not) write, instead of sleeping.
	Reconciled func(key types.NamespacedName, resourceVersion string)
	// SchemaChecked, when set, is called after the cleaner looked at a FirmwareSchema that
	// exists, saying whether it deleted it (the same kind of test seam).
	SchemaChecked func(key types.NamespacedName, deleted bool)
}

// DefaultConfig returns metal3's delays.
func DefaultConfig() Config {
	return Config{Resync: 5 * time.Minute, ChangeResync: time.Minute, SchemaGrace: time.Minute, Concurrency: 10}
}

// Reconciler keeps each registered host's HostFirmwareSettings (same name, owned by the host) in
// line with the firmware settings the provisioner reads from the host, checks its spec against the
// host's schema, and publishes that schema as a shared FirmwareSchema.
type Reconciler struct {
	Client   client.Client
	Recorder recorder.EventRecorder
	// Provisioner reads the host's settings and their schema.
	Provisioner provisioner.FirmwareReader
	Config      Config

	written patch.Tracker
	driver  companion.Driver
	schemas *schemas
	// skipNameValidation lets tests run several managers in one process.
	skipNameValidation bool
}

// +kubebuilder:rbac:groups=metal3.io,resources=hostfirmwaresettings,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=metal3.io,resources=hostfirmwaresettings/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=metal3.io,resources=firmwareschemas,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=metal3.io,resources=baremetalhosts,verbs=get;list;watch

// SetupWithManager registers the controller (keyed by host: a host's changes and its
// HostFirmwareSettings' spec edits and deletion wake it) and the schema cleaner.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if r.Client == nil {
		r.Client = mgr.GetClient()
	}
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorder("metal3-hostfirmwaresettings-controller")
	}
	def := DefaultConfig()
	for _, d := range []struct{ v, def *time.Duration }{
		{&r.Config.Resync, &def.Resync}, {&r.Config.ChangeResync, &def.ChangeResync}, {&r.Config.SchemaGrace, &def.SchemaGrace},
	} {
		if *d.v == 0 {
			*d.v = *d.def
		}
	}
	r.schemas = &schemas{client: r.Client, now: r.now, grace: r.Config.SchemaGrace}
	r.driver = companion.Driver{Client: r.Client, Written: &r.written, Reconciled: r.Config.Reconciled, Resync: r.Config.Resync,
		Settled: func(o client.Object) bool {
			hfs := o.(*metal3.HostFirmwareSettings)
			return companion.Settled(hfs.Status.LastUpdated, hfs.Status.Conditions, string(metal3.FirmwareSettingsChangeDetected), hfs.Generation)
		},
		NoHost: r.noHost, HostFound: r.hostFound}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &metal3.HostFirmwareSettings{}, schemaRefField, schemaRefOf); err != nil {
		return fmt.Errorf("indexing host firmware settings by schema: %w", err)
	}
	err := ctrl.NewControllerManagedBy(mgr).
		Named("hostfirmwaresettings").
		For(&metal3.HostFirmwareSettings{}, builder.WithPredicates(companion.EditedOrDeleted())).
		Watches(&metal3.BareMetalHost{}, &handler.EnqueueRequestForObject{}, builder.WithPredicates(companion.HostChanges())).
		Watches(&metal3.FirmwareSchema{}, r.usersOfDeletedSchema()).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(1, r.Config.Concurrency), SkipNameValidation: &r.skipNameValidation}).
		Complete(r)
	if err != nil {
		return fmt.Errorf("setting up the host firmware settings controller: %w", err)
	}
	return setupCleaner(mgr, &cleaner{client: r.Client, schemas: r.schemas, now: r.now, checked: r.Config.SchemaChecked}, r.skipNameValidation)
}

// Reconcile is the driver: the host, its settings from the provisioner, the schema, then one
// status write when something changed.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (ctrl.Result, error) {
	hfs := &metal3.HostFirmwareSettings{}
	return r.driver.Run(ctx, req.NamespacedName, hfs, func(host *metal3.BareMetalHost, exists bool) (ctrl.Result, error) {
		settings, schema, err := r.Provisioner.FirmwareSettings(ctx, companion.ProvisionerHost(host), true)
		if err != nil {
			return companion.ProvisionerError(ctx, err, "reading the firmware settings of host "+req.String())
		}
		if exists && hfs.Status.LastUpdated != nil && companion.Applying(host) {
			// Keep the settings as they were until the host's preparing or servicing ends (it
			// wakes this controller): a spec edit is still judged, against them. Only settings
			// read from the provisioner (lastUpdated): an object created before its host has an
			// empty list, which is no reading.
			settings = hfs.Status.Settings
		}
		published := publishedSchema(schema)
		schemaKey := types.NamespacedName{Namespace: host.Namespace, Name: schemaName(published)}
		if err := r.schemas.ensure(ctx, schemaKey, func() *metal3.FirmwareSchema { return newSchema(published, host) }); err != nil {
			return ctrl.Result{}, err
		}
		if !exists {
			hfs.Spec.Settings = metal3.DesiredSettingsMap{}
			created, err := companion.Create(ctx, r.Client, host, hfs)
			if err != nil || !created {
				return ctrl.Result{RequeueAfter: companion.StaleRetry}, err
			}
		}
		p := patch.NewHelper(r.Client, hfs, &r.written)
		now := r.now()
		list := setStatus(hfs, observed{settings: settings, schema: schema,
			schemaRef: metal3.SchemaReference{Namespace: schemaKey.Namespace, Name: schemaKey.Name}}, now)
		first := p.Snapshot().(*metal3.HostFirmwareSettings).Status.LastUpdated == nil
		if err := companion.WriteStatus(ctx, p, hfs, &hfs.Status.LastUpdated, first, now); err != nil {
			return ctrl.Result{}, err
		}
		list.Emit(r.Recorder, hfs)
		after := r.Config.Resync
		if conditions.IsTrue(hfs.Status.Conditions, string(metal3.FirmwareSettingsChangeDetected)) {
			after = r.Config.ChangeResync
		}
		return ctrl.Result{RequeueAfter: companion.Jitter(after)}, nil
	})
}

// noHost marks HostFirmwareSettings a user created under a name no host has: Valid False
// (ConfigurationError) naming metadata.name, and a Warning.
func (r *Reconciler) noHost(ctx context.Context, obj client.Object) error {
	hfs := obj.(*metal3.HostFirmwareSettings)
	p := patch.NewHelper(r.Client, hfs, &r.written)
	list := companion.NoHost(&hfs.Status.Conditions, "HostFirmwareSettings", string(metal3.FirmwareSettingsValid),
		metal3.FirmwareConfigurationErrorReason, hfs, r.now())
	// No host, no reading: settings of a host gone before must not be taken for the next one of
	// that name. (Settings are required: a replacing write carries the whole status.)
	replacing := hfs.Status.LastUpdated == nil
	hfs.Status.Settings, hfs.Status.LastUpdated, hfs.Status.FirmwareSchema = metal3.SettingsMap{}, nil, nil
	if _, err := p.PatchStatus(ctx, hfs, patch.Replacing(replacing)); err != nil {
		return err
	}
	list.Emit(r.Recorder, hfs)
	return nil
}

// hostFound takes back noHost's mark once the host exists, registered or not.
func (r *Reconciler) hostFound(ctx context.Context, obj client.Object) error {
	hfs := obj.(*metal3.HostFirmwareSettings)
	p := patch.NewHelper(r.Client, hfs, &r.written)
	if !companion.Unmark(&hfs.Status.Conditions, "HostFirmwareSettings", string(metal3.FirmwareSettingsValid), hfs) {
		return nil
	}
	_, err := p.PatchStatus(ctx, hfs)
	return err
}

func (r *Reconciler) now() time.Time {
	if r.Config.Now != nil {
		return r.Config.Now()
	}
	return time.Now()
}

// SkipNameValidation lets a test process run several managers with this controller.
func (r *Reconciler) SkipNameValidation() { r.skipNameValidation = true }
