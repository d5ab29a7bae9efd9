package imagebuild

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/metalforge/metalforge/internal/test/poll"
)

// URLs are stable while the content is: the same request after a restart is not rebuilt and has
// the same name; new network data or another work directory (another key) gives another name.
func TestNamesAndRebuilds(t *testing.T) {
	e := newEnv(t, nil)
	first := e.build(request("a"))
	if again, built, err := e.b.Prepare(context.Background(), request("a")); err != nil || built || again.Image != first.Image {
		t.Fatalf("unchanged inputs: built %t (%v)", built, err)
	}
	other := e.build(request("z"))
	if other.Image == first.Image {
		t.Error("two PreprovisioningImages share a name")
	}
	e.start(e.store.Dir())
	if again, built, err := e.b.Prepare(context.Background(), request("a")); err != nil || built || again.Image != first.Image {
		t.Fatalf("after a restart: built %t, %v", built, err)
	}
	// Rebuilding the same content (a Secret change that does not touch the data) keeps the name.
	req := request("a")
	req.NetworkData["other-key"] = []byte("x")
	rebuilt, built, err := e.b.Prepare(context.Background(), req)
	if err != nil || !built || rebuilt.Image != first.Image || rebuilt.SHA256 != first.SHA256 {
		t.Fatalf("same content, new inputs: built %t, %s vs %s (%v)", built, rebuilt.Image, first.Image, err)
	}
	req = request("a")
	req.NetworkData["nmstate"] = []byte(strings.Replace(networkData, "192.0.2.10", "192.0.2.11", 1))
	changed, built, err := e.b.Prepare(context.Background(), req)
	if err != nil || !built || changed.Image == first.Image {
		t.Fatalf("new network data must give a new name (built %t, %v)", built, err)
	}
	e.start(filepath.Join(e.dir, "other-work"))
	if lost, built, _ := e.b.Prepare(context.Background(), request("a")); !built || lost.Image == first.Image {
		t.Error("another work directory (cache loss) must give new names")
	}
}

func TestInvalidInputs(t *testing.T) {
	e := newEnv(t, nil)
	tests := map[string]struct {
		edit func(*Request)
		want string
	}{
		"no nmstate key": {func(r *Request) { r.NetworkData = map[string][]byte{"networkData": []byte("{}")} }, `network data Secret nd has no "nmstate" key`},
		"bad nmstate": {func(r *Request) {
			r.NetworkData["nmstate"] = []byte("interfaces:\n- {name: eno1, type: ethernet, ipv4: {enabled: true, address: [{ip: 192.0.2.300, prefix-length: 24}]}}\n")
		}, "interfaces[0].ipv4.address[0].ip"},
		"unsupported nmstate": {func(r *Request) {
			r.NetworkData["nmstate"] = []byte("interfaces:\n- {name: br0, type: linux-bridge}\n")
		}, "interfaces[0].type"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			req := request("x")
			tc.edit(&req)
			_, _, err := e.b.Prepare(context.Background(), req)
			var ie *InvalidError
			if !errors.As(err, &ie) || !strings.Contains(ie.Msg, tc.want) {
				t.Errorf("error %v, want an InvalidError with %q", err, tc.want)
			}
		})
	}
	req := request("x")
	req.Arch = "s390x"
	if _, _, err := e.b.Prepare(context.Background(), req); !errors.Is(err, ErrUnsupported) {
		t.Errorf("unknown arch: %v", err)
	}
}

func TestOverride(t *testing.T) {
	e := newEnv(t, nil)
	big := make([]byte, 400<<10)
	_, _ = rand.Read(big)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/agent.ign":
			if r.URL.Query().Get("token") != "s3cret" {
				http.Error(w, "no", http.StatusForbidden)
				return
			}
			_, _ = w.Write([]byte(`{"ignition":{"version":"3.1.0"},"storage":{"files":[{"path":"/etc/assisted/agent.conf","contents":{"source":"data:,assisted"}}]}}`))
		case "/big.ign":
			_, _ = w.Write([]byte(`{"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"/big","contents":{"source":"data:;base64,` + base64.StdEncoding.EncodeToString(big) + `"}}]}}`))
		case "/v2.ign":
			_, _ = w.Write([]byte(`{"ignition":{"version":"2.2.0"}}`))
		case "/down.ign":
			http.Error(w, "later", http.StatusServiceUnavailable)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	req := request("o")
	req.OverrideURI = srv.URL + "/agent.ign?token=s3cret"
	rec := e.build(req)
	area := rec.Patch
	_, config := unpackArea(t, area)
	if !strings.Contains(string(config), `"path":"/etc/assisted/agent.conf"`) || !strings.Contains(string(config), `"path":"/etc/ironic-python-agent.conf"`) {
		t.Errorf("merged config lacks a file: %.300s", config)
	}
	tests := map[string]struct {
		uri       string
		transient bool
		want      string
	}{
		"too large for the embed area": {srv.URL + "/big.ign", false, "more than the 262144 bytes of the ISO's Ignition embed area"},
		"spec 2":                       {srv.URL + "/v2.ign", false, "spec 2.2.0 is not supported"},
		"forbidden":                    {srv.URL + "/agent.ign?token=wrong", false, "HTTP 403"},
		"not there yet":                {srv.URL + "/missing.ign?token=s3cret", true, "HTTP 404"},
		"server down":                  {srv.URL + "/down.ign", true, "HTTP 503"},
		"unreachable":                  {"http://127.0.0.1:1/x.ign?token=s3cret", true, "failed"},
		"not http":                     {"ftp://example.com/x.ign", false, "not an http or https URL"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			req := request("o")
			req.OverrideURI = tc.uri
			_, _, err := e.b.Prepare(context.Background(), req)
			var ie *InvalidError
			var oe *OverrideError
			if tc.transient && !errors.As(err, &oe) || !tc.transient && !errors.As(err, &ie) {
				t.Fatalf("error %v (%T), transient %t", err, err, tc.transient)
			}
			if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "wrong") {
				t.Errorf("message %q (want %q, never the query)", err, tc.want)
			}
		})
	}
}

// An ISO whose checksum needs the whole rest of the base read gets it from the background
// worker, which then says so.
func TestBackgroundChecksum(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.SyncChecksumLimit = 1 })
	rec := e.build(request("s"))
	if rec.SHA256 != "" {
		t.Fatal("the checksum should be left to the background")
	}
	if uid := <-e.summed; uid != "s" {
		t.Fatalf("checksum reported for %s", uid)
	}
	got := e.store.Get("s").SHA256
	if got == "" || got != sum(e.download(e.b.URL(rec))) {
		t.Errorf("background checksum %q does not match the image", got)
	}
}

// A background checksum that failed (the base unreadable for a while) is tried again, and the
// image gets its checksum once the base is back.
func TestBackgroundChecksumRetried(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.SyncChecksumLimit = 1 })
	e.b.sums.retryMin = 50 * time.Millisecond
	away := e.paths.ISO + ".away"
	must(t, os.Rename(e.paths.ISO, away))
	rec := e.build(request("r"))
	poll.Until(t, "a failed checksum without its base", func() (bool, string) {
		return e.b.sums.failedAttempts("r", rec.Image) > 0, "no failure counted"
	})
	must(t, os.Rename(away, e.paths.ISO))
	poll.Until(t, "the checksum retried", func() (bool, string) {
		select {
		case uid := <-e.summed:
			if uid != "r" {
				t.Fatalf("checksum reported for %s", uid)
			}
			return true, ""
		default:
			return false, "not stored yet"
		}
	})
	if got := e.store.Get("r").SHA256; got == "" || got != sum(e.download(e.b.URL(rec))) {
		t.Errorf("retried checksum %q does not match the image", got)
	}
	if n := e.b.sums.failedAttempts("r", rec.Image); n != 0 {
		t.Errorf("%d failures still counted after success", n)
	}
}
