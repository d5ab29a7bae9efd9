package kernel

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestOfNode(t *testing.T) {
	tests := map[string]struct {
		info   string
		labels map[string]string
		want   string
	}{
		"kubelet report wins":        {info: "5.14.0-284.el9.x86_64", labels: map[string]string{"feature.node.kubernetes.io/kernel-version.full": "other"}, want: "5.14.0-284.el9.x86_64"},
		"nfd label when no report":   {labels: map[string]string{"feature.node.kubernetes.io/kernel-version.full": "4.18.0-305.el8.x86_64"}, want: "4.18.0-305.el8.x86_64"},
		"neither":                    {},
		"whitespace is not a report": {info: "  ", labels: map[string]string{"feature.node.kubernetes.io/kernel-version.full": "x"}, want: "x"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: tc.labels}}
			n.Status.NodeInfo.KernelVersion = tc.info
			if got := OfNode(n); got != tc.want {
				t.Fatalf("OfNode = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestPatchVersion(t *testing.T) {
	for in, want := range map[string]string{
		"4.18.0-305.10.2.el8_4.x86_64":    "4.18.0-305",
		"5.14.0-284.30.1.el9_2.x86_64":    "5.14.0-284",
		"6.8.0-45-generic":                "6.8.0-45",
		"4.18.0-305.rt7.72.el8.x86_64+rt": "4.18.0-305",
		"6.1.0":                           "6.1.0",
	} {
		if got := PatchVersion(in); got != want {
			t.Errorf("PatchVersion(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestOSOf(t *testing.T) {
	tests := map[string]struct {
		kernel string
		labels map[string]string
		want   OS
	}{
		"el8_4 kernel":      {kernel: "4.18.0-305.10.2.el8_4.x86_64", want: OS{"rhel8", "rhel8.4", "8.4"}},
		"el9 without minor": {kernel: "5.14.0-70.el9.x86_64", want: OS{"rhel9", "rhel9", "9"}},
		"nfd labels win": {kernel: "4.18.0-305.el8_4.x86_64", labels: map[string]string{
			"feature.node.kubernetes.io/system-os_release.ID":               "ubuntu",
			"feature.node.kubernetes.io/system-os_release.VERSION_ID.major": "22",
			"feature.node.kubernetes.io/system-os_release.VERSION_ID.minor": "04",
		}, want: OS{"ubuntu22", "ubuntu22.04", "22.04"}},
		"rhcos maps to its rhel": {kernel: "x", labels: map[string]string{
			"feature.node.kubernetes.io/system-os_release.ID":               "rhcos",
			"feature.node.kubernetes.io/system-os_release.VERSION_ID.major": "4",
			"feature.node.kubernetes.io/system-os_release.RHEL_VERSION":     "8.6",
		}, want: OS{"rhel8", "rhel8.6", "8.6"}},
		"nfd labels of this kernel win": {kernel: "5.14.0-427.13.1.el9_4.x86_64", labels: map[string]string{
			"feature.node.kubernetes.io/system-os_release.ID":           "rhcos",
			"feature.node.kubernetes.io/system-os_release.RHEL_VERSION": "9.4",
			"feature.node.kubernetes.io/kernel-version.full":            "5.14.0-427.13.1.el9_4.x86_64",
		}, want: OS{"rhel9", "rhel9.4", "9.4"}},
		// Rebooted into an upgrade: NFD has not labelled the node again yet.
		"nfd labels of the kernel before are stale": {kernel: "5.14.0-427.13.1.el9_4.x86_64", labels: map[string]string{
			"feature.node.kubernetes.io/system-os_release.ID":           "rhcos",
			"feature.node.kubernetes.io/system-os_release.RHEL_VERSION": "9.2",
			"feature.node.kubernetes.io/kernel-version.full":            "5.14.0-284.30.1.el9_2.x86_64",
		}, want: OS{"rhel9", "rhel9.4", "9.4"}},
		// A kernel that names no release keeps the labels: they are right for an update within
		// the release, and the preflight of an upgrade only has the old kernel's.
		"nfd labels of another kernel, an Ubuntu kernel": {kernel: "6.8.0-50-generic", labels: map[string]string{
			"feature.node.kubernetes.io/system-os_release.ID":               "ubuntu",
			"feature.node.kubernetes.io/system-os_release.VERSION_ID.major": "22",
			"feature.node.kubernetes.io/system-os_release.VERSION_ID.minor": "04",
			"feature.node.kubernetes.io/kernel-version.full":                "6.8.0-45-generic",
		}, want: OS{"ubuntu22", "ubuntu22.04", "22.04"}},
		"unknown":                           {kernel: "6.8.0-45-generic"},
		"el inside a word is not a release": {kernel: "6.1.0-shell9.x86_64"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := OSOf(tc.kernel, tc.labels); got != tc.want {
				t.Fatalf("OSOf = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestMajorMinor(t *testing.T) {
	for in, want := range map[string]string{"4.14.3": "4.14", "v1.37.2": "1.37", "4.10.0-fc.8": "4.10", "5": "5"} {
		if got := MajorMinor(in); got != want {
			t.Errorf("MajorMinor(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestOSLabelsChanged(t *testing.T) {
	base := map[string]string{"feature.node.kubernetes.io/system-os_release.RHEL_VERSION": "9.2", "other": "a"}
	for name, tc := range map[string]struct {
		after map[string]string
		want  bool
	}{
		"nothing":           {after: map[string]string{"feature.node.kubernetes.io/system-os_release.RHEL_VERSION": "9.2", "other": "a"}},
		"another label":     {after: map[string]string{"feature.node.kubernetes.io/system-os_release.RHEL_VERSION": "9.2", "other": "b"}},
		"the RHEL version":  {after: map[string]string{"feature.node.kubernetes.io/system-os_release.RHEL_VERSION": "9.4", "other": "a"}, want: true},
		"NFD's kernel seen": {after: map[string]string{"feature.node.kubernetes.io/system-os_release.RHEL_VERSION": "9.2", "other": "a", "feature.node.kubernetes.io/kernel-version.full": "k"}, want: true},
	} {
		if got := OSLabelsChanged(base, tc.after); got != tc.want {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
	}
}
