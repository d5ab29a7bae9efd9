// Package subprocess runs the project's binaries (the operator, the image-customization-controller,
// bmcsim) as child processes for the demo and the end-to-end suites: output to a log file, a
// readiness wait that ends early when the process exits (its log then says why), and a stop that
// sends SIGTERM and waits.
package subprocess

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Process is a running child.
type Process struct {
	Name string
	Cmd  *exec.Cmd
	// Log is the file its stdout and stderr go to.
	Log string
	// Done is closed when it exited.
	Done chan struct{}
}

// Options shape Start.
type Options struct {
	// Env is added to this process's environment.
	Env []string
	// OwnGroup puts the child in its own process group, so that a terminal's Ctrl-C reaches only
	// the parent, which stops its children in order.
	OwnGroup bool
}

// Start runs binary with args, logging to dir/<name>.log. The child gets SIGTERM when this process
// dies, so a killed test or demo leaves nothing running.
func Start(name, binary, dir string, o Options, args ...string) (*Process, error) {
	p := &Process{Name: name, Log: filepath.Join(dir, name+".log"), Done: make(chan struct{})}
	f, err := os.Create(p.Log)
	if err != nil {
		return nil, err
	}
	p.Cmd = exec.Command(binary, args...)
	p.Cmd.Env = append(os.Environ(), o.Env...)
	p.Cmd.Stdout, p.Cmd.Stderr = f, f
	p.Cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: o.OwnGroup, Pdeathsig: syscall.SIGTERM}
	if err := p.Cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", binary, err)
	}
	go func() {
		_ = p.Cmd.Wait()
		f.Close()
		close(p.Done)
	}()
	return p, nil
}

// WaitHTTP waits until url answers 200, the process exits (an error with the end of its log) or
// ctx ends.
func (p *Process) WaitHTTP(ctx context.Context, url string) error {
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.Done:
			return fmt.Errorf("%s exited, see %s:\n%s", p.Name, p.Log, p.Tail(20))
		case <-ctx.Done():
			return fmt.Errorf("%s is not ready at %s, see %s: %w", p.Name, url, p.Log, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.Done:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM and waits (20 s, then SIGKILL). Safe to call twice.
func (p *Process) Stop() {
	if p.Exited() {
		return
	}
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.Done:
	case <-time.After(20 * time.Second):
		_ = p.Cmd.Process.Kill()
		<-p.Done
	}
}

// Tail is the last n lines of the log.
func (p *Process) Tail(n int) string {
	b, err := os.ReadFile(p.Log)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
