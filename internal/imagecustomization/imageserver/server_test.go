package imageserver

import (
	"bytes"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/metalforge/metalforge/internal/imagecustomization/imagestore"
)

type fixture struct {
	srv   *httptest.Server
	s     *Server
	image []byte // what the record describes
	name  string
	rec   *imagestore.Record
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	base := make([]byte, 3<<20+123)
	for i := range base {
		base[i] = byte(i*7 + i>>11)
	}
	basePath := filepath.Join(dir, "base.iso")
	if err := os.WriteFile(basePath, base, 0o644); err != nil {
		t.Fatal(err)
	}
	store, err := imagestore.Open(filepath.Join(dir, "work"))
	if err != nil {
		t.Fatal(err)
	}
	name := store.Name([]byte("x")) + ".iso"
	rec := &imagestore.Record{
		UID: "u1", Image: name, Base: basePath, BaseSize: int64(len(base)), Size: int64(len(base)),
		PatchOffset: 1 << 20, PatchLength: 256 << 10, Patch: []byte("IGNITION ARCHIVE"),
		ModTime: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC),
	}
	if err := store.Put(rec); err != nil {
		t.Fatal(err)
	}
	image := append([]byte(nil), base...)
	clear(image[rec.PatchOffset : rec.PatchOffset+rec.PatchLength])
	copy(image[rec.PatchOffset:], rec.Patch)
	s := &Server{Store: store}
	// The root filesystem of an ISO is served from inside it.
	s.AddStatic("rootfs.img", &imagestore.Record{UID: "static", Image: "rootfs.img", Base: basePath, BaseOffset: 2 << 20, BaseSize: 4096, Size: 4096})
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return &fixture{srv: srv, s: s, image: image, name: name, rec: rec}
}

func (f *fixture) do(t *testing.T, method, path string, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

func TestGetAndHead(t *testing.T) {
	f := newFixture(t)
	resp, body := f.do(t, "GET", "/"+f.name, nil)
	if resp.StatusCode != 200 || !bytes.Equal(body, f.image) {
		t.Fatalf("GET: %d, %d bytes, equal %t", resp.StatusCode, len(body), bytes.Equal(body, f.image))
	}
	if resp.Header.Get("Last-Modified") != "Thu, 02 Jan 2025 03:04:05 GMT" || resp.Header.Get("ETag") == "" || resp.Header.Get("Accept-Ranges") != "bytes" {
		t.Errorf("headers %v", resp.Header)
	}
	resp, body = f.do(t, "HEAD", "/"+f.name, nil)
	if resp.StatusCode != 200 || len(body) != 0 || resp.ContentLength != int64(len(f.image)) {
		t.Errorf("HEAD: %d, body %d, length %d", resp.StatusCode, len(body), resp.ContentLength)
	}
	resp, body = f.do(t, "GET", "/rootfs.img", nil)
	if resp.StatusCode != 200 || !bytes.Equal(body, f.image[2<<20:2<<20+4096]) {
		t.Errorf("static file from inside the base: %d, %d bytes", resp.StatusCode, len(body))
	}
}

func TestRanges(t *testing.T) {
	f := newFixture(t)
	n := int64(len(f.image))
	p := f.rec.PatchOffset
	tests := map[string]struct {
		rng        string
		start, end int64 // inclusive end
	}{
		"inside the patch":       {fmt.Sprintf("bytes=%d-%d", p+3, p+20), p + 3, p + 20},
		"across the patch start": {fmt.Sprintf("bytes=%d-%d", p-100, p+100), p - 100, p + 100},
		"across the patch end":   {fmt.Sprintf("bytes=%d-", p+f.rec.PatchLength-10), p + f.rec.PatchLength - 10, n - 1},
		"suffix":                 {"bytes=-1000", n - 1000, n - 1},
		"suffix longer than all": {fmt.Sprintf("bytes=-%d", n+5), 0, n - 1},
		"end past the size":      {fmt.Sprintf("bytes=%d-%d", n-5, n+100), n - 5, n - 1},
		"first byte":             {"bytes=0-0", 0, 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			resp, body := f.do(t, "GET", "/"+f.name, map[string]string{"Range": tc.rng})
			want := f.image[tc.start : tc.end+1]
			wantStatus := http.StatusPartialContent
			if tc.start == 0 && tc.end == n-1 {
				wantStatus = http.StatusOK
			}
			if resp.StatusCode != wantStatus || !bytes.Equal(body, want) {
				t.Fatalf("status %d (want %d), %d bytes (want %d), equal %t", resp.StatusCode, wantStatus, len(body), len(want), bytes.Equal(body, want))
			}
			if wantStatus == http.StatusPartialContent && resp.Header.Get("Content-Range") != fmt.Sprintf("bytes %d-%d/%d", tc.start, tc.end, n) {
				t.Errorf("Content-Range %q", resp.Header.Get("Content-Range"))
			}
		})
	}
	t.Run("unsatisfiable", func(t *testing.T) {
		resp, _ := f.do(t, "GET", "/"+f.name, map[string]string{"Range": fmt.Sprintf("bytes=%d-", n)})
		if resp.StatusCode != http.StatusRequestedRangeNotSatisfiable {
			t.Errorf("status %d", resp.StatusCode)
		}
	})
	t.Run("multiple ranges", func(t *testing.T) {
		resp, body := f.do(t, "GET", "/"+f.name, map[string]string{"Range": fmt.Sprintf("bytes=0-9,%d-%d", p, p+15)})
		_, params, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
		if resp.StatusCode != http.StatusPartialContent || err != nil {
			t.Fatalf("status %d, %v", resp.StatusCode, err)
		}
		mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
		for _, want := range [][]byte{f.image[0:10], f.image[p : p+16]} {
			part, err := mr.NextPart()
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(part)
			if !bytes.Equal(got, want) {
				t.Errorf("part %q, want %q", got, want)
			}
		}
	})
	t.Run("conditional", func(t *testing.T) {
		resp, _ := f.do(t, "GET", "/"+f.name, nil)
		etag := resp.Header.Get("ETag")
		resp, body := f.do(t, "GET", "/"+f.name, map[string]string{"If-None-Match": etag})
		if resp.StatusCode != http.StatusNotModified || len(body) != 0 {
			t.Errorf("If-None-Match: %d", resp.StatusCode)
		}
		resp, body = f.do(t, "GET", "/"+f.name, map[string]string{"If-Range": etag, "Range": "bytes=5-9"})
		if resp.StatusCode != http.StatusPartialContent || !bytes.Equal(body, f.image[5:10]) {
			t.Errorf("If-Range: %d", resp.StatusCode)
		}
	})
}

// No listing, nothing outside the names, no writes.
func TestNotFoundAndMethods(t *testing.T) {
	f := newFixture(t)
	for _, p := range []string{"/", "/images/", "/" + strings.TrimSuffix(f.name, ".iso"), "/x/" + f.name, "/" + f.name + "/", "/..%2f" + f.name, "/key", "/images/u1.json"} {
		if resp, body := f.do(t, "GET", p, nil); resp.StatusCode != http.StatusNotFound || bytes.Contains(body, []byte(f.name)) {
			t.Errorf("GET %s: %d", p, resp.StatusCode)
		}
	}
	if resp, _ := f.do(t, "PUT", "/"+f.name, nil); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("PUT: %d", resp.StatusCode)
	}
	f.s.Valid = func(*imagestore.Record) bool { return false }
	if resp, _ := f.do(t, "GET", "/"+f.name, nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a record whose base changed must not be served: %d", resp.StatusCode)
	}
}

// Concurrent downloads of one image each get the whole, right image: every download has its own
// reader.
func TestConcurrentDownloads(t *testing.T) {
	f := newFixture(t)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("GET", f.srv.URL+"/"+f.name, nil)
			if i%2 == 1 {
				req.Header.Set("Range", fmt.Sprintf("bytes=%d-", i*1000))
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			want := f.image
			if i%2 == 1 {
				want = f.image[i*1000:]
			}
			if err != nil || !bytes.Equal(body, want) {
				errs <- fmt.Errorf("download %d: %w, %d bytes", i, err, len(body))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if f.s.Active() != 0 {
		t.Errorf("%d downloads still counted", f.s.Active())
	}
}
