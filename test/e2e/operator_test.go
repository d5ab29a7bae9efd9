package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"

	"github.com/metalforge/metalforge/internal/test/ironicenv"
	"github.com/metalforge/metalforge/internal/test/operatorproc"
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
	return operatorproc.Build()
}

// startOperator runs bin/baremetal-operator as a subprocess with its admission webhooks, on the
// API server and the Ironic of the suite, and returns once it is ready.
func startOperator(ctx context.Context, binary string, kube *testenv.Env, ironic *ironicenv.Instance) (*operatorproc.Process, error) {
	dir, err := os.MkdirTemp("", "metalforge-e2e-")
	if err != nil {
		return nil, err
	}
	args := append([]string{
		"--webhook-port=" + strconv.Itoa(kube.WebhookPort),
		"--webhook-cert-dir=" + kube.WebhookCertDir,
	}, operatorArgs...)
	env := append([]string{"KUBECONFIG=" + kube.KubeconfigPath,
		// No Ironic credentials: noauth, as the script's Ironic runs.
		"METAL3_AUTH_ROOT_DIR=" + filepath.Join(dir, "no-auth")}, ironic.OperatorEnv()...)
	return operatorproc.Start(ctx, operatorproc.Options{Binary: binary, Args: args, Env: env, LogPath: filepath.Join(dir, "operator.log")})
}
