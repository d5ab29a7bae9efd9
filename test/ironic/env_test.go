package ironic_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/noauth"

	"github.com/metalforge/metalforge/internal/bmcsim"
	"github.com/metalforge/metalforge/internal/bmcsim/agent"
	"github.com/metalforge/metalforge/internal/bmcsim/config"
)

// microversion is what the test speaks: node inventory (1.81), firmware (1.86), service (1.87).
const microversion = "1.95"

// ironicEnv is what hack/ironic-up.sh printed.
type ironicEnv map[string]string

// exitMirrorUnreachable is hack/ironic-up.sh's exit code when Debian's mirror cannot be reached.
const exitMirrorUnreachable = 3

// startIronic runs hack/ironic-up.sh for an instance of its own (own ports, database and logs),
// with short timeouts, and stops and deletes it when the test ends.
func startIronic(t *testing.T) ironicEnv {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipping: starting Ironic needs root (debootstrap, chroot, mount namespaces)")
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	extra := filepath.Join(t.TempDir(), "extra.conf")
	// deploy_callback_timeout makes the crashed agent's node fail within the test; heartbeats
	// reset it, so healthy nodes are unaffected.
	if err := os.WriteFile(extra, []byte(`[conductor]
check_provision_state_interval = 5
deploy_callback_timeout = 30
clean_callback_timeout = 300
service_callback_timeout = 300
`), 0o644); err != nil {
		t.Fatal(err)
	}
	instance := fmt.Sprintf("gotest-%d", os.Getpid())
	env := append(os.Environ(), "IRONIC_INSTANCE="+instance, "IRONIC_EXTRA_CONF="+extra, "IRONIC_DEBUG=1")
	if os.Getenv("KEEP_IRONIC") == "" {
		// A test binary killed before its cleanup (timeout) still stops its Ironic.
		env = append(env, fmt.Sprintf("IRONIC_OWNER_PID=%d", os.Getpid()))
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(filepath.Join(repo, "hack/ironic-up.sh"))
	cmd.Env, cmd.Stdout, cmd.Stderr = env, &stdout, &stderr
	start := time.Now()
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == exitMirrorUnreachable {
		t.Skipf("skipping: the Debian mirror is unreachable, Ironic cannot be installed:\n%s", stderr.String())
	}
	if err != nil {
		t.Fatalf("hack/ironic-up.sh: %v\n%s", err, stderr.String())
	}
	t.Logf("ironic-up took %s:\n%s", time.Since(start).Round(time.Second), stderr.String())
	out := ironicEnv{}
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if !ok {
			t.Fatalf("ironic-up printed a line that is not NAME=value: %q", sc.Text())
		}
		out[k] = v
	}
	for _, k := range []string{"IRONIC_ENDPOINT", "DEPLOY_ISO_URL", "DEPLOY_KERNEL_URL", "DEPLOY_RAMDISK_URL", "IRONIC_LOG"} {
		if out[k] == "" {
			t.Fatalf("ironic-up did not print %s:\n%s", k, stdout.String())
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			if b, err := os.ReadFile(out["IRONIC_LOG"]); err == nil {
				lines := strings.Split(string(b), "\n")
				var errs []string
				for _, l := range lines {
					if strings.Contains(l, " ERROR ") || strings.Contains(l, " WARNING ") {
						errs = append(errs, l)
					}
				}
				t.Logf("Ironic log %s, warnings and errors (last 60):\n%s", out["IRONIC_LOG"], strings.Join(tail(errs, 60), "\n"))
			}
		}
		if os.Getenv("KEEP_IRONIC") != "" {
			t.Logf("KEEP_IRONIC set: Ironic instance %s left running", instance)
			return
		}
		down := exec.Command(filepath.Join(repo, "hack/ironic-down.sh"), "--purge")
		down.Env = env
		if b, err := down.CombinedOutput(); err != nil {
			t.Errorf("hack/ironic-down.sh: %v\n%s", err, b)
		}
	})
	return out
}

func tail(s []string, n int) []string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func ironicClient(t *testing.T, env ironicEnv) *gophercloud.ServiceClient {
	t.Helper()
	c, err := noauth.NewBareMetalNoAuth(noauth.EndpointOpts{IronicEndpoint: env["IRONIC_ENDPOINT"]})
	if err != nil {
		t.Fatal(err)
	}
	c.Microversion = microversion
	return c
}

// startBMCSim runs bmcsim in process with its agent runner; the fallback Ironic URL is set, but the
// agents take it from the deploy ISO's kernel parameters.
func startBMCSim(t *testing.T, env ironicEnv, hosts int) *bmcsim.Sim {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	runner, err := agent.NewRunner(agent.Config{
		APIURL:            env["IRONIC_URL"],
		HeartbeatInterval: time.Second,
		WriteSpeedMBps:    50,
		Logger:            logger.With("component", "agent"),
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Hosts = hosts
	cfg.NamePrefix = "gotest-"
	cfg.BootTime = config.Duration{Duration: 300 * time.Millisecond}
	sim, err := bmcsim.Start(bmcsim.Options{Config: cfg, Runner: runner, ControlListen: "127.0.0.1:0", Logger: logger.With("component", "bmcsim")})
	if err != nil {
		runner.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = sim.Close(ctx)
		_ = runner.Close()
	})
	return sim
}

// testWriter sends bmcsim's log to the test log (shown with -v or on failure).
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// imageServer serves the disk image and firmware files, with HEAD and Range like a real web server.
type imageServer struct {
	*httptest.Server
	diskSHA256 string
}

func startImageServer(t *testing.T) *imageServer {
	disk := make([]byte, 8<<20)
	for i := range disk {
		disk[i] = byte(i*7 + i>>12)
	}
	sum := sha256.Sum256(disk)
	firmware := bytes.Repeat([]byte("METALFORGE-FIRMWARE"), 1000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var data []byte
		switch {
		case r.URL.Path == "/disk.img":
			data = disk
		case strings.HasPrefix(r.URL.Path, "/firmware/"):
			data = firmware
		default:
			http.NotFound(w, r)
			return
		}
		http.ServeContent(w, r, filepath.Base(r.URL.Path), time.Unix(1700000000, 0), bytes.NewReader(data))
	}))
	t.Cleanup(srv.Close)
	return &imageServer{Server: srv, diskSHA256: hex.EncodeToString(sum[:])}
}

// redfish reads bmcsim's Redfish API as a client would (basic auth).
type redfish struct {
	base, user, pass string
}

func (r redfish) get(t *testing.T, path string) map[string]any {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, r.base+path, nil)
	req.SetBasicAuth(r.user, r.pass)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: HTTP %d: %s", path, resp.StatusCode, body)
	}
	var out map[string]any
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return out
}

func members(doc map[string]any) []string {
	var out []string
	list, _ := doc["Members"].([]any)
	for _, m := range list {
		if mm, ok := m.(map[string]any); ok {
			if id, ok := mm["@odata.id"].(string); ok {
				out = append(out, id)
			}
		}
	}
	return out
}

func control(t *testing.T, sim *bmcsim.Sim, method, path string, body any) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, sim.ControlURL()+path, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		msg, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s %s: HTTP %d: %s", method, path, resp.StatusCode, msg)
	}
}

// splitBMC turns a redfish+http://host:port/redfish/v1/Systems/ID address into Ironic's
// redfish_address and redfish_system_id.
func splitBMC(t *testing.T, addr string) (string, string) {
	u, err := url.Parse(addr)
	if err != nil {
		t.Fatal(err)
	}
	return "http://" + u.Host, u.Path
}
