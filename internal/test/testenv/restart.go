package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/rest"

	"github.com/metalforge/metalforge/internal/test/procstat"
)

// apiServerProcess is a kube-apiserver that RestartAPIServer started in place of envtest's.
type apiServerProcess struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// RestartAPIServer restarts the kube-apiserver as a rolling update of the control plane would:
// SIGTERM, wait until it has exited, wait down more, and start it again with the same command
// line (same port, certificates and etcd, whose data is kept). It returns once the API server
// answers /readyz again, with how long the old one took to stop (its graceful shutdown drains the
// requests in flight). Clients keep working across the restart: nothing they were given changes.
func (e *Env) RestartAPIServer(ctx context.Context, down time.Duration) (time.Duration, error) {
	pid, args, err := e.apiServerCommand()
	if err != nil {
		return 0, err
	}
	stopping := time.Now()
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return 0, fmt.Errorf("stopping kube-apiserver (pid %d): %w", pid, err)
	}
	if e.apiServer != nil {
		<-e.apiServer.done
	} else {
		// envtest's own process: its waiter reaps it.
		for syscall.Kill(pid, 0) == nil {
			time.Sleep(50 * time.Millisecond)
		}
	}
	stopped := time.Since(stopping)
	select {
	case <-ctx.Done():
		return stopped, ctx.Err()
	case <-time.After(down):
	}
	cmd := exec.Command(args[0], args[1:]...)
	// Its output goes to a file beside the kubeconfig, to tell why a restart did not come up.
	logFile, err := os.OpenFile(filepath.Join(e.tmpDir, "kube-apiserver.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return stopped, err
	}
	defer logFile.Close()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// The test process dying takes the API server with it, as envtest's own would be stopped.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return stopped, fmt.Errorf("starting kube-apiserver again: %w", err)
	}
	p := &apiServerProcess{cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	e.apiServer = p
	return stopped, e.waitReady(ctx, p.done)
}

// apiServerCommand finds the running kube-apiserver (a child of this process) and its command line.
func (e *Env) apiServerCommand() (int, []string, error) {
	var pid int
	if e.apiServer != nil {
		pid = e.apiServer.cmd.Process.Pid
	} else {
		pids := procstat.Children(os.Getpid(), "kube-apiserver")
		if len(pids) != 1 {
			return 0, nil, fmt.Errorf("finding kube-apiserver: %d child processes of that name, want 1", len(pids))
		}
		pid = pids[0]
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return 0, nil, fmt.Errorf("reading the command line of kube-apiserver: %w", err)
	}
	args := bytes.Split(bytes.TrimRight(raw, "\x00"), []byte{0})
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = string(a)
	}
	return pid, out, nil
}

// waitReady polls /readyz until it answers 200, the process exits or ctx ends.
func (e *Env) waitReady(ctx context.Context, exited <-chan struct{}) error {
	hc, err := rest.HTTPClientFor(e.Config)
	if err != nil {
		return err
	}
	var last error
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(e.Config.Host, "/")+"/readyz", nil)
		if err != nil {
			return err
		}
		if resp, err := hc.Do(req); err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Errorf("HTTP %d: %s", resp.StatusCode, body)
		} else {
			last = err
		}
		select {
		case <-exited:
			return fmt.Errorf("kube-apiserver exited after its restart, see %s", filepath.Join(e.tmpDir, "kube-apiserver.log"))
		case <-ctx.Done():
			return fmt.Errorf("waiting for kube-apiserver's /readyz (last answer: %w): %w", last, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// stopRestarted stops an API server that RestartAPIServer started (envtest stops its own).
func (e *Env) stopRestarted() error {
	p := e.apiServer
	if p == nil {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		return errors.New("kube-apiserver did not stop within 20 s of SIGTERM")
	}
}
