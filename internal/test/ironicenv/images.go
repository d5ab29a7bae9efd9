package ironicenv

import (
	"bytes"
	"crypto/md5" //nolint:gosec // metal3's image checksums include md5
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/metalforge/metalforge/internal/iso"
)

// ImageServer serves OS images, a live ISO and firmware files over HTTP (HEAD and Range like a
// real web server) and counts full downloads per path: the simulated agent downloads an image to
// verify its checksum before writing it, so the count tells a deploy from an adoption.
type ImageServer struct {
	*httptest.Server
	mu    sync.Mutex
	files map[string][]byte
	gets  map[string]int
}

// NewImageServer serves /disk.img (4 MiB of random bytes), the same bytes as /recovery/disk.img and
// /redirected/disk.img (for tests that count their downloads alone), /live.iso (a small ISO 9660 image) and
// /bios-2.1.0.bin (bmcsim takes the new firmware version from the file name); any of them under
// /moved/ redirects to it. Close it when done.
func NewImageServer() *ImageServer {
	s := &ImageServer{files: map[string][]byte{}, gets: map[string]int{}}
	disk := make([]byte, 4<<20)
	_, _ = rand.Read(disk)
	s.files["/disk.img"] = disk
	s.files["/recovery/disk.img"] = disk
	s.files["/redirected/disk.img"] = disk
	var live bytes.Buffer
	if err := iso.Write(&live, iso.Options{VolumeID: "LIVE"}, []iso.File{{Path: "README.TXT", Data: []byte("a live ISO for tests\n")}}); err != nil {
		panic(err)
	}
	s.files["/live.iso"] = live.Bytes()
	s.files["/bios-2.1.0.bin"] = []byte("firmware image for tests")
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Add serves data at path (replacing what was there).
func (s *ImageServer) Add(path string, data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.files[path] = data
}

// movedPrefix: a path under it redirects to the path without it (302), as mirrors and artifact
// servers do.
const movedPrefix = "/moved"

func (s *ImageServer) serve(w http.ResponseWriter, r *http.Request) {
	if rest, ok := strings.CutPrefix(r.URL.Path, movedPrefix+"/"); ok {
		http.Redirect(w, r, "/"+rest, http.StatusFound)
		return
	}
	s.mu.Lock()
	data, ok := s.files[r.URL.Path]
	if ok && r.Method == http.MethodGet && r.Header.Get("Range") == "" {
		s.gets[r.URL.Path]++
	}
	s.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	http.ServeContent(w, r, r.URL.Path, time.Unix(1700000000, 0), bytes.NewReader(data))
}

func (s *ImageServer) file(path string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.files[path]
}

// Bytes returns the file served at path (nil when none).
func (s *ImageServer) Bytes(path string) []byte { return s.file(path) }

// SHA256 is the hex sha256 of the file at path.
func (s *ImageServer) SHA256(path string) string {
	sum := sha256.Sum256(s.file(path))
	return hex.EncodeToString(sum[:])
}

// MD5 is the hex md5 of the file at path.
func (s *ImageServer) MD5(path string) string {
	sum := md5.Sum(s.file(path)) //nolint:gosec // a checksum format metal3 accepts, not security
	return hex.EncodeToString(sum[:])
}

// Downloads is how many full GETs the path had.
func (s *ImageServer) Downloads(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gets[path]
}
