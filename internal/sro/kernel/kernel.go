// Package kernel reads the kernel a node runs and derives the variables recipes and image
// templates use from it: the patch version (4.18.0-305) and the operating system (rhel8,
// rhel8.4, 8.4), the way the special-resource-operator exposed them.
package kernel

import (
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
)

// OfNode is the kernel a node runs: status.nodeInfo.kernelVersion as the kubelet reports it,
// or, when the kubelet reports none, node-feature-discovery's kernel label. Empty when neither
// says.
func OfNode(n *corev1.Node) string {
	if k := strings.TrimSpace(n.Status.NodeInfo.KernelVersion); k != "" {
		return k
	}
	return n.Labels[sro.NFDKernelLabel]
}

// PatchVersion is the kernel version with the first component of its release:
// 4.18.0-305.10.2.el8_4.x86_64 → 4.18.0-305, 6.8.0-45-generic → 6.8.0-45. A kernel without a
// release part is returned as it is.
func PatchVersion(full string) string {
	version, release, ok := strings.Cut(full, "-")
	if !ok {
		return full
	}
	first, _, _ := strings.Cut(release, ".")
	first, _, _ = strings.Cut(first, "-")
	return version + "-" + first
}

// OS is the operating system a kernel belongs to, in the special-resource-operator's forms.
type OS struct {
	// Major is the distribution and major version: "rhel8".
	Major string
	// MajorMinor adds the minor version when known: "rhel8.4".
	MajorMinor string
	// Decimal is the version alone: "8.4".
	Decimal string
}

// NFD node labels describing the operating system.
const (
	nfdOSID        = "feature.node.kubernetes.io/system-os_release.ID"
	nfdOSMajor     = "feature.node.kubernetes.io/system-os_release.VERSION_ID.major"
	nfdOSMinor     = "feature.node.kubernetes.io/system-os_release.VERSION_ID.minor"
	nfdRHELVersion = "feature.node.kubernetes.io/system-os_release.RHEL_VERSION"
)

// elRelease finds the RHEL release in a kernel release: .el8_4. or .el9.
var elRelease = regexp.MustCompile(`\.el(\d+)(?:_(\d+))?(?:\.|$)`)

// OSOf derives the operating system from node-feature-discovery's labels when a node has them
// (RHCOS nodes report the RHEL version they are built on), else from the kernel's release
// (el8_4 → rhel8.4). Zero when neither says.
func OSOf(full string, nodeLabels map[string]string) OS {
	if os, ok := osFromLabels(nodeLabels); ok {
		return os
	}
	if m := elRelease.FindStringSubmatch(full); m != nil {
		return makeOS("rhel", m[1], m[2])
	}
	return OS{}
}

// OSLabelled: node-feature-discovery's labels on the node say its operating system (OSOf uses
// them rather than the kernel's release, which may lack the minor version).
func OSLabelled(nodeLabels map[string]string) bool {
	_, ok := osFromLabels(nodeLabels)
	return ok
}

func osFromLabels(nodeLabels map[string]string) (OS, bool) {
	id, major, minor := nodeLabels[nfdOSID], nodeLabels[nfdOSMajor], nodeLabels[nfdOSMinor]
	if rhel := nodeLabels[nfdRHELVersion]; rhel != "" && (id == "rhcos" || id == "rhel") {
		id = "rhel"
		major, minor, _ = strings.Cut(rhel, ".")
	}
	if id == "" || major == "" {
		return OS{}, false
	}
	return makeOS(id, major, minor), true
}

func makeOS(id, major, minor string) OS {
	os := OS{Major: id + major, MajorMinor: id + major, Decimal: major}
	if minor != "" {
		os.MajorMinor += "." + minor
		os.Decimal += "." + minor
	}
	return os
}

// MajorMinor cuts a version to its first two components: 4.14.3 → 4.14, v1.37.2 → 1.37.
func MajorMinor(version string) string {
	version = strings.TrimPrefix(version, "v")
	parts := strings.SplitN(version, ".", 3)
	if len(parts) < 2 {
		return version
	}
	return parts[0] + "." + parts[1]
}
