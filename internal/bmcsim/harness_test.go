package bmcsim_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/metalforge/metalforge/internal/bmcsim"
	"github.com/metalforge/metalforge/internal/bmcsim/agent"
	"github.com/metalforge/metalforge/internal/bmcsim/config"
	"github.com/metalforge/metalforge/internal/iso"
)

// fakeRunner records what bmcsim asks of the agent runner.
type fakeRunner struct {
	mu     sync.Mutex
	events []string
	isos   map[string][]byte
}

func (r *fakeRunner) Boot(m agent.Machine, iso []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	kind := "net"
	if iso != nil {
		kind = fmt.Sprintf("iso%d", len(iso))
	}
	r.events = append(r.events, "boot:"+kind)
	if r.isos == nil {
		r.isos = map[string][]byte{}
	}
	r.isos[m.ID()] = iso
	return nil
}

func (r *fakeRunner) Stop(string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, "stop")
}

// take returns the events so far and forgets them.
func (r *fakeRunner) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ev := r.events
	r.events = nil
	return ev
}

// env is one running bmcsim with an image server next to it, standing in for Ironic's.
type env struct {
	t      *testing.T
	sim    *bmcsim.Sim
	runner *fakeRunner
	images *httptest.Server
	iso    []byte
	host   bmcsim.Host
	client *http.Client
	// fetches counts GETs per image path.
	fetchMu sync.Mutex
	fetches map[string]int
	// release lets downloads of /slow/... images finish.
	release     chan struct{}
	releaseOnce sync.Once
}

func (e *env) releaseSlow() { e.releaseOnce.Do(func() { close(e.release) }) }

type envOptions struct {
	hosts     int
	state     string
	tls       bool
	configure func(*config.Config)
}

func testConfig(hosts int) config.Config {
	cfg := config.Default()
	cfg.Hosts = hosts
	cfg.BootTime = config.Duration{}
	return cfg
}

func newEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	if o.hosts == 0 {
		o.hosts = 2
	}
	e := &env{t: t, runner: &fakeRunner{}, fetches: map[string]int{}, release: make(chan struct{})}
	var image bytes.Buffer
	if err := iso.Write(&image, iso.Options{VolumeID: "DEPLOY"}, []iso.File{{Path: "grub.cfg", Data: []byte("linux /vmlinuz ipa-api-url=http://127.0.0.1:6385 --\n")}}); err != nil {
		t.Fatalf("building the test ISO: %v", err)
	}
	e.iso = image.Bytes()
	e.images = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.fetchMu.Lock()
		e.fetches[r.URL.Path]++
		e.fetchMu.Unlock()
		switch {
		case strings.HasSuffix(r.URL.Path, ".iso"):
			_, _ = w.Write(e.iso)
		case r.URL.Path == "/not-an-iso.img":
			_, _ = w.Write(bytes.Repeat([]byte("x"), 40000))
		case strings.HasPrefix(r.URL.Path, "/slow/"):
			<-e.release
			_, _ = w.Write([]byte("firmware payload"))
		case strings.HasPrefix(r.URL.Path, "/firmware/"):
			_, _ = w.Write([]byte("firmware payload"))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(e.images.Close)
	t.Cleanup(e.releaseSlow) // runs before images.Close, which waits for the slow handlers
	cfg := testConfig(o.hosts)
	if o.configure != nil {
		o.configure(&cfg)
	}
	e.start(cfg, o)
	return e
}

func (e *env) start(cfg config.Config, o envOptions) {
	e.t.Helper()
	sim, err := bmcsim.Start(bmcsim.Options{
		Config: cfg, Runner: e.runner, StateFile: o.state, ControlListen: "127.0.0.1:0", TLS: o.tls,
	})
	if err != nil {
		e.t.Fatalf("starting bmcsim: %v", err)
	}
	e.sim = sim
	e.host = sim.Hosts()[0]
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig.InsecureSkipVerify = true //nolint:gosec // the simulator's self-signed certificate
	e.client = &http.Client{Transport: tr, Timeout: 30 * time.Second}
	e.t.Cleanup(func() { e.stop() })
}

// stop closes the simulator (idempotent).
func (e *env) stop() {
	if e.sim == nil {
		return
	}
	e.releaseSlow() // the simulator waits for its downloads
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.sim.Close(ctx); err != nil {
		e.t.Errorf("closing bmcsim: %v", err)
	}
	e.sim = nil
}

// response is a decoded answer.
type response struct {
	status int
	header http.Header
	body   map[string]any
	raw    []byte
}

// call sends a request as host h (basic auth) unless hdr carries other credentials.
func (e *env) call(h bmcsim.Host, method, path string, body any, hdr map[string]string) response {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, e.sim.BaseURL()+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if h.Username != "" {
		req.SetBasicAuth(h.Username, h.Password)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := response{status: resp.StatusCode, header: resp.Header, raw: raw}
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, &r.body); err != nil {
			e.t.Fatalf("%s %s: answer is not a JSON object: %v: %s", method, path, err, raw)
		}
	}
	return r
}

func (e *env) get(path string) response {
	e.t.Helper()
	return e.call(e.host, http.MethodGet, path, nil, nil)
}

// must calls and checks the status.
func (e *env) must(want int, method, path string, body any) response {
	e.t.Helper()
	r := e.call(e.host, method, path, body, nil)
	if r.status != want {
		e.t.Fatalf("%s %s: status %d, want %d: %s", method, path, r.status, want, r.raw)
	}
	return r
}

func (e *env) sys() string { return e.host.SystemPath }

func (e *env) reset(kind string) {
	e.t.Helper()
	e.must(http.StatusNoContent, http.MethodPost, e.sys()+"/Actions/ComputerSystem.Reset", map[string]string{"ResetType": kind})
	e.sim.Fleet.Quiesce()
}

func (e *env) power() string {
	e.t.Helper()
	return str(e.must(http.StatusOK, http.MethodGet, e.sys(), nil).body, "PowerState")
}

func (e *env) imageURL(p string) string { return e.images.URL + p }

func (e *env) control(method, path string, body any) response {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, e.sim.ControlURL()+path, rd)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("control %s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := response{status: resp.StatusCode, raw: raw}
	_ = json.Unmarshal(raw, &r.body)
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("control %s %s: status %d: %s", method, path, resp.StatusCode, raw)
	}
	return r
}

// str digs a string out of nested JSON objects.
func str(m map[string]any, keys ...string) string {
	var v any = m
	for _, k := range keys {
		o, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		v = o[k]
	}
	s, _ := v.(string)
	return s
}

func equal(t *testing.T, what string, got, want any) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}
