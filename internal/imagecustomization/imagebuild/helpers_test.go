package imagebuild

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/go-logr/logr/testr"

	"github.com/metalforge/metalforge/internal/bmcsim/agent/deployimage"
	"github.com/metalforge/metalforge/internal/imagecustomization/baseimage"
	"github.com/metalforge/metalforge/internal/imagecustomization/ignition"
	"github.com/metalforge/metalforge/internal/imagecustomization/imageserver"
	"github.com/metalforge/metalforge/internal/imagecustomization/imagestore"
)

const networkData = `
interfaces:
- name: eno1
  type: ethernet
  ipv4:
    enabled: true
    address: [{ip: 192.0.2.10, prefix-length: 24}]
routes:
  config:
  - {destination: 0.0.0.0/0, next-hop-address: 192.0.2.1, next-hop-interface: eno1}
`

// testAgent is the agent configuration every test builder writes into its images.
var testAgent = ignition.AgentConfig{IronicURLs: []string{"http://192.0.2.2:6385"}, AgentImage: "quay.io/metal3-io/ironic-agent"}

// env is a builder over freshly written base images, with its image server.
type env struct {
	t       *testing.T
	dir     string
	paths   baseimage.Paths
	b       *Builder
	store   *imagestore.Store
	srv     *httptest.Server
	handler atomic.Pointer[imageserver.Server]
	summed  chan string
	cfgEdit func(*Config)
}

func newEnv(t *testing.T, edit func(*Config)) *env {
	t.Helper()
	if _, err := exec.LookPath("nmcli"); err != nil {
		t.Skip("nmcli is not installed; `make test` installs it (hack/host-packages.sh, Debian package network-manager)")
	}
	dir := t.TempDir()
	e := &env{t: t, dir: dir, summed: make(chan string, 100), cfgEdit: edit}
	e.paths = baseimage.Paths{ISO: filepath.Join(dir, "agent.iso"), Initrd: filepath.Join(dir, "agent.initramfs"), Kernel: filepath.Join(dir, "agent.kernel")}
	if err := deployimage.WriteLiveISO(e.paths.ISO, deployimage.LiveOptions{}); err != nil {
		t.Fatal(err)
	}
	must(t, os.WriteFile(e.paths.Initrd, deployimage.LiveInitramfs(), 0o644))
	must(t, os.WriteFile(e.paths.Kernel, deployimage.Kernel(), 0o644))
	// One listener for the env's whole life: a restarted controller keeps its publish address.
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { e.handler.Load().ServeHTTP(w, r) }))
	t.Cleanup(e.srv.Close)
	e.start(filepath.Join(dir, "work"))
	return e
}

// start (re)starts the builder and server on the work directory, as the controller does.
func (e *env) start(work string) {
	e.t.Helper()
	cat, err := baseimage.Load(e.paths)
	must(e.t, err)
	e.store, err = imagestore.Open(work)
	must(e.t, err)
	srv := &imageserver.Server{Store: e.store}
	cfg := Config{
		Catalog: cat, Store: e.store, PublishURL: e.srv.URL,
		Agent:      testAgent,
		OnChecksum: func(r *imagestore.Record) { e.summed <- r.UID },
		Log:        testr.New(e.t),
	}
	if e.cfgEdit != nil {
		e.cfgEdit(&cfg)
	}
	e.b, err = New(cfg)
	must(e.t, err)
	srv.Valid = e.b.Valid
	for name, r := range e.b.Statics() {
		srv.AddStatic(name, r)
	}
	e.handler.Store(srv)
	ctx, cancel := context.WithCancel(context.Background())
	e.t.Cleanup(cancel)
	go func() { _ = e.b.Start(ctx) }()
}

func (e *env) build(req Request) *imagestore.Record {
	e.t.Helper()
	rec, _, err := e.b.Prepare(context.Background(), req)
	must(e.t, err)
	must(e.t, e.b.Commit(rec))
	return rec
}

func (e *env) download(url string) []byte {
	e.t.Helper()
	resp, err := e.srv.Client().Get(url)
	must(e.t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	must(e.t, err)
	if resp.StatusCode != 200 {
		e.t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	return data
}

func (e *env) save(data []byte, name string) string {
	e.t.Helper()
	p := filepath.Join(e.t.TempDir(), name)
	must(e.t, os.WriteFile(p, data, 0o644))
	return p
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func request(uid string) Request {
	return Request{UID: uid, Namespace: "ns", Name: "host-" + uid, Format: "iso", NetworkDataName: "nd", NetworkData: map[string][]byte{"nmstate": []byte(networkData)}}
}

// run runs a Debian tool; `make test` installs them (hack/host-packages.sh).
func run(t *testing.T, stdin []byte, name string, args ...string) []byte {
	t.Helper()
	return runIn(t, "", stdin, name, args...)
}

func runIn(t *testing.T, dir string, stdin []byte, name string, args ...string) []byte {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Skipf("%s is not installed; `make test` installs it (hack/host-packages.sh)", name)
	}
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, stderr.Bytes())
	}
	return out
}

// extract reads one file out of an ISO with xorriso.
func extract(t *testing.T, image, path string) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "extracted")
	run(t, nil, "xorriso", "-osirrox", "on", "-indev", image, "-extract", path, out)
	return mustRead(t, out)
}

// failedAttempts is the number of failed attempts counted for an image (tests).
func (c *checksummer) failedAttempts(uid, image string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.failures[uid+"/"+image]
}
