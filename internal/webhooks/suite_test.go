package webhooks

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/metalforge/metalforge/internal/test/testenv"
)

// The envtest suite shares one API server, with config/webhook installed, and one manager
// serving this package's webhooks. It starts on the first test that needs it, so the table
// tests of the pure validation functions run without an API server.
var (
	suiteOnce sync.Once
	suiteEnv  *testenv.Env
	suiteErr  error
	stopSuite func()
)

func TestMain(m *testing.M) {
	code := m.Run()
	if stopSuite != nil {
		stopSuite()
	}
	os.Exit(code)
}

// webhookEnv returns the shared API server, starting it and the webhook server on first use.
func webhookEnv(t *testing.T) *testenv.Env {
	t.Helper()
	suiteOnce.Do(func() { suiteEnv, stopSuite, suiteErr = startWebhookEnv() })
	if suiteErr != nil {
		t.Fatalf("starting the API server and the webhook server: %v", suiteErr)
	}
	return suiteEnv
}

func startWebhookEnv() (*testenv.Env, func(), error) {
	env, err := testenv.Start(testenv.Options{Webhooks: true})
	if err != nil {
		return nil, nil, err
	}
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		WebhookServer: webhook.NewServer(webhook.Options{
			Host: env.WebhookHost, Port: env.WebhookPort, CertDir: env.WebhookCertDir,
		}),
	})
	if err == nil {
		err = SetupWithManager(mgr)
	}
	if err != nil {
		_ = env.Stop()
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	var mgrErr error
	done := make(chan struct{})
	go func() {
		mgrErr = mgr.Start(ctx)
		close(done)
	}()
	stop := func() {
		cancel()
		<-done
		if mgrErr != nil {
			fmt.Fprintf(os.Stderr, "webhook manager: %v\n", mgrErr)
		}
		if err := env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		}
	}
	// The webhook configurations are installed with failurePolicy Fail: every write of these
	// kinds fails until the server answers.
	if err := waitForTLS(net.JoinHostPort(env.WebhookHost, strconv.Itoa(env.WebhookPort)), done); err != nil {
		stop()
		return nil, nil, err
	}
	return env, stop, nil
}

func waitForTLS(addr string, managerDone <-chan struct{}) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only probing that the server is up
		if err == nil {
			return conn.Close()
		}
		select {
		case <-managerDone:
			return errors.New("webhook manager stopped before serving")
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("webhook server at %s not serving after 30s: %w", addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
