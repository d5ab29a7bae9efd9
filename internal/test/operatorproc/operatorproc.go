// Package operatorproc runs bin/baremetal-operator as a subprocess for the end-to-end tests, the
// Ironic benchmark and the fault campaign: build it, start it on loopback addresses of its own,
// wait until it is ready, kill it and start it again on the same addresses, read its metrics.
package operatorproc

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/metalforge/metalforge/internal/test/ironicenv"
	"github.com/metalforge/metalforge/internal/test/loopback"
	"github.com/metalforge/metalforge/internal/test/testenv"
)

// Build builds ./cmd/baremetal-operator into bin/ of the repository and returns its path
// (testenv.BuildOperator, with the compiler's output kept for the error).
func Build() (string, error) {
	var out bytes.Buffer
	path, err := testenv.BuildOperator(&out)
	if err != nil {
		return "", fmt.Errorf("%w\n%s", err, out.String())
	}
	return path, nil
}

// Options say how to run the operator.
type Options struct {
	// Binary is the operator to run (Build's result).
	Binary string
	// Args are its flags; the metrics and health probe addresses are added (free loopback ports,
	// the same for every start of the process).
	Args []string
	// Env is added to this process's environment (KUBECONFIG, IRONIC_ENDPOINT, ...).
	Env []string
	// LogPath receives the operator's output; each start appends to it.
	LogPath string
}

// Process is the operator running as a subprocess, started again after a Kill by Start.
type Process struct {
	opts Options
	// Metrics and Probe are the addresses of its /metrics and /readyz endpoints.
	Metrics, Probe string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Start starts the operator and returns once /readyz answers 200 (or the operator exits, or ctx
// ends).
func Start(ctx context.Context, o Options) (*Process, error) {
	p := &Process{opts: o, Metrics: loopback.FreeAddr(), Probe: loopback.FreeAddr()}
	return p, p.Start(ctx)
}

// Start starts the operator again after Kill or Stop, on the same addresses, appending to the
// same log; it returns once it is ready.
func (p *Process) Start(ctx context.Context) error {
	logFile, err := os.OpenFile(p.opts.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	args := append([]string{"--metrics-bind-address=" + p.Metrics, "--health-probe-bind-address=" + p.Probe}, p.opts.Args...)
	cmd := exec.Command(p.opts.Binary, args...)
	cmd.Env = append(os.Environ(), p.opts.Env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// A parent that dies (a killed test binary, a benchmark interrupted) takes the operator with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("starting %s: %w", p.opts.Binary, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(done)
	}()
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()

	ready := make(chan error, 1)
	waitCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { ready <- loopback.WaitOK(waitCtx, "http://"+p.Probe+"/readyz") }()
	select {
	case err := <-ready:
		if err != nil {
			return fmt.Errorf("the operator is not ready, see %s: %w", p.opts.LogPath, err)
		}
		return nil
	case <-done:
		return fmt.Errorf("the operator exited at start, see %s:\n%s", p.opts.LogPath, p.LogTail(30))
	}
}

// Pid is the running process's id (of the last start).
func (p *Process) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd.Process.Pid
}

// Running reports whether the last started process is still running.
func (p *Process) Running() bool {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// Kill sends SIGKILL and waits until the process is gone.
func (p *Process) Kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	_ = cmd.Process.Kill()
	<-done
}

// Stop asks the operator to stop (SIGTERM) and kills it after 20 s.
func (p *Process) Stop() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// LogPath is the file holding the operator's output.
func (p *Process) LogPath() string { return p.opts.LogPath }

// LogTail returns the last n lines of the operator's log.
func (p *Process) LogTail(n int) string {
	b, err := os.ReadFile(p.opts.LogPath)
	if err != nil {
		return err.Error()
	}
	return ironicenv.LastLines(string(b), n)
}

// Scrape reads the operator's /metrics and sums the samples of metric by the value of label ("" for
// samples without it).
func (p *Process) Scrape(ctx context.Context, metric, label string) (map[string]float64, error) {
	url := "http://" + p.Metrics + "/metrics"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scraping %s: HTTP %d", url, resp.StatusCode)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, metric+"{") && !strings.HasPrefix(line, metric+" ") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[labelValue(line[:i], label)] += v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", url, err)
	}
	return out, nil
}

// labelValue is the value of label in a sample's name part (`name{a="x",b="y"}`), "" without it.
func labelValue(sample, label string) string {
	key := label + `="`
	for {
		j := strings.Index(sample, key)
		if j < 0 || label == "" {
			return ""
		}
		// A match inside another label's name (operation= in sub_operation=) does not count.
		if j > 0 && sample[j-1] != '{' && sample[j-1] != ',' {
			sample = sample[j+len(key):]
			continue
		}
		rest := sample[j+len(key):]
		if k := strings.IndexByte(rest, '"'); k >= 0 {
			return rest[:k]
		}
		return ""
	}
}
