package ironic

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/metalforge/metalforge/internal/bmcsim"
	"github.com/metalforge/metalforge/internal/bmcsim/control"
	"github.com/metalforge/metalforge/internal/test/ironicenv"
)

// The integration tests drive the provisioner against a real Ironic (hack/ironic-up.sh, its own
// instance with a fresh database) and bmcsim in this process (its agents answer Ironic). The
// environment starts on first use, so unit tests alone start nothing; TestMain stops it.

// testInstance names this test binary's Ironic instances (own ports, database and logs), so that
// test packages running at once do not share one.
var testInstance = fmt.Sprintf("provisioner-%d", os.Getpid())

// simHosts is the number of simulated servers; each integration test takes its own (one that
// leaves its node in Ironic is not handed out again: see host). More than the tests that take one
// (27 by a reviewer's count, most of which leave their node), with room for new ones: with 16, a
// fresh-clone CI run found none left for its last test after 10 minutes.
const simHosts = 34

type testEnv struct {
	ironic  *ironicInstance // the shared Ironic
	sim     *ironicenv.Sim
	hosts   []bmcsim.Host
	images  *ironicenv.ImageServer
	free    chan bmcsim.Host
	control ironicenv.Control

	// second is an Ironic of its own for the tests that wipe its database or stop it, so that
	// they run alongside the others.
	secondOnce sync.Once
	second     *ironicInstance
	secondErr  error
}

// ironicInstance is one Ironic started by hack/ironic-up.sh.
type ironicInstance struct{ *ironicenv.Instance }

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

// startIronic starts an Ironic instance with a fresh database and the test configuration.
func startIronic(name string) (*ironicInstance, error) {
	o := ironicenv.Options{Instance: name, ExtraConf: ironicTestConf, WipeDB: true, MemoizeKeyDerivation: true}
	if os.Getenv("IRONIC_TEST_KEEP") == "" {
		// A test binary killed before its cleanup (timeout) still stops and removes its Ironic.
		o.OwnerPID = os.Getpid()
	}
	i, err := ironicenv.Start(o)
	if err != nil {
		return nil, err
	}
	return &ironicInstance{i}, nil
}

// secondIronic returns the environment's second Ironic, starting it on first use.
func (e *testEnv) secondIronic(t *testing.T) *ironicInstance {
	t.Helper()
	e.secondOnce.Do(func() { e.second, e.secondErr = startIronic(testInstance + "-2") })
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

func startEnv() (*testEnv, error) {
	if why := ironicenv.Unavailable(); why != "" {
		skipReason = "integration test: " + why
		return nil, nil
	}
	e := &testEnv{free: make(chan bmcsim.Host, simHosts)}
	envStarted.Store(true)

	ironic, err := startIronic(testInstance)
	if err != nil {
		return e, err
	}
	e.ironic = ironic

	sim, err := ironicenv.StartSim(ironicenv.SimOptions{
		Config: ironicenv.FastConfig(simHosts),
		Agent:  ironicenv.FastAgent(ironic.URL()),
	})
	if err != nil {
		return e, err
	}
	e.sim = sim
	e.control = sim.Control
	e.hosts = sim.Hosts()
	for _, h := range e.hosts {
		e.free <- h
	}
	e.images = ironicenv.NewImageServer()
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
		_ = e.sim.Close()
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
		if err := i.Purge(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping Ironic:", err)
		}
	}
}

// host takes a simulated server for one test and gives it back at the end.
func (e *testEnv) host(t *testing.T) bmcsim.Host {
	t.Helper()
	select {
	case h := <-e.free:
		t.Cleanup(func() {
			if e.nodeLeftBy(h) {
				t.Logf("server %s not handed out again: its node is still in Ironic", h.Name)
				return
			}
			// Handed out again as a fresh server. One left on (its node deleted while it ran) made
			// the next test's power-on a no-op, so a FailPowerOn fault never fired; one left with
			// the BIOS value an earlier test set made the next test's change need no reboot.
			if err := e.control.FactoryReset(h.Name); err != nil {
				t.Logf("server %s not handed out again: %v", h.Name, err)
				return
			}
			e.free <- h
		})
		return h
	case <-time.After(10 * time.Minute):
		t.Fatal("no free simulated server")
	}
	return bmcsim.Host{}
}

// nodeLeftBy reports whether the shared Ironic still has a node with the server's boot MAC (the
// test ended without deleting it): registering the server there again would fail ("boot MAC address
// … belongs to another Ironic node"), so the server is not handed to another test.
func (e *testEnv) nodeLeftBy(h bmcsim.Host) bool {
	resp, err := http.Get(e.ironic.Vars["IRONIC_ENDPOINT"] + "ports?address=" + url.QueryEscape(h.BootMAC))
	if err != nil {
		return true
	}
	defer func() { _ = resp.Body.Close() }()
	var body struct {
		Ports []json.RawMessage `json:"ports"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&body) != nil {
		return true
	}
	return len(body.Ports) > 0
}

// config is the provisioner configuration for an Ironic instance, with short delays.
func (i *ironicInstance) config() Config {
	c := DefaultConfig()
	c.Endpoint = i.Vars["IRONIC_ENDPOINT"]
	c.DeployKernelURL = i.Vars["DEPLOY_KERNEL_URL"]
	c.DeployRamdiskURL = i.Vars["DEPLOY_RAMDISK_URL"]
	c.DeployISOURL = i.Vars["DEPLOY_ISO_URL"]
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
func (e *testEnv) server(t *testing.T, name string) control.Detail {
	t.Helper()
	s, err := e.control.Server(name)
	if err != nil {
		t.Fatalf("reading server %s from bmcsim: %v", name, err)
	}
	return s
}
