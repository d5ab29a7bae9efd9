package baseimage

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/metalforge/metalforge/internal/iso"
)

// RootfsURLArg is the kernel argument with which the live initramfs fetches its root filesystem.
const RootfsURLArg = "coreos.live.rootfs_url"

// inMemory is the largest file WriteMinimal holds in memory; larger ones are staged on disk.
const inMemory = 1 << 20

// WriteMinimal writes a minimal ISO to out: the base ISO without images/pxeboot/rootfs.img, with
// coreos.live.rootfs_url=rootfsURL instead of coreos.liveiso=… in its kernel arguments (the
// embed areas of coreos/kargs.json, and its default). It is what seed 001 asks for BMCs that
// refuse large ISOs, and what coreos-installer's "iso extract minimal-iso" and the
// assisted-image-service produce; like the latter, it is laid out anew (with El Torito entries for
// isolinux/isolinux.bin and images/efiboot.img when the base has them) rather than reconstructed
// bit for bit, and an isohybrid MBR of the base is not kept (BMC virtual media boots El Torito).
// The output depends only on the base's content and rootfsURL. tmp holds staged files, the
// image writer's copies included (a crash leaves them where the caller cleans up).
func WriteMinimal(base *ISO, rootfsURL, out, tmp string) error {
	if base.Kargs == nil {
		return fmt.Errorf("minimal ISO: %s has no /%s, so its kernel arguments cannot be changed", base.Path, KargsPath)
	}
	if strings.ContainsAny(rootfsURL, " \t\n\"'#") || rootfsURL == "" {
		return fmt.Errorf("minimal ISO: root filesystem URL %q cannot be a kernel argument", rootfsURL)
	}
	kargs := minimalKargs(base.Kargs.Default, rootfsURL)
	if len(kargs)+1 > base.Kargs.Size {
		return fmt.Errorf("minimal ISO: kernel arguments %q do not fit the %d-byte embed area", kargs, base.Kargs.Size)
	}
	im, err := iso.OpenFile(base.Path)
	if err != nil {
		return fmt.Errorf("minimal ISO: %w", err)
	}
	defer im.Close()
	stage, err := os.MkdirTemp(tmp, "minimal-")
	if err != nil {
		return fmt.Errorf("minimal ISO: %w", err)
	}
	defer os.RemoveAll(stage)
	files, err := collect(im, ".", stage)
	if err != nil {
		return fmt.Errorf("minimal ISO: %w", err)
	}
	byPath := map[string]*iso.File{}
	for i := range files {
		byPath[strings.ToLower(files[i].Path)] = &files[i]
	}
	for _, loc := range base.Kargs.Files {
		f := byPath[strings.ToLower(strings.TrimPrefix(loc.Path, "/"))]
		if f == nil || f.Data == nil {
			return fmt.Errorf("minimal ISO: kernel argument file %s is missing or too large", loc.Path)
		}
		if f.Data, err = rewriteKargs(f.Data, loc, base.Kargs.Size, kargs); err != nil {
			return fmt.Errorf("minimal ISO: %s: %w", loc.Path, err)
		}
	}
	kj := *base.Kargs
	kj.Default = kargs
	data, err := json.MarshalIndent(kj, "", "  ")
	if err != nil {
		return fmt.Errorf("minimal ISO: %w", err)
	}
	if f := byPath[KargsPath]; f != nil {
		f.Data = append(data, '\n')
	}
	boot := bootEntries(byPath)
	tmpOut := out + ".tmp"
	if err := iso.WriteFile(tmpOut, iso.Options{VolumeID: base.VolumeID, Publisher: "metalforge minimal ISO", Boot: boot, TempDir: stage}, files); err != nil {
		return fmt.Errorf("minimal ISO: %w", err)
	}
	if err := os.Rename(tmpOut, out); err != nil {
		return fmt.Errorf("minimal ISO: %w", err)
	}
	return nil
}

// minimalKargs drops coreos.liveiso (the root filesystem is not on the ISO) and adds the URL.
func minimalKargs(def, rootfsURL string) string {
	var out []string
	for _, a := range strings.Fields(def) {
		if strings.HasPrefix(a, "coreos.liveiso=") || strings.HasPrefix(a, RootfsURLArg+"=") {
			continue
		}
		out = append(out, a)
	}
	return strings.Join(append(out, RootfsURLArg+"="+rootfsURL), " ")
}

// rewriteKargs puts kargs into the size-byte area at loc.Offset, ended and padded as
// coreos-installer does.
func rewriteKargs(data []byte, loc KargsLocation, size int, kargs string) ([]byte, error) {
	end, pad := "\n", "#"
	if loc.End != "" {
		end = loc.End
	}
	if loc.Pad != "" {
		pad = loc.Pad
	}
	if loc.Offset < 0 || loc.Offset+int64(size) > int64(len(data)) {
		return nil, fmt.Errorf("kernel argument area at %d (%d bytes) is outside the file", loc.Offset, size)
	}
	area := data[loc.Offset : loc.Offset+int64(size)]
	if !strings.HasSuffix(string(area), pad) {
		return nil, errors.New("no kernel argument area at the offset kargs.json gives")
	}
	out := append([]byte(nil), data...)
	fill := kargs + end + strings.Repeat(pad, size-len(kargs)-len(end))
	copy(out[loc.Offset:], fill)
	return out, nil
}

// collect lists the regular files under dir except the root filesystem, holding small ones in
// memory and staging large ones under stage. The base's El Torito catalog is left out: the writer
// makes a new one.
func collect(im *iso.Image, dir, stage string) ([]iso.File, error) {
	entries, err := im.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []iso.File
	for _, e := range entries {
		p := path.Join(dir, e.Name)
		switch {
		case e.IsDir:
			sub, err := collect(im, p, stage)
			if err != nil {
				return nil, err
			}
			out = append(out, sub...)
			continue
		case strings.EqualFold(p, RootfsPath), isCatalog(p):
			continue
		}
		f := iso.File{Path: p, Mode: e.Mode.Perm()}
		if e.Length <= inMemory {
			if f.Data, err = im.ReadFile(p); err != nil {
				return nil, err
			}
		} else if f.Source, err = extract(im, p, stage); err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

func isCatalog(p string) bool {
	b := strings.ToLower(path.Base(p))
	return b == "boot.cat" || b == "boot.catalog"
}

func extract(im *iso.Image, p, stage string) (string, error) {
	r, err := im.Open(p)
	if err != nil {
		return "", err
	}
	dst := filepath.Join(stage, strings.ReplaceAll(p, "/", "_"))
	w, err := os.Create(dst)
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(w, r); err != nil {
		w.Close()
		return "", fmt.Errorf("extracting %s: %w", p, err)
	}
	return dst, w.Close()
}

// bootEntries makes El Torito entries for the CoreOS boot files the ISO has.
func bootEntries(byPath map[string]*iso.File) *iso.Boot {
	b := &iso.Boot{Catalog: "boot.catalog"}
	if f := byPath["isolinux/isolinux.bin"]; f != nil {
		b.Catalog = path.Join(path.Dir(f.Path), "boot.cat")
		b.Entries = append(b.Entries, iso.BootEntry{Platform: iso.BIOS, File: f.Path, LoadSectors: 4, InfoTable: true})
	}
	if f := byPath["images/efiboot.img"]; f != nil {
		b.Entries = append(b.Entries, iso.BootEntry{Platform: iso.EFI, File: f.Path})
	}
	if len(b.Entries) == 0 {
		return nil
	}
	return b
}
