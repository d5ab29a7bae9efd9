package hostfirmwarecomponents

import (
	"context"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
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
	companiontest.StartManager(t, env, restCfg, ns, nil, func(_ context.Context, mgr ctrl.Manager) error {
		return (&Reconciler{Provisioner: fix, Config: cfg, skipNameValidation: true}).SetupWithManager(mgr)
	})
	return seen
}

func getHFC(t *testing.T, ns, name string) (*metal3.HostFirmwareComponents, bool) {
	t.Helper()
	hfc := &metal3.HostFirmwareComponents{}
	err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, hfc)
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return hfc, true
}

func waitHFC(t *testing.T, ns, name, what string, cond func(*metal3.HostFirmwareComponents) bool) *metal3.HostFirmwareComponents {
	t.Helper()
	var hfc *metal3.HostFirmwareComponents
	companiontest.Eventually(t, name+": "+what, func() (bool, string) {
		var ok bool
		if hfc, ok = getHFC(t, ns, name); !ok {
			return false, "no HostFirmwareComponents"
		}
		return cond(hfc), fmt.Sprintf("status %+v", hfc.Status)
	})
	return hfc
}

// current: both conditions were computed for the spec as it is.
func current(hfc *metal3.HostFirmwareComponents) bool {
	for _, c := range hfc.Status.Conditions {
		if c.ObservedGeneration != hfc.Generation {
			return false
		}
	}
	return len(hfc.Status.Conditions) == 2
}

func condition(hfc *metal3.HostFirmwareComponents, t metal3.UpdatesConditionType) metav1.Condition {
	for _, c := range hfc.Status.Conditions {
		if c.Type == string(t) {
			return c
		}
	}
	return metav1.Condition{}
}

// setUpdates replaces spec.updates and returns the new generation.
func setUpdates(t *testing.T, ns, name string, updates ...metal3.FirmwareUpdate) int64 {
	t.Helper()
	for range 10 {
		hfc, ok := getHFC(t, ns, name)
		if !ok {
			t.Fatalf("no HostFirmwareComponents %s", name)
		}
		hfc.Spec.Updates = updates
		err := env.Client.Update(context.Background(), hfc)
		if err == nil {
			return hfc.Generation
		}
		if !apierrors.IsConflict(err) {
			t.Fatal(err)
		}
	}
	t.Fatal("too many conflicts")
	return 0
}
