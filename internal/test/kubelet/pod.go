package kubelet

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// pod is one running pod of a Deployment.
type pod struct {
	node       *Node
	name, uid  string
	namespace  string
	deployment string
	hash       string
	ip         string
	labels     map[string]string
	spec       corev1.PodSpec
	dir        string
	hostsFile  string

	cancel context.CancelFunc
	// ctx ends when the pod stops.
	ctx   context.Context
	done  chan struct{}
	fwd   forwards
	ready atomic.Bool
	// started counts the containers' process starts (restarts show as more).
	started atomic.Int64
	mu      sync.Mutex
	starts  map[string]int
}

// run starts the init containers in order, then the containers, and keeps them running until
// ctx ends (a container that exits is started again, as with restartPolicy Always).
func (p *pod) run(ctx context.Context) {
	defer close(p.done)
	for _, c := range p.spec.InitContainers {
		for attempt := 0; ; attempt++ {
			err := p.runOnce(ctx, c)
			if err == nil {
				break
			}
			p.node.logf("pod %s: init container %s: %v", p.name, c.Name, err)
			if !sleep(ctx, backoff(attempt)) {
				return
			}
		}
	}
	var wg sync.WaitGroup
	readiness := make([]atomic.Bool, len(p.spec.Containers))
	for i, c := range p.spec.Containers {
		wg.Go(func() { p.keepRunning(ctx, c, &readiness[i]) })
	}
	wg.Go(func() {
		for sleep(ctx, 200*time.Millisecond) {
			all := true
			for i := range readiness {
				all = all && readiness[i].Load()
			}
			p.ready.Store(all)
		}
		p.ready.Store(false)
	})
	wg.Wait()
}

// keepRunning runs a container, probes its readiness, and starts it again when it exits.
func (p *pod) keepRunning(ctx context.Context, c corev1.Container, ready *atomic.Bool) {
	for attempt := 0; ctx.Err() == nil; attempt++ {
		cmd, err := p.start(c)
		if err != nil {
			p.node.logf("pod %s: container %s: %v", p.name, c.Name, err)
		} else {
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			probeCtx, stopProbe := context.WithCancel(ctx)
			go p.probe(probeCtx, c, ready)
			select {
			case err = <-exited:
				p.node.logf("pod %s: container %s exited: %v", p.name, c.Name, err)
			case <-ctx.Done():
				_ = stopProcess(cmd, exited)
			}
			stopProbe()
			ready.Store(false)
		}
		if !sleep(ctx, backoff(attempt)) {
			return
		}
	}
}

// runOnce runs an init container to completion.
func (p *pod) runOnce(ctx context.Context, c corev1.Container) error {
	cmd, err := p.start(c)
	if err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		return err
	case <-ctx.Done():
		_ = stopProcess(cmd, exited)
		return ctx.Err()
	}
}

func backoff(attempt int) time.Duration {
	return min(time.Duration(1<<min(attempt, 4))*500*time.Millisecond, 10*time.Second)
}

func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// stopProcess stops a container's process group: TERM, then KILL after a grace period. It
// returns how the process ended (a stopped container's exit status is of no interest).
func stopProcess(cmd *exec.Cmd, exited <-chan error) error {
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	select {
	case err := <-exited:
		return err
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		return <-exited
	}
}

// start starts one container as a process: the test binary again, as the container's init.
func (p *pod) start(c corev1.Container) (*exec.Cmd, error) {
	img, ok := p.node.Images[c.Image]
	if !ok {
		return nil, fmt.Errorf("image %s is not known to the node", c.Image)
	}
	env, err := p.env(c, img)
	if err != nil {
		return nil, err
	}
	lookup := func(name string) (string, bool) {
		for i := len(env) - 1; i >= 0; i-- {
			if k, v, _ := strings.Cut(env[i], "="); k == name {
				return v, true
			}
		}
		return "", false
	}
	if len(c.Command) == 0 {
		return nil, fmt.Errorf("container %s has no command (image entrypoints are not emulated)", c.Name)
	}
	var argv []string
	for _, a := range append(append([]string{}, c.Command...), c.Args...) {
		argv = append(argv, expand(a, lookup))
	}
	mounts, err := p.mounts(c)
	if err != nil {
		return nil, err
	}
	uid, gid := img.UID, img.GID
	if sc := c.SecurityContext; sc != nil && sc.RunAsUser != nil {
		uid = int(*sc.RunAsUser)
	} else if psc := p.spec.SecurityContext; psc != nil && psc.RunAsUser != nil {
		uid = int(*psc.RunAsUser)
	}
	dir := filepath.Join(p.dir, "containers", c.Name)
	scratch := filepath.Join(dir, "scratch")
	if err := os.MkdirAll(scratch, 0o755); err != nil {
		return nil, err
	}
	spec := initSpec{Scratch: scratch, Layers: img.Layers, Mounts: mounts, Workdir: c.WorkingDir, Argv: argv, Env: env, UID: uid, GID: gid,
		ReadOnly: c.SecurityContext != nil && c.SecurityContext.ReadOnlyRootFilesystem != nil && *c.SecurityContext.ReadOnlyRootFilesystem}
	data, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	specPath := filepath.Join(dir, "init.json")
	if err := os.WriteFile(specPath, data, 0o600); err != nil {
		return nil, err
	}
	log, err := os.OpenFile(p.node.LogPath(p.deployment, c.Name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "==== %s: starting %q\n", time.Now().Format(time.RFC3339), argv)
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = []string{initEnv + "=" + specPath}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("starting container %s: %w", c.Name, err)
	}
	log.Close() // the child holds its own descriptors
	p.started.Add(1)
	p.mu.Lock()
	if p.starts == nil {
		p.starts = map[string]int{}
	}
	p.starts[c.Name]++
	p.mu.Unlock()
	return cmd, nil
}

// probe runs the container's readiness probe (at most every second: tests want it quick) and
// stores the result; without a probe the container is ready once started.
func (p *pod) probe(ctx context.Context, c corev1.Container, ready *atomic.Bool) {
	rp := c.ReadinessProbe
	if rp == nil || rp.HTTPGet == nil && rp.TCPSocket == nil {
		ready.Store(true)
		return
	}
	period := time.Second
	if rp.PeriodSeconds > 0 && time.Duration(rp.PeriodSeconds)*time.Second < period {
		period = time.Duration(rp.PeriodSeconds) * time.Second
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the kubelet does not verify probe certificates either
	}}
	for sleep(ctx, period) {
		ready.Store(p.probeOnce(ctx, c, rp, client) == nil)
	}
}

func (p *pod) probeOnce(ctx context.Context, c corev1.Container, rp *corev1.Probe, client *http.Client) error {
	if rp.TCPSocket != nil {
		port, err := containerPort(c, rp.TCPSocket.Port)
		if err != nil {
			return err
		}
		conn, err := net.DialTimeout("tcp", net.JoinHostPort(p.ip, strconv.Itoa(port)), 5*time.Second)
		if err == nil {
			conn.Close()
		}
		return err
	}
	g := rp.HTTPGet
	port, err := containerPort(c, g.Port)
	if err != nil {
		return err
	}
	host := p.ip
	if g.Host != "" {
		host = g.Host
	}
	scheme := "http"
	if g.Scheme == corev1.URISchemeHTTPS {
		scheme = "https"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s://%s%s", scheme, net.JoinHostPort(host, strconv.Itoa(port)), g.Path), nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("probe answered %d", resp.StatusCode)
	}
	return nil
}

// containerPort resolves a port number or name against the container's ports.
func containerPort(c corev1.Container, port intstr.IntOrString) (int, error) {
	if port.Type == intstr.Int {
		return int(port.IntVal), nil
	}
	for _, cp := range c.Ports {
		if cp.Name == port.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	return 0, fmt.Errorf("container %s has no port named %s", c.Name, port.StrVal)
}
