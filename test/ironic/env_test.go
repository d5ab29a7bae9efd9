package ironic_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/noauth"

	"github.com/metalforge/metalforge/internal/bmcsim"
	"github.com/metalforge/metalforge/internal/bmcsim/agent"
	"github.com/metalforge/metalforge/internal/bmcsim/config"
	"github.com/metalforge/metalforge/internal/test/ironicenv"
)

// microversion is what the test speaks: node inventory (1.81), firmware (1.86), service (1.87).
const microversion = "1.95"

// ironicEnv is what hack/ironic-up.sh printed.
type ironicEnv map[string]string

// startIronic starts an Ironic instance of its own (own ports, database and logs), with short
// timeouts, and stops and deletes it when the test ends.
func startIronic(t *testing.T) ironicEnv {
	t.Helper()
	// deploy_callback_timeout makes the crashed agent's node fail within the test; heartbeats
	// reset it, so healthy nodes are unaffected.
	return startInstance(t, "gotest", `[conductor]
check_provision_state_interval = 5
deploy_callback_timeout = 30
clean_callback_timeout = 300
service_callback_timeout = 300
`, true).Vars
}

// startInstance starts Ironic instance <name>-<pid> with extraConf, and stops and deletes it when
// the test ends (unless KEEP_IRONIC is set); it skips the test where Ironic cannot run.
func startInstance(t *testing.T, name, extraConf string, debug bool) *ironicenv.Instance {
	t.Helper()
	if why := ironicenv.Unavailable(); why != "" {
		t.Skip("skipping: " + why)
	}
	o := ironicenv.Options{Instance: fmt.Sprintf("%s-%d", name, os.Getpid()), ExtraConf: extraConf, Debug: debug}
	if os.Getenv("KEEP_IRONIC") == "" {
		// A test binary killed before its cleanup (timeout) still stops its Ironic.
		o.OwnerPID = os.Getpid()
	}
	ironic, err := ironicenv.Start(o)
	if errors.Is(err, ironicenv.ErrMirrorUnreachable) {
		t.Skipf("skipping: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("ironic-up took %s:\n%s", ironic.StartTime.Round(time.Second), ironic.StartLog)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("Ironic log %s, warnings and errors (last 60):\n%s", ironic.Vars["IRONIC_LOG"], ironic.LogProblems(60))
		}
		if os.Getenv("KEEP_IRONIC") != "" {
			t.Logf("KEEP_IRONIC set: Ironic instance %s left running", ironic.Name)
			return
		}
		if err := ironic.Purge(); err != nil {
			t.Errorf("stopping Ironic: %v", err)
		}
	})
	return ironic
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
	cfg := config.Default()
	cfg.Hosts = hosts
	cfg.NamePrefix = "gotest-"
	cfg.BootTime = config.Duration{Duration: 300 * time.Millisecond}
	sim, err := ironicenv.StartSim(ironicenv.SimOptions{
		Config: cfg,
		Agent:  agent.Config{APIURL: env["IRONIC_URL"], HeartbeatInterval: time.Second, WriteSpeedMBps: 50},
		Logger: logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	return sim.Sim
}

// testWriter sends bmcsim's log to the test log (shown with -v or on failure).
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// imageServer serves the disk image and firmware files, with HEAD and Range like a real web server.
type imageServer struct {
	*ironicenv.ImageServer
	diskSHA256 string
}

func startImageServer(t *testing.T) *imageServer {
	t.Helper()
	disk := make([]byte, 8<<20)
	for i := range disk {
		disk[i] = byte(i*7 + i>>12)
	}
	srv := ironicenv.NewImageServer()
	srv.Add("/disk.img", disk)
	srv.Add("/firmware/bios-2.1.0.bin", bytes.Repeat([]byte("METALFORGE-FIRMWARE"), 1000))
	srv.Add("/firmware/nic-21.0.0.bin", bytes.Repeat([]byte("METALFORGE-NIC-FIRMWARE"), 1000))
	t.Cleanup(srv.Close)
	return &imageServer{ImageServer: srv, diskSHA256: srv.SHA256("/disk.img")}
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

// controlOf is the control API of the test's bmcsim (fault injection).
func controlOf(sim *bmcsim.Sim) ironicenv.Control { return ironicenv.Control{URL: sim.ControlURL()} }

// splitBMC turns a redfish+http://host:port/redfish/v1/Systems/ID address into Ironic's
// redfish_address and redfish_system_id.
func splitBMC(t *testing.T, addr string) (string, string) {
	t.Helper()
	u, err := url.Parse(addr)
	if err != nil {
		t.Fatal(err)
	}
	return "http://" + u.Host, u.Path
}
