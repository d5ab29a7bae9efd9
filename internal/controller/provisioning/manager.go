package provisioning

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/provisioning/render"
	"github.com/metalforge/metalforge/internal/controller/provisioning/secrets"
)

// CacheOptions keep the operator's cache small: namespaced objects from its namespace only, the
// Secrets it made and its Deployments' pods only (labelled; the namespace also holds every host's
// BMC credentials), the metal3-state Service's EndpointSlices only (where the metal3 pod runs), and
// of the hosts (from every namespace: watchAllNamespaces may be switched on) only what tells whether
// they are busy. Of the cluster's configuration namespace it holds one Secret, the cluster's pull
// secret, selected by name: the controller reads it from here and its watch wakes the controller
// when it changes, and the operator's Role there grants that one name only (a list or watch with
// a metadata.name field selector is authorized by name).
func CacheOptions(namespace string) cache.Options {
	componentLabel, _ := labels.NewRequirement(render.ComponentLabel, selection.Exists, nil)
	return cache.Options{
		DefaultTransform:  cache.TransformStripManagedFields(),
		DefaultNamespaces: map[string]cache.Config{namespace: {}},
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {Namespaces: map[string]cache.Config{
				namespace:                          {LabelSelector: labels.NewSelector().Add(*componentLabel)},
				secrets.ClusterPullSecretNamespace: {FieldSelector: fields.OneTermEqualSelector("metadata.name", secrets.ClusterPullSecretName)},
			}},
			// Only the stack's pods: whether a container crash-loops.
			&corev1.Pod{}: {Label: labels.NewSelector().Add(*componentLabel)},
			// Only the metal3 pod's endpoints: where Ironic runs.
			&discoveryv1.EndpointSlice{}: {Label: labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: render.StateService})},
			&metal3.BareMetalHost{}: {
				Namespaces: map[string]cache.Config{cache.AllNamespaces: {}},
				Transform:  busyOnly,
			},
		},
	}
}

// busyOnly keeps of a host what busyOperation reads.
func busyOnly(obj any) (any, error) {
	h, ok := obj.(*metal3.BareMetalHost)
	if !ok {
		return obj, nil
	}
	out := &metal3.BareMetalHost{}
	out.ObjectMeta = *h.ObjectMeta.DeepCopy()
	out.ManagedFields, out.Annotations = nil, nil
	out.Status.OperationalStatus = h.Status.OperationalStatus
	out.Status.Provisioning.State = h.Status.Provisioning.State
	return out, nil
}
