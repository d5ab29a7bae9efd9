package hostfirmwarecomponents

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
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
	// Resync is how often a host's firmware versions are read again (metal3: 5 min).
	Resync time.Duration
	// ChangeResync is Resync while updates wait to be applied (metal3: 1 min).
	ChangeResync time.Duration
	// Concurrency is how many hosts are reconciled at once.
	Concurrency int
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Reconciled, when set, is called at the end of every reconcile (except those that found the
	// cache behind their own last write) with the HostFirmwareComponents' resourceVersion after
	// it ("" when there is none): a test seam, as the host controller's.
	Reconciled func(key types.NamespacedName, resourceVersion string)
}

// DefaultConfig returns metal3's delays.
func DefaultConfig() Config {
	return Config{Resync: 5 * time.Minute, ChangeResync: time.Minute, Concurrency: 10}
}

// Reconciler keeps each registered host's HostFirmwareComponents (same name, owned by the host;
// created when the provisioner reports components) in line with the firmware versions the
// provisioner reads, and checks its spec.updates.
type Reconciler struct {
	Client   client.Client
	Recorder recorder.EventRecorder
	// Provisioner reads the host's firmware components.
	Provisioner provisioner.FirmwareReader
	Config      Config

	written patch.Tracker
	driver  companion.Driver
	// skipNameValidation lets tests run several managers in one process.
	skipNameValidation bool
}

// +kubebuilder:rbac:groups=metal3.io,resources=hostfirmwarecomponents,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=metal3.io,resources=hostfirmwarecomponents/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=metal3.io,resources=baremetalhosts,verbs=get;list;watch

// SetupWithManager registers the controller, keyed by host: the host's changes, spec edits and
// the host controller recording applied updates in status.updates wake it.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil {
		r.Client = mgr.GetClient()
	}
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorder("metal3-hostfirmwarecomponents-controller")
	}
	def := DefaultConfig()
	if r.Config.Resync == 0 {
		r.Config.Resync = def.Resync
	}
	if r.Config.ChangeResync == 0 {
		r.Config.ChangeResync = def.ChangeResync
	}
	r.driver = companion.Driver{Client: r.Client, Written: &r.written, Reconciled: r.Config.Reconciled, Resync: r.Config.Resync,
		Settled: func(o client.Object) bool {
			hfc := o.(*metal3.HostFirmwareComponents)
			return companion.Settled(hfc.Status.LastUpdated, hfc.Status.Conditions, string(metal3.HostFirmwareComponentsChangeDetected), hfc.Generation)
		},
		NoHost: r.noHost, HostFound: r.hostFound}
	err := ctrl.NewControllerManagedBy(mgr).
		Named("hostfirmwarecomponents").
		For(&metal3.HostFirmwareComponents{}, builder.WithPredicates(predicate.Or[client.Object](companion.EditedOrDeleted(), updatesRecorded()))).
		Watches(&metal3.BareMetalHost{}, &handler.EnqueueRequestForObject{}, builder.WithPredicates(companion.HostChanges())).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(1, r.Config.Concurrency), SkipNameValidation: &r.skipNameValidation}).
		Complete(r)
	if err != nil {
		return fmt.Errorf("setting up the host firmware components controller: %w", err)
	}
	return nil
}

// updatesRecorded passes the host controller's write of status.updates (an update was applied: the
// versions changed and ChangeDetected must follow).
func updatesRecorded() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc:  func(ctrlevent.CreateEvent) bool { return false },
		DeleteFunc:  func(ctrlevent.DeleteEvent) bool { return false },
		GenericFunc: func(ctrlevent.GenericEvent) bool { return false },
		UpdateFunc: func(e ctrlevent.UpdateEvent) bool {
			o, okO := e.ObjectOld.(*metal3.HostFirmwareComponents)
			n, okN := e.ObjectNew.(*metal3.HostFirmwareComponents)
			return okO && okN && !reflect.DeepEqual(o.Status.Updates, n.Status.Updates)
		},
	}
}

// Reconcile is the driver: the host, its components from the provisioner, then one status write
// when something changed.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (ctrl.Result, error) {
	hfc := &metal3.HostFirmwareComponents{}
	return r.driver.Run(ctx, req.NamespacedName, hfc, func(host *metal3.BareMetalHost, exists bool) (ctrl.Result, error) {
		components, err := r.Provisioner.FirmwareComponents(ctx, companion.ProvisionerHost(host))
		// unsupported: the host's BMC type has no firmware interface (IPMI). metal3 creates no
		// HostFirmwareComponents then (its address may change: looked at again at the resync);
		// in one a user created, each listed update is invalid, named, instead of Valid and a
		// preparation that fails in the provisioner.
		var unsupported error
		if errors.Is(err, provisioner.ErrFirmwareUpdateUnsupported) {
			if !exists {
				return ctrl.Result{RequeueAfter: companion.Jitter(r.Config.Resync)}, nil
			}
			unsupported, err = provisioner.ErrFirmwareUpdateUnsupported, nil
		}
		if err != nil {
			return companion.ProvisionerError(ctx, err, "reading the firmware components of host "+req.String())
		}
		if !exists {
			if len(components) == 0 {
				// Nothing to show or update (the BMC reports no versions): look again at the resync.
				return ctrl.Result{RequeueAfter: companion.Jitter(r.Config.Resync)}, nil
			}
			hfc.Spec.Updates = []metal3.FirmwareUpdate{}
			created, err := companion.Create(ctx, r.Client, host, hfc)
			if err != nil || !created {
				return ctrl.Result{RequeueAfter: companion.StaleRetry}, err
			}
		}
		p := patch.NewHelper(r.Client, hfc, &r.written)
		now := r.now()
		list := setStatus(hfc, components, unsupported, now)
		first := p.Snapshot().(*metal3.HostFirmwareComponents).Status.LastUpdated == nil
		if err := companion.WriteStatus(ctx, p, hfc, &hfc.Status.LastUpdated, first, now); err != nil {
			return ctrl.Result{}, err
		}
		list.Emit(r.Recorder, hfc)
		after := r.Config.Resync
		if conditions.IsTrue(hfc.Status.Conditions, string(metal3.HostFirmwareComponentsChangeDetected)) {
			after = r.Config.ChangeResync
		}
		return ctrl.Result{RequeueAfter: companion.Jitter(after)}, nil
	})
}

// noHost marks HostFirmwareComponents a user created under a name no host has: Valid False
// (InvalidComponent) naming metadata.name, and a Warning.
func (r *Reconciler) noHost(ctx context.Context, obj client.Object) error {
	hfc := obj.(*metal3.HostFirmwareComponents)
	p := patch.NewHelper(r.Client, hfc, &r.written)
	list := companion.NoHost(&hfc.Status.Conditions, "HostFirmwareComponents", string(metal3.HostFirmwareComponentsValid),
		metal3.FirmwareComponentsInvalidReason, hfc, r.now())
	if hfc.Status.Updates == nil {
		hfc.Status.Updates = []metal3.FirmwareUpdate{} // required: the first write carries the whole status
	}
	if _, err := p.PatchStatus(ctx, hfc, patch.Replacing(hfc.Status.LastUpdated == nil)); err != nil {
		return err
	}
	list.Emit(r.Recorder, hfc)
	return nil
}

// hostFound takes back noHost's mark once the host exists, registered or not.
func (r *Reconciler) hostFound(ctx context.Context, obj client.Object) error {
	hfc := obj.(*metal3.HostFirmwareComponents)
	p := patch.NewHelper(r.Client, hfc, &r.written)
	if !companion.Unmark(&hfc.Status.Conditions, "HostFirmwareComponents", string(metal3.HostFirmwareComponentsValid), hfc) {
		return nil
	}
	_, err := p.PatchStatus(ctx, hfc)
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
