package iso9660

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
)

// ErrNotISO means the data carries no ISO 9660 primary volume descriptor.
var ErrNotISO = errors.New("iso9660: not an ISO 9660 image")

// ErrNotExist means a path is not in the image.
var ErrNotExist = errors.New("iso9660: file does not exist")

// maxDirBytes bounds a directory extent so a corrupt image cannot make us allocate gigabytes.
const maxDirBytes = 16 << 20

// Image is an opened ISO 9660 filesystem.
type Image struct {
	r         io.ReaderAt
	size      int64
	volumeID  string
	publisher string
	root      Entry
	susp      int // bytes to skip at the start of each system use area (SUSP "SP"), -1 if no SUSP
}

// Entry is one directory record.
type Entry struct {
	Name  string // Rock Ridge name when present, else the ISO name without ";1" and trailing dot
	IsDir bool
	Size  int64
	lba   uint32
}

// Open reads the volume descriptors of an image of the given size.
func Open(r io.ReaderAt, size int64) (*Image, error) {
	im := &Image{r: r, size: size, susp: -1}
	sec := make([]byte, SectorSize)
	for lba := int64(16); ; lba++ {
		if (lba+1)*SectorSize > size {
			return nil, ErrNotISO
		}
		if _, err := r.ReadAt(sec, lba*SectorSize); err != nil {
			return nil, fmt.Errorf("iso9660: reading volume descriptor %d: %w", lba, err)
		}
		if string(sec[1:6]) != "CD001" {
			return nil, ErrNotISO
		}
		if sec[0] == 255 {
			return nil, ErrNotISO // terminator without a primary descriptor
		}
		if sec[0] == 1 {
			if bs := binary.LittleEndian.Uint16(sec[128:]); bs != SectorSize {
				return nil, fmt.Errorf("iso9660: unsupported logical block size %d", bs)
			}
			im.volumeID = strings.TrimRight(string(sec[40:72]), " ")
			im.publisher = strings.TrimRight(string(sec[318:446]), " ")
			e, _, err := im.parseRecord(sec[156:190])
			if err != nil {
				return nil, fmt.Errorf("iso9660: root record: %w", err)
			}
			im.root = e
			break
		}
	}
	// SUSP: the root's "." record carries "SP" when Rock Ridge (or other SUSP) is in use.
	if ext, err := im.readExtent(im.root); err == nil && len(ext) > 0 && int(ext[0]) <= len(ext) {
		rec := ext[:ext[0]]
		if len(rec) > 34 {
			su := rec[34:]
			if len(su) >= 7 && string(su[0:2]) == "SP" && su[4] == 0xBE && su[5] == 0xEF {
				im.susp = int(su[6])
			}
		}
	}
	return im, nil
}

// VolumeID is the volume identifier (e.g. VMEDIA_BOOT_ISO for the ISOs Ironic builds).
func (im *Image) VolumeID() string { return im.volumeID }

// Publisher is the publisher identifier (Ironic puts ir_pub_id there).
func (im *Image) Publisher() string { return im.publisher }

// ReadDir lists a directory ("/" or "" for the root). Names match case-insensitively.
func (im *Image) ReadDir(p string) ([]Entry, error) {
	e, err := im.lookup(p)
	if err != nil {
		return nil, err
	}
	if !e.IsDir {
		return nil, fmt.Errorf("iso9660: %s is not a directory", p)
	}
	return im.list(e)
}

// ReadFile returns a file's content. Names match case-insensitively, with or without ";1".
func (im *Image) ReadFile(p string) ([]byte, error) {
	e, err := im.lookup(p)
	if err != nil {
		return nil, err
	}
	if e.IsDir {
		return nil, fmt.Errorf("iso9660: %s is a directory", p)
	}
	return im.readExtent(e)
}

func (im *Image) lookup(p string) (Entry, error) {
	cur := im.root
	for _, part := range strings.Split(strings.Trim(path.Clean("/"+p), "/"), "/") {
		if part == "" {
			continue
		}
		if !cur.IsDir {
			return Entry{}, fmt.Errorf("%w: %s", ErrNotExist, p)
		}
		entries, err := im.list(cur)
		if err != nil {
			return Entry{}, err
		}
		found := false
		for _, e := range entries {
			if strings.EqualFold(e.Name, part) {
				cur, found = e, true
				break
			}
		}
		if !found {
			return Entry{}, fmt.Errorf("%w: %s", ErrNotExist, p)
		}
	}
	return cur, nil
}

func (im *Image) readExtent(e Entry) ([]byte, error) {
	start := int64(e.lba) * SectorSize
	if e.Size < 0 || start+e.Size > im.size {
		return nil, fmt.Errorf("iso9660: extent of %q beyond the end of the image", e.Name)
	}
	if e.IsDir && e.Size > maxDirBytes {
		return nil, fmt.Errorf("iso9660: directory %q too large", e.Name)
	}
	buf := make([]byte, e.Size)
	if _, err := im.r.ReadAt(buf, start); err != nil && (!errors.Is(err, io.EOF) || e.Size != 0) {
		return nil, fmt.Errorf("iso9660: reading %q: %w", e.Name, err)
	}
	return buf, nil
}

func (im *Image) list(dir Entry) ([]Entry, error) {
	ext, err := im.readExtent(dir)
	if err != nil {
		return nil, err
	}
	var out []Entry
	for off := 0; off < len(ext); {
		n := int(ext[off])
		if n == 0 { // no more records in this sector
			off = (off/SectorSize + 1) * SectorSize
			continue
		}
		if n < 34 || off+n > len(ext) {
			return nil, fmt.Errorf("iso9660: bad directory record at offset %d of %q", off, dir.Name)
		}
		e, special, err := im.parseRecord(ext[off : off+n])
		if err != nil {
			return nil, err
		}
		if !special {
			out = append(out, e)
		}
		off += n
	}
	return out, nil
}

// parseRecord decodes one directory record; special is true for "." and "..".
func (im *Image) parseRecord(rec []byte) (Entry, bool, error) {
	if len(rec) < 34 || int(rec[0]) > len(rec) || int(rec[0]) < 33+int(rec[32]) {
		return Entry{}, false, errors.New("iso9660: short directory record")
	}
	nameLen := int(rec[32])
	raw := string(rec[33 : 33+nameLen])
	e := Entry{
		lba:   binary.LittleEndian.Uint32(rec[2:]),
		Size:  int64(binary.LittleEndian.Uint32(rec[10:])),
		IsDir: rec[25]&2 != 0,
	}
	if raw == "\x00" || raw == "\x01" {
		return e, true, nil
	}
	name := raw
	if i := strings.IndexByte(name, ';'); i >= 0 {
		name = name[:i]
	}
	name = strings.TrimSuffix(name, ".")
	if im.susp >= 0 {
		suStart := 33 + nameLen
		if nameLen%2 == 0 {
			suStart++
		}
		suStart += im.susp
		if suStart < int(rec[0]) {
			if nm := rockRidgeName(rec[suStart:rec[0]]); nm != "" {
				name = nm
			}
		}
	}
	e.Name = name
	return e, false, nil
}

// rockRidgeName joins the NM entries of a system use area (continuation areas are not followed).
func rockRidgeName(su []byte) string {
	var b strings.Builder
	for len(su) >= 4 {
		l := int(su[2])
		if l < 4 || l > len(su) {
			break
		}
		if string(su[0:2]) == "NM" && l >= 5 {
			flags := su[4]
			if flags&0x06 == 0 { // not "." / ".."
				b.Write(su[5:l])
			}
		}
		su = su[l:]
	}
	return b.String()
}
