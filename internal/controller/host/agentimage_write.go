package host

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner"
)

// The driver's side of the host's PreprovisioningImage: it is read from the manager's cache
// before the handlers run, and written (created, updated, deleted) after them, as planImage
// decided. With the image controller in the same manager both read one cache of images.

// loadAgentImage reads what the handlers need to know about the host's image: the formats the
// provisioner boots on the host's BMC (nil without --build-preprov-image, or while the BMC
// details are bad), and the image itself.
func (r *Reconciler) loadAgentImage(ctx context.Context, s *hostScope) error {
	if !r.Config.PreprovisioningImages {
		return nil
	}
	h := s.host
	key := types.NamespacedName{Namespace: h.Namespace, Name: h.Name}
	ppi := &metal3.PreprovisioningImage{}
	switch err := r.Client.Get(ctx, key, ppi); {
	case apierrors.IsNotFound(err):
		ppi = nil
	case err != nil:
		return fmt.Errorf("reading the PreprovisioningImage of host %s: %w", key, err)
	}
	ppi, err := r.images.current(ctx, key, ppi, r.APIReader)
	if err != nil {
		return err
	}
	s.in.image = ppi
	s.in.imageCreateRefused = r.refusals.has(h.UID)
	if s.in.bmcErr != nil || !h.HasBMCDetails() {
		return nil
	}
	formats, err := r.Provisioner.PreprovisioningImageFormats(provisioner.Host{Namespace: h.Namespace, Name: h.Name, BMCAddress: h.Spec.BMC.Address})
	if err != nil {
		return fmt.Errorf("asking the provisioner which image formats host %s/%s boots: %w", h.Namespace, h.Name, err)
	}
	s.in.imageFormats = formats
	return nil
}

// writeImage creates or updates the host's image. It runs before the status write, which may say
// that the host waits for the image. An image the cache had not seen yet is already there: the
// next reconcile reads it.
func (r *Reconciler) writeImage(ctx context.Context, w imageWrite) error {
	log := ctrl.LoggerFrom(ctx)
	switch {
	case w.create != nil:
		log.V(1).Info("Creating the host's PreprovisioningImage", "spec", w.create.Spec)
		err := r.Client.Create(ctx, w.create)
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating PreprovisioningImage %s/%s: %w", w.create.Namespace, w.create.Name, err)
		}
		if err == nil {
			r.images.wrote(w.create)
		}
	case w.update != nil:
		log.V(1).Info("Updating the host's PreprovisioningImage", "spec", w.update.Spec)
		// Optimistic: the labels and owner references are lists and maps others may change too.
		patch := client.MergeFromWithOptions(w.before, client.MergeFromWithOptimisticLock{})
		if err := r.Client.Patch(ctx, w.update, patch); err != nil {
			return fmt.Errorf("updating PreprovisioningImage %s/%s: %w", w.update.Namespace, w.update.Name, err)
		}
		r.images.wrote(w.update)
	}
	return nil
}

// imageCreateRefusal handles a failed create of the image of a deleting host: the API server
// refuses every create in a namespace being deleted, so a host whose cleaning needs an image it
// no longer has (deleted once the host was provisioned) would fail the same way at every
// reconcile, before its status write, and its finalizer would hold the namespace for ever. The
// refusal is remembered instead and shown as the image's error (imageCheck), which lets a
// deleting host go on without cleaning (imageFailed). Any other error is returned.
func (r *Reconciler) imageCreateRefusal(s *hostScope, err error) error {
	if !s.deleting() || s.fx.image.create == nil || !apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		return err
	}
	ctrl.LoggerFrom(s.ctx).Info("The host's namespace is being deleted: going on without its PreprovisioningImage", "error", err.Error())
	r.refusals.add(s.host.UID)
	s.fx.imageCreateRefused = true
	return nil
}

// imageRefusals remembers the deleting hosts whose image the API server refused to create because
// their namespace is being deleted (by host UID, memory only: after a restart the next create is
// refused again and remembered again).
type imageRefusals struct {
	m sync.Map // types.UID → struct{}
}

func (m *imageRefusals) add(uid types.UID) { m.m.Store(uid, struct{}{}) }

func (m *imageRefusals) has(uid types.UID) bool {
	_, ok := m.m.Load(uid)
	return ok
}

func (m *imageRefusals) forget(uid types.UID) { m.m.Delete(uid) }

// deleteImage deletes the host's image (that exact object: a new one of the same name is not
// ours to delete). It runs after the status write: should that fail, the state that needed the
// image finds it still there.
func (r *Reconciler) deleteImage(ctx context.Context, ppi *metal3.PreprovisioningImage) error {
	ctrl.LoggerFrom(ctx).V(1).Info("Deleting the host's PreprovisioningImage")
	if err := r.dropHostFinalizer(ctx, ppi); err != nil {
		return err
	}
	uid := ppi.UID
	if err := r.Client.Delete(ctx, ppi, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting PreprovisioningImage %s/%s: %w", ppi.Namespace, ppi.Name, err)
	}
	r.images.deleted(ppi)
	return nil
}

// imageMemory remembers, per host, the image as this controller last wrote it, or that it
// deleted it, until the cache shows that write. The images' informer is not the hosts': a
// reconcile that starts before it delivered our write (woken by a Secret, or by the host's own
// status) would create, update or delete the image again, an API write for nothing.
type imageMemory struct {
	mu sync.Mutex
	m  map[types.NamespacedName]writtenImage
}

type writtenImage struct {
	obj        *metal3.PreprovisioningImage // created or updated
	deletedUID types.UID                    // deleted
}

func (m *imageMemory) wrote(ppi *metal3.PreprovisioningImage) {
	m.set(client.ObjectKeyFromObject(ppi), writtenImage{obj: ppi.DeepCopy()})
}

func (m *imageMemory) deleted(ppi *metal3.PreprovisioningImage) {
	m.set(client.ObjectKeyFromObject(ppi), writtenImage{deletedUID: ppi.UID})
}

func (m *imageMemory) set(key types.NamespacedName, w writtenImage) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = map[types.NamespacedName]writtenImage{}
	}
	m.m[key] = w
}

func (m *imageMemory) forget(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.m, key)
}

// current is the image to work from: the cached copy, unless our last write is newer. An image
// we created that the cache does not show yet is read from the API server (someone may have
// deleted it since).
func (m *imageMemory) current(ctx context.Context, key types.NamespacedName, cached *metal3.PreprovisioningImage, reader client.Reader) (*metal3.PreprovisioningImage, error) {
	m.mu.Lock()
	w, ok := m.m[key]
	m.mu.Unlock()
	switch {
	case !ok:
		return cached, nil
	case w.deletedUID != "":
		if cached != nil && cached.UID == w.deletedUID {
			return nil, nil // deleted; the cache has not heard yet
		}
	case cached != nil && (cached.UID != w.obj.UID || !olderThan(cached, w.obj)):
		// The cache caught up (or the image was replaced): the memory is not needed any more.
	case cached != nil:
		return w.obj, nil
	default:
		live := &metal3.PreprovisioningImage{}
		if err := reader.Get(ctx, key, live); apierrors.IsNotFound(err) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("reading PreprovisioningImage %s: %w", key, err)
		}
		return live, nil
	}
	m.forget(key)
	return cached, nil
}

// olderThan compares resourceVersions as numbers (etcd revisions); unparsable ones are not older.
func olderThan(a, b *metal3.PreprovisioningImage) bool {
	va, errA := strconv.ParseUint(a.ResourceVersion, 10, 64)
	vb, errB := strconv.ParseUint(b.ResourceVersion, 10, 64)
	return errA == nil && errB == nil && va < vb
}

// releaseImage deletes the image of a host whose finalizer goes (normally deleting did already).
func (r *Reconciler) releaseImage(ctx context.Context, h *metal3.BareMetalHost) error {
	if !r.Config.PreprovisioningImages {
		return nil
	}
	ppi := &metal3.PreprovisioningImage{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: h.Namespace, Name: h.Name}, ppi); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("reading the PreprovisioningImage of host %s/%s: %w", h.Namespace, h.Name, err)
	}
	if !controlledBy(ppi, h) {
		return nil
	}
	if !ppi.DeletionTimestamp.IsZero() {
		return r.dropHostFinalizer(ctx, ppi)
	}
	return r.deleteImage(ctx, ppi)
}

// dropHostFinalizer removes metal3's host finalizer (HostPreprovisioningImageFinalizer) from an
// image the host is done with. This operator never adds it, but a metal3 baremetal-operator that
// ran before it (a cluster moved over from OpenShift's stack) put it on every image it made, and
// removes it itself once it deleted the image: left there, the image stayed Terminating for ever,
// the host waited for a new one that could not be created (the old name still taken) and a
// deleting host's cleaning never started.
func (r *Reconciler) dropHostFinalizer(ctx context.Context, ppi *metal3.PreprovisioningImage) error {
	if !slices.Contains(ppi.Finalizers, metal3.HostPreprovisioningImageFinalizer) {
		return nil
	}
	next := withoutHostFinalizer(ppi)
	if err := r.Client.Patch(ctx, next, client.MergeFromWithOptions(ppi, client.MergeFromWithOptimisticLock{})); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing finalizer %s from PreprovisioningImage %s/%s: %w", metal3.HostPreprovisioningImageFinalizer,
			ppi.Namespace, ppi.Name, err)
	}
	return nil
}

// imageChanged wakes a host when its image's status changes (built, failed, rebuilt), when the
// image is being deleted or is gone. Not on create or spec changes: those are the host's own
// writes.
func imageChanged() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc: func(ctrlevent.CreateEvent) bool { return false },
		UpdateFunc: func(e ctrlevent.UpdateEvent) bool {
			o, okO := e.ObjectOld.(*metal3.PreprovisioningImage)
			n, okN := e.ObjectNew.(*metal3.PreprovisioningImage)
			return !okO || !okN || !reflect.DeepEqual(o.Status, n.Status) || !n.DeletionTimestamp.Equal(o.DeletionTimestamp)
		},
		DeleteFunc:  func(ctrlevent.DeleteEvent) bool { return true },
		GenericFunc: func(ctrlevent.GenericEvent) bool { return false },
	}
}
