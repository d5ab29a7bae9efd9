package ironic

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/metalforge/metalforge/internal/bmcsim"
	"github.com/metalforge/metalforge/internal/bmcsim/agent"
	"github.com/metalforge/metalforge/internal/bmcsim/agent/iso9660"
	"github.com/metalforge/metalforge/internal/bmcsim/config"
)

// The integration tests drive the provisioner against a real Ironic (hack/ironic-up.sh, its own
// instance with a fresh database) and bmcsim in this process (its agents answer Ironic). The
// environment starts on first use, so unit tests alone start nothing; TestMain stops it.

// testInstance names this test binary's Ironic instances (own ports, database and logs), so that
// test packages running at once do not share one.
var testInstance = fmt.Sprintf("provisioner-%d", os.Getpid())

// simHosts is the number of simulated servers; each integration test takes its own.
const simHosts = 12

type testEnv struct {
	ironic  *ironicInstance // the shared Ironic
	sim     *bmcsim.Sim
	hosts   []bmcsim.Host
	images  *imageServer
	free    chan bmcsim.Host
	control string

	// second is an Ironic of its own for the tests that wipe its database or stop it, so that
	// they run alongside the others.
	secondOnce sync.Once
	second     *ironicInstance
	secondErr  error
}

// ironicInstance is one Ironic started by hack/ironic-up.sh.
type ironicInstance struct {
	name string
	vars map[string]string // ironic-up.sh's NAME=value output
}

var (
	envOnce    sync.Once
	env        *testEnv
	envErr     error
	skipReason string
	envStarted atomic.Bool
)

func TestMain(m *testing.M) {
	flag.Parse()
	// The integration tests spend their time waiting for Ironic, not computing: run them all at
	// once unless -parallel says otherwise (its default is GOMAXPROCS, 2 on small machines).
	parallelSet := false
	flag.Visit(func(f *flag.Flag) { parallelSet = parallelSet || f.Name == "test.parallel" })
	if !parallelSet {
		_ = flag.Set("test.parallel", "8")
	}
	code := m.Run()
	if envStarted.Load() {
		env.close()
	}
	os.Exit(code)
}

// startIronic starts (or restarts, with a fresh database when wipe) an Ironic instance.
func startIronic(name string, wipe bool) (*ironicInstance, error) {
	extra, err := os.CreateTemp("", "ironic-extra-*.conf")
	if err != nil {
		return nil, err
	}
	defer os.Remove(extra.Name())
	fmt.Fprint(extra, ironicTestConf)
	extra.Close()
	var args []string
	if wipe {
		args = append(args, "--wipe-db")
	}
	env := []string{"IRONIC_EXTRA_CONF=" + extra.Name()}
	if os.Getenv("IRONIC_TEST_KEEP") == "" {
		// A test binary killed before its cleanup (timeout) still stops and removes its Ironic.
		env = append(env, fmt.Sprintf("IRONIC_OWNER_PID=%d", os.Getpid()))
	}
	out, err := ironicScript(repoRoot(), name, "ironic-up.sh", env, args...)
	if err != nil {
		return nil, err
	}
	return &ironicInstance{name: name, vars: parseEnvLines(out)}, nil
}

func (i *ironicInstance) stop() error {
	_, err := ironicScript(repoRoot(), i.name, "ironic-down.sh", nil)
	return err
}

// purge stops the instance and deletes its state.
func (i *ironicInstance) purge() error {
	_, err := ironicScript(repoRoot(), i.name, "ironic-down.sh", nil, "--purge")
	return err
}

// secondIronic returns the environment's second Ironic, starting it on first use.
func (e *testEnv) secondIronic(t *testing.T) *ironicInstance {
	t.Helper()
	e.secondOnce.Do(func() { e.second, e.secondErr = startIronic(testInstance+"-2", true) })
	if e.secondErr != nil {
		t.Fatalf("starting the second Ironic: %v", e.secondErr)
	}
	return e.second
}

// integration returns the shared environment, or skips the test when it cannot run here.
func integration(t *testing.T) *testEnv {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: skipped with -short")
	}
	envOnce.Do(func() { env, envErr = startEnv() })
	if skipReason != "" {
		t.Skip(skipReason)
	}
	if envErr != nil {
		t.Fatalf("starting Ironic and bmcsim: %v", envErr)
	}
	return env
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}

func startEnv() (*testEnv, error) {
	if os.Geteuid() != 0 {
		skipReason = "integration test: needs root (Ironic runs in a debootstrapped chroot started by hack/ironic-up.sh)"
		return nil, nil
	}
	root := repoRoot()
	cache := os.Getenv("IRONIC_CACHE_DIR")
	if cache == "" {
		cache = filepath.Join(root, ".cache", "ironic")
	}
	if _, err := os.Stat(filepath.Join(cache, "root", ".metalforge-root-v1")); err != nil && !debianReachable() {
		skipReason = "integration test: the Ironic root is not built and deb.debian.org is unreachable"
		return nil, nil
	}
	e := &testEnv{free: make(chan bmcsim.Host, simHosts)}
	envStarted.Store(true)

	ironic, err := startIronic(testInstance, true)
	if err != nil {
		return e, err
	}
	e.ironic = ironic

	runner, err := agent.NewRunner(agent.Config{
		// Only for images without ipa-api-url: each instance's deploy ISO carries its own.
		APIURL:            ironic.vars["IRONIC_URL"],
		HeartbeatInterval: 500 * time.Millisecond,
		BootDelay:         20 * time.Millisecond,
		LookupInterval:    200 * time.Millisecond,
		EraseDuration:     20 * time.Millisecond,
		StepDuration:      20 * time.Millisecond,
		WriteSpeedMBps:    10000,
	})
	if err != nil {
		return e, fmt.Errorf("starting the simulated agents: %w", err)
	}
	cfg := config.Default()
	cfg.Hosts = simHosts
	cfg.BootTime = config.Duration{Duration: 100 * time.Millisecond}
	cfg.WriteSpeedMBps = 10000
	sim, err := bmcsim.Start(bmcsim.Options{
		Config: cfg, Runner: runner, ControlListen: "127.0.0.1:0",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return e, fmt.Errorf("starting bmcsim: %w", err)
	}
	e.sim = sim
	e.control = sim.ControlURL()
	e.hosts = sim.Hosts()
	for _, h := range e.hosts {
		e.free <- h
	}
	e.images = newImageServer()
	return e, nil
}

// ironicTestConf is appended to ironic.conf: fail fast instead of waiting half an hour, and do
// not sleep seconds between power polls after the agent powered the host off.
const ironicTestConf = `
[conductor]
deploy_callback_timeout = 300
clean_callback_timeout = 300
service_callback_timeout = 300
inspect_wait_timeout = 300
check_provision_state_interval = 10

[agent]
post_deploy_get_power_state_retry_interval = 1
post_deploy_get_power_state_retries = 30
`

func (e *testEnv) close() {
	if e == nil {
		return
	}
	if e.sim != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = e.sim.Close(ctx)
		cancel()
	}
	if e.images != nil {
		e.images.Close()
	}
	if os.Getenv("IRONIC_TEST_KEEP") != "" {
		return
	}
	for _, i := range []*ironicInstance{e.ironic, e.second} {
		if i == nil {
			continue
		}
		if err := i.purge(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping Ironic:", err)
		}
	}
}

// ironicScript runs hack/<script> for an Ironic instance and returns its stdout.
func ironicScript(root, instance, script string, env []string, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(root, "hack", script), args...)
	cmd.Env = append(append(os.Environ(), "IRONIC_INSTANCE="+instance), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("hack/%s: %w\n%s", script, err, lastLines(stderr.String(), 30))
	}
	return stdout.String(), nil
}

func parseEnvLines(out string) map[string]string {
	m := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			m[k] = v
		}
	}
	return m
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func debianReachable() bool {
	c, err := net.DialTimeout("tcp", "deb.debian.org:80", 5*time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// host takes a simulated server for one test and gives it back at the end.
func (e *testEnv) host(t *testing.T) bmcsim.Host {
	t.Helper()
	select {
	case h := <-e.free:
		t.Cleanup(func() { e.free <- h })
		return h
	case <-time.After(10 * time.Minute):
		t.Fatal("no free simulated server")
	}
	return bmcsim.Host{}
}

// config is the provisioner configuration for an Ironic instance, with short delays.
func (i *ironicInstance) config() Config {
	c := DefaultConfig()
	c.Endpoint = i.vars["IRONIC_ENDPOINT"]
	c.DeployKernelURL = i.vars["DEPLOY_KERNEL_URL"]
	c.DeployRamdiskURL = i.vars["DEPLOY_RAMDISK_URL"]
	c.DeployISOURL = i.vars["DEPLOY_ISO_URL"]
	c.ShortDelay, c.LongDelay = 300*time.Millisecond, time.Second
	c.CapacityCacheTTL = 0
	return c
}

// provisioner is a provisioner for the shared Ironic.
func (e *testEnv) provisioner(t *testing.T) *Provisioner {
	t.Helper()
	return newTestProvisioner(t, e.ironic.config())
}

func newTestProvisioner(t *testing.T, cfg Config) *Provisioner {
	t.Helper()
	p, err := New(cfg, testr.NewWithOptions(t, testr.Options{Verbosity: 1}))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// server reads a simulated server's state through bmcsim's control API.
func (e *testEnv) server(t *testing.T, name string) serverState {
	t.Helper()
	resp, err := http.Get(e.control + "/v1/servers/" + name)
	if err != nil {
		t.Fatalf("reading server %s from bmcsim: %v", name, err)
	}
	defer resp.Body.Close()
	var s serverState
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatalf("decoding server %s: %v", name, err)
	}
	return s
}

// serverState is the part of bmcsim's GET /v1/servers/{name} the tests look at.
type serverState struct {
	Name  string `json:"name"`
	Power string `json:"power"`
	State struct {
		Power       string         `json:"power"`
		BIOS        map[string]any `json:"bios"`
		PendingBIOS map[string]any `json:"pendingBios"`
		DiskImage   string         `json:"diskImage"`
		Booted      string         `json:"booted"`
		BootedImage string         `json:"bootedImage"`
		Volumes     []struct {
			Name     string   `json:"name"`
			RAIDType string   `json:"raidType"`
			Drives   []string `json:"drives"`
		} `json:"volumes"`
	} `json:"state"`
}

func (e *testEnv) setFaults(t *testing.T, name, body string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, e.control+"/v1/servers/"+name+"/faults", strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		t.Fatalf("setting faults on %s: %s", name, resp.Status)
	}
}

// imageServer serves the test images and counts full downloads per path, which tells a deploy
// (the agent downloads the image to check its checksum) from an adoption (nothing is written).
type imageServer struct {
	*httptest.Server
	mu    sync.Mutex
	files map[string][]byte
	gets  map[string]int
}

func newImageServer() *imageServer {
	s := &imageServer{files: map[string][]byte{}, gets: map[string]int{}}
	disk := make([]byte, 4<<20)
	_, _ = rand.Read(disk)
	s.files["/disk.img"] = disk
	// The same image under another name, for a test that counts its downloads alone.
	s.files["/recovery/disk.img"] = disk
	var iso bytes.Buffer
	if err := iso9660.Write(&iso, iso9660.Options{VolumeID: "LIVE"}, []iso9660.File{{Path: "README.TXT", Data: []byte("a live ISO for tests\n")}}); err != nil {
		panic(err)
	}
	s.files["/live.iso"] = iso.Bytes()
	// bmcsim takes the new version from the file name.
	s.files["/bios-2.1.0.bin"] = []byte("firmware image for tests")
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

func (s *imageServer) serve(w http.ResponseWriter, r *http.Request) {
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
	http.ServeContent(w, r, r.URL.Path, time.Time{}, bytes.NewReader(data))
}

func (s *imageServer) sha256(path string) string {
	sum := sha256.Sum256(s.files[path])
	return hex.EncodeToString(sum[:])
}

func (s *imageServer) downloads(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gets[path]
}
