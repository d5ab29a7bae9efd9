package iso

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/iso9660"
)

// SectorSize is the logical block size of every image this package writes or reads.
const SectorSize = 2048

// DefaultTime is the time stamped on every record when Options.Time is zero.
var DefaultTime = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// File is one regular file of an image. Data or Source gives its content; with neither it is empty.
type File struct {
	// Path is slash-separated; a leading "/" is optional ("EFI/BOOT/grub.cfg"). Directories are
	// created as needed. Rock Ridge keeps the name's case and length.
	Path string
	// Data is the content of a small file.
	Data []byte
	// Source is a file on disk to copy, for content too large to hold in memory.
	Source string
	// Mode holds the permission bits recorded in Rock Ridge; zero means 0644.
	Mode fs.FileMode
}

// Options describe the volume.
type Options struct {
	// VolumeID is the volume identifier (up to 32 characters; mkisofs' -V).
	VolumeID string
	// Publisher is the publisher identifier (up to 128 characters).
	Publisher string
	// Time is recorded in the volume descriptor and on every file and directory; zero means
	// DefaultTime. Nothing in the image depends on the clock.
	Time time.Time
	// Boot makes the image bootable with El Torito; nil means not bootable.
	Boot *Boot
	// TempDir is where the files are staged while the image is written (a copy of each, removed
	// at the end); empty means os.TempDir(). A caller that cleans up after a crash, or whose
	// /tmp is small, names a directory of its own.
	TempDir string
}

// Boot is an El Torito boot catalog.
type Boot struct {
	// Catalog is where the catalog appears in the image; empty means "boot.catalog".
	Catalog string
	// Entries are the boot images, the default one first.
	Entries []BootEntry
}

// Platform is an El Torito platform.
type Platform uint8

// The platforms a boot entry can name.
const (
	BIOS = Platform(iso9660.BIOS)
	EFI  = Platform(iso9660.EFI)
)

// BootEntry is one boot image, always without emulation (what mkisofs' -no-emul-boot writes).
type BootEntry struct {
	Platform Platform
	// File is the image's path; it must be one of the files written.
	File string
	// LoadSectors is how many 512-byte sectors a BIOS loads (mkisofs' -boot-load-size); zero
	// lets go-diskfs choose (4 for BIOS, the whole file for EFI).
	LoadSectors uint16
	// InfoTable patches a boot information table into the image (mkisofs' -boot-info-table), as
	// isolinux needs.
	InfoTable bool
}

// Write writes an image of files to w. The image is built in a temporary file first.
func Write(w io.Writer, opts Options, files []File) error {
	f, err := os.CreateTemp("", "metalforge-iso-*.iso")
	if err != nil {
		return fmt.Errorf("iso: creating a temporary image: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if err := build(f, opts, files); err != nil {
		return err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("iso: rewinding the temporary image: %w", err)
	}
	if _, err := io.Copy(w, f); err != nil {
		return fmt.Errorf("iso: copying the image: %w", err)
	}
	return nil
}

// WriteFile writes an image of files to the file name, replacing it; on failure name is removed.
func WriteFile(name string, opts Options, files []File) (err error) {
	f, err := os.Create(name)
	if err != nil {
		return fmt.Errorf("iso: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("iso: closing %s: %w", name, cerr)
		}
		if err != nil {
			_ = os.Remove(name)
		}
	}()
	return build(f, opts, files)
}

// build has go-diskfs lay out the image into out and makes the result reproducible.
func build(out *os.File, opts Options, files []File) error {
	if err := layout(out, opts, files); err != nil {
		return err
	}
	t := opts.Time
	if t.IsZero() {
		t = DefaultTime
	}
	if err := makeReproducible(out, t); err != nil {
		return fmt.Errorf("iso: %w", err)
	}
	return nil
}

// layout checks the input, stages the files in a workspace and has go-diskfs write the image.
func layout(out *os.File, opts Options, files []File) error {
	if len(opts.VolumeID) > 32 || len(opts.Publisher) > 128 {
		return fmt.Errorf("iso: VolumeID (%d bytes) is longer than 32 or Publisher (%d bytes) longer than 128", len(opts.VolumeID), len(opts.Publisher))
	}
	tree, err := plan(files)
	if err != nil {
		return err
	}
	if err := checkBoot(opts.Boot, tree); err != nil {
		return err
	}
	ws, err := os.MkdirTemp(opts.TempDir, "metalforge-iso-ws-")
	if err != nil {
		return fmt.Errorf("iso: creating a workspace: %w", err)
	}
	defer os.RemoveAll(ws)
	if err := stage(ws, files); err != nil {
		return err
	}
	return finalize(out, ws, opts)
}

// finalize has go-diskfs turn the staged workspace into an image (it removes the workspace).
func finalize(out *os.File, ws string, opts Options) error {
	fsys, err := iso9660.Create(file.New(out, false), 0, 0, SectorSize, ws)
	if err != nil {
		return fmt.Errorf("iso: %w", err)
	}
	fo := iso9660.FinalizeOptions{
		RockRidge:           true,
		VolumeIdentifier:    opts.VolumeID,
		PublisherIdentifier: opts.Publisher,
		ElTorito:            elTorito(opts.Boot),
	}
	if err := fsys.Finalize(fo); err != nil {
		return fmt.Errorf("iso: laying out the image: %w", err)
	}
	return nil
}

// cleanPath turns "/a/b", "a/b" and "a//b/" into "a/b" ("." for the root).
func cleanPath(p string) string {
	p = strings.TrimPrefix(path.Clean("/"+p), "/")
	if p == "" {
		return "."
	}
	return p
}

// maxDirDepth is how many directory levels go-diskfs writes without Rock Ridge relocation (the
// root is level 1 of ECMA-119's 8), whose result depends on map order.
const maxDirDepth = 7

// plan checks the paths and returns, per directory, the names it holds (directories and files).
func plan(files []File) (map[string]map[string]bool, error) {
	tree := map[string]map[string]bool{".": {}}
	isFile := map[string]bool{}
	for _, f := range files {
		p := cleanPath(f.Path)
		if p == "." || strings.Contains(f.Path, "\x00") {
			return nil, fmt.Errorf("iso: invalid file path %q", f.Path)
		}
		if f.Data != nil && f.Source != "" {
			return nil, fmt.Errorf("iso: %s: give Data or Source, not both", p)
		}
		if int64(len(f.Data)) > math.MaxUint32 {
			return nil, fmt.Errorf("iso: %s: 4 GiB or larger", p)
		}
		parts := strings.Split(p, "/")
		if len(parts)-1 > maxDirDepth {
			return nil, fmt.Errorf("iso: %s: more than %d directory levels", p, maxDirDepth)
		}
		for i, name := range parts {
			if len(name) > 255 {
				return nil, fmt.Errorf("iso: %s: a name longer than 255 bytes", p)
			}
			dir, cur := path.Join(parts[:i]...), path.Join(parts[:i+1]...)
			if dir == "" {
				dir = "."
			}
			last := i == len(parts)-1
			if isFile[cur] || (last && tree[cur] != nil) {
				return nil, fmt.Errorf("iso: %s: a path is both a file and a directory, or given twice", p)
			}
			tree[dir][name] = true
			if last {
				isFile[cur] = true
			} else if tree[cur] == nil {
				tree[cur] = map[string]bool{}
			}
		}
	}
	for dir, names := range tree {
		if err := checkShortNames(dir, names); err != nil {
			return nil, err
		}
	}
	return tree, nil
}

// checkShortNames refuses a directory where two groups of names clash in their ISO 9660 8.3 form:
// go-diskfs renames each group (FILENAM0, FILENAM1, ...) in map order, so which name a group gets
// would change between runs. One clashing group is renamed the same way every time.
func checkShortNames(dir string, names map[string]bool) error {
	groups := map[string][]string{}
	for n := range names {
		k := shortName(n)
		groups[k] = append(groups[k], n)
	}
	var clashing []string
	for k, g := range groups {
		if len(g) > 1 {
			clashing = append(clashing, k)
		}
	}
	if len(clashing) > 1 {
		return fmt.Errorf("iso: directory %s: names clash in more than one 8.3 group (%s); the layout would not be reproducible, rename some",
			dir, strings.Join(clashing, ", "))
	}
	return nil
}

// shortName is go-diskfs's 8.3 form of a name (calculateShortnameExtension): upper case, the
// part before the first dot cut to 8 characters, the rest to 3, other characters as "_".
func shortName(name string) string {
	base, ext, _ := strings.Cut(name, ".")
	clean := func(s string, n int) string {
		b := []byte(strings.ToUpper(s))
		for i, c := range b {
			if (c < 'A' || c > 'Z') && (c < '0' || c > '9') {
				b[i] = '_'
			}
		}
		return string(b[:min(len(b), n)])
	}
	return clean(base, 8) + "." + clean(ext, 3)
}

// stage writes the files into the workspace go-diskfs turns into the image. Modes are set
// explicitly so that the umask does not reach the image.
func stage(ws string, files []File) error {
	if err := os.Chmod(ws, 0o755); err != nil {
		return fmt.Errorf("iso: %w", err)
	}
	for _, f := range files {
		p := cleanPath(f.Path)
		dst := filepath.Join(ws, filepath.FromSlash(p))
		if err := mkdirs(ws, path.Dir(p)); err != nil {
			return err
		}
		var err error
		if f.Source != "" {
			err = copyFile(dst, f.Source)
		} else {
			err = os.WriteFile(dst, f.Data, 0o600)
		}
		if err != nil {
			return fmt.Errorf("iso: staging %s: %w", p, err)
		}
		mode := f.Mode.Perm()
		if mode == 0 {
			mode = 0o644
		}
		if err := os.Chmod(dst, mode); err != nil {
			return fmt.Errorf("iso: staging %s: %w", p, err)
		}
	}
	return nil
}

func mkdirs(ws, dir string) error {
	if dir == "." {
		return nil
	}
	cur := ws
	for _, part := range strings.Split(dir, "/") {
		cur = filepath.Join(cur, part)
		err := os.Mkdir(cur, 0o755)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err == nil {
			err = os.Chmod(cur, 0o755)
		}
		if err != nil {
			return fmt.Errorf("iso: staging directory %s: %w", dir, err)
		}
	}
	return nil
}

func copyFile(dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("source %s is not a regular file", src)
	}
	if st.Size() > math.MaxUint32 {
		// ISO 9660 records a size in 32 bits; go-diskfs does not split larger files into extents.
		return fmt.Errorf("source %s is 4 GiB or larger", src)
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func checkBoot(b *Boot, tree map[string]map[string]bool) error {
	if b == nil {
		return nil
	}
	if len(b.Entries) == 0 {
		return errors.New("iso: Boot has no entries")
	}
	for i, e := range b.Entries {
		p := cleanPath(e.File)
		if !tree[path.Dir(p)][path.Base(p)] || tree[p] != nil {
			return fmt.Errorf("iso: Boot.Entries[%d].File %q is not one of the files", i, e.File)
		}
		if e.Platform != BIOS && e.Platform != EFI {
			return fmt.Errorf("iso: Boot.Entries[%d].Platform %#x is neither BIOS nor EFI", i, e.Platform)
		}
	}
	// go-diskfs adds the catalog to its directory like a file, so it takes part in the 8.3 check.
	c := catalogPath(b)
	dir, name := path.Dir(c), path.Base(c)
	if tree[dir] == nil || tree[dir][name] || tree[c] != nil {
		return fmt.Errorf("iso: Boot.Catalog %q must name a new file in a directory of the image", b.Catalog)
	}
	tree[dir][name] = true
	return checkShortNames(dir, tree[dir])
}

func catalogPath(b *Boot) string {
	if b.Catalog == "" {
		return "boot.catalog"
	}
	return cleanPath(b.Catalog)
}

func elTorito(b *Boot) *iso9660.ElTorito {
	if b == nil {
		return nil
	}
	et := &iso9660.ElTorito{BootCatalog: catalogPath(b)}
	for _, e := range b.Entries {
		ent := &iso9660.ElToritoEntry{
			Platform:  iso9660.Platform(e.Platform),
			Emulation: iso9660.NoEmulation,
			BootFile:  cleanPath(e.File),
			BootTable: e.InfoTable,
		}
		if e.LoadSectors != 0 {
			ent.SetLoadSize(e.LoadSectors)
		}
		et.Entries = append(et.Entries, ent)
	}
	return et
}
