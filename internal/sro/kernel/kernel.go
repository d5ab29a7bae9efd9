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
	// nfdKernelFull is the kernel node-feature-discovery saw when it last labelled the node.
	nfdKernelFull = "feature.node.kubernetes.io/kernel-version.full"
)

// osLabels are the labels OSOf reads, a change of which changes what templates render with.
var osLabels = []string{nfdOSID, nfdOSMajor, nfdOSMinor, nfdRHELVersion, nfdKernelFull}

// OSLabelsChanged: a change between two label sets of a node that can change its OSOf.
func OSLabelsChanged(before, after map[string]string) bool {
	for _, l := range osLabels {
		if before[l] != after[l] {
			return true
		}
	}
	return false
}

// elRelease finds the RHEL release in a kernel release: .el8_4. or .el9.
var elRelease = regexp.MustCompile(`\.el(\d+)(?:_(\d+))?(?:\.|$)`)

// OSOf derives the operating system from node-feature-discovery's labels when a node has them
// for kernel full (RHCOS nodes report the RHEL version they are built on), else from the kernel's
// release (el8_4 → rhel8.4). Zero when neither says. Labels NFD wrote for another kernel are
// stale: a node rebooted into an upgrade reports its new kernel at once, while its OS labels stay
// those of the release it left until NFD's worker runs again (rhel9.2 rendered for an el9_4
// kernel: the wrong image, or a build with the wrong arguments).
func OSOf(full string, nodeLabels map[string]string) OS {
	if os, ok := osFromLabelsFor(full, nodeLabels); ok {
		return os
	}
	if m := elRelease.FindStringSubmatch(full); m != nil {
		return makeOS("rhel", m[1], m[2])
	}
	return OS{}
}

// OSLabelled: node-feature-discovery's labels on the node say its operating system for kernel
// full (OSOf uses them rather than the kernel's release, which may lack the minor version).
func OSLabelled(full string, nodeLabels map[string]string) bool {
	_, ok := osFromLabelsFor(full, nodeLabels)
	return ok
}

// osFromLabelsFor reads the labels unless NFD wrote them for another kernel than full and full
// names its own release (el9_4): then the kernel's release says it better than labels of the
// release the node left. A kernel naming none (Ubuntu, Debian) keeps the labels, stale or not:
// an upgrade within a release is the usual case, and without them the OS variables render empty
// (the preflight of such a kernel reads the labels of nodes still on the old one). Without NFD's
// kernel label (NFD configured without its kernel source) the labels are taken as they are.
func osFromLabelsFor(full string, nodeLabels map[string]string) (OS, bool) {
	if k := nodeLabels[nfdKernelFull]; k != "" && k != full && elRelease.MatchString(full) {
		return OS{}, false
	}
	return osFromLabels(nodeLabels)
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

// OSSourceBefore says whether node a rather than node b of one kernel gives the operating-system
// values (OSOf) its templates render with. The cache lists nodes in no particular order: taking
// the first listed let the values (and the images and objects rendered from them) flip between
// reconciles when a node of the same kernel had no node-feature-discovery labels yet. A labelled
// node comes first (its labels name the minor release the kernel may not), then the first by
// name; the SpecialResource controller and the preflight check choose alike.
func OSSourceBefore(full, a string, aLabels map[string]string, b string, bLabels map[string]string) bool {
	if la, lb := OSLabelled(full, aLabels), OSLabelled(full, bLabels); la != lb {
		return la
	}
	return a < b
}

// Labelled is a node as the operating-system choice sees it.
type Labelled struct {
	Name   string
	Kernel string
	Labels map[string]string
}

// UpgradeOSLabels are the node labels OSOf takes the operating system of kernel k from when the
// nodes do not all run it yet (a preflight check before an upgrade), among the nodes given (those
// a SpecialResource selects):
//   - a node that runs k already: the labels the SpecialResource controller renders k with
//     (OSSourceBefore);
//   - else none when k's release names its operating system (el9_2: RHEL and RHCOS kernels), as
//     nothing in the nodes' labels can say the upgrade's better;
//   - else the labels of a node reporting the operating system the labelled nodes agree on: an
//     upgrade keeps the distribution (an Ubuntu or Debian kernel names none), and without them
//     the operating system variables render empty where the nodes will fill them in;
//   - else none (no node labelled, or the nodes disagree: no guess).
func UpgradeOSLabels(k string, nodes []Labelled) map[string]string {
	var running *Labelled
	for i := range nodes {
		n := &nodes[i]
		if n.Kernel == k && (running == nil || OSSourceBefore(k, n.Name, n.Labels, running.Name, running.Labels)) {
			running = n
		}
	}
	if running != nil {
		return running.Labels
	}
	if elRelease.MatchString(k) {
		return nil
	}
	var agreed *Labelled
	var os OS
	for i := range nodes {
		n := &nodes[i]
		nos, ok := osFromLabelsFor(n.Kernel, n.Labels)
		switch {
		case !ok:
		case agreed == nil:
			agreed, os = n, nos
		case nos != os:
			return nil
		case n.Name < agreed.Name:
			agreed = n
		}
	}
	if agreed == nil {
		return nil
	}
	return agreed.Labels
}
