package imagecustomization

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cavaliergopher/cpio"
	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/bmcsim/agent/deployimage"
	"github.com/metalforge/metalforge/internal/controller/cacheview"
	"github.com/metalforge/metalforge/internal/imagecustomization/baseimage"
	"github.com/metalforge/metalforge/internal/imagecustomization/ignition"
	"github.com/metalforge/metalforge/internal/imagecustomization/imagebuild"
	"github.com/metalforge/metalforge/internal/imagecustomization/imageserver"
	"github.com/metalforge/metalforge/internal/imagecustomization/imagestore"
	"github.com/metalforge/metalforge/internal/iso"
	"github.com/metalforge/metalforge/internal/test/poll"
	"github.com/metalforge/metalforge/internal/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	// The base images are removed after a passing run (kept to look at otherwise).
	testenv.Main(m, testenv.Options{AfterTests: func() error { return os.RemoveAll(basesDir) }}, &env)
}

// bases are the base images of the whole suite, written once.
var (
	basesOnce sync.Once
	bases     baseimage.Paths
	basesDir  string
	basesErr  error
)

func basePaths(t *testing.T) baseimage.Paths {
	t.Helper()
	if _, err := exec.LookPath("nmcli"); err != nil {
		t.Skip("nmcli is not installed; `make test` installs it (hack/host-packages.sh, Debian package network-manager)")
	}
	basesOnce.Do(func() {
		dir, err := os.MkdirTemp("", "metalforge-icc-bases-")
		if err != nil {
			basesErr = err
			return
		}
		basesDir = dir
		bases = baseimage.Paths{ISO: filepath.Join(dir, "agent.iso"), Initrd: filepath.Join(dir, "agent.initramfs"), Kernel: filepath.Join(dir, "agent.kernel")}
		if basesErr = deployimage.WriteLiveISO(bases.ISO, deployimage.LiveOptions{}); basesErr == nil {
			basesErr = errors.Join(os.WriteFile(bases.Initrd, deployimage.LiveInitramfs(), 0o644), os.WriteFile(bases.Kernel, deployimage.Kernel(), 0o644))
		}
	})
	if basesErr != nil {
		t.Fatal(basesErr)
	}
	return bases
}

// icc is the controller running in-process against one namespace, with its image server on a
// listener that outlives restarts (the publish address does not change).
type icc struct {
	t      *testing.T
	ns     string
	work   string
	paths  baseimage.Paths
	srv    *httptest.Server
	cur    atomic.Pointer[imageserver.Server]
	tune   []func(*Config)
	btune  []func(*imagebuild.Config)
	cancel context.CancelFunc
	done   chan error

	mu   sync.Mutex
	seen map[types.NamespacedName][]uint64
}

func startICC(t *testing.T, ns string, tune ...func(*Config)) *icc {
	t.Helper()
	return startICCWith(t, ns, nil, tune...)
}

func startICCWith(t *testing.T, ns string, btune []func(*imagebuild.Config), tune ...func(*Config)) *icc {
	t.Helper()
	c := &icc{t: t, ns: ns, work: t.TempDir(), paths: basePaths(t), tune: tune, btune: btune}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { c.cur.Load().ServeHTTP(w, r) }))
	t.Cleanup(c.srv.Close)
	c.start()
	t.Cleanup(c.stop)
	return c
}

// testAgent is the agent configuration every test builder writes into its images.
var testAgent = ignition.AgentConfig{IronicURLs: []string{"http://192.0.2.2:6385"}, AgentImage: "quay.io/metal3-io/ironic-agent"}

// start runs the controller on c.work, wired as main wires it.
func (c *icc) start() {
	t := c.t
	t.Helper()
	catalog, err := baseimage.Load(c.paths)
	must(t, err)
	store, err := imagestore.Open(c.work)
	must(t, err)
	r := &Reconciler{skipNameValidation: true}
	bcfg := imagebuild.Config{
		Catalog: catalog, Store: store, PublishURL: c.srv.URL, Log: testr.New(t),
		Agent:      testAgent,
		OnChecksum: func(rec *imagestore.Record) { r.Checksummed(rec.Namespace, rec.Name) },
	}
	for _, f := range c.btune {
		f(&bcfg)
	}
	b, err := imagebuild.New(bcfg)
	must(t, err)
	r.Builder = b
	cfg := DefaultConfig()
	cfg.GracePeriod, cfg.MinRetryDelay, cfg.MaxRetryDelay = 0, 100*time.Millisecond, time.Second
	cfg.Reconciled = c.reconciled
	for _, f := range c.tune {
		f(&cfg)
	}
	r.Config = cfg
	srv := &imageserver.Server{Store: store, Valid: b.Valid}
	for name, rec := range b.Statics() {
		srv.AddStatic(name, rec)
	}
	c.cur.Store(srv)
	cacheOpts, clientOpts, err := cacheview.Options([]string{c.ns}, CacheViews()...)
	must(t, err)
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme: env.Scheme, Cache: cacheOpts, Client: clientOpts,
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
	})
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	must(t, r.SetupWithManager(ctx, mgr))
	must(t, mgr.Add(runnable(b.Start)))
	c.cancel, c.done = cancel, make(chan error, 1)
	c.mu.Lock()
	c.seen = map[types.NamespacedName][]uint64{}
	c.mu.Unlock()
	go func() { c.done <- mgr.Start(ctx) }()
}

type runnable func(context.Context) error

func (f runnable) Start(ctx context.Context) error { return f(ctx) }

func (c *icc) stop() {
	if c.cancel == nil {
		return
	}
	c.cancel()
	if err := <-c.done; err != nil {
		c.t.Errorf("manager stopped with an error: %v", err)
	}
	c.cancel = nil
}

// restart stops the controller and starts it again; with emptyWork, on an empty work directory
// (the image cache lost).
func (c *icc) restart(emptyWork bool) {
	c.t.Helper()
	c.stop()
	if emptyWork {
		c.work = c.t.TempDir()
	}
	c.start()
}

func (c *icc) reconciled(key types.NamespacedName, rv string) {
	v, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen[key] = append(c.seen[key], v)
}

// waitSeen waits until the controller finished a reconcile of name that started from
// resourceVersion rv or later, so a test can assert what it did not do without sleeping.
func (c *icc) waitSeen(t *testing.T, name, rv string) {
	t.Helper()
	min, _ := strconv.ParseUint(rv, 10, 64)
	poll.Until(t, "a reconcile of "+name+" at "+rv, func() (bool, string) {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, v := range c.seen[types.NamespacedName{Namespace: c.ns, Name: name}] {
			if v >= min {
				return true, ""
			}
		}
		return false, "not yet"
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

const staticNMState = `
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

func newPPI(ns, name string, formats ...metal3.ImageFormat) *metal3.PreprovisioningImage {
	if len(formats) == 0 {
		formats = []metal3.ImageFormat{metal3.ImageFormatISO, metal3.ImageFormatInitRD}
	}
	return &metal3.PreprovisioningImage{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       metal3.PreprovisioningImageSpec{Architecture: baseimage.HostArch(), AcceptFormats: formats},
	}
}

func networkSecret(ns, name, nmstate string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{"nmstate": []byte(nmstate)}}
}

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := env.Client.Create(context.Background(), o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

func get(t *testing.T, ns, name string) *metal3.PreprovisioningImage {
	t.Helper()
	p := &metal3.PreprovisioningImage{}
	must(t, env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, p))
	return p
}

func describe(p *metal3.PreprovisioningImage) string {
	return fmt.Sprintf("url %q ready %+v error %+v", p.Status.ImageURL, cond(p, readyType), cond(p, errorType))
}

func waitPPI(t *testing.T, ns, name, what string, ok func(*metal3.PreprovisioningImage) bool) *metal3.PreprovisioningImage {
	t.Helper()
	var p *metal3.PreprovisioningImage
	poll.Until(t, name+": "+what, func() (bool, string) {
		p = get(t, ns, name)
		return ok(p), describe(p)
	})
	return p
}

func waitReady(t *testing.T, ns, name string) *metal3.PreprovisioningImage {
	t.Helper()
	return waitPPI(t, ns, name, "Ready", func(p *metal3.PreprovisioningImage) bool {
		c := cond(p, readyType)
		return c.Status == metav1.ConditionTrue && c.ObservedGeneration == p.Generation && p.Status.ImageURL != ""
	})
}

func update(t *testing.T, obj client.Object, change func()) {
	t.Helper()
	poll.Until(t, "update of "+obj.GetName(), func() (bool, string) {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return false, err.Error()
		}
		change()
		if err := env.Client.Update(context.Background(), obj); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
}

func download(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	must(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	must(t, err)
	return resp.StatusCode, data
}

// ignitionOf reads config.ign out of a downloaded ISO's embed area (internal/iso, gzip and cpio).
func ignitionOf(t *testing.T, image []byte) string {
	t.Helper()
	im, err := iso.Open(bytes.NewReader(image), int64(len(image)))
	must(t, err)
	area, err := im.ReadFile("images/ignition.img")
	must(t, err)
	zr, err := gzip.NewReader(bytes.NewReader(area))
	must(t, err)
	zr.Multistream(false)
	cr := cpio.NewReader(zr)
	for {
		h, err := cr.Next()
		must(t, err)
		if h.Name == "config.ign" {
			data, err := io.ReadAll(cr)
			must(t, err)
			return string(data)
		}
	}
}

func sha256hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// history records every change of the PreprovisioningImages in ns as the API server reports them.
type history struct {
	mu      sync.Mutex
	entries []*metal3.PreprovisioningImage
	stop    func()
}

func watchPPIs(t *testing.T, ns string) *history {
	t.Helper()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	must(t, err)
	w, err := wc.Watch(context.Background(), &metal3.PreprovisioningImageList{}, client.InNamespace(ns))
	must(t, err)
	h := &history{stop: w.Stop}
	go func() {
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*metal3.PreprovisioningImage); ok && ev.Type != watch.Error {
				h.mu.Lock()
				h.entries = append(h.entries, p)
				h.mu.Unlock()
			}
		}
	}()
	t.Cleanup(w.Stop)
	return h
}

// of returns the recorded versions of name, oldest first.
func (h *history) of(name string) []*metal3.PreprovisioningImage {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []*metal3.PreprovisioningImage
	for _, p := range h.entries {
		if p.Name == name {
			out = append(out, p)
		}
	}
	return out
}
