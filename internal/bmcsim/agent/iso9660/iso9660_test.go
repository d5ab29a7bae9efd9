package iso9660

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func build(t testing.TB, files []File) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := Write(&b, Options{VolumeID: "test_vol", Publisher: "pub"}, files); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestRoundTrip(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 1000) // spans several sectors
	var many []File
	for i := 0; i < 80; i++ { // forces a directory extent over more than one sector
		many = append(many, File{Path: "many/file_" + strings.Repeat("x", i%20) + string(rune('a'+i%26)) + ".txt", Data: []byte{byte(i)}})
	}
	files := append([]File{
		{Path: "vmlinuz", Data: []byte("kernel")},
		{Path: "initrd", Data: big},
		{Path: "EFI/BOOT/grub.cfg", Data: []byte("linux /vmlinuz a=b --\n")},
		{Path: "boot/grub/efiboot.img", Data: nil},
	}, dedupe(many)...)
	img := build(t, files)
	if len(img)%SectorSize != 0 {
		t.Fatalf("image size %d not a multiple of the sector size", len(img))
	}
	im, err := Open(bytes.NewReader(img), int64(len(img)))
	if err != nil {
		t.Fatal(err)
	}
	if im.VolumeID() != "TEST_VOL" || im.Publisher() != "pub" {
		t.Errorf("volume %q publisher %q", im.VolumeID(), im.Publisher())
	}
	for _, f := range files {
		got, err := im.ReadFile(f.Path)
		if err != nil {
			t.Fatalf("%s: %v", f.Path, err)
		}
		if !bytes.Equal(got, f.Data) {
			t.Errorf("%s: content differs (%d bytes, want %d)", f.Path, len(got), len(f.Data))
		}
	}
	if _, err := im.ReadFile("EFI/BOOT/missing.cfg"); !errors.Is(err, ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	entries, err := im.ReadDir("/")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name)
	}
	if got := strings.Join(names, ","); got != "BOOT,EFI,INITRD,MANY,VMLINUZ" {
		t.Errorf("root entries %s", got)
	}
}

func dedupe(files []File) []File {
	seen := map[string]bool{}
	var out []File
	for _, f := range files {
		n, _ := isoName(filepath.Base(f.Path), false)
		if !seen[n] {
			seen[n] = true
			out = append(out, f)
		}
	}
	return out
}

func TestNotISO(t *testing.T) {
	if _, err := Open(bytes.NewReader(make([]byte, 40*SectorSize)), 40*SectorSize); !errors.Is(err, ErrNotISO) {
		t.Errorf("zeros: %v", err)
	}
	if _, err := Open(bytes.NewReader([]byte("short")), 5); !errors.Is(err, ErrNotISO) {
		t.Errorf("short: %v", err)
	}
}

func TestDuplicate(t *testing.T) {
	var b bytes.Buffer
	err := Write(&b, Options{}, []File{{Path: "a.txt"}, {Path: "/A.TXT"}})
	if err == nil {
		t.Fatal("duplicate names accepted")
	}
}

// mkisofs finds genisoimage on the host or in the Ironic root made by hack/ironic-up.sh.
func mkisofs(t *testing.T) []string {
	t.Helper()
	if p, err := exec.LookPath("mkisofs"); err == nil {
		return []string{p}
	}
	root, _ := filepath.Abs("../../../../.cache/ironic/root")
	if _, err := os.Stat(filepath.Join(root, "usr/bin/mkisofs")); err == nil && os.Geteuid() == 0 {
		return []string{"chroot", root, "/usr/bin/mkisofs"}
	}
	return nil
}

// TestReadMkisofs reads an ISO laid out the way Ironic builds its boot ISO (mkisofs -r, Rock Ridge
// names in lower case), so the agent can read Ironic's grub.cfg.
func TestReadMkisofs(t *testing.T) {
	cmd := mkisofs(t)
	if cmd == nil {
		t.Skip("no mkisofs on the host or in .cache/ironic/root (make ironic-up builds it)")
	}
	dir := t.TempDir()
	if cmd[0] == "chroot" {
		// The chrooted mkisofs sees only the root: work in a directory inside it.
		d, err := os.MkdirTemp(filepath.Join(cmd[1], "tmp"), "isotest")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(d) })
		dir = d
	}
	src := filepath.Join(dir, "src")
	must(t, os.MkdirAll(filepath.Join(src, "EFI/BOOT"), 0o755))
	must(t, os.MkdirAll(filepath.Join(src, "boot/grub"), 0o755))
	must(t, os.WriteFile(filepath.Join(src, "vmlinuz"), []byte("kernel"), 0o644))
	must(t, os.WriteFile(filepath.Join(src, "EFI/BOOT/grub.cfg"), []byte("linux /vmlinuz ipa-api-url=http://x --\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(src, "boot/grub/efiboot.img"), make([]byte, 4096), 0o644))
	out := filepath.Join(dir, "out.iso")
	inner := func(p string) string {
		if cmd[0] == "chroot" {
			return strings.TrimPrefix(p, cmd[1])
		}
		return p
	}
	args := append(append([]string{}, cmd[1:]...), "-quiet", "-r", "-V", "VMEDIA_BOOT_ISO", "-l", "-publisher", "ir-pub",
		"-e", "boot/grub/efiboot.img", "-no-emul-boot", "-o", inner(out), inner(src))
	if b, err := exec.Command(cmd[0], args...).CombinedOutput(); err != nil {
		t.Fatalf("mkisofs: %v\n%s", err, b)
	}
	data, err := os.ReadFile(out)
	must(t, err)
	im, err := Open(bytes.NewReader(data), int64(len(data)))
	must(t, err)
	if im.VolumeID() != "VMEDIA_BOOT_ISO" {
		t.Errorf("volume id %q", im.VolumeID())
	}
	cfg, err := im.ReadFile("/EFI/BOOT/grub.cfg")
	must(t, err)
	if !strings.Contains(string(cfg), "ipa-api-url=http://x") {
		t.Errorf("grub.cfg %q", cfg)
	}
	entries, err := im.ReadDir("EFI/BOOT")
	must(t, err)
	if len(entries) != 1 || entries[0].Name != "grub.cfg" {
		t.Errorf("Rock Ridge name not used: %+v", entries)
	}
}

// TestWriteReadByIsoinfo checks our writer against an independent reader when one is around.
func TestWriteReadByIsoinfo(t *testing.T) {
	isoinfo, err := exec.LookPath("isoinfo")
	if err != nil {
		t.Skip("isoinfo not installed")
	}
	img := build(t, []File{{Path: "EFI/BOOT/grub.cfg", Data: []byte("hello")}})
	p := filepath.Join(t.TempDir(), "x.iso")
	must(t, os.WriteFile(p, img, 0o644))
	out, err := exec.Command(isoinfo, "-i", p, "-x", "/EFI/BOOT/GRUB.CFG;1").CombinedOutput()
	if err != nil || string(out) != "hello" {
		t.Fatalf("isoinfo: %v %q", err, out)
	}
}

func FuzzOpen(f *testing.F) {
	f.Add(build(f, []File{{Path: "a/b.txt", Data: []byte("x")}}))
	f.Fuzz(func(t *testing.T, data []byte) {
		im, err := Open(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		entries, _ := im.ReadDir("/")
		for _, e := range entries {
			_, _ = im.ReadFile(e.Name)
			_, _ = im.ReadDir(e.Name)
		}
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
