// Package imageserver serves the image-customization-controller's images over HTTP: each image
// is streamed from its base file on disk with the host's few kilobytes of Ignition patched in,
// never copied. GET and HEAD with Range; each download opens its own reader of the base file, and
// the base's bytes go from the page cache to the socket with sendfile, so memory stays flat
// however many downloads run. There is no listing: "/" and any unknown name answer 404, and
// names are HMACs the store derives with its secret key.
package imageserver

import (
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-logr/logr"

	"github.com/metalforge/metalforge/internal/imagecustomization/imagestore"
)

// Server is the image HTTP handler.
type Server struct {
	Store *imagestore.Store
	// Valid, when set, says whether a record may be served: its base must still be the content
	// the record was built from (a base replaced while the controller was down gives a 404 until
	// the image is rebuilt under a new name).
	Valid func(*imagestore.Record) bool
	Log   logr.Logger

	mu      sync.RWMutex
	statics map[string]*imagestore.Record

	active atomic.Int64
}

// AddStatic serves a file that is the same for every host (the initrd's kernel, the live root
// filesystem) under name.
func (s *Server) AddStatic(name string, r *imagestore.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.statics == nil {
		s.statics = map[string]*imagestore.Record{}
	}
	s.statics[name] = r
}

// Active is the number of downloads in progress.
func (s *Server) Active() int64 { return s.active.Load() }

func (s *Server) lookup(name string) *imagestore.Record {
	s.mu.RLock()
	st := s.statics[name]
	s.mu.RUnlock()
	if st != nil {
		return st
	}
	r := s.Store.Lookup(name)
	if r != nil && s.Valid != nil && !s.Valid(r) {
		return nil
	}
	return r
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, "/")
	var rec *imagestore.Record
	if name != "" && !strings.Contains(name, "/") {
		rec = s.lookup(name)
	}
	if rec == nil {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	s.active.Add(1)
	defer s.active.Add(-1)
	// Each download reads through its own descriptor: its position is its own.
	f, err := os.Open(rec.Base)
	if err != nil {
		s.Log.Error(err, "Cannot open a base image", "image", name)
		http.Error(w, "image unavailable", http.StatusInternalServerError)
		return
	}
	defer f.Close()
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("X-Content-Type-Options", "nosniff")
	// Names are derived from the content: the name is a strong validator.
	h.Set("ETag", `"`+strings.TrimSuffix(name, extension(name))+`"`)
	// Ironic caches downloads and checks Last-Modified; private keeps shared caches out (images
	// carry the agent's configuration).
	h.Set("Cache-Control", "private")
	if !rec.ModTime.IsZero() {
		h.Set("Last-Modified", rec.ModTime.UTC().Format(http.TimeFormat))
	}
	start, length, ok := simpleRange(r, rec.Size)
	if !ok {
		// Conditional requests and multi-range: the standard library gets them right.
		http.ServeContent(w, r, "", rec.ModTime, io.NewSectionReader(rec.ReaderAt(f), 0, rec.Size))
		return
	}
	h.Set("Accept-Ranges", "bytes")
	h.Set("Content-Length", strconv.FormatInt(length, 10))
	status := http.StatusOK
	if length != rec.Size {
		status = http.StatusPartialContent
		h.Set("Content-Range", "bytes "+strconv.FormatInt(start, 10)+"-"+strconv.FormatInt(start+length-1, 10)+"/"+strconv.FormatInt(rec.Size, 10))
	}
	w.WriteHeader(status)
	if r.Method == http.MethodHead || length == 0 {
		return
	}
	if err := send(w, f, rec, start, length); err != nil {
		// Mostly clients that went away; a base shorter than recorded shows here too.
		s.Log.V(1).Info("Download ended early", "image", name, "error", err.Error())
	}
}

// send writes [start, start+length) of the image: the base's parts with io.CopyN from the file
// (which net/http turns into sendfile), the patch from memory, zeros from a shared block.
func send(w io.Writer, f *os.File, rec *imagestore.Record, start, length int64) error {
	for _, seg := range rec.Segments(start, length) {
		var err error
		switch {
		case seg.Base:
			if _, err = f.Seek(rec.BaseOffset+seg.Offset, io.SeekStart); err == nil {
				var n int64
				n, err = io.CopyN(w, f, seg.Length)
				if err == nil && n < seg.Length {
					err = io.ErrUnexpectedEOF
				}
			}
		case seg.Data != nil:
			_, err = w.Write(seg.Data)
		default:
			err = writeZeros(w, seg.Length)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

var zeros = make([]byte, 64<<10)

func writeZeros(w io.Writer, n int64) error {
	for n > 0 {
		k := min(n, int64(len(zeros)))
		if _, err := w.Write(zeros[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// simpleRange handles a request without conditions and with at most one range: it returns the
// bytes to send. ok is false for anything else (ServeContent answers it).
func simpleRange(r *http.Request, size int64) (start, length int64, ok bool) {
	for _, h := range []string{"If-Match", "If-None-Match", "If-Modified-Since", "If-Unmodified-Since", "If-Range"} {
		if r.Header.Get(h) != "" {
			return 0, 0, false
		}
	}
	spec := r.Header.Get("Range")
	if spec == "" {
		return 0, size, true
	}
	spec, found := strings.CutPrefix(spec, "bytes=")
	if !found || strings.Contains(spec, ",") {
		return 0, 0, false
	}
	a, b, found := strings.Cut(strings.TrimSpace(spec), "-")
	if !found {
		return 0, 0, false
	}
	if a == "" { // the last b bytes
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n <= 0 || size == 0 {
			return 0, 0, false
		}
		n = min(n, size)
		return size - n, n, true
	}
	first, err := strconv.ParseInt(a, 10, 64)
	if err != nil || first < 0 || first >= size {
		return 0, 0, false // unsatisfiable: ServeContent answers 416
	}
	last := size - 1
	if b != "" {
		if last, err = strconv.ParseInt(b, 10, 64); err != nil || last < first {
			return 0, 0, false
		}
		last = min(last, size-1)
	}
	return first, last - first + 1, true
}

func extension(name string) string {
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		return name[i:]
	}
	return ""
}
