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
			&corev1.Secret{}:        {Label: labels.SelectorFromSet(labels.Set{metal3.EnvironmentLabel: metal3.EnvironmentLabelValue})},
			&metal3.BareMetalHost{}: {Transform: compactHost},
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

// compactHost strips what the controller never reads from cached hosts: managedFields, and the
// inspected hardware in status (deprecated; HardwareData has it) down to the CPU architecture. Real
// hardware details (hundreds of CPU flags, dozens of NICs and disks) are most of a host's size.
// patchStatus replaces status.hardware whole whenever a handler changes it, so the compacted copy
// never reaches the API server.
func compactHost(obj any) (any, error) {
	obj, err := cache.TransformStripManagedFields()(obj)
	if h, ok := obj.(*metal3.BareMetalHost); ok && h.Status.HardwareDetails != nil {
		h.Status.HardwareDetails = compactHardware(h.Status.HardwareDetails)
	}
	return obj, err
}

func compactHardware(hw *metal3.HardwareDetails) *metal3.HardwareDetails {
	return &metal3.HardwareDetails{CPU: metal3.CPU{Arch: hw.CPU.Arch}, Hostname: hw.Hostname}
}

// ClientOptions keep HardwareData out of the cache: it is written, rarely read, and large.
func ClientOptions() client.Options {
	return client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&metal3.HardwareData{}}}}
}
