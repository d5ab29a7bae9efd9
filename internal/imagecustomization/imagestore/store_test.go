package imagestore

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// expand is the image a record describes, built the slow, obvious way.
func expand(r *Record, base []byte) []byte {
	img := make([]byte, r.Size)
	copy(img, base[:r.BaseSize])
	area := img[r.PatchOffset : r.PatchOffset+r.PatchLength]
	clear(area)
	copy(area, r.Patch)
	return img
}

func TestReaderAt(t *testing.T) {
	base := make([]byte, 10000)
	for i := range base {
		base[i] = byte(i%251) + 1
	}
	tests := map[string]*Record{
		// ISO: the embed area inside the base is replaced, the rest is zeros up to its length.
		"patch inside": {BaseSize: 10000, Size: 10000, PatchOffset: 4096, PatchLength: 2048, Patch: []byte("gzip'd cpio")},
		// initrd: the archive goes after the base, 4-byte aligned, zeros between.
		"appended":       {BaseSize: 9998, Size: 10000 + 7, PatchOffset: 10000, PatchLength: 7, Patch: []byte("archive")},
		"patch at start": {BaseSize: 10000, Size: 10000, PatchOffset: 0, PatchLength: 100, Patch: []byte("x")},
		"patch at end":   {BaseSize: 10000, Size: 10000, PatchOffset: 9000, PatchLength: 1000, Patch: bytes.Repeat([]byte("y"), 1000)},
	}
	for name, r := range tests {
		t.Run(name, func(t *testing.T) {
			r.UID, r.Image, r.Base = "u", "i", "b"
			if err := r.Check(); err != nil {
				t.Fatal(err)
			}
			want := expand(r, base)
			got, err := io.ReadAll(io.NewSectionReader(r.ReaderAt(bytes.NewReader(base)), 0, r.Size))
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("whole read differs (%v)", err)
			}
			// Random windows, including ones crossing every boundary and past the end.
			ra := r.ReaderAt(bytes.NewReader(base))
			rng := rand.New(rand.NewPCG(1, 2))
			for range 2000 {
				off := rng.Int64N(r.Size + 10)
				buf := make([]byte, rng.IntN(3000))
				n, err := ra.ReadAt(buf, off)
				var exp []byte
				if off < r.Size {
					exp = want[off:min(r.Size, off+int64(len(buf)))]
				}
				if n != len(exp) || !bytes.Equal(buf[:n], exp) {
					t.Fatalf("ReadAt(%d bytes at %d) = %d bytes, want %d", len(buf), off, n, len(exp))
				}
				if (n < len(buf)) != errors.Is(err, io.EOF) {
					t.Fatalf("ReadAt(%d at %d): n=%d err=%v", len(buf), off, n, err)
				}
			}
		})
	}
}

func TestReaderAtShortBase(t *testing.T) {
	r := &Record{UID: "u", Image: "i", Base: "b", BaseSize: 100, Size: 100}
	_, err := r.ReaderAt(bytes.NewReader(make([]byte, 50))).ReadAt(make([]byte, 100), 0)
	if err == nil || errors.Is(err, io.EOF) {
		t.Errorf("a base shorter than recorded must be an error, not %v", err)
	}
}

func TestCheck(t *testing.T) {
	for name, r := range map[string]Record{
		"no uid":          {Image: "i", Base: "b"},
		"smaller":         {UID: "u", Image: "i", Base: "b", BaseSize: 10, Size: 5},
		"patch too long":  {UID: "u", Image: "i", Base: "b", BaseSize: 10, Size: 10, PatchOffset: 5, PatchLength: 2, Patch: []byte("abc")},
		"patch past size": {UID: "u", Image: "i", Base: "b", BaseSize: 10, Size: 10, PatchOffset: 9, PatchLength: 2},
	} {
		if err := r.Check(); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
}

func TestStorePersistsAndNamesAreKeyed(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Fresh {
		t.Error("a new work directory is fresh")
	}
	name := s.Name([]byte("content"), []byte("uid"))
	if len(name) != NameLength || name == s.Name([]byte("contentuid")) || name == s.Name([]byte("content"), []byte("uid2")) {
		t.Errorf("names must be length-prefixed and depend on every part: %s", name)
	}
	r := &Record{UID: "uid-1", Namespace: "ns", Name: "host-0", Image: name + ".iso", Base: "/b", BaseSize: 10, Size: 10, PatchOffset: 2, PatchLength: 4, Patch: []byte("ab")}
	if err := s.Put(r); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(filepath.Join(dir, "images", "uid-1.json")); st == nil || st.Mode().Perm() != 0o600 {
		t.Errorf("record file mode %v: images embed the agent configuration", st)
	}
	if err := os.WriteFile(filepath.Join(dir, "images", "junk.json"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}

	// A restart with the same work directory: same key, same names, same records.
	s2, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s2.Fresh || s2.Name([]byte("content"), []byte("uid")) != name {
		t.Error("the key must survive a restart")
	}
	if got := s2.Lookup(name + ".iso"); got == nil || got.UID != "uid-1" || string(got.Patch) != "ab" {
		t.Errorf("record after restart: %+v", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "images", "junk.json")); err == nil {
		t.Error("an unreadable record must be removed")
	}

	// Replacing a UID's record stops serving its old name; a checksum for an old image is ignored.
	r2 := *r
	r2.Image = s2.Name([]byte("other")) + ".iso"
	if err := s2.Put(&r2); err != nil {
		t.Fatal(err)
	}
	if s2.Lookup(r.Image) != nil || s2.Lookup(r2.Image) == nil || s2.Len() != 1 {
		t.Error("the old image must not be served after replacement")
	}
	if err := s2.SetChecksum("uid-1", r.Image, "stale"); err != nil || s2.Get("uid-1").SHA256 != "" {
		t.Error("a checksum of a replaced image must not be recorded")
	}
	if err := s2.SetChecksum("uid-1", r2.Image, "abc"); err != nil || s2.Get("uid-1").SHA256 != "abc" {
		t.Error("checksum not recorded")
	}
	if err := s2.Delete("uid-1"); err != nil || s2.Lookup(r2.Image) != nil || s2.Get("uid-1") != nil {
		t.Error("Delete must stop serving")
	}

	// Cache loss: a work directory without its key starts fresh, with a new key.
	if err := os.Remove(filepath.Join(dir, "key")); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(r); err != nil {
		t.Fatal(err)
	}
	s3, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !s3.Fresh || s3.Len() != 0 || s3.Name([]byte("content"), []byte("uid")) == name {
		t.Error("without the key nothing old may be served and names must change")
	}
}

// A checksum that arrives while its image is deleted never brings the record back: once Delete
// returned, the image is neither served nor on disk, whatever the order the two ran in.
func TestChecksumRacingDelete(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		r := &Record{UID: "uid-1", Namespace: "ns", Name: "host-0", Image: s.Name([]byte{byte(i)}) + ".iso", Base: "/b", BaseSize: 10, Size: 10, PatchOffset: 2, PatchLength: 4, Patch: []byte("ab")}
		if err := s.Put(r); err != nil {
			t.Fatal(err)
		}
		done := make(chan error)
		go func() { done <- s.SetChecksum(r.UID, r.Image, "sum") }()
		if err := s.Delete(r.UID); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if s.Get(r.UID) != nil || s.Lookup(r.Image) != nil {
			t.Fatalf("iteration %d: a deleted image is served again after a racing checksum", i)
		}
		if _, err := os.Stat(filepath.Join(dir, "images", "uid-1.json")); err == nil {
			t.Fatalf("iteration %d: a deleted image's record is back on disk after a racing checksum", i)
		}
	}
}
