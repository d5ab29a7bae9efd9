package baseimage

import (
	"bytes"
	"crypto/sha256"

	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/metalforge/metalforge/internal/bmcsim/agent/deployimage"
)

func liveISO(t *testing.T, o deployimage.LiveOptions) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "live.iso")
	if err := deployimage.WriteLiveISO(p, o); err != nil {
		t.Fatal(err)
	}
	return p
}

func tool(t *testing.T, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Skipf("%s is not installed; `make test` installs it (hack/host-packages.sh)", name)
	}
}

// xorrisoLBA reports each file's first block and size as xorriso reads them.
func xorrisoLBA(t *testing.T, image string) map[string][2]int64 {
	t.Helper()
	tool(t, "xorriso")
	out, err := exec.Command("xorriso", "-indev", image, "-find", "/", "-exec", "report_lba").CombinedOutput()
	if err != nil {
		t.Fatalf("xorriso: %v\n%s", err, out)
	}
	re := regexp.MustCompile(`File data lba:\s+\d+\s*,\s*(\d+)\s*,\s*\d+\s*,\s*(\d+)\s*,\s*'(.*)'`)
	m := map[string][2]int64{}
	for _, l := range re.FindAllStringSubmatch(string(out), -1) {
		lba, _ := strconv.ParseInt(l[1], 10, 64)
		size, _ := strconv.ParseInt(l[2], 10, 64)
		m[l[3]] = [2]int64{lba * 2048, size}
	}
	return m
}

func TestOpenISO(t *testing.T) {
	p := liveISO(t, deployimage.LiveOptions{})
	b, err := OpenISO(p)
	if err != nil {
		t.Fatal(err)
	}
	lba := xorrisoLBA(t, p)
	if got, want := b.Area, lba["/images/ignition.img"]; got.Offset != want[0] || got.Length != want[1] || got.Length != deployimage.LiveEmbedSize {
		t.Errorf("embed area %+v, xorriso says %v", got, want)
	}
	if got, want := b.Rootfs, lba["/images/pxeboot/rootfs.img"]; got.Offset != want[0] || got.Length != want[1] {
		t.Errorf("rootfs %+v, xorriso says %v", got, want)
	}
	if b.Kargs == nil || b.Kargs.Default != deployimage.LiveKargs("METALFORGE-LIVE") || len(b.Kargs.Files) != 2 {
		t.Errorf("kargs %+v", b.Kargs)
	}
	data, _ := os.ReadFile(p)
	if b.SHA256 != sha256.Sum256(data) || b.Size != int64(len(data)) {
		t.Error("identity is not the file's sha256 and size")
	}
	// The saved hash states continue to the same sum.
	h, err := b.HashBeforeArea()
	if err != nil {
		t.Fatal(err)
	}
	h.Write(data[b.Area.Offset:])
	if !bytes.Equal(h.Sum(nil), b.SHA256[:]) {
		t.Error("the state before the embed area does not continue to the file's sum")
	}
}

func TestOpenISORefusesOtherISOs(t *testing.T) {
	p := filepath.Join(t.TempDir(), "agent.iso")
	data, err := deployimage.ISO("http://127.0.0.1:6385")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenISO(p); err == nil || !strings.Contains(err.Error(), "not a CoreOS live ISO") {
		t.Errorf("error %v", err)
	}
}

// An aarch64 controller finds the x86_64 images beside its own (the architecture name has an
// underscore), and takes no other underscored suffix for an architecture.
func TestVariantsX86_64(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"agent.iso", "agent_x86_64.iso", "agent.x86_64.initramfs", "agent_old_2.iso"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := variants(filepath.Join(dir, "agent.iso"), "aarch64")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"aarch64": filepath.Join(dir, "agent.iso"), "x86_64": filepath.Join(dir, "agent_x86_64.iso")}
	if !maps.Equal(got, want) {
		t.Errorf("variants %v, want %v", got, want)
	}
}

func TestCatalogVariants(t *testing.T) {
	dir := t.TempDir()
	iso := liveISO(t, deployimage.LiveOptions{})
	data, _ := os.ReadFile(iso)
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	isoPath := write("ironic-python-agent.iso", data)
	write("ironic-python-agent_aarch64.iso", data)
	write("ironic-python-agent.ppc64le.iso", data)
	write("ironic-python-agent.iso.bak", data) // not a variant
	initrd := write("ironic-python-agent.initramfs", deployimage.LiveInitramfs())
	write("ironic-python-agent_aarch64.initramfs", deployimage.LiveInitramfs())
	kernel := write("ironic-python-agent.kernel", deployimage.Kernel())
	_, err := Load(Paths{ISO: isoPath, Initrd: initrd, Kernel: kernel})
	if err == nil {
		t.Fatal("aarch64 has an initramfs but no kernel: want an error")
	}
	write("ironic-python-agent_aarch64.kernel", deployimage.Kernel())
	c, err := Load(Paths{ISO: isoPath, Initrd: initrd, Kernel: kernel})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.Arches(), ","); got != "aarch64,ppc64le,"+HostArch() {
		t.Errorf("arches %s", got)
	}
	if s := c.For(""); s == nil || s.ISO == nil || s.Initrd == nil || s.ISO.Path != isoPath {
		t.Errorf("host set %+v", s)
	}
	if s := c.For("ppc64le"); s.ISO == nil || s.Initrd != nil {
		t.Errorf("ppc64le set %+v", s)
	}
	if _, err := Load(Paths{Initrd: initrd}); err == nil {
		t.Error("an initramfs without a kernel must be refused")
	}
	if _, err := Load(Paths{ISO: filepath.Join(dir, "missing.iso")}); err == nil || !strings.Contains(err.Error(), "DEPLOY_ISO") {
		t.Errorf("missing base: %v", err)
	}
}

func TestWriteMinimal(t *testing.T) {
	base, err := OpenISO(liveISO(t, deployimage.LiveOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "minimal.iso")
	const url = "http://192.0.2.9:8084/rootfs/abc.img"
	// Everything is staged in the directory given, none in the system's: the caller's start-up
	// removes what a crash left there, and /tmp may be small or read-only.
	staging, systemTmp := t.TempDir(), os.Getenv("TMPDIR")
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "missing"))
	err = WriteMinimal(base, url, out, staging)
	t.Setenv("TMPDIR", systemTmp) // the rest of the test makes temporary directories
	if err != nil {
		t.Fatal(err)
	}

	min, err := OpenISO(out)
	if err != nil {
		t.Fatal(err)
	}
	if min.Rootfs.Length != 0 || min.Size >= base.Size {
		t.Errorf("minimal ISO keeps the root filesystem (rootfs %+v, %d ≥ %d bytes)", min.Rootfs, min.Size, base.Size)
	}
	want := "mitigations=auto,nosmt ignition.firstboot ignition.platform.id=metal coreos.live.rootfs_url=" + url
	if min.Kargs.Default != want {
		t.Errorf("kargs.json default %q", min.Kargs.Default)
	}
	// An independent reader sees the new arguments in both boot configurations, the boot entries
	// and no rootfs.img.
	tool(t, "xorriso")
	dir := t.TempDir()
	if out, err := exec.Command("xorriso", "-osirrox", "on", "-indev", out, "-extract", "/", dir).CombinedOutput(); err != nil {
		t.Fatalf("xorriso extract: %v\n%s", err, out)
	}
	baseDir := t.TempDir()
	if out, err := exec.Command("xorriso", "-osirrox", "on", "-indev", base.Path, "-extract", "/", baseDir).CombinedOutput(); err != nil {
		t.Fatalf("xorriso extract: %v\n%s", err, out)
	}
	for _, f := range []string{"EFI/fedora/grub.cfg", "isolinux/isolinux.cfg"} {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), want+"\n#") || strings.Contains(string(data), "coreos.liveiso") {
			t.Errorf("%s:\n%s", f, data)
		}
		orig, err := os.ReadFile(filepath.Join(baseDir, f))
		if err != nil || len(orig) != len(data) {
			t.Errorf("%s changed size (%d → %d): the area must be rewritten in place", f, len(orig), len(data))
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "images/pxeboot/rootfs.img")); err == nil {
		t.Error("rootfs.img is still there")
	}
	rep, _ := exec.Command("xorriso", "-indev", out, "-report_el_torito", "plain").CombinedOutput()
	for _, w := range []string{"/isolinux/isolinux.bin", "/images/efiboot.img"} {
		if !strings.Contains(string(rep), w) {
			t.Errorf("El Torito lacks %s:\n%s", w, rep)
		}
	}
	// Reproducible: the same base and URL give the same bytes.
	again := filepath.Join(t.TempDir(), "again.iso")
	if err := WriteMinimal(base, url, again, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(out)
	b, _ := os.ReadFile(again)
	if !bytes.Equal(a, b) {
		t.Error("minimal ISO differs between two runs")
	}
	if err := WriteMinimal(base, "http://x/a b", again, t.TempDir()); err == nil {
		t.Error("a URL with a space must be refused")
	}
}
