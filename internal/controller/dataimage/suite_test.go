package dataimage_test

import (
	"context"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/dataimage"
	"github.com/metalforge/metalforge/internal/controller/host"
	"github.com/metalforge/metalforge/internal/provisioner/fixture"
	"github.com/metalforge/metalforge/internal/test/companiontest"
	"github.com/metalforge/metalforge/internal/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{}, &env) }

// startOperator runs the DataImage controller alone, with the binary's cache views and short
// delays; the host controller's part is played by the host status each test writes. It returns
// the manager's cache, to wait on before a change the controller must have seen.
func startOperator(t *testing.T, ns string, fix *fixture.Fixture, tune ...func(*dataimage.Config)) client.Reader {
	t.Helper()
	cfg := dataimage.Config{Resync: time.Minute, BusyRetry: 100 * time.Millisecond, RetryDelay: 500 * time.Millisecond,
		ProvisionerRetry: 200 * time.Millisecond, Concurrency: 2}
	for _, f := range tune {
		f(&cfg)
	}
	return companiontest.StartManager(t, env, env.Config, ns, host.CacheViews(), func(_ context.Context, mgr ctrl.Manager) error {
		return (&dataimage.Reconciler{Provisioner: fix, Config: cfg, SkipNameValidation: true}).SetupWithManager(mgr)
	})
}

// waitDataImage polls the DataImage ns/name until cond holds.
func waitDataImage(t *testing.T, ns, name, what string, cond func(*metal3.DataImage) bool) *metal3.DataImage {
	t.Helper()
	di := &metal3.DataImage{}
	companiontest.Wait(t, env.Client, ns, name, what, di, func() bool { return cond(di) })
	return di
}
