package imagebuild

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr/testr"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/bmcsim/agent/deployimage"
	"github.com/metalforge/metalforge/internal/imagecustomization/baseimage"
	"github.com/metalforge/metalforge/internal/imagecustomization/imagestore"
)

// twoArchCatalog writes base images for the host architecture and, beside them, for another one
// (agent_aarch64.*, or agent_x86_64.* on an aarch64 host), each ISO with content of its own.
func twoArchCatalog(t *testing.T) (cat *baseimage.Catalog, host, other string) {
	t.Helper()
	host, other = baseimage.HostArch(), "aarch64"
	if host == other {
		other = "x86_64"
	}
	dir := t.TempDir()
	for suffix, volume := range map[string]string{"": "HOST-LIVE", "_" + other: "OTHER-LIVE"} {
		must(t, deployimage.WriteLiveISO(filepath.Join(dir, "agent"+suffix+".iso"), deployimage.LiveOptions{VolumeID: volume}))
		must(t, os.WriteFile(filepath.Join(dir, "agent"+suffix+".initramfs"), deployimage.LiveInitramfs(), 0o644))
		must(t, os.WriteFile(filepath.Join(dir, "agent"+suffix+".kernel"), deployimage.Kernel(), 0o644))
	}
	cat, err := baseimage.Load(baseimage.Paths{ISO: filepath.Join(dir, "agent.iso"), Initrd: filepath.Join(dir, "agent.initramfs"), Kernel: filepath.Join(dir, "agent.kernel")})
	must(t, err)
	if got := strings.Join(cat.Arches(), " "); cat.For(host) == nil || cat.For(other) == nil {
		t.Fatalf("catalog has %s, want %s and %s", got, host, other)
	}
	return cat, host, other
}

// rootfsArg is the coreos.live.rootfs_url in kernel arguments ("" when there is none).
func rootfsArg(kargs string) string {
	for _, a := range strings.Fields(kargs) {
		if v, ok := strings.CutPrefix(a, baseimage.RootfsURLArg+"="); ok {
			return v
		}
	}
	return ""
}

// IRONIC_ROOTFS_URL names the host architecture's live root filesystem. Another architecture's
// initrd images and minimal ISOs point at its own root filesystem beside it (OpenShift's naming,
// ironic-python-agent_aarch64.rootfs), never at the host's: a live initramfs refuses a root
// filesystem that is not its own, so such a host would never boot its agent.
func TestRootfsURLPerArchitecture(t *testing.T) {
	cat, host, other := twoArchCatalog(t)
	const hostURL = "http://192.0.2.2:6180/images/ironic-python-agent.rootfs"
	want := map[string]string{host: hostURL, other: "http://192.0.2.2:6180/images/ironic-python-agent_" + other + ".rootfs"}
	for _, minimal := range []bool{false, true} {
		name := "full ISO"
		if minimal {
			name = "minimal ISO"
		}
		t.Run(name, func(t *testing.T) {
			store, err := imagestore.Open(filepath.Join(t.TempDir(), "work"))
			must(t, err)
			b, err := New(Config{Catalog: cat, Store: store, PublishURL: "http://192.0.2.1:8084", RootfsURL: hostURL,
				MinimalISO: minimal, Agent: testAgent, Log: testr.New(t)})
			must(t, err)
			for arch, url := range want {
				rec, _, err := b.Prepare(t.Context(), Request{UID: arch, Namespace: "ns", Name: "host-" + arch, Format: metal3.ImageFormatInitRD, Arch: arch})
				must(t, err)
				if got := rootfsArg(rec.ExtraKernelParams); got != url {
					t.Errorf("%s initrd image: %s=%q, want %q", arch, baseimage.RootfsURLArg, got, url)
				}
				if minimal {
					if got := rootfsArg(b.isos[arch].Kargs.Default); got != url {
						t.Errorf("%s minimal ISO: %s=%q, want %q", arch, baseimage.RootfsURLArg, got, url)
					}
				}
			}
		})
	}
}

// Without IRONIC_ROOTFS_URL each architecture's images point at the root filesystem of its own
// ISO, which this server serves.
func TestServedRootfsPerArchitecture(t *testing.T) {
	cat, host, other := twoArchCatalog(t)
	store, err := imagestore.Open(filepath.Join(t.TempDir(), "work"))
	must(t, err)
	b, err := New(Config{Catalog: cat, Store: store, PublishURL: "http://192.0.2.1:8084", Agent: testAgent, Log: testr.New(t)})
	must(t, err)
	for _, arch := range []string{host, other} {
		rec, _, err := b.Prepare(t.Context(), Request{UID: arch, Namespace: "ns", Name: "host-" + arch, Format: metal3.ImageFormatInitRD, Arch: arch})
		must(t, err)
		u := rootfsArg(rec.ExtraKernelParams)
		static := b.Statics()[strings.TrimPrefix(u, "http://192.0.2.1:8084/")]
		if static == nil || static.Base != cat.For(arch).ISO.Path {
			t.Errorf("%s initrd image: %s=%q is not the root filesystem of %s", arch, baseimage.RootfsURLArg, u, cat.For(arch).ISO.Path)
		}
	}
}

func TestArchRootfsURL(t *testing.T) {
	for _, tc := range []struct{ in, arch, want string }{
		{"http://192.0.2.2:6180/images/ironic-python-agent.rootfs", "x86_64", "http://192.0.2.2:6180/images/ironic-python-agent.rootfs"},
		{"http://192.0.2.2:6180/images/ironic-python-agent.rootfs", "aarch64", "http://192.0.2.2:6180/images/ironic-python-agent_aarch64.rootfs"},
		{"http://[2001:db8::2]:6180/rootfs.img?sig=x", "ppc64le", "http://[2001:db8::2]:6180/rootfs_ppc64le.img?sig=x"},
		{"http://images.example/rootfs", "aarch64", "http://images.example/rootfs_aarch64"},
	} {
		if got, err := archRootfsURL(tc.in, tc.arch, "x86_64"); err != nil || got != tc.want {
			t.Errorf("%s for %s: %q, %v; want %q", tc.in, tc.arch, got, err, tc.want)
		}
	}
}
