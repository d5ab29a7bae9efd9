package baseimage

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io/fs"

	"github.com/metalforge/metalforge/internal/iso"
)

// Layout paths (see the package documentation).
const (
	IgnInfoPath      = "coreos/igninfo.json"
	KargsPath        = "coreos/kargs.json"
	DefaultEmbedPath = "images/ignition.img"
	RootfsPath       = "images/pxeboot/rootfs.img"
)

// ErrNotLive means the ISO is not a CoreOS live ISO (no Ignition embed area).
var ErrNotLive = errors.New("not a CoreOS live ISO")

// ISO is a CoreOS live ISO.
type ISO struct {
	File
	VolumeID string
	// Area is the Ignition embed area's extent in the image.
	Area iso.Extent
	// Rootfs is where images/pxeboot/rootfs.img is (Length 0: the ISO has none).
	Rootfs iso.Extent
	// Kargs is coreos/kargs.json (nil: the ISO has none).
	Kargs *Kargs
	// atArea is the sha256 state after the bytes before Area.
	atArea []byte
}

// IgnInfo is coreos/igninfo.json.
type IgnInfo struct {
	File   string `json:"file"`
	Offset *int64 `json:"offset,omitempty"`
	Length *int64 `json:"length,omitempty"`
}

// Kargs is coreos/kargs.json.
type Kargs struct {
	Default string          `json:"default"`
	Files   []KargsLocation `json:"files"`
	Size    int             `json:"size"`
}

// KargsLocation is one kernel argument embed area.
type KargsLocation struct {
	Path   string `json:"path"`
	Offset int64  `json:"offset"`
	Pad    string `json:"pad,omitempty"`
	End    string `json:"end,omitempty"`
}

// OpenISO reads a CoreOS live ISO's layout and hashes it.
func OpenISO(path string) (*ISO, error) {
	im, err := iso.OpenFile(path)
	if err != nil {
		return nil, fmt.Errorf("base ISO: %w", err)
	}
	out := &ISO{VolumeID: im.VolumeID()}
	out.Area, err = embedArea(im)
	if err == nil {
		out.Kargs, err = readKargs(im)
	}
	if err == nil {
		if out.Rootfs, err = im.Locate(RootfsPath); errors.Is(err, fs.ErrNotExist) {
			out.Rootfs, err = iso.Extent{}, nil
		}
	}
	im.Close()
	if err != nil {
		return nil, fmt.Errorf("base ISO %s: %w", path, err)
	}
	f, states, err := openFile(path, out.Area.Offset)
	if err != nil {
		return nil, err
	}
	out.File, out.atArea = *f, states[0]
	return out, nil
}

// HashBeforeArea returns a sha256 that has consumed the image up to the embed area.
func (i *ISO) HashBeforeArea() (hash.Hash, error) { return resume(i.atArea) }

// embedArea finds the Ignition embed area from coreos/igninfo.json (images/ignition.img when the
// ISO predates it).
func embedArea(im *iso.Image) (iso.Extent, error) {
	info := IgnInfo{File: DefaultEmbedPath}
	if data, err := im.ReadFile(IgnInfoPath); err == nil {
		if err := json.Unmarshal(data, &info); err != nil || info.File == "" {
			return iso.Extent{}, fmt.Errorf("%w: /%s is not valid (%w)", ErrNotLive, IgnInfoPath, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return iso.Extent{}, err
	}
	x, err := im.Locate(info.File)
	if err != nil {
		return iso.Extent{}, fmt.Errorf("%w: no embed area /%s (%w)", ErrNotLive, info.File, err)
	}
	off, length := int64(0), x.Length
	if info.Offset != nil {
		off = *info.Offset
	}
	if info.Length != nil {
		length = *info.Length
	} else {
		length -= off
	}
	if off < 0 || length <= 0 || off+length > x.Length {
		return iso.Extent{}, fmt.Errorf("%w: /%s: offset %d and length %d do not fit %s (%d bytes)", ErrNotLive, IgnInfoPath, off, length, info.File, x.Length)
	}
	return iso.Extent{Offset: x.Offset + off, Length: length}, nil
}

func readKargs(im *iso.Image) (*Kargs, error) {
	data, err := im.ReadFile(KargsPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	k := &Kargs{}
	if err := json.Unmarshal(data, k); err != nil {
		return nil, fmt.Errorf("/%s is not valid: %w", KargsPath, err)
	}
	if k.Size <= 0 || k.Size > 2048 || len(k.Default) >= k.Size {
		return nil, fmt.Errorf("/%s: area size %d does not hold the default arguments", KargsPath, k.Size)
	}
	return k, nil
}
