// Package isotest builds tiny but real ISO 9660 images for bmcsim's tests: one primary volume
// descriptor, a terminator, both path tables and a root directory holding the given files.
package isotest

import (
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
)

const sector = 2048

// File is one file in the root directory. Names are stored in ISO 9660 level 1 form (NAME.EXT;1).
type File struct {
	Name string
	Data []byte
}

// Build returns the image.
func Build(volumeID string, files []File) []byte {
	sort.Slice(files, func(i, j int) bool { return isoName(files[i].Name) < isoName(files[j].Name) })
	// Layout: 16 system sectors, PVD (16), terminator (17), L path table (18), M path table (19),
	// root directory (20), then each file's data.
	const rootLBA = 20
	next := rootLBA + 1
	lbas := make([]int, len(files))
	for i, f := range files {
		lbas[i] = next
		next += (len(f.Data) + sector - 1) / sector
		if len(f.Data) == 0 {
			next++
		}
	}
	img := make([]byte, next*sector)

	var root []byte
	root = append(root, dirRecord([]byte{0}, rootLBA, sector, true)...)
	root = append(root, dirRecord([]byte{1}, rootLBA, sector, true)...)
	for i, f := range files {
		root = append(root, dirRecord([]byte(isoName(f.Name)), lbas[i], len(f.Data), false)...)
		copy(img[lbas[i]*sector:], f.Data)
	}
	if len(root) > sector {
		panic("isotest: too many files for a one-sector root directory")
	}
	copy(img[rootLBA*sector:], root)

	pvd := img[16*sector : 17*sector]
	pvd[0] = 1
	copy(pvd[1:6], "CD001")
	pvd[6] = 1
	pad(pvd[8:40], "BMCSIM")
	pad(pvd[40:72], strings.ToUpper(volumeID))
	both32(pvd[80:88], next)
	both16(pvd[120:124], 1)
	both16(pvd[124:128], 1)
	both16(pvd[128:132], sector)
	both32(pvd[132:140], 10) // one path table record
	binary.LittleEndian.PutUint32(pvd[140:144], 18)
	binary.BigEndian.PutUint32(pvd[148:152], 19)
	copy(pvd[156:190], dirRecord([]byte{0}, rootLBA, sector, true))
	for _, r := range [][2]int{{190, 318}, {318, 446}, {446, 574}, {574, 702}, {702, 739}, {739, 776}, {776, 813}} {
		pad(pvd[r[0]:r[1]], "")
	}
	for _, off := range []int{813, 830, 847, 864} {
		copy(pvd[off:off+16], "2026010100000000")
	}
	pvd[881] = 1

	term := img[17*sector : 18*sector]
	term[0] = 255
	copy(term[1:6], "CD001")
	term[6] = 1

	for i, order := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
		pt := img[(18+i)*sector:]
		pt[0] = 1 // identifier length
		order.PutUint32(pt[2:6], rootLBA)
		order.PutUint16(pt[6:8], 1)
	}
	return img
}

func isoName(name string) string {
	n := strings.ToUpper(name)
	if !strings.Contains(n, ".") {
		n += "."
	}
	return n + ";1"
}

func dirRecord(name []byte, lba, size int, dir bool) []byte {
	l := 33 + len(name)
	if l%2 == 1 {
		l++
	}
	r := make([]byte, l)
	r[0] = byte(l)
	both32(r[2:10], lba)
	both32(r[10:18], size)
	copy(r[18:25], []byte{126, 1, 1, 0, 0, 0, 0}) // 2026-01-01 00:00:00 UTC
	if dir {
		r[25] = 2
	}
	both16(r[28:32], 1)
	r[32] = byte(len(name))
	copy(r[33:], name)
	return r
}

func both16(b []byte, v int) {
	binary.LittleEndian.PutUint16(b[0:2], uint16(v))
	binary.BigEndian.PutUint16(b[2:4], uint16(v))
}

func both32(b []byte, v int) {
	binary.LittleEndian.PutUint32(b[0:4], uint32(v))
	binary.BigEndian.PutUint32(b[4:8], uint32(v))
}

func pad(b []byte, s string) {
	if len(s) > len(b) {
		panic(fmt.Sprintf("isotest: %q is longer than %d bytes", s, len(b)))
	}
	copy(b, s)
	for i := len(s); i < len(b); i++ {
		b[i] = ' '
	}
}
