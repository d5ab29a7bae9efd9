package iso

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// ironicLike is the tree of the boot ISO Ironic builds for virtual media (image_utils: kernel,
// ramdisk, the ESP image and grub.cfg carrying the kernel parameters).
func ironicLike() []File {
	return []File{
		{Path: "vmlinuz", Data: []byte("kernel")},
		{Path: "initrd", Data: bytes.Repeat([]byte("ramdisk "), 3000)},
		{Path: "EFI/BOOT/grub.cfg", Data: []byte("linux /vmlinuz ipa-api-url=http://x:6385 --\ninitrd /initrd\n")},
		{Path: "boot/grub/efiboot.img", Data: make([]byte, 8192)},
		{Path: "some-long-lower-case-name.conf", Data: []byte("long")},
	}
}

// TestReadToolImages reads images made by the tools Ironic uses (mkisofs is genisoimage on
// Debian; xorriso's mkisofs emulation), with Rock Ridge, the way Ironic calls them.
func TestReadToolImages(t *testing.T) {
	for name, cmd := range map[string][]string{
		"genisoimage -r":         {"genisoimage", "-quiet", "-r", "-V", "VMEDIA_BOOT_ISO", "-l", "-publisher", "ir-pub", "-e", "boot/grub/efiboot.img", "-no-emul-boot"},
		"genisoimage -r -J":      {"genisoimage", "-quiet", "-r", "-J", "-V", "VMEDIA_BOOT_ISO", "-l"},
		"xorriso -as mkisofs -r": {"xorriso", "-as", "mkisofs", "-quiet", "-r", "-V", "VMEDIA_BOOT_ISO", "-e", "boot/grub/efiboot.img", "-no-emul-boot"},
	} {
		t.Run(name, func(t *testing.T) {
			src := srcTree(t, ironicLike())
			p := filepath.Join(t.TempDir(), "tool.iso")
			run(t, cmd[0], append(cmd[1:], "-o", p, src)...)
			im, err := OpenFile(p)
			must(t, err)
			defer im.Close()
			if im.VolumeID() != "VMEDIA_BOOT_ISO" {
				t.Errorf("volume id %q", im.VolumeID())
			}
			data, err := os.ReadFile(p)
			must(t, err)
			for _, f := range ironicLike() {
				got, err := im.ReadFile("/" + f.Path)
				if err != nil || !bytes.Equal(got, f.Data) {
					t.Errorf("%s: %d bytes, %v", f.Path, len(got), err)
				}
				x, err := im.Locate(f.Path)
				must(t, err)
				if !bytes.Equal(data[x.Offset:x.Offset+x.Length], f.Data) {
					t.Errorf("%s: extent %+v does not hold the file", f.Path, x)
				}
			}
			boot, err := im.ReadDir("EFI/BOOT")
			must(t, err)
			if names(boot) != "grub.cfg" {
				t.Errorf("EFI/BOOT lists %q: Rock Ridge names not used", names(boot))
			}
			root, err := im.ReadDir("")
			must(t, err)
			if got := names(root); !strings.Contains(got, "some-long-lower-case-name.conf") {
				t.Errorf("root lists %q", got)
			}
		})
	}
}

// TestReadPlainISO9660 reads an image without Rock Ridge or Joliet: names are upper case, and a
// path given in lower case still finds them.
func TestReadPlainISO9660(t *testing.T) {
	src := srcTree(t, ironicLike())
	p := filepath.Join(t.TempDir(), "plain.iso")
	run(t, "genisoimage", "-quiet", "-o", p, src)
	im, err := OpenFile(p)
	must(t, err)
	defer im.Close()
	got, err := im.ReadFile("EFI/BOOT/grub.cfg")
	if err != nil || !strings.Contains(string(got), "ipa-api-url") {
		t.Errorf("grub.cfg: %q, %v", got, err)
	}
	boot, err := im.ReadDir("efi/boot")
	must(t, err)
	if names(boot) != "GRUB.CFG" {
		t.Errorf("efi/boot lists %q", names(boot))
	}
}

// TestToolsReadOurImages has isoinfo and xorriso, independent readers, read what Write made:
// contents, names, modes and where each file is.
func TestToolsReadOurImages(t *testing.T) {
	files := sample()
	p := writeImage(t, Options{VolumeID: "METALFORGE_TEST", Publisher: "metalforge"}, files)
	info := string(run(t, "isoinfo", "-d", "-i", p))
	for _, want := range []string{"Volume id: METALFORGE_TEST", "Publisher id: metalforge", "Rock Ridge signatures version 1 found"} {
		if !strings.Contains(info, want) {
			t.Errorf("isoinfo -d lacks %q:\n%s", want, info)
		}
	}
	if got := run(t, "isoinfo", "-R", "-i", p, "-x", "/EFI/BOOT/grub.cfg"); string(got) != "linux /vmlinuz a=b --\n" {
		t.Errorf("isoinfo -x grub.cfg: %q", got)
	}

	// xorriso extracts the whole tree; it must match the input file by file, mode included.
	out := filepath.Join(t.TempDir(), "x")
	run(t, "xorriso", "-osirrox", "on", "-indev", p, "-extract", "/", out)
	for _, f := range files {
		got, err := os.ReadFile(filepath.Join(out, cleanPath(f.Path)))
		if err != nil || !bytes.Equal(got, f.Data) {
			t.Errorf("xorriso extracted %s as %d bytes, %v", f.Path, len(got), err)
		}
	}
	if st, err := os.Stat(filepath.Join(out, "bin/run.sh")); err != nil || st.Mode().Perm()&0o111 == 0 {
		t.Errorf("bin/run.sh lost its execute bits: %v %v", st.Mode(), err)
	}

	// Locate agrees with the logical block isoinfo reports for every file.
	im, err := OpenFile(p)
	must(t, err)
	defer im.Close()
	checked := 0
	for _, e := range isoinfoList(t, p, true) {
		if e.isDirEntry || e.size == 0 {
			continue // an empty file has no extent of its own
		}
		x, err := im.Locate(e.dir + e.name)
		if err != nil {
			t.Errorf("%s%s: %v", e.dir, e.name, err)
			continue
		}
		if x.Offset != e.lba*SectorSize || x.Length != e.size {
			t.Errorf("%s%s: Locate says %+v, isoinfo block %d size %d", e.dir, e.name, x, e.lba, e.size)
		}
		checked++
	}
	if checked < len(files)-1 {
		t.Errorf("only %d files compared with isoinfo", checked)
	}
}

// TestElTorito makes a BIOS + EFI bootable image as a live ISO has it and checks the catalog with
// xorriso and the boot information table in the image.
func TestElTorito(t *testing.T) {
	loader := make([]byte, 4096)
	copy(loader, "isolinux")
	files := append(ironicLike(), File{Path: "isolinux/isolinux.bin", Data: loader})
	p := writeImage(t, Options{VolumeID: "LIVE", Boot: &Boot{
		Catalog: "isolinux/boot.cat",
		Entries: []BootEntry{
			{Platform: BIOS, File: "isolinux/isolinux.bin", LoadSectors: 4, InfoTable: true},
			{Platform: EFI, File: "boot/grub/efiboot.img"},
		},
	}}, files)
	var report []string // xorriso's lines with single spaces
	for _, line := range strings.Split(string(run(t, "xorriso", "-indev", p, "-report_el_torito", "plain")), "\n") {
		report = append(report, strings.Join(strings.Fields(line), " "))
	}
	im, err := OpenFile(p)
	must(t, err)
	defer im.Close()
	bios, err := im.Locate("isolinux/isolinux.bin")
	must(t, err)
	efi, err := im.Locate("boot/grub/efiboot.img")
	must(t, err)
	catalog, err := im.Locate("isolinux/boot.cat")
	must(t, err)
	for _, want := range []string{
		fmt.Sprintf("El Torito catalog : %d 1", catalog.Offset/SectorSize),
		fmt.Sprintf("El Torito boot img : 1 BIOS y none 0x0000 0x00 4 %d", bios.Offset/SectorSize),
		fmt.Sprintf("El Torito boot img : 2 UEFI y none 0x0000 0x00 16 %d", efi.Offset/SectorSize),
		"El Torito img opts : 1 boot-info-table",
	} {
		if !slices.Contains(report, want) {
			t.Errorf("xorriso -report_el_torito lacks %q:\n%s", want, strings.Join(report, "\n"))
		}
	}
	// -boot-info-table: the image's copy of the loader carries the volume descriptor's and its
	// own block at bytes 8 and 12; the input was not changed.
	got, err := im.ReadFile("isolinux/isolinux.bin")
	must(t, err)
	if binary.LittleEndian.Uint32(got[8:]) != 16 || int64(binary.LittleEndian.Uint32(got[12:])) != bios.Offset/SectorSize {
		t.Errorf("boot information table: % x", got[8:24])
	}
	if !bytes.Equal(loader[8:64], make([]byte, 56)) {
		t.Error("Write changed the caller's boot file")
	}
}

func TestErrors(t *testing.T) {
	img := build1(t, Options{}, sample())
	im, err := Open(bytes.NewReader(img), int64(len(img)))
	must(t, err)
	for p, want := range map[string]error{
		"missing":              fs.ErrNotExist,
		"vmlinuz/below-a-file": fs.ErrNotExist,
		"EFI/BOOT/missing.cfg": fs.ErrNotExist,
	} {
		if _, err := im.ReadFile(p); !errors.Is(err, want) {
			t.Errorf("ReadFile(%q): %v, want %v", p, err, want)
		}
	}
	if _, err := im.ReadFile("EFI"); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("ReadFile of a directory: %v", err)
	}
	if _, err := im.ReadDir("vmlinuz"); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("ReadDir of a file: %v", err)
	}

	for name, data := range map[string][]byte{
		"zeros": make([]byte, 40*SectorSize),
		"short": []byte("short"),
	} {
		if _, err := Open(bytes.NewReader(data), int64(len(data))); !errors.Is(err, ErrNotISO) {
			t.Errorf("%s: %v, want ErrNotISO", name, err)
		}
	}
	if HasSignature(img[:HeaderSize-1]) || !HasSignature(img[:HeaderSize]) || HasSignature(make([]byte, HeaderSize)) {
		t.Error("HasSignature is wrong")
	}

	// A truncated image: the directory tree is there, a file's extent is not.
	cut := img[:len(img)-SectorSize]
	im, err = Open(bytes.NewReader(cut), int64(len(cut)))
	must(t, err)
	var last string
	for _, f := range sample() {
		x, err := im.Locate(f.Path)
		if err != nil {
			last = f.Path
			if !strings.Contains(err.Error(), "beyond the end of the image") {
				t.Errorf("%s: %v", f.Path, err)
			}
			continue
		}
		if x.Offset+x.Length > int64(len(cut)) {
			t.Errorf("%s: extent %+v beyond the image", f.Path, x)
		}
	}
	if last == "" {
		t.Error("no file was reported beyond the end of the truncated image")
	}
}

// TestDamagedImageIsAnError: go-diskfs slices with lengths from the image; a bad name length in
// the root's first record panics inside it, and Open must return an error instead.
func TestDamagedImageIsAnError(t *testing.T) {
	img := build1(t, Options{}, sample())
	root := int64(binary.LittleEndian.Uint32(img[16*SectorSize+156+2:])) * SectorSize
	img[root+32] = 0xff // the "." record's name length
	_, err := Open(bytes.NewReader(img), int64(len(img)))
	if err == nil || !strings.Contains(err.Error(), "damaged image") {
		t.Errorf("Open of a damaged image: %v", err)
	}
}

// TestOpenStreamsFromDisk reads files through Open's readers concurrently from an image on disk
// and checks that the Image reads only what it is asked for.
func TestOpenStreamsFromDisk(t *testing.T) {
	p := writeImage(t, Options{}, sample())
	f, err := os.Open(p)
	must(t, err)
	defer f.Close()
	st, err := f.Stat()
	must(t, err)
	counter := &countingReaderAt{r: f}
	im, err := Open(counter, st.Size())
	must(t, err)
	opened := counter.total()
	if opened >= st.Size()/2 {
		t.Errorf("Open read %d of %d bytes", opened, st.Size())
	}
	want := sample()[1].Data // initrd, several sectors
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			r, err := im.Open("initrd")
			if err != nil {
				t.Error(err)
				return
			}
			got, err := io.ReadAll(r)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("initrd through Open: %d bytes, %v", len(got), err)
			}
		})
	}
	wg.Wait()
	if read := counter.total() - opened; read > 8*int64(len(want))+64*SectorSize {
		t.Errorf("8 reads of a %d-byte file read %d bytes of the image", len(want), read)
	}
}

type countingReaderAt struct {
	r  io.ReaderAt
	mu sync.Mutex
	n  int64
}

func (c *countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.mu.Lock()
	c.n += int64(n)
	c.mu.Unlock()
	return n, err
}

func (c *countingReaderAt) total() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// TestOpenBlockDevice opens an image written to a block device (a loop device here), whose Stat
// size is 0: the base ISO of the image-customization-controller may be one.
func TestOpenBlockDevice(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to attach a loop device")
	}
	p := filepath.Join(t.TempDir(), "base.iso")
	files := ironicLike()
	must(t, WriteFile(p, Options{VolumeID: "ON_A_DISK"}, files))
	out, err := exec.Command("losetup", "--read-only", "--find", "--show", p).CombinedOutput()
	if err != nil {
		t.Skipf("no loop device: %v: %s", err, out)
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() { _ = exec.Command("losetup", "--detach", dev).Run() })
	if st, err := os.Stat(dev); err != nil || st.Size() != 0 {
		t.Fatalf("%s: Stat size %v, %v: the test needs a device that reports 0", dev, st, err)
	}
	im, err := OpenFile(dev)
	must(t, err)
	defer im.Close()
	if im.VolumeID() != "ON_A_DISK" {
		t.Errorf("volume id %q", im.VolumeID())
	}
	for _, f := range files {
		if got, err := im.ReadFile("/" + f.Path); err != nil || !bytes.Equal(got, f.Data) {
			t.Errorf("%s: %d bytes, %v", f.Path, len(got), err)
		}
	}
}
