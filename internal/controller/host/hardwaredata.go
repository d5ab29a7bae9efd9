package host

import (
	"context"
	"fmt"
	"reflect"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

// HardwareData is not cached by the operator (it would double the memory of every inspected
// host): it is created with its owner reference and finalizer in one request, and read through
// the API reader only when that create finds one already there.

// writeHardwareData creates or updates the host's HardwareData.
func (r *Reconciler) writeHardwareData(ctx context.Context, host *metal3.BareMetalHost, hw *metal3.HardwareDetails) error {
	hd := &metal3.HardwareData{
		ObjectMeta: metav1.ObjectMeta{
			Name:            host.Name,
			Namespace:       host.Namespace,
			Finalizers:      []string{metal3.HardwareDataFinalizer},
			OwnerReferences: []metav1.OwnerReference{ownerRef(host)},
		},
		Spec: metal3.HardwareDataSpec{HardwareDetails: hw.DeepCopy()},
	}
	err := r.Client.Create(ctx, hd)
	if err == nil || !apierrors.IsAlreadyExists(err) {
		if err != nil {
			return fmt.Errorf("creating hardware data %s/%s: %w", host.Namespace, host.Name, err)
		}
		return nil
	}
	existing := &metal3.HardwareData{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(hd), existing); err != nil {
		return fmt.Errorf("reading hardware data %s/%s: %w", host.Namespace, host.Name, err)
	}
	want := existing.DeepCopy()
	want.Spec = hd.Spec
	want.OwnerReferences = hd.OwnerReferences
	controllerutil.AddFinalizer(want, metal3.HardwareDataFinalizer)
	if reflect.DeepEqual(want, existing) {
		return nil
	}
	if err := r.Client.Update(ctx, want); err != nil {
		return fmt.Errorf("updating hardware data %s/%s: %w", host.Namespace, host.Name, err)
	}
	return nil
}

// deleteHardwareData removes the host's HardwareData: its finalizer first, then the object.
func (r *Reconciler) deleteHardwareData(ctx context.Context, host *metal3.BareMetalHost) error {
	hd := &metal3.HardwareData{}
	key := types.NamespacedName{Namespace: host.Namespace, Name: host.Name}
	if err := r.APIReader.Get(ctx, key, hd); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("reading hardware data %s: %w", key, err)
	}
	if !ownedBy(hd.OwnerReferences, host) {
		return nil // not ours (a new host of the same name may own it)
	}
	if controllerutil.ContainsFinalizer(hd, metal3.HardwareDataFinalizer) {
		patch := client.MergeFromWithOptions(hd.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.RemoveFinalizer(hd, metal3.HardwareDataFinalizer)
		if err := r.Client.Patch(ctx, hd, patch); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("releasing hardware data %s: %w", key, err)
		}
	}
	if err := r.Client.Delete(ctx, hd); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting hardware data %s: %w", key, err)
	}
	return nil
}

// loadHardwareData returns the host's HardwareData details (status restore: they win over the
// annotation's copy), nil when there is none.
func (r *Reconciler) loadHardwareData(ctx context.Context, host *metal3.BareMetalHost) (*metal3.HardwareDetails, error) {
	hd := &metal3.HardwareData{}
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: host.Namespace, Name: host.Name}, hd)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading hardware data %s/%s: %w", host.Namespace, host.Name, err)
	}
	return hd.Spec.HardwareDetails, nil
}

func ownerRef(host *metal3.BareMetalHost) metav1.OwnerReference {
	yes := true
	return metav1.OwnerReference{
		APIVersion: metal3.GroupVersion.String(), Kind: "BareMetalHost",
		Name: host.Name, UID: host.UID, Controller: &yes, BlockOwnerDeletion: &yes,
	}
}

func ownedBy(refs []metav1.OwnerReference, host *metal3.BareMetalHost) bool {
	for _, r := range refs {
		if r.UID == host.UID {
			return true
		}
	}
	return len(refs) == 0
}
