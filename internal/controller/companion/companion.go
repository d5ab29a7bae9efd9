// Package companion holds what the controllers of a host's companion objects share: the objects
// that carry a BareMetalHost's name in its namespace, belong to it and describe one side of it
// (HostFirmwareSettings, HostFirmwareComponents). Each of those controllers is keyed by the host's
// name, works only while the host is registered with the provisioner, is woken by the host's
// changes that matter to it, creates its object owned by the host, and backs off the same way when
// the provisioner cannot answer.
package companion

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner"
)

// registeredStates are the states in which the provisioner has a node for the host that it
// manages: past registration (the BMC answered, Ironic read the BIOS and firmware), and not on the
// way out of the provisioner.
var registeredStates = map[metal3.ProvisioningState]bool{
	metal3.StateInspecting: true, metal3.StateMatchProfile: true, metal3.StatePreparing: true,
	metal3.StateReady: true, metal3.StateAvailable: true, metal3.StateProvisioning: true,
	metal3.StateProvisioned: true, metal3.StateExternallyProvisioned: true, metal3.StateDeprovisioning: true,
}

// Registered reports whether the provisioner can answer about the host now: it has the host's node
// (registered, not detached) and the host is neither paused nor being deleted.
func Registered(h *metal3.BareMetalHost) bool {
	if h.Status.Provisioning.ID == "" || !registeredStates[h.Status.Provisioning.State] || !h.DeletionTimestamp.IsZero() ||
		h.Status.OperationalStatus == metal3.OperationalStatusDetached {
		return false
	}
	_, detached := h.Annotations[metal3.DetachedAnnotation]
	return !Paused(h) && !detached
}

// Paused: the paused annotation stops every controller's work on the host (any value; CAPM3
// writes its name there).
func Paused(h *metal3.BareMetalHost) bool {
	_, ok := h.Annotations[metal3.PausedAnnotation]
	return ok
}

// IsRebootAnnotation: key is reboot.metal3.io or reboot.metal3.io/<owner>.
func IsRebootAnnotation(key string) bool {
	return key == metal3.RebootAnnotationPrefix || strings.HasPrefix(key, metal3.RebootAnnotationPrefix+"/")
}

// HasRebootAnnotation: any reboot annotation is on the host.
func HasRebootAnnotation(h *metal3.BareMetalHost) bool {
	for key := range h.Annotations {
		if IsRebootAnnotation(key) {
			return true
		}
	}
	return false
}

// Applying reports whether the provisioner may be applying firmware changes to the host now:
// preparing (manual cleaning), or a live update running or failed (servicing, servicing error).
// Ironic's copy of the settings moves step by step during those (the BIOS step's values show while
// the firmware step still runs); a companion that published them then would shrink the host's
// request mid-way, and the provisioner would take the smaller request for a new one and run it
// again. A failed live update is retried (after its backoff, counted) with the request it failed
// with: shrunk by a partial failure's values, it would look changed by the user and be started
// again at once, its failures no longer counted.
func Applying(h *metal3.BareMetalHost) bool {
	return h.Status.Provisioning.State == metal3.StatePreparing || h.Status.OperationalStatus == metal3.OperationalStatusServicing ||
		h.Status.ErrorType == metal3.ServicingError
}

// ProvisionerHost is the provisioner's view of the host for reading its firmware: its node.
func ProvisionerHost(h *metal3.BareMetalHost) provisioner.Host {
	return provisioner.Host{Namespace: h.Namespace, Name: h.Name, NodeID: h.Status.Provisioning.ID, BMCAddress: h.Spec.BMC.Address,
		State: h.Status.Provisioning.State, OperationalStatus: h.Status.OperationalStatus}
}

// HostChanges passes the host events after which a companion may read something new from the
// provisioner: the host appearing (and every host when the operator starts), becoming registered
// or not (paused, unpaused, detached, attached, deleted), registered again on a new node (Ironic
// lost its node; a new node's values are read anew by Ironic), and leaving the two steps that change
// firmware: preparing (manual cleaning applies settings and updates) and servicing. Every other
// host change (the other state moves, power polls, spec edits) waits for the periodic re-read: at
// a thousand hosts each wake costs every companion a provisioner read, and Ironic's own copy of
// the settings and versions only changes at those steps. Waking on every state change cost about
// 12 Ironic requests per host per lifecycle in `make bench-ironic` (README). The host's removal
// passes too (it costs no provisioner read): a user's companion left under its name is marked.
func HostChanges() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc:  func(ctrlevent.CreateEvent) bool { return true },
		DeleteFunc:  func(ctrlevent.DeleteEvent) bool { return true },
		GenericFunc: func(ctrlevent.GenericEvent) bool { return false },
		UpdateFunc: func(e ctrlevent.UpdateEvent) bool {
			o, okO := e.ObjectOld.(*metal3.BareMetalHost)
			n, okN := e.ObjectNew.(*metal3.BareMetalHost)
			if !okO || !okN {
				return false
			}
			return hostChangeMatters(o, n)
		},
	}
}

// hostChangeMatters is HostChanges' rule for an update from o to n.
func hostChangeMatters(o, n *metal3.BareMetalHost) bool {
	left := func(was, is, step string) bool { return was == step && is != step }
	return Registered(o) != Registered(n) ||
		o.Status.Provisioning.ID != n.Status.Provisioning.ID ||
		left(string(o.Status.Provisioning.State), string(n.Status.Provisioning.State), string(metal3.StatePreparing)) ||
		(Applying(o) && !Applying(n))
}

// ProvisionerRetry is how long a companion waits when the provisioner cannot answer now.
const ProvisionerRetry = 30 * time.Second

// ProvisionerError turns an error reading from the provisioner into the reconcile's result: a
// provisioner that is unavailable or lost the node is waited for (the host controller registers
// the host again), anything else is returned.
func ProvisionerError(ctx context.Context, err error, doing string) (ctrl.Result, error) {
	if errors.Is(err, provisioner.ErrUnavailable) || errors.Is(err, provisioner.ErrNeedsRegistration) {
		ctrl.LoggerFrom(ctx).V(1).Info("The provisioner cannot answer yet", "doing", doing, "reason", err.Error())
		return ctrl.Result{RequeueAfter: ProvisionerRetry}, nil
	}
	return ctrl.Result{}, fmt.Errorf("%s: %w", doing, err)
}

// Create creates obj (named and placed like the host) with the host as its controlling owner, so
// that deleting the host deletes it. It reports false when it exists already (created by the user,
// or by this controller in a reconcile whose write the cache does not show yet): the caller looks
// again on the next reconcile.
func Create(ctx context.Context, c client.Client, host *metal3.BareMetalHost, obj client.Object) (bool, error) {
	obj.SetName(host.Name)
	obj.SetNamespace(host.Namespace)
	obj.SetOwnerReferences([]metav1.OwnerReference{*metav1.NewControllerRef(host, metal3.GroupVersion.WithKind("BareMetalHost"))})
	err := c.Create(ctx, obj)
	if apierrors.IsAlreadyExists(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("creating %T %s/%s: %w", obj, host.Namespace, host.Name, err)
	}
	return true, nil
}

// StaleRetry is how soon a companion looks again when the cache does not show its last write yet.
const StaleRetry = 200 * time.Millisecond

// Jitter spreads periodic re-reads (up to 10 % later), so that hosts created together do not all
// ask the provisioner in the same second every few minutes.
func Jitter(d time.Duration) time.Duration {
	return d + time.Duration(rand.Int64N(int64(d)/10+1)) //nolint:gosec // spreading load, not security
}

// EditedOrDeleted passes a companion's spec edits and its deletion. A companion deleted by hand
// while its host is registered is created again at once, not at the next periodic re-read (its
// spec is lost with it; status is read again from the provisioner); when the host itself is deleted the reconcile
// finds the host gone or going and does nothing. Its creation by a controller is followed through
// the host's events and the resync, and the controller's own status writes must not wake it; a
// user's creation (no owner) is passed, so that a name matching no host is said at once.
func EditedOrDeleted() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc:  func(e ctrlevent.CreateEvent) bool { return !OwnedByHost(e.Object) },
		DeleteFunc:  func(ctrlevent.DeleteEvent) bool { return true },
		GenericFunc: func(ctrlevent.GenericEvent) bool { return false },
		UpdateFunc: func(e ctrlevent.UpdateEvent) bool {
			return e.ObjectNew.GetGeneration() != e.ObjectOld.GetGeneration()
		},
	}
}
