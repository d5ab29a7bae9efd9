package iso

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"time"
)

// What go-diskfs v1.9.4 writes that does not follow from the files given (finalize.go,
// rockridge.go), and what makeReproducible does about it:
//
//   - volume descriptors: creation, modification, expiration and effective time are all
//     time.Now() → creation and modification become Options.Time, expiration and effective
//     "not specified" (an image that expires the moment it is made is odd anyway);
//   - directory records: the recording time is the staged file's mtime, in the local time zone;
//     the El Torito catalog's is time.Now() → Options.Time in UTC;
//   - Rock Ridge TF: modify, access and attribute-change times from the staged file (the last
//     one cannot be set at all) → Options.Time;
//   - Rock Ridge PX: owner and group of the staged file, and its link count (a directory's
//     depends on the file system the workspace is on; btrfs says 1) → owner and group 0, link
//     count 1 for files and 2 + subdirectories for directories, as on most Unix file systems.
//
// Modes come from the staging, which sets them explicitly; Rock Ridge serial numbers (the walk
// order) and everything else are already a function of the input. makeReproducible finds the
// records by walking the directory tree from the primary volume descriptor, following Rock
// Ridge continuation areas, and patches the fields in place.

// readWriterAt is the finished image.
type readWriterAt interface {
	io.ReaderAt
	io.WriterAt
}

// maxExtent bounds what the walk reads at once for one directory or continuation area.
const maxExtent = 64 << 20

const (
	vdPrimary       = 1
	vdSupplementary = 2
	vdTerminator    = 255
)

// chunk is a piece of the image read for patching and written back at the end.
type chunk struct {
	off int64
	b   []byte
}

// pxField is a Rock Ridge PX entry to patch once every directory's subdirectories are counted.
type pxField struct {
	c      *chunk
	pos    int    // start of the entry in c.b
	dirLoc uint32 // extent of the directory the record describes, 0 for a file
}

type reproducer struct {
	img      readWriterAt
	short    [7]byte  // ECMA-119 9.1.5 recording time
	long     [17]byte // ECMA-119 8.4.26.1 volume time
	chunks   []*chunk
	px       []pxField
	subdirs  map[uint32]int
	visited  map[uint32]bool
	suspSkip int
}

func makeReproducible(img readWriterAt, t time.Time) error {
	t = t.UTC()
	if t.Year() < 1900 || t.Year() > 2155 {
		return fmt.Errorf("time %s cannot be recorded in ISO 9660 (years 1900 to 2155)", t)
	}
	r := &reproducer{img: img, subdirs: map[uint32]int{}, visited: map[uint32]bool{}}
	r.short = [7]byte{byte(t.Year() - 1900), byte(t.Month()), byte(t.Day()), byte(t.Hour()), byte(t.Minute()), byte(t.Second()), 0}
	copy(r.long[:], fmt.Sprintf("%04d%02d%02d%02d%02d%02d%02d", t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond()/1e7))
	root, err := r.volumeDescriptors()
	if err != nil {
		return err
	}
	if err := r.walk(root); err != nil {
		return err
	}
	for _, p := range r.px {
		links := uint32(1)
		if p.dirLoc != 0 {
			links = uint32(2 + r.subdirs[p.dirLoc])
		}
		both32(p.c.b[p.pos+12:], links) // PX: mode (4), links (12), uid (20), gid (28)
		both32(p.c.b[p.pos+20:], 0)
		both32(p.c.b[p.pos+28:], 0)
	}
	for _, c := range r.chunks {
		if _, err := r.img.WriteAt(c.b, c.off); err != nil {
			return fmt.Errorf("writing the reproducible image: %w", err)
		}
	}
	return nil
}

func (r *reproducer) read(off int64, n int) (*chunk, error) {
	if n < 0 || n > maxExtent {
		return nil, fmt.Errorf("an extent of %d bytes at %d is out of bounds", n, off)
	}
	c := &chunk{off: off, b: make([]byte, n)}
	if _, err := r.img.ReadAt(c.b, off); err != nil {
		return nil, fmt.Errorf("reading %d bytes at %d: %w", n, off, err)
	}
	r.chunks = append(r.chunks, c)
	return c, nil
}

// volumeDescriptors patches the times of the primary (and any supplementary) volume descriptor
// and returns the root directory's record.
func (r *reproducer) volumeDescriptors() ([]byte, error) {
	var root []byte
	for lba := int64(16); ; lba++ {
		c, err := r.read(lba*SectorSize, SectorSize)
		if err != nil {
			return nil, fmt.Errorf("volume descriptor %d: %w", lba, err)
		}
		vd := c.b
		if !bytes.Equal(vd[1:6], []byte(signature)) {
			return nil, fmt.Errorf("no volume descriptor at sector %d", lba)
		}
		switch vd[0] {
		case vdTerminator:
			if root == nil {
				return nil, errors.New("no primary volume descriptor")
			}
			return root, nil
		case vdPrimary, vdSupplementary:
			copy(vd[813:830], r.long[:]) // creation
			copy(vd[830:847], r.long[:]) // modification
			for _, off := range []int{847, 864} {
				copy(vd[off:off+16], "0000000000000000") // expiration, effective: not specified
				vd[off+16] = 0
			}
			copy(vd[156+18:156+25], r.short[:]) // the root's record
			if vd[0] == vdPrimary {
				root = vd[156:190]
			}
		}
	}
}

// walk patches every directory record reachable from the root, breadth first.
func (r *reproducer) walk(root []byte) error {
	queue := [][2]uint32{{le32(root[2:]), le32(root[10:])}}
	r.visited[le32(root[2:])] = true
	first := true
	for len(queue) > 0 {
		loc, size := queue[0][0], queue[0][1]
		queue = queue[1:]
		c, err := r.read(int64(loc)*SectorSize, int(size))
		if err != nil {
			return fmt.Errorf("directory at sector %d: %w", loc, err)
		}
		for off := 0; off < len(c.b); {
			n := int(c.b[off])
			if n == 0 { // the rest of this sector is padding
				off = (off/SectorSize + 1) * SectorSize
				continue
			}
			if n < 34 || off+n > len(c.b) || 33+int(c.b[off+32]) > n {
				return fmt.Errorf("bad directory record at byte %d of the directory at sector %d", off, loc)
			}
			rec := c.b[off : off+n]
			copy(rec[18:25], r.short[:])
			nameLen := int(rec[32])
			special := nameLen == 1 && rec[33] <= 1 // "." or ".."
			isDir := rec[25]&2 != 0
			skip := r.suspSkip
			if first { // the root's "." starts with SUSP's SP entry, which says what to skip in the others
				if su := rec[33+nameLen+1-nameLen%2:]; len(su) >= 7 && string(su[:2]) == "SP" {
					r.suspSkip = int(su[6])
				}
				first = false
			}
			if isDir && !special {
				r.subdirs[loc]++
				if child := le32(rec[2:]); !r.visited[child] {
					r.visited[child] = true
					queue = append(queue, [2]uint32{child, le32(rec[10:])})
				}
			}
			dirLoc := uint32(0)
			if isDir {
				dirLoc = le32(rec[2:])
			}
			suStart := off + 33 + nameLen + 1 - nameLen%2 + skip
			if suStart < off+n {
				if err := r.systemUse(c, suStart, off+n, dirLoc); err != nil {
					return fmt.Errorf("record at byte %d of the directory at sector %d: %w", off, loc, err)
				}
			}
			off += n
		}
	}
	return nil
}

// systemUse patches the SUSP entries in c.b[start:end] and in any continuation areas they chain to.
func (r *reproducer) systemUse(c *chunk, start, end int, dirLoc uint32) error {
	for hops := 0; ; hops++ {
		if hops > 64 {
			return errors.New("too many Rock Ridge continuation areas")
		}
		var next *[3]uint32 // CE: block, offset, length
		for pos := start; pos+4 <= end; {
			sig, n := string(c.b[pos:pos+2]), int(c.b[pos+2])
			if n < 4 || pos+n > end {
				return fmt.Errorf("bad system use entry %q", sig)
			}
			e := c.b[pos : pos+n]
			switch sig {
			case "TF":
				if err := r.timestamps(e); err != nil {
					return err
				}
			case "PX":
				if n < 36 {
					return errors.New("short PX entry")
				}
				r.px = append(r.px, pxField{c: c, pos: pos, dirLoc: dirLoc})
			case "CE":
				if n < 28 {
					return errors.New("short CE entry")
				}
				next = &[3]uint32{le32(e[4:]), le32(e[12:]), le32(e[20:])}
			case "ST":
				pos = end
				continue
			}
			pos += n
		}
		if next == nil {
			return nil
		}
		cc, err := r.read(int64(next[0])*SectorSize+int64(next[1]), int(next[2]))
		if err != nil {
			return fmt.Errorf("continuation area: %w", err)
		}
		c, start, end = cc, 0, len(cc.b)
	}
}

// timestamps rewrites every time of a TF entry (RRIP 4.1.6): one per flag bit 0-6, each 7 bytes
// or, with bit 7, 17 bytes.
func (r *reproducer) timestamps(e []byte) error {
	if len(e) < 5 {
		return errors.New("short TF entry")
	}
	flags := e[4]
	size, stamp := 7, r.short[:]
	if flags&0x80 != 0 {
		size, stamp = 17, r.long[:]
	}
	count := bits.OnesCount8(flags & 0x7f)
	if 5+count*size > len(e) {
		return errors.New("TF entry shorter than its flags say")
	}
	for i := range count {
		copy(e[5+i*size:], stamp)
	}
	return nil
}

func le32(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }

// both32 writes v in ISO 9660's both-byte-order form (7.3.3).
func both32(b []byte, v uint32) {
	binary.LittleEndian.PutUint32(b, v)
	binary.BigEndian.PutUint32(b[4:], v)
}
