// Package iso9660 writes and reads small ISO 9660 images: enough to make the project's deploy ISO
// and to read the kernel command line out of the ISOs Ironic hands to a BMC (built by mkisofs with
// Rock Ridge, or ours).
package iso9660

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"time"
)

// SectorSize is the logical block size; ISO 9660 images always use 2048 here.
const SectorSize = 2048

// File is one regular file of an image, by slash-separated path ("EFI/BOOT/grub.cfg").
type File struct {
	Path string
	Data []byte
}

// Options describe the volume.
type Options struct {
	VolumeID  string // up to 32 d-characters; upper-cased
	Publisher string // up to 128 a-characters
	// Time stamps every record; zero means a fixed epoch, so the same input gives the same bytes.
	Time time.Time
}

type dirNode struct {
	name     string // ISO name as stored (upper case, no version)
	parent   *dirNode
	dirs     []*dirNode
	files    []*fileNode
	number   int // path table number, 1-based
	lba      uint32
	size     uint32
	children []record // sorted, without . and ..
}

type fileNode struct {
	name string // stored name including ";1"
	data []byte
	lba  uint32
}

type record struct {
	name string
	dir  *dirNode
	file *fileNode
}

// Write lays out files as an ISO 9660 image (level 2 names, upper case, no extensions such as
// Rock Ridge or Joliet: Linux shows the names in lower case). Directories are created as needed.
func Write(w io.Writer, opts Options, files []File) error {
	root := &dirNode{}
	for _, f := range files {
		if err := addFile(root, f); err != nil {
			return err
		}
	}
	// Number directories breadth-first, ordered by parent number then name (path table order).
	var dirs []*dirNode
	queue := []*dirNode{root}
	for len(queue) > 0 {
		d := queue[0]
		queue = queue[1:]
		dirs = append(dirs, d)
		d.number = len(dirs)
		sort.Slice(d.dirs, func(i, j int) bool { return d.dirs[i].name < d.dirs[j].name })
		queue = append(queue, d.dirs...)
	}
	for _, d := range dirs {
		for _, c := range d.dirs {
			d.children = append(d.children, record{name: c.name, dir: c})
		}
		for _, f := range d.files {
			d.children = append(d.children, record{name: f.name, file: f})
		}
		sort.Slice(d.children, func(i, j int) bool { return d.children[i].name < d.children[j].name })
		d.size = dirExtentSize(d)
	}

	pathTable := buildPathTable(dirs, binary.LittleEndian)
	ptSectors := sectors(uint32(len(pathTable)))
	// Layout: 16 system sectors, PVD, terminator, L path table, M path table, directories, files.
	next := uint32(18)
	lPT := next
	next += ptSectors
	mPT := next
	next += ptSectors
	for _, d := range dirs {
		d.lba = next
		next += d.size / SectorSize
	}
	for _, d := range dirs {
		for _, f := range d.files {
			f.lba = next
			next += sectors(uint32(len(f.data)))
		}
	}
	total := next

	t := opts.Time
	if t.IsZero() {
		t = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	bw := &sectorWriter{w: w}
	bw.write(make([]byte, 16*SectorSize))
	bw.write(primaryDescriptor(opts, t, total, uint32(len(pathTable)), lPT, mPT, root))
	term := make([]byte, SectorSize)
	term[0] = 255
	copy(term[1:], "CD001")
	term[6] = 1
	bw.write(term)
	bw.writePadded(buildPathTable(dirs, binary.LittleEndian))
	bw.writePadded(buildPathTable(dirs, binary.BigEndian))
	for _, d := range dirs {
		bw.write(dirExtent(d, t))
	}
	for _, d := range dirs {
		for _, f := range d.files {
			bw.writePadded(f.data)
		}
	}
	return bw.err
}

func addFile(root *dirNode, f File) error {
	p := strings.Trim(path.Clean("/"+f.Path), "/")
	if p == "" || p == "." {
		return fmt.Errorf("iso9660: file with empty path")
	}
	parts := strings.Split(p, "/")
	d := root
	for _, part := range parts[:len(parts)-1] {
		name, err := isoName(part, true)
		if err != nil {
			return fmt.Errorf("iso9660: %s: %w", f.Path, err)
		}
		var found *dirNode
		for _, c := range d.dirs {
			if c.name == name {
				found = c
			}
		}
		if found == nil {
			found = &dirNode{name: name, parent: d}
			d.dirs = append(d.dirs, found)
		}
		d = found
	}
	name, err := isoName(parts[len(parts)-1], false)
	if err != nil {
		return fmt.Errorf("iso9660: %s: %w", f.Path, err)
	}
	for _, c := range d.files {
		if c.name == name {
			return fmt.Errorf("iso9660: duplicate file %s", f.Path)
		}
	}
	d.files = append(d.files, &fileNode{name: name, data: f.Data})
	return nil
}

// isoName maps a name to d-characters (A-Z 0-9 _), keeping one dot for files and adding ";1".
func isoName(s string, dir bool) (string, error) {
	up := strings.ToUpper(s)
	var b strings.Builder
	for _, r := range up {
		switch {
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_':
			b.WriteRune(r)
		case r == '.' && !dir:
			b.WriteRune(r)
		default:
			b.WriteRune('_')
		}
	}
	name := b.String()
	if !dir {
		if i := strings.LastIndexByte(name, '.'); i >= 0 {
			name = strings.ReplaceAll(name[:i], ".", "_") + name[i:]
		} else {
			name += "."
		}
		name += ";1"
	}
	if len(name) > 33 {
		return "", fmt.Errorf("name %q too long for ISO 9660", s)
	}
	return name, nil
}

func sectors(n uint32) uint32 { return (n + SectorSize - 1) / SectorSize }

func recordLen(nameLen int) int {
	n := 33 + nameLen
	if n%2 == 1 {
		n++
	}
	return n
}

// dirExtentSize is the size of a directory extent in whole sectors; records never cross a sector.
func dirExtentSize(d *dirNode) uint32 {
	used := 2 * recordLen(1) // . and ..
	secs := uint32(1)
	for _, c := range d.children {
		l := recordLen(len(c.name))
		if used+l > SectorSize {
			secs++
			used = 0
		}
		used += l
	}
	return secs * SectorSize
}

func dirExtent(d *dirNode, t time.Time) []byte {
	buf := make([]byte, d.size)
	off := 0
	put := func(rec []byte) {
		if off%SectorSize+len(rec) > SectorSize {
			off = (off/SectorSize + 1) * SectorSize
		}
		copy(buf[off:], rec)
		off += len(rec)
	}
	parent := d.parent
	if parent == nil {
		parent = d
	}
	put(dirRecord("\x00", d.lba, d.size, true, t))
	put(dirRecord("\x01", parent.lba, parent.size, true, t))
	for _, c := range d.children {
		if c.dir != nil {
			put(dirRecord(c.name, c.dir.lba, c.dir.size, true, t))
		} else {
			put(dirRecord(c.name, c.file.lba, uint32(len(c.file.data)), false, t))
		}
	}
	return buf
}

func dirRecord(name string, lba, size uint32, dir bool, t time.Time) []byte {
	rec := make([]byte, recordLen(len(name)))
	rec[0] = byte(len(rec))
	both32(rec[2:], lba)
	both32(rec[10:], size)
	recDate(rec[18:], t)
	if dir {
		rec[25] = 2
	}
	both16(rec[28:], 1)
	rec[32] = byte(len(name))
	copy(rec[33:], name)
	return rec
}

func buildPathTable(dirs []*dirNode, order binary.ByteOrder) []byte {
	var b bytes.Buffer
	for _, d := range dirs {
		name := d.name
		parent := 1
		if d.parent == nil {
			name = "\x00"
		} else {
			parent = d.parent.number
		}
		e := make([]byte, 8+len(name)+len(name)%2)
		e[0] = byte(len(name))
		order.PutUint32(e[2:], d.lba)
		order.PutUint16(e[6:], uint16(parent))
		copy(e[8:], name)
		b.Write(e)
	}
	return b.Bytes()
}

func primaryDescriptor(opts Options, t time.Time, total, ptSize, lPT, mPT uint32, root *dirNode) []byte {
	d := make([]byte, SectorSize)
	d[0] = 1
	copy(d[1:], "CD001")
	d[6] = 1
	padded(d[8:40], "LINUX")
	padded(d[40:72], strings.ToUpper(opts.VolumeID))
	both32(d[80:], total)
	both16(d[120:], 1)
	both16(d[124:], 1)
	both16(d[128:], SectorSize)
	both32(d[132:], ptSize)
	binary.LittleEndian.PutUint32(d[140:], lPT)
	binary.BigEndian.PutUint32(d[148:], mPT)
	copy(d[156:190], dirRecord("\x00", root.lba, root.size, true, t))
	padded(d[190:318], "")
	padded(d[318:446], opts.Publisher)
	padded(d[446:574], "")
	padded(d[574:702], "METALFORGE")
	padded(d[702:813], "")
	longDate(d[813:], t)
	longDate(d[830:], t)
	copy(d[847:], "0000000000000000")
	copy(d[864:], "0000000000000000")
	d[881] = 1
	return d
}

func padded(dst []byte, s string) {
	for i := range dst {
		dst[i] = ' '
	}
	copy(dst, s)
}

func both32(b []byte, v uint32) {
	binary.LittleEndian.PutUint32(b, v)
	binary.BigEndian.PutUint32(b[4:], v)
}

func both16(b []byte, v uint16) {
	binary.LittleEndian.PutUint16(b, v)
	binary.BigEndian.PutUint16(b[2:], v)
}

func recDate(b []byte, t time.Time) {
	t = t.UTC()
	b[0] = byte(t.Year() - 1900)
	b[1] = byte(t.Month())
	b[2] = byte(t.Day())
	b[3] = byte(t.Hour())
	b[4] = byte(t.Minute())
	b[5] = byte(t.Second())
	b[6] = 0 // GMT offset
}

func longDate(b []byte, t time.Time) {
	copy(b, t.UTC().Format("20060102150405")+"00")
	b[16] = 0
}

type sectorWriter struct {
	w   io.Writer
	err error
}

func (s *sectorWriter) write(b []byte) {
	if s.err == nil {
		_, s.err = s.w.Write(b)
	}
}

func (s *sectorWriter) writePadded(b []byte) {
	s.write(b)
	if r := len(b) % SectorSize; r != 0 {
		s.write(make([]byte, SectorSize-r))
	}
}
