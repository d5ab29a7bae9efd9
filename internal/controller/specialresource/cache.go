package specialresource

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
)

// CacheOptions are the manager cache settings the operator is designed for: every kind is
// cached only when labelled specialresource.openshift.io/owned (what the operator created; so
// the operator never caches every DaemonSet, ConfigMap, Secret or pod of the cluster), except
// the kinds it reads whole: Nodes (compacted to what it reads), SpecialResources,
// PreflightValidations and Namespaces. (The ClusterOperator, which may not exist as a kind, is
// read directly.)
func CacheOptions() cache.Options {
	owned, err := labels.NewRequirement(sro.OwnedLabel, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant label key
	}
	all := cache.ByObject{Label: labels.Everything()}
	return cache.Options{
		DefaultTransform:     cache.TransformStripManagedFields(),
		DefaultLabelSelector: labels.NewSelector().Add(*owned),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Node{}:             {Label: labels.Everything(), Transform: compactNode},
			&sro.SpecialResource{}:     all,
			&sro.PreflightValidation{}: all,
			&corev1.Namespace{}:        all,
		},
	}
}

// ClientOptions read unstructured objects (recipe kinds the scheme does not know) from the cache
// too, instead of from the API server on every reconcile.
func ClientOptions() client.Options {
	return client.Options{Cache: &client.CacheOptions{Unstructured: true}}
}

// compactNode keeps what the operator reads of a node: name, labels, and the kernel and OS it
// reports. A real node's status (images, conditions, addresses) is most of its size.
func compactNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	return &corev1.Node{
		TypeMeta: n.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion, Generation: n.Generation,
			Labels: n.Labels, CreationTimestamp: n.CreationTimestamp, DeletionTimestamp: n.DeletionTimestamp},
		Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KernelVersion: n.Status.NodeInfo.KernelVersion,
			OSImage: n.Status.NodeInfo.OSImage, BootID: n.Status.NodeInfo.BootID}},
	}, nil
}
