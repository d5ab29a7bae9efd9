package imagestore

import (
	"errors"
	"fmt"
	"io"
	"time"
)

// Record is one built image: a base file with a patch.
type Record struct {
	// UID, Namespace and Name identify the PreprovisioningImage.
	UID       string `json:"uid"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`

	// Image is the URL path (without "/"): the HMAC name and an extension.
	Image  string `json:"image"`
	Format string `json:"format"`
	Arch   string `json:"arch"`

	// Base is the base file; BaseID its sha256 (hex) when the record was made. Byte i < BaseSize
	// of the image is byte BaseOffset+i of the base (BaseOffset is 0 but for a file served from
	// inside an ISO, such as its root filesystem).
	Base       string `json:"base"`
	BaseID     string `json:"baseID"`
	BaseOffset int64  `json:"baseOffset,omitempty"`
	BaseSize   int64  `json:"baseSize"`
	// Size is the image's size. Bytes at or after BaseSize that the patch does not cover are zero.
	Size int64 `json:"size"`
	// Bytes [PatchOffset, PatchOffset+PatchLength) are Patch followed by zeros.
	PatchOffset int64  `json:"patchOffset"`
	PatchLength int64  `json:"patchLength"`
	Patch       []byte `json:"patch"`
	// ModTime is the Last-Modified time served (the base's).
	ModTime time.Time `json:"modTime"`

	// KernelURL and ExtraKernelParams go with an initrd image.
	KernelURL         string `json:"kernelURL,omitempty"`
	ExtraKernelParams string `json:"extraKernelParams,omitempty"`

	// Inputs digests what the image was built from (spec, network data version, override,
	// configuration), so an unchanged PreprovisioningImage is not rebuilt after a restart.
	Inputs string `json:"inputs"`
	// SHA256 of the whole image (hex); empty until computed.
	SHA256 string `json:"sha256,omitempty"`
}

// Check verifies that the record describes a well-formed image.
func (r *Record) Check() error {
	switch {
	case r.UID == "" || r.Image == "" || r.Base == "":
		return fmt.Errorf("record %s: uid, image or base missing", r.Image)
	case r.BaseOffset < 0 || r.BaseSize < 0 || r.Size < r.BaseSize:
		return fmt.Errorf("record %s: size %d smaller than the base's %d", r.Image, r.Size, r.BaseSize)
	case r.PatchOffset < 0 || r.PatchLength < int64(len(r.Patch)) || r.PatchOffset+r.PatchLength > r.Size:
		return fmt.Errorf("record %s: patch of %d bytes at %d (%d long) does not fit %d bytes", r.Image, len(r.Patch), r.PatchOffset, r.PatchLength, r.Size)
	}
	return nil
}

// ReaderAt reads the image from base (the base file, opened by the caller). It holds no state
// but its arguments, so one base file can serve any number of concurrent readers (os.File's
// ReadAt is pread).
func (r *Record) ReaderAt(base io.ReaderAt) io.ReaderAt { return &patched{rec: r, base: base} }

type patched struct {
	rec  *Record
	base io.ReaderAt
}

// Segment is a part of the image: from the base file (Base true, at BaseOffset+Offset), from
// Data, or zeros.
type Segment struct {
	Offset, Length int64
	Base           bool
	Data           []byte // nil with Base false: zeros
}

// Segments splits [off, off+n) of the image into base, patch and zero parts, in order.
func (r *Record) Segments(off, n int64) []Segment {
	var out []Segment
	end := min(off+n, r.Size)
	pEnd := r.PatchOffset + r.PatchLength
	for off < end {
		switch {
		case off >= r.PatchOffset && off < pEnd:
			stop := min(end, pEnd)
			dataEnd := r.PatchOffset + int64(len(r.Patch))
			if off < dataEnd {
				stop = min(stop, dataEnd)
				out = append(out, Segment{Offset: off, Length: stop - off, Data: r.Patch[off-r.PatchOffset : stop-r.PatchOffset]})
			} else {
				out = append(out, Segment{Offset: off, Length: stop - off})
			}
			off = stop
		case off < r.BaseSize:
			stop := min(end, r.BaseSize)
			if off < r.PatchOffset {
				stop = min(stop, r.PatchOffset)
			}
			out = append(out, Segment{Offset: off, Length: stop - off, Base: true})
			off = stop
		default:
			stop := end
			if off < r.PatchOffset {
				stop = min(stop, r.PatchOffset)
			}
			out = append(out, Segment{Offset: off, Length: stop - off})
			off = stop
		}
	}
	return out
}

func (p *patched) ReadAt(b []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("negative offset %d", off)
	}
	if off >= p.rec.Size {
		return 0, io.EOF
	}
	n := 0
	for _, s := range p.rec.Segments(off, int64(len(b))) {
		dst := b[s.Offset-off : s.Offset-off+s.Length]
		switch {
		case s.Base:
			m, err := p.base.ReadAt(dst, p.rec.BaseOffset+s.Offset)
			n += m
			if err != nil && m < len(dst) {
				if errors.Is(err, io.EOF) {
					err = io.ErrUnexpectedEOF // the base is shorter than recorded
				}
				return n, fmt.Errorf("reading base %s: %w", p.rec.Base, err)
			}
		case s.Data != nil:
			n += copy(dst, s.Data)
		default:
			clear(dst)
			n += len(dst)
		}
	}
	if n < len(b) {
		return n, io.EOF
	}
	return n, nil
}
