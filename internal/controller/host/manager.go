package host

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

// CacheOptions are the manager cache settings the controller is designed for: managedFields
// stripped from every cached object, Secrets cached only when labelled
// environment.metal3.io=baremetal, and the watched namespaces (none = all).
func CacheOptions(namespaces []string) cache.Options {
	opts := cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {Label: labels.SelectorFromSet(labels.Set{metal3.EnvironmentLabel: metal3.EnvironmentLabelValue})},
		},
	}
	if len(namespaces) > 0 {
		opts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return opts
}

// ClientOptions keep HardwareData out of the cache: it is written, rarely read, and large.
func ClientOptions() client.Options {
	return client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&metal3.HardwareData{}}}}
}
