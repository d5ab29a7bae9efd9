package iso

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/diskfs/go-diskfs/backend"
	"github.com/diskfs/go-diskfs/filesystem/iso9660"
)

// signature is the standard identifier of every volume descriptor.
const signature = "CD001"

// HeaderSize is how many bytes from the start of an image HasSignature needs: the system area and
// the type and identifier of the first volume descriptor.
const HeaderSize = 16*SectorSize + 6

// ErrNotISO means the data has no ISO 9660 volume descriptor.
var ErrNotISO = errors.New("iso: not an ISO 9660 image")

// HasSignature reports whether head, the first bytes of some data, starts like an ISO 9660 image
// (the "CD001" identifier of the first volume descriptor, at sector 16).
func HasSignature(head []byte) bool {
	return len(head) >= HeaderSize && string(head[16*SectorSize+1:HeaderSize]) == signature
}

// Extent is where a file's bytes are in an image.
type Extent struct {
	Offset int64
	Length int64
}

// Entry is a file or directory of an image.
type Entry struct {
	// Name is the Rock Ridge name when the image has Rock Ridge, else the ISO 9660 name without
	// its ";1" version.
	Name  string
	IsDir bool
	// Mode is the Rock Ridge mode (0755 without Rock Ridge).
	Mode fs.FileMode
	// Extent is where the content is (for a directory, its records).
	Extent
}

// Image is an opened ISO 9660 image. Reads go straight to the underlying io.ReaderAt: nothing is
// loaded up front but the volume descriptors and path table, and an Image is safe for concurrent
// use when its ReaderAt is (an *os.File is).
type Image struct {
	fs     *iso9660.FileSystem
	r      io.ReaderAt
	size   int64
	root   Entry
	closer io.Closer
}

// Open reads the volume descriptors of an image of size bytes.
func Open(r io.ReaderAt, size int64) (im *Image, err error) {
	head := make([]byte, len(signature)+1)
	if size < 17*SectorSize {
		return nil, ErrNotISO
	}
	if _, err := r.ReadAt(head, 16*SectorSize); err != nil {
		return nil, fmt.Errorf("iso: reading the first volume descriptor: %w", err)
	}
	if string(head[1:]) != signature {
		return nil, ErrNotISO
	}
	defer recoverDamage(&err, "opening")
	fsys, err := iso9660.Read(storage{io.NewSectionReader(r, 0, size)}, size, 0, SectorSize)
	if err != nil {
		return nil, fmt.Errorf("iso: opening: %w", err)
	}
	im = &Image{fs: fsys, r: r, size: size}
	fi, err := fsys.Stat(".")
	if err != nil {
		return nil, fmt.Errorf("iso: reading the root directory: %w", err)
	}
	if im.root, err = im.entry(".", fi); err != nil {
		return nil, err
	}
	return im, nil
}

// OpenFile opens the image in the named file or block device (a CoreOS live ISO written to a
// disk, which OpenShift's image-customization-controller accepts as its base); Close closes it.
func OpenFile(name string) (*Image, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("iso: %w", err)
	}
	// The end, not Stat: a block device's Stat size is 0.
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("iso: %s: %w", name, err)
	}
	im, err := Open(f, size)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	im.closer = f
	return im, nil
}

// Close closes the file OpenFile opened; for an image from Open it does nothing.
func (im *Image) Close() error {
	if im.closer == nil {
		return nil
	}
	return im.closer.Close()
}

// Size is the size of the image in bytes.
func (im *Image) Size() int64 { return im.size }

// VolumeID is the volume identifier (VMEDIA_BOOT_ISO in the ISOs Ironic builds).
func (im *Image) VolumeID() string { return strings.TrimRight(im.fs.Label(), " \x00") }

// Stat describes the file or directory at p ("/", "" or "." is the root). A name that is not found
// exactly is matched case-insensitively.
func (im *Image) Stat(p string) (Entry, error) {
	e, _, err := im.resolve(p)
	return e, err
}

// resolve finds p and returns its entry and its path as the image spells it.
func (im *Image) resolve(p string) (Entry, string, error) {
	p = cleanPath(p)
	cur, dir := im.root, "."
	if p == "." {
		return cur, dir, nil
	}
	for _, part := range strings.Split(p, "/") {
		if !cur.IsDir {
			return Entry{}, "", fmt.Errorf("iso: %s: %w", p, fs.ErrNotExist)
		}
		entries, err := im.readDir(dir)
		if err != nil {
			return Entry{}, "", err
		}
		found, n := find(entries, part)
		if n == 0 {
			return Entry{}, "", fmt.Errorf("iso: %s: %w", p, fs.ErrNotExist)
		}
		if n > 1 {
			// xorriso stores a file over 4 GiB as several records of the same name.
			return Entry{}, "", fmt.Errorf("iso: %s is stored in several extents, which is not supported", p)
		}
		cur, dir = found, path.Join(dir, found.Name)
	}
	return cur, dir, nil
}

// find returns the entry named name (else the first whose name matches case-insensitively) and
// how many entries have that name.
func find(entries []Entry, name string) (Entry, int) {
	for _, exact := range []bool{true, false} {
		var found Entry
		n := 0
		for _, e := range entries {
			if (exact && e.Name == name) || (!exact && strings.EqualFold(e.Name, name)) {
				if n == 0 {
					found = e
				}
				n++
			}
		}
		if n > 0 {
			return found, n
		}
	}
	return Entry{}, 0
}

// ReadDir lists the directory at p, in the order of its records.
func (im *Image) ReadDir(p string) ([]Entry, error) {
	e, real, err := im.resolve(p)
	if err != nil {
		return nil, err
	}
	if !e.IsDir {
		return nil, fmt.Errorf("iso: %s is not a directory", cleanPath(p))
	}
	return im.readDir(real)
}

// Locate returns where the regular file at p is stored in the image.
func (im *Image) Locate(p string) (Extent, error) {
	e, err := im.Stat(p)
	if err != nil {
		return Extent{}, err
	}
	if e.IsDir {
		return Extent{}, fmt.Errorf("iso: %s is a directory", cleanPath(p))
	}
	return e.Extent, nil
}

// Open returns a reader of the regular file at p that reads from the image on demand.
func (im *Image) Open(p string) (*io.SectionReader, error) {
	x, err := im.Locate(p)
	if err != nil {
		return nil, err
	}
	return io.NewSectionReader(im.r, x.Offset, x.Length), nil
}

// ReadFile returns the content of the regular file at p.
func (im *Image) ReadFile(p string) ([]byte, error) {
	x, err := im.Locate(p)
	if err != nil {
		return nil, err
	}
	b := make([]byte, x.Length)
	if _, err := im.r.ReadAt(b, x.Offset); err != nil && (!errors.Is(err, io.EOF) || x.Length != 0) {
		return nil, fmt.Errorf("iso: reading %s: %w", cleanPath(p), err)
	}
	return b, nil
}

func (im *Image) readDir(dir string) (entries []Entry, err error) {
	defer recoverDamage(&err, "reading directory "+dir)
	des, err := im.fs.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("iso: %w", err)
	}
	for _, de := range des {
		fi, err := de.Info()
		if err != nil {
			return nil, fmt.Errorf("iso: %s: %w", path.Join(dir, de.Name()), err)
		}
		e, err := im.entry(path.Join(dir, de.Name()), fi)
		if err != nil {
			return nil, err
		}
		entries = append(entries, e)
	}
	return entries, nil
}

func (im *Image) entry(p string, fi fs.FileInfo) (Entry, error) {
	st, ok := fi.Sys().(*iso9660.StatT)
	if !ok {
		return Entry{}, fmt.Errorf("iso: %s: no ISO 9660 record", p)
	}
	e := Entry{Name: fi.Name(), IsDir: fi.IsDir(), Mode: fi.Mode(), Extent: Extent{Offset: int64(st.Location) * SectorSize, Length: fi.Size()}}
	if e.Offset+e.Length > im.size {
		return Entry{}, fmt.Errorf("iso: %s: its extent ends at byte %d, beyond the end of the image (%d bytes)", p, e.Offset+e.Length, im.size)
	}
	return e, nil
}

// recoverDamage turns a panic inside go-diskfs, which trusts lengths read from the image, into an
// error.
func recoverDamage(err *error, what string) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("iso: %s: damaged image (%v)", what, r)
	}
}

// storage adapts an io.SectionReader to the read-only backend go-diskfs reads from.
type storage struct{ *io.SectionReader }

var _ backend.Storage = storage{}

func (storage) Stat() (fs.FileInfo, error)              { return nil, errors.ErrUnsupported }
func (storage) Close() error                            { return nil }
func (storage) Sys() (*os.File, error)                  { return nil, backend.ErrNotSuitable }
func (storage) Writable() (backend.WritableFile, error) { return nil, backend.ErrIncorrectOpenMode }
func (storage) Path() string                            { return "" }
