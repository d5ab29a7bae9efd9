// Package images runs per-host agent images end to end: a real API server (envtest's
// kube-apiserver + etcd from bin/), a real Ironic (hack/ironic-up.sh, an instance of its own),
// bmcsim with its agents in this process, bin/baremetal-operator with --build-preprov-image and
// --external-preprov-image-builder, and bin/image-customization-controller on a CoreOS-layout base
// ISO, both as subprocesses. Each host has its own static nmstate network data; the tests drive
// everything through the Kubernetes API and check that every host's agent came up with the address
// from its network data (Ironic's inspection, the host's HardwareData).
package images

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/metalforge/metalforge/internal/bmcsim"
	"github.com/metalforge/metalforge/internal/bmcsim/agent/deployimage"
	"github.com/metalforge/metalforge/internal/test/ironicenv"
	"github.com/metalforge/metalforge/internal/test/loopback"
	"github.com/metalforge/metalforge/internal/test/testenv"
)

// servers is how many simulated servers the tests share.
const servers = 6

// ironicConf shortens Ironic's checks to the simulator's pace.
const ironicConf = `
[conductor]
check_provision_state_interval = 5
deploy_callback_timeout = 60
inspect_wait_timeout = 300

[agent]
post_deploy_get_power_state_retry_interval = 1
post_deploy_get_power_state_retries = 30
`

type suite struct {
	kube   *testenv.Env
	c      client.Client
	ironic *ironicenv.Instance
	sim    *ironicenv.Sim
	images *ironicenv.ImageServer
	op     *process
	icc    *process
	// publish is the controller's image server.
	publish string
	free    chan bmcsim.Host
}

var (
	suiteOnce  sync.Once
	theSuite   *suite
	suiteErr   error
	skipReason string
)

func TestMain(m *testing.M) {
	flag.Parse()
	parallelSet := false
	flag.Visit(func(f *flag.Flag) { parallelSet = parallelSet || f.Name == "test.parallel" })
	if !parallelSet {
		_ = flag.Set("test.parallel", "16")
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		if theSuite != nil {
			theSuite.stop()
		}
		os.Exit(2)
	}()
	code := m.Run()
	if theSuite != nil {
		theSuite.stop()
	}
	os.Exit(code)
}

func e2e(t *testing.T) *suite {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	suiteOnce.Do(func() {
		if why := ironicenv.Unavailable(); why != "" {
			skipReason = "end-to-end: " + why
			return
		}
		if _, err := exec.LookPath("nmcli"); err != nil {
			skipReason = "end-to-end: nmcli is not installed; `make test` installs it (hack/host-packages.sh, Debian network-manager)"
			return
		}
		theSuite, suiteErr = startSuite()
	})
	if skipReason != "" {
		t.Skip(skipReason)
	}
	if suiteErr != nil {
		t.Fatalf("starting the end-to-end environment: %v", suiteErr)
	}
	return theSuite
}

func startSuite() (s *suite, err error) {
	s = &suite{}
	defer func() {
		if err != nil {
			s.stop()
		}
	}()
	dir, err := os.MkdirTemp("", "metalforge-e2e-images-")
	if err != nil {
		return s, err
	}
	var wg sync.WaitGroup
	var buildErr, ironicErr error
	bins := map[string]string{}
	wg.Go(func() { buildErr = build(bins) })
	wg.Go(func() {
		s.ironic, ironicErr = ironicenv.Start(ironicenv.Options{
			Instance: fmt.Sprintf("e2e-images-%d", os.Getpid()), ExtraConf: ironicConf, WipeDB: true, OwnerPID: os.Getpid(),
		})
	})
	s.kube, err = testenv.Start(testenv.Options{})
	wg.Wait()
	if err = firstErr(err, buildErr, ironicErr); err != nil {
		return s, err
	}
	s.c = s.kube.Client

	agentCfg := ironicenv.FastAgent(s.ironic.URL())
	agentCfg.HeartbeatInterval, agentCfg.LookupInterval = 5*time.Second, time.Second
	if s.sim, err = ironicenv.StartSim(ironicenv.SimOptions{Config: ironicenv.FastConfig(servers), Agent: agentCfg}); err != nil {
		return s, err
	}
	s.free = make(chan bmcsim.Host, servers)
	for _, h := range s.sim.Hosts() {
		s.free <- h
	}
	s.images = ironicenv.NewImageServer()

	// The base images: a CoreOS-layout live ISO, its initramfs and kernel.
	base := filepath.Join(dir, "ironic-python-agent.iso")
	if err := deployimage.WriteLiveISO(base, deployimage.LiveOptions{}); err != nil {
		return s, err
	}
	initrd, kernel := filepath.Join(dir, "ironic-python-agent.initramfs"), filepath.Join(dir, "ironic-python-agent.kernel")
	if err := firstErr(os.WriteFile(initrd, deployimage.LiveInitramfs(), 0o644), os.WriteFile(kernel, deployimage.Kernel(), 0o644)); err != nil {
		return s, err
	}
	addr, probe := loopback.FreeAddr(), loopback.FreeAddr()
	s.publish = "http://" + addr
	s.icc, err = start("icc", bins["icc"], dir, []string{
		"KUBECONFIG=" + s.kube.KubeconfigPath, "DEPLOY_ISO=" + base, "DEPLOY_INITRD=" + initrd, "DEPLOY_KERNEL=" + kernel,
		"IRONIC_BASE_URL=" + s.ironic.URL(), "IRONIC_AGENT_IMAGE=quay.io/metal3-io/ironic-agent",
	}, "-images-bind-addr="+addr, "-images-publish-addr="+s.publish, "-work-dir="+filepath.Join(dir, "icc-work"),
		"-grace-period=1s", "-health-probe-bind-address="+probe, "-v=2")
	if err != nil {
		return s, err
	}
	if err := s.icc.waitReady("http://" + probe + "/readyz"); err != nil {
		return s, err
	}
	opProbe := loopback.FreeAddr()
	s.op, err = start("operator", bins["operator"], dir, append([]string{
		"KUBECONFIG=" + s.kube.KubeconfigPath, "METAL3_AUTH_ROOT_DIR=" + filepath.Join(dir, "no-auth"),
	}, s.ironic.OperatorEnv()...),
		"--provisioner=ironic", "--webhook-port=0", "--build-preprov-image", "--external-preprov-image-builder",
		"--metrics-bind-address=0", "--health-probe-bind-address="+opProbe,
		"--error-backoff-base=2s", "--power-poll-interval=5s", "--provisioner-unavailable-delay=3s",
		"--ironic-short-poll=1s", "--ironic-long-poll=3s", "-v=2")
	if err != nil {
		return s, err
	}
	return s, s.op.waitReady("http://" + opProbe + "/readyz")
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// build builds the operator and the controller into bin/ (E2E_OPERATOR and E2E_ICC name binaries
// to use instead).
func build(bins map[string]string) error {
	root := ironicenv.RepoRoot()
	for key, pkg := range map[string]string{"operator": "baremetal-operator", "icc": "image-customization-controller"} {
		if b := os.Getenv("E2E_" + map[string]string{"operator": "OPERATOR", "icc": "ICC"}[key]); b != "" {
			bins[key] = b
			continue
		}
		out := filepath.Join(root, "bin", pkg)
		cmd := exec.Command("go", "build", "-o", out, "./cmd/"+pkg)
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("building %s: %w\n%s", pkg, err, b)
		}
		bins[key] = out
	}
	return nil
}

func (s *suite) stop() {
	for _, p := range []*process{s.op, s.icc} {
		if p != nil {
			p.stop()
		}
	}
	if s.sim != nil {
		_ = s.sim.Close()
	}
	if s.images != nil {
		s.images.Close()
	}
	if s.ironic != nil {
		if err := s.ironic.Purge(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: stopping Ironic:", err)
		}
	}
	if s.kube != nil {
		_ = s.kube.Stop()
	}
}

func (s *suite) take(t *testing.T) bmcsim.Host {
	t.Helper()
	select {
	case h := <-s.free:
		return h
	default:
		t.Fatal("no free simulated server: raise servers")
	}
	return bmcsim.Host{}
}

// process is a binary the suite runs.
type process struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func start(name, binary, dir string, env []string, args ...string) (*process, error) {
	p := &process{name: name, log: filepath.Join(dir, name+".log"), done: make(chan struct{})}
	f, err := os.Create(p.log)
	if err != nil {
		return nil, err
	}
	p.cmd = exec.Command(binary, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = f, f
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := p.cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", binary, err)
	}
	go func() {
		_ = p.cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *process) waitReady(url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for {
		resp, err := http.Get(url) //nolint:noctx // local, polled
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited at start, see %s:\n%s", p.name, p.log, tail(p.log, 30))
		case <-ctx.Done():
			return fmt.Errorf("%s is not ready, see %s", p.name, p.log)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (p *process) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return ironicenv.LastLines(string(b), n)
}
