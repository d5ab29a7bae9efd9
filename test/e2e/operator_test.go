package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/metalforge/metalforge/internal/test/ironicenv"
	"github.com/metalforge/metalforge/internal/test/loopback"
	"github.com/metalforge/metalforge/internal/test/testenv"
)

// operatorArgs shorten the operator's waits to the simulator's pace (its defaults are metal3's,
// made for real servers): errors back off 2-4 s instead of 1-2 min, provisioned hosts check their
// power every 5 s (so a database wipe is noticed quickly), and Ironic is polled every 1 s for quick
// operations and every 3 s for long ones (polls are most of Ironic's API load: faster ones slow
// everything down on two cores).
var operatorArgs = []string{
	"--provisioner=ironic",
	"--error-backoff-base=2s",
	"--power-poll-interval=5s",
	"--provisioner-unavailable-delay=3s",
	"--ironic-short-poll=1s",
	"--ironic-long-poll=3s",
	"-v=2",
}

// buildOperator builds bin/baremetal-operator (E2E_OPERATOR names a binary to use instead).
func buildOperator() (string, error) {
	if b := os.Getenv("E2E_OPERATOR"); b != "" {
		return b, nil
	}
	root := ironicenv.RepoRoot()
	out := filepath.Join(root, "bin", "baremetal-operator")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/baremetal-operator")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the operator: %w\n%s", err, b)
	}
	return out, nil
}

// operator is bin/baremetal-operator running as a subprocess.
type operator struct {
	cmd     *exec.Cmd
	logPath string
	metrics string
	done    chan struct{}
}

func startOperator(ctx context.Context, binary string, kube *testenv.Env, ironic *ironicenv.Instance) (*operator, error) {
	dir, err := os.MkdirTemp("", "metalforge-e2e-")
	if err != nil {
		return nil, err
	}
	o := &operator{logPath: filepath.Join(dir, "operator.log"), metrics: loopback.FreeAddr(), done: make(chan struct{})}
	logFile, err := os.Create(o.logPath)
	if err != nil {
		return nil, err
	}
	probe := loopback.FreeAddr()
	args := append([]string{
		"--metrics-bind-address=" + o.metrics,
		"--health-probe-bind-address=" + probe,
		"--webhook-port=" + strconv.Itoa(kube.WebhookPort),
		"--webhook-cert-dir=" + kube.WebhookCertDir,
	}, operatorArgs...)
	o.cmd = exec.Command(binary, args...)
	o.cmd.Env = append(os.Environ(), "KUBECONFIG="+kube.KubeconfigPath,
		// No Ironic credentials: noauth, as the script's Ironic runs.
		"METAL3_AUTH_ROOT_DIR="+filepath.Join(dir, "no-auth"))
	o.cmd.Env = append(o.cmd.Env, ironic.OperatorEnv()...)
	o.cmd.Stdout, o.cmd.Stderr = logFile, logFile
	// A test binary that dies (timeout, kill) takes the operator with it.
	o.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := o.cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", binary, err)
	}
	go func() {
		_ = o.cmd.Wait()
		logFile.Close()
		close(o.done)
	}()
	for {
		resp, err := http.Get("http://" + probe + "/readyz") //nolint:noctx // local, polled
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return o, nil
			}
		}
		select {
		case <-o.done:
			return o, fmt.Errorf("the operator exited at start, see %s:\n%s", o.logPath, tailFile(o.logPath, 30))
		case <-ctx.Done():
			return o, fmt.Errorf("the operator is not ready, see %s: %w", o.logPath, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (o *operator) stop() {
	select {
	case <-o.done:
		return
	default:
	}
	_ = o.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-o.done:
	case <-time.After(20 * time.Second):
		_ = o.cmd.Process.Kill()
		<-o.done
	}
}

func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return ironicenv.LastLines(string(b), n)
}
