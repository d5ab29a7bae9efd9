package imagebuild

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/go-logr/logr/testr"

	"github.com/metalforge/metalforge/internal/bmcsim/agent"
	"github.com/metalforge/metalforge/internal/bmcsim/agent/deployimage"
	"github.com/metalforge/metalforge/internal/imagecustomization/baseimage"
	"github.com/metalforge/metalforge/internal/imagecustomization/imagestore"
)

// unpackArea decompresses an embed area or appended archive with Debian's gzip and cpio: it
// returns the names cpio lists and config.ign's content.
func unpackArea(t *testing.T, area []byte) ([]string, []byte) {
	t.Helper()
	// gzip stops at the end of the member; the zeros after it are the unused area.
	end := gzipEnd(t, area)
	cpioData := run(t, area[:end], "gzip", "-dc")
	names := strings.Fields(string(run(t, cpioData, "cpio", "-it", "--quiet")))
	dir := t.TempDir()
	runIn(t, dir, cpioData, "cpio", "-id", "--quiet")
	config, err := os.ReadFile(filepath.Join(dir, "config.ign"))
	must(t, err)
	return names, config
}

// gzipEnd is where the gzip member at the start of b ends, found with Go's reader only to cut the
// padding off for the independent tools.
func gzipEnd(t *testing.T, b []byte) int {
	t.Helper()
	br := bytes.NewReader(b)
	zr, err := gzip.NewReader(br)
	must(t, err)
	zr.Multistream(false)
	_, err = io.Copy(io.Discard, zr)
	must(t, err)
	end := len(b) - br.Len()
	if strings.Trim(string(b[end:]), "\x00") != "" {
		t.Fatalf("bytes after the archive are not zero")
	}
	return end
}

var lbaLine = regexp.MustCompile(`File data lba:\s+\d+\s*,\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*,\s*'(.*)'`)

// The ISO a host gets, checked with xorriso and isoinfo: the embed area holds a gzip'd cpio with
// config.ign (with the host's keyfile and the agent's Ironic URL), every file keeps its place and
// size, and every byte outside the area is the base's.
func TestISOCheckedByXorriso(t *testing.T) {
	e := newEnv(t, nil)
	rec := e.build(request("a"))
	img := e.save(e.download(e.b.URL(rec)), "host.iso")
	base, err := os.ReadFile(e.paths.ISO)
	must(t, err)
	got, err := os.ReadFile(img)
	must(t, err)

	lba := func(p string) string {
		return strings.Join(lbaLine.FindAllString(string(run(t, nil, "xorriso", "-indev", p, "-find", "/", "-exec", "report_lba")), -1), "\n")
	}
	if l1, l2 := lba(e.paths.ISO), lba(img); l1 != l2 || l1 == "" {
		t.Fatalf("file layout changed:\n%s\nvs\n%s", l1, l2)
	}
	if l1, l2 := run(t, nil, "isoinfo", "-R", "-l", "-i", e.paths.ISO), run(t, nil, "isoinfo", "-R", "-l", "-i", img); !bytes.Equal(l1, l2) {
		t.Errorf("isoinfo listings differ")
	}
	// Where xorriso says the area is.
	var off, size int64
	for _, m := range lbaLine.FindAllStringSubmatch(lba(img), -1) {
		if m[4] == "/images/ignition.img" {
			var blk int64
			for _, c := range m[1] {
				blk = blk*10 + int64(c-'0')
			}
			off = blk * 2048
			for _, c := range m[3] {
				size = size*10 + int64(c-'0')
			}
		}
	}
	if len(got) != len(base) || size != 256<<10 {
		t.Fatalf("size %d (base %d), area %d", len(got), len(base), size)
	}
	if !bytes.Equal(got[:off], base[:off]) || !bytes.Equal(got[off+size:], base[off+size:]) {
		t.Fatal("bytes outside the embed area changed")
	}
	area := extract(t, img, "/images/ignition.img")
	if int64(len(area)) != size || !bytes.Equal(area, got[off:off+size]) {
		t.Fatalf("xorriso extracted %d bytes", len(area))
	}
	names, config := unpackArea(t, area)
	if len(names) != 1 || names[0] != "config.ign" {
		t.Errorf("cpio lists %v", names)
	}
	checkConfig(t, config, "http://192.0.2.2:6385", "address1=192.0.2.10/24")
	if rec.SHA256 != sum(got) {
		t.Errorf("recorded sha256 %s, image %s", rec.SHA256, sum(got))
	}
}

// checkConfig decodes what the host's Ignition writes, without our Ignition code.
func checkConfig(t *testing.T, config []byte, wantAPI, wantKeyfileLine string) {
	t.Helper()
	var c struct {
		Ignition struct{ Version string }
		Storage  struct {
			Files []struct {
				Path     string
				Mode     int
				Contents struct{ Source string }
			}
		}
	}
	must(t, json.Unmarshal(config, &c))
	files := map[string]string{}
	for _, f := range c.Storage.Files {
		data, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(f.Contents.Source, "data:;base64,"))
		files[f.Path] = string(data)
	}
	if c.Ignition.Version != "3.2.0" {
		t.Errorf("version %q", c.Ignition.Version)
	}
	if !strings.Contains(files["/etc/ironic-python-agent.conf"], "api_url = "+wantAPI) {
		t.Errorf("agent config %q", files["/etc/ironic-python-agent.conf"])
	}
	if wantKeyfileLine != "" && !strings.Contains(files["/etc/NetworkManager/system-connections/eno1.nmconnection"], wantKeyfileLine) {
		t.Errorf("keyfile %q", files["/etc/NetworkManager/system-connections/eno1.nmconnection"])
	}
}

// An initrd image is the base initramfs, zeros to a 4-byte boundary, and the archive; it comes
// with the kernel's URL and the kernel arguments to boot the live system.
func TestInitrd(t *testing.T) {
	e := newEnv(t, nil)
	req := request("b")
	req.Format = "initrd"
	rec := e.build(req)
	got := e.download(e.b.URL(rec))
	base, err := os.ReadFile(e.paths.Initrd)
	must(t, err)
	off := (len(base) + 3) &^ 3
	if !bytes.Equal(got[:len(base)], base) || strings.Trim(string(got[len(base):off]), "\x00") != "" {
		t.Fatal("the base initramfs is not the image's start")
	}
	names, config := unpackArea(t, got[off:])
	if len(names) != 1 {
		t.Errorf("cpio lists %v", names)
	}
	checkConfig(t, config, "http://192.0.2.2:6385", "method=manual")
	// The base itself is a valid archive to cpio (the kernel unpacks both in turn).
	if first := strings.Fields(string(run(t, run(t, base, "gzip", "-dc"), "cpio", "-it", "--quiet"))); len(first) != 1 {
		t.Errorf("base initramfs lists %v", first)
	}
	if kernel := e.download(rec.KernelURL); !bytes.Equal(kernel, mustRead(t, e.paths.Kernel)) {
		t.Error("kernel URL does not serve the kernel")
	}
	wantParams := "coreos.live.rootfs_url=" + e.srv.URL + "/"
	if !strings.HasPrefix(rec.ExtraKernelParams, wantParams) || !strings.HasSuffix(rec.ExtraKernelParams, " ignition.firstboot ignition.platform.id=metal") {
		t.Errorf("kernel params %q", rec.ExtraKernelParams)
	}
	rootfsURL := strings.Fields(strings.TrimPrefix(rec.ExtraKernelParams, "coreos.live.rootfs_url="))[0]
	iso, err := baseimage.OpenISO(e.paths.ISO)
	must(t, err)
	isoBytes := mustRead(t, e.paths.ISO)
	if rootfs := e.download(rootfsURL); !bytes.Equal(rootfs, isoBytes[iso.Rootfs.Offset:iso.Rootfs.Offset+iso.Rootfs.Length]) {
		t.Error("the root filesystem URL does not serve the ISO's rootfs.img")
	}
	if rec.SHA256 != sum(got) {
		t.Error("initrd checksum")
	}
}

// An initramfs without a root filesystem to point at (no ISO beside it, no IRONIC_ROOTFS_URL)
// would build images that cannot boot: the builder refuses it at start, naming what is missing;
// with IRONIC_ROOTFS_URL it starts and the images point there.
func TestInitrdNeedsRootfs(t *testing.T) {
	dir := t.TempDir()
	paths := baseimage.Paths{Initrd: filepath.Join(dir, "agent.initramfs"), Kernel: filepath.Join(dir, "agent.kernel")}
	must(t, os.WriteFile(paths.Initrd, deployimage.LiveInitramfs(), 0o644))
	must(t, os.WriteFile(paths.Kernel, deployimage.Kernel(), 0o644))
	cat, err := baseimage.Load(paths)
	must(t, err)
	store, err := imagestore.Open(filepath.Join(dir, "work"))
	must(t, err)
	cfg := Config{Catalog: cat, Store: store, PublishURL: "http://192.0.2.1:8084", Log: testr.New(t),
		Agent: testAgent}
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "IRONIC_ROOTFS_URL") || !strings.Contains(err.Error(), paths.Initrd) {
		t.Fatalf("New without a root filesystem: %v, want an error naming the initramfs and IRONIC_ROOTFS_URL", err)
	}
	cfg.RootfsURL = "http://images.example/rootfs.img"
	if _, err := New(cfg); err != nil {
		t.Fatalf("New with IRONIC_ROOTFS_URL: %v", err)
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	must(t, err)
	return b
}

// A minimal ISO has no root filesystem; its kernel arguments point at this server's copy.
func TestMinimalISO(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MinimalISO = true })
	rec := e.build(request("c"))
	img := e.save(e.download(e.b.URL(rec)), "min.iso")
	if st, _ := os.Stat(img); st.Size() >= int64(len(mustRead(t, e.paths.ISO))) {
		t.Error("the minimal ISO is not smaller")
	}
	listing := string(run(t, nil, "xorriso", "-indev", img, "-find", "/", "-name", "*.img"))
	if strings.Contains(listing, "rootfs.img") || !strings.Contains(listing, "ignition.img") {
		t.Errorf("files: %s", listing)
	}
	grub := string(extract(t, img, "/EFI/fedora/grub.cfg"))
	m := regexp.MustCompile(`coreos\.live\.rootfs_url=(\S+)`).FindStringSubmatch(grub)
	if m == nil || !strings.HasPrefix(m[1], e.srv.URL+"/") {
		t.Fatalf("grub.cfg:\n%s", grub)
	}
	if got := e.download(m[1]); !bytes.HasPrefix(got, []byte("METALFORGE-AGENT-ROOTFS")) {
		t.Error("the root filesystem is not served")
	}
	area := extract(t, img, "/images/ignition.img")
	_, config := unpackArea(t, area)
	checkConfig(t, config, "http://192.0.2.2:6385", "")
	// A restart finds the template and serves the same image under the same name; the staging
	// directory of a template write a crash interrupted is removed.
	stale := filepath.Join(e.store.Dir(), "minimal-123456")
	must(t, os.MkdirAll(stale, 0o700))
	must(t, os.WriteFile(filepath.Join(stale, "initrd.img"), []byte("left by a crash"), 0o600))
	staleRecord := filepath.Join(e.store.Dir(), "images", ".tmp-123456")
	must(t, os.WriteFile(staleRecord, []byte("{"), 0o600))
	e.start(e.store.Dir())
	again, built, err := e.b.Prepare(t.Context(), request("c"))
	must(t, err)
	if built || again.Image != rec.Image {
		t.Errorf("after a restart: built %t, %s vs %s", built, again.Image, rec.Image)
	}
	for _, p := range []string{stale, staleRecord} {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s left after a restart: %v", p, err)
		}
	}
}

// bmcsim's agent, which reads images with its own code, boots what a host gets: the Ironic URL
// and the static address come from the image.
func TestSimulatedAgentReadsTheImage(t *testing.T) {
	e := newEnv(t, nil)
	iso := e.download(e.b.URL(e.build(request("sim"))))
	bi, err := agent.ParseBootISO(iso)
	must(t, err)
	if !bi.Ignition || bi.APIURL != "http://192.0.2.2:6385" || len(bi.Network) != 1 || bi.Network[0].Interface != "eno1" || bi.Network[0].IPv4 != "192.0.2.10" {
		t.Errorf("the agent read %+v", bi)
	}
}
