package baseimage

import (
	"crypto/sha256"
	"encoding"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"time"
)

// File is a base file: where it is and what it holds.
type File struct {
	Path    string
	Size    int64
	ModTime time.Time
	// SHA256 of the whole content: the file's identity.
	SHA256 [32]byte
	// end is the sha256 state after the whole file (to hash an image that appends to it).
	end []byte
}

// ID is the hex SHA256.
func (f *File) ID() string { return hex.EncodeToString(f.SHA256[:]) }

// Open opens the file for reading (one reader per download).
func (f *File) Open() (*os.File, error) {
	r, err := os.Open(f.Path)
	if err != nil {
		return nil, fmt.Errorf("opening base image: %w", err)
	}
	return r, nil
}

// HashAfter returns a sha256 that has already consumed the whole file.
func (f *File) HashAfter() (hash.Hash, error) { return resume(f.end) }

// openFile hashes the file at path, keeping the hash state at each offset in marks (ascending)
// and at the end.
func openFile(path string, marks ...int64) (*File, [][]byte, error) {
	r, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("base image: %w", err)
	}
	defer r.Close()
	st, err := r.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("base image: %w", err)
	}
	if st.IsDir() {
		return nil, nil, fmt.Errorf("base image %s is a directory", path)
	}
	// A block device reports size 0; its end tells the size.
	size, err := r.Seek(0, io.SeekEnd)
	if err != nil {
		return nil, nil, fmt.Errorf("base image %s: %w", path, err)
	}
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return nil, nil, fmt.Errorf("base image %s: %w", path, err)
	}
	h := sha256.New()
	var states [][]byte
	var pos int64
	for _, m := range marks {
		if m < pos || m > size {
			return nil, nil, fmt.Errorf("base image %s: offset %d is outside the file", path, m)
		}
		if _, err := io.CopyN(h, r, m-pos); err != nil {
			return nil, nil, fmt.Errorf("reading base image %s: %w", path, err)
		}
		pos = m
		s, err := marshal(h)
		if err != nil {
			return nil, nil, err
		}
		states = append(states, s)
	}
	if n, err := io.Copy(h, r); err != nil {
		return nil, nil, fmt.Errorf("reading base image %s: %w", path, err)
	} else if pos+n != size {
		return nil, nil, fmt.Errorf("base image %s changed size while being read", path)
	}
	end, err := marshal(h)
	if err != nil {
		return nil, nil, err
	}
	f := &File{Path: path, Size: size, ModTime: st.ModTime(), end: end}
	copy(f.SHA256[:], h.Sum(nil))
	return f, states, nil
}

func marshal(h hash.Hash) ([]byte, error) {
	m, ok := h.(encoding.BinaryMarshaler)
	if !ok {
		return nil, errors.New("sha256 state cannot be saved")
	}
	b, err := m.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("saving sha256 state: %w", err)
	}
	return b, nil
}

func resume(state []byte) (hash.Hash, error) {
	h := sha256.New()
	u, ok := h.(encoding.BinaryUnmarshaler)
	if !ok {
		return nil, errors.New("sha256 state cannot be restored")
	}
	if err := u.UnmarshalBinary(state); err != nil {
		return nil, fmt.Errorf("restoring sha256 state: %w", err)
	}
	return h, nil
}
