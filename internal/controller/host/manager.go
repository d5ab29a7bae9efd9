package host

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/cacheview"
)

// CacheViews are how the host controller needs the manager to cache what it reads; the binary
// passes them, with every other controller's, to cacheview.Options. Other controllers in the same
// manager read the same reduced copies (see each Reduced).
func CacheViews() []cacheview.View {
	return []cacheview.View{
		{
			Object: &metal3.BareMetalHost{}, Owner: "host controller", Transform: compactHost,
			Reduced: "status.hardware keeps only cpu.arch, hostname and systemVendor.manufacturer/productName (read HardwareData, or the host through the API reader, for the rest)",
		},
		{
			Object: &corev1.Secret{}, Owner: "host controller",
			Label:   labels.SelectorFromSet(labels.Set{metal3.EnvironmentLabel: metal3.EnvironmentLabelValue}),
			Reduced: "only Secrets labelled " + metal3.EnvironmentLabel + "=" + metal3.EnvironmentLabelValue + " are cached (read others through the API reader)",
		},
		{
			// Written, rarely read, and large: caching it would double the memory of every
			// inspected host.
			Object: &metal3.HardwareData{}, Owner: "host controller", Uncached: true,
			Reduced: "not cached: every read goes to the API server",
		},
	}
}

// compactHost strips what the controllers never read from cached hosts: the inspected hardware in
// status (deprecated; HardwareData has it) down to the CPU architecture, the hostname and the
// system's vendor and model (the HostFirmwareSettings controller names a FirmwareSchema's hardware
// with them). Real
// hardware details (hundreds of CPU flags, dozens of NICs and disks) are most of a host's size.
// patchStatus replaces status.hardware whole whenever a handler changes it, so the compacted copy
// never reaches the API server. (cacheview strips managedFields first.)
func compactHost(obj any) (any, error) {
	if h, ok := obj.(*metal3.BareMetalHost); ok && h.Status.HardwareDetails != nil {
		h.Status.HardwareDetails = compactHardware(h.Status.HardwareDetails)
	}
	return obj, nil
}

func compactHardware(hw *metal3.HardwareDetails) *metal3.HardwareDetails {
	return &metal3.HardwareDetails{CPU: metal3.CPU{Arch: hw.CPU.Arch}, Hostname: hw.Hostname,
		SystemVendor: metal3.HardwareSystemVendor{Manufacturer: hw.SystemVendor.Manufacturer, ProductName: hw.SystemVendor.ProductName}}
}
