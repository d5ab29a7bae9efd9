package hostfirmwarecomponents

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/host"
	"github.com/metalforge/metalforge/internal/provisioner/fixture"
	"github.com/metalforge/metalforge/internal/test/companiontest"
	"github.com/metalforge/metalforge/internal/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{}, &env) }

func startOperator(t *testing.T, restCfg *rest.Config, ns string, fix *fixture.Fixture, tune ...func(*Config)) *companiontest.Reconciles {
	t.Helper()
	cfg := Config{Resync: 200 * time.Millisecond, ChangeResync: 100 * time.Millisecond, Concurrency: 4}
	for _, f := range tune {
		f(&cfg)
	}
	seen := &companiontest.Reconciles{}
	cfg.Reconciled = seen.Record
	companiontest.StartManager(t, env, restCfg, ns, host.CacheViews(), func(_ context.Context, mgr ctrl.Manager) error {
		return (&Reconciler{Provisioner: fix, Config: cfg, skipNameValidation: true}).SetupWithManager(mgr)
	})
	return seen
}

func getHFC(t *testing.T, ns, name string) (*metal3.HostFirmwareComponents, bool) {
	t.Helper()
	hfc := &metal3.HostFirmwareComponents{}
	return hfc, companiontest.Get(t, env.Client, ns, name, hfc)
}

func waitHFC(t *testing.T, ns, name, what string, cond func(*metal3.HostFirmwareComponents) bool) *metal3.HostFirmwareComponents {
	t.Helper()
	hfc := &metal3.HostFirmwareComponents{}
	companiontest.Wait(t, env.Client, ns, name, what, hfc, func() bool { return cond(hfc) })
	return hfc
}

// current: both conditions were computed for the spec as it is.
func current(hfc *metal3.HostFirmwareComponents) bool {
	return companiontest.Judged(hfc.Status.Conditions, hfc.Generation)
}

func condition(hfc *metal3.HostFirmwareComponents, t metal3.UpdatesConditionType) metav1.Condition {
	return companiontest.Condition(hfc.Status.Conditions, t)
}

// setUpdates replaces spec.updates and returns the new generation.
func setUpdates(t *testing.T, ns, name string, updates ...metal3.FirmwareUpdate) int64 {
	t.Helper()
	hfc := &metal3.HostFirmwareComponents{}
	return companiontest.Update(t, env.Client, ns, name, hfc, func() { hfc.Spec.Updates = updates })
}
