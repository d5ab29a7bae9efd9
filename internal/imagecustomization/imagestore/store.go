package imagestore

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

const (
	keyFile   = "key"
	keySize   = 32
	imagesDir = "images"
	// NameLength is the hex length of an image name: 128 bits, short enough for BMCs that
	// refuse long URLs (iDRAC) and long enough not to be guessed.
	NameLength = 32
)

// Store holds the records of one work directory. Safe for concurrent use.
type Store struct {
	dir string
	key []byte
	// Fresh: the work directory had no key, so every image built before (if any) is lost.
	Fresh bool

	// writes serialises the changes (Put, SetChecksum, Delete): each checks, writes its file and
	// indexes as one step, so that a checksum arriving while an image is deleted or replaced
	// cannot bring the old record back.
	writes sync.Mutex
	mu     sync.RWMutex
	byUID  map[string]*Record
	byName map[string]*Record
}

// Open opens (or creates) the store in dir and loads its records. A record that cannot be read
// is removed (it is rebuilt when its PreprovisioningImage is reconciled).
func Open(dir string) (*Store, error) {
	if err := os.MkdirAll(filepath.Join(dir, imagesDir), 0o700); err != nil {
		return nil, fmt.Errorf("image store: %w", err)
	}
	s := &Store{dir: dir, byUID: map[string]*Record{}, byName: map[string]*Record{}}
	key, err := os.ReadFile(filepath.Join(dir, keyFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if key, err = s.newKey(); err != nil {
			return nil, err
		}
		s.Fresh = true
	case err != nil:
		return nil, fmt.Errorf("image store: reading the key: %w", err)
	case len(key) != keySize:
		return nil, fmt.Errorf("image store: %s is %d bytes, not %d", filepath.Join(dir, keyFile), len(key), keySize)
	}
	s.key = key
	if s.Fresh {
		// Records without their key cannot be served under the same names: start empty.
		if err := clearDir(filepath.Join(dir, imagesDir)); err != nil {
			return nil, err
		}
		return s, nil
	}
	return s, s.load()
}

func (s *Store) newKey() ([]byte, error) {
	key := make([]byte, keySize)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("image store: %w", err)
	}
	if err := writeFile(filepath.Join(s.dir, keyFile), key); err != nil {
		return nil, fmt.Errorf("image store: writing the key: %w", err)
	}
	return key, nil
}

func (s *Store) load() error {
	dir := filepath.Join(s.dir, imagesDir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("image store: %w", err)
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if strings.HasPrefix(e.Name(), ".tmp-") {
			_ = os.Remove(p) // a write a crash interrupted (writeFile)
			continue
		}
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		var r Record
		data, err := os.ReadFile(p)
		if err == nil {
			err = json.Unmarshal(data, &r)
		}
		if err == nil {
			err = r.Check()
		}
		if err != nil || e.Name() != r.UID+".json" {
			_ = os.Remove(p)
			continue
		}
		s.index(&r)
	}
	return nil
}

// Name derives an image name from parts with the store's key. Parts are length-prefixed, so no
// two different lists give the same input.
func (s *Store) Name(parts ...[]byte) string {
	m := hmac.New(sha256.New, s.key)
	var n [8]byte
	for _, p := range parts {
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		m.Write(n[:])
		m.Write(p)
	}
	return hex.EncodeToString(m.Sum(nil))[:NameLength]
}

// Put stores r (replacing the record of the same UID) on disk, then serves it.
func (s *Store) Put(r *Record) error {
	s.writes.Lock()
	defer s.writes.Unlock()
	return s.put(r)
}

func (s *Store) put(r *Record) error {
	if err := r.Check(); err != nil {
		return err
	}
	data, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("image store: %w", err)
	}
	if err := writeFile(s.path(r.UID), data); err != nil {
		return fmt.Errorf("image store: writing %s: %w", r.Image, err)
	}
	s.index(r)
	return nil
}

func (s *Store) index(r *Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.byUID[r.UID]; old != nil && s.byName[old.Image] == old {
		delete(s.byName, old.Image)
	}
	s.byUID[r.UID] = r
	s.byName[r.Image] = r
}

// SetChecksum records the image's sha256 if the UID's record is still that image.
func (s *Store) SetChecksum(uid, image, sum string) error {
	s.writes.Lock()
	defer s.writes.Unlock()
	cur := s.Get(uid)
	if cur == nil || cur.Image != image {
		return nil
	}
	r := *cur
	r.SHA256 = sum
	return s.put(&r)
}

// Get returns the record of a PreprovisioningImage, or nil. Callers must not change it.
func (s *Store) Get(uid string) *Record {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.byUID[uid]
}

// Lookup returns the record served as image, or nil.
func (s *Store) Lookup(image string) *Record {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.byName[image]
}

// Delete forgets a PreprovisioningImage's image: it is no longer served.
func (s *Store) Delete(uid string) error {
	s.writes.Lock()
	defer s.writes.Unlock()
	s.mu.Lock()
	if r := s.byUID[uid]; r != nil {
		if s.byName[r.Image] == r {
			delete(s.byName, r.Image)
		}
		delete(s.byUID, uid)
	}
	s.mu.Unlock()
	if err := os.Remove(s.path(uid)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("image store: %w", err)
	}
	return nil
}

// All returns every record. Callers must not change them.
func (s *Store) All() []*Record {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]*Record, 0, len(s.byUID))
	for _, r := range s.byUID {
		out = append(out, r)
	}
	return out
}

// Len is the number of records.
func (s *Store) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.byUID)
}

// Dir is the work directory.
func (s *Store) Dir() string { return s.dir }

func (s *Store) path(uid string) string {
	// UIDs are API-server generated; refuse anything that could leave the directory.
	return filepath.Join(s.dir, imagesDir, filepath.Base(uid)+".json")
}

// writeFile replaces path atomically (a crash leaves the old or the new content).
func writeFile(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func clearDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("image store: %w", err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("image store: %w", err)
		}
	}
	return nil
}
