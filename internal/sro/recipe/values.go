package recipe

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/template"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/sro/kernel"
)

// Values are the variables templates see (the special-resource-operator's runtime information,
// under its names). Kernel fields are empty when a manifest is not kernel-affine.
type Values struct {
	// KernelFullVersion is the kernel as the node reports it: 5.14.0-284.30.1.el9_2.x86_64.
	KernelFullVersion string
	// KernelVersion is KernelFullVersion (the seed's examples use this name).
	KernelVersion string
	// KernelPatchVersion is 5.14.0-284.
	KernelPatchVersion string
	// OperatingSystemMajor is rhel9; OperatingSystemMajorMinor rhel9.2; OperatingSystemDecimal 9.2.
	OperatingSystemMajor      string
	OperatingSystemMajorMinor string
	OperatingSystemDecimal    string
	// ClusterVersion is the OpenShift version (ClusterVersion "version"), or on other clusters
	// the Kubernetes version; ClusterVersionMajorMinor its first two components.
	ClusterVersion           string
	ClusterVersionMajorMinor string
	// Namespace is the SpecialResource's namespace (spec.namespace or its default).
	Namespace string
	// Image is the driver image for this kernel (empty when not kernel-affine).
	Image string
	// DriverHash changes whenever version, buildArgs, runArgs or modules change; the built-in
	// recipe puts it on its pod template so that the driver rolls out again.
	DriverHash string
	// PushSecretName is spec.driverContainer.pullSecret.
	PushSecretName string
	// SpecialResource is the SpecialResource, its strings rendered by the first pass.
	SpecialResource *sro.SpecialResource
	// Dependencies are the dependsOn SpecialResources, by name.
	Dependencies map[string]Dependency
}

// Dependency is what templates see of a dependsOn SpecialResource.
type Dependency struct {
	// Namespace of the dependency.
	Namespace string
	// Image is the dependency's driver image for this kernel (when imageReference is "true").
	Image string
}

// WithKernel returns v with the variables of kernel k: its versions, and its operating system
// from node-feature-discovery's labels of one of its nodes (nodeLabels, when known) or else from
// the kernel's release.
func WithKernel(v Values, k string, nodeLabels map[string]string) Values {
	os := kernel.OSOf(k, nodeLabels)
	v.KernelFullVersion, v.KernelVersion, v.KernelPatchVersion = k, k, kernel.PatchVersion(k)
	v.OperatingSystemMajor, v.OperatingSystemMajorMinor, v.OperatingSystemDecimal = os.Major, os.MajorMinor, os.Decimal
	return v
}

// Funcs are the functions templates may call besides text/template's built-ins. quote and toJson
// write JSON, which is valid YAML, so values with colons or quotes stay one scalar.
func Funcs() template.FuncMap {
	return template.FuncMap{
		"quote":      quote,
		"toJson":     toJSON,
		"join":       func(sep string, s []string) string { return strings.Join(s, sep) },
		"lower":      strings.ToLower,
		"upper":      strings.ToUpper,
		"replace":    func(old, new, s string) string { return strings.ReplaceAll(s, old, new) },
		"trimPrefix": func(prefix, s string) string { return strings.TrimPrefix(s, prefix) },
		"trimSuffix": func(suffix, s string) string { return strings.TrimSuffix(s, suffix) },
		"default": func(def string, v string) string {
			if v == "" {
				return def
			}
			return v
		},
	}
}

func quote(v any) string {
	b, _ := json.Marshal(fmt.Sprint(v))
	return string(b)
}

func toJSON(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("toJson: %w", err)
	}
	return string(b), nil
}

// Sample are values of the right shape for checking that a template renders (the webhook has no
// node to take a kernel from).
func Sample(sr *sro.SpecialResource) Values {
	const k = "5.14.0-284.30.1.el9_2.x86_64"
	deps := map[string]Dependency{}
	for _, d := range sr.Spec.DependsOn {
		deps[d.Name] = Dependency{Namespace: d.Name, Image: "registry.example/dependency:" + k}
	}
	return Values{
		KernelFullVersion: k, KernelVersion: k, KernelPatchVersion: "5.14.0-284",
		OperatingSystemMajor: "rhel9", OperatingSystemMajorMinor: "rhel9.2", OperatingSystemDecimal: "9.2",
		ClusterVersion: "4.14.0", ClusterVersionMajorMinor: "4.14",
		Namespace: sr.TargetNamespace(), Image: "registry.example/driver:" + k, DriverHash: "0",
		PushSecretName: sr.Spec.DriverContainer.PullSecret, SpecialResource: sr, Dependencies: deps,
	}
}
