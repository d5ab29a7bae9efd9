package hostfirmwaresettings

import (
	"context"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/host"
	"github.com/metalforge/metalforge/internal/provisioner"
	"github.com/metalforge/metalforge/internal/provisioner/fixture"
	"github.com/metalforge/metalforge/internal/test/companiontest"
	"github.com/metalforge/metalforge/internal/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{}, &env) }

// operator is the controller running in-process against one namespace.
type operator struct {
	companiontest.Reconciles
	// cache is what the controller reads.
	cache client.Reader
	// stop stops the operator before the test ends.
	stop func()

	mu sync.Mutex
	// checked records the cleaner's decisions, per schema.
	checked map[types.NamespacedName][]bool
}

func (o *operator) schemaChecked(key types.NamespacedName, deleted bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.checked[key] = append(o.checked[key], deleted)
}

// checks returns the cleaner's decisions about a schema so far.
func (o *operator) checks(key types.NamespacedName) []bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]bool(nil), o.checked[key]...)
}

// testConfig re-reads often, so that resyncs happen within a test. The schema grace covers the
// moment between a schema's creation and the status write that names it even on a loaded
// machine: at 300 ms, a test beside a fault campaign saw the cleaner delete a schema about to be
// named (created again, so two creates where the test counts one).
func testConfig() Config {
	return Config{Resync: 200 * time.Millisecond, ChangeResync: 100 * time.Millisecond, SchemaGrace: 2 * time.Second, Concurrency: 4}
}

func startOperator(t *testing.T, restCfg *rest.Config, ns string, fix provisioner.FirmwareReader, tune ...func(*Config)) *operator {
	t.Helper()
	cfg := testConfig()
	for _, f := range tune {
		f(&cfg)
	}
	op := &operator{checked: map[types.NamespacedName][]bool{}}
	cfg.Reconciled, cfg.SchemaChecked = op.Record, op.schemaChecked
	op.cache, op.stop = companiontest.StartStoppableManager(t, env, restCfg, ns, append(host.CacheViews(), CacheViews()...), func(ctx context.Context, mgr ctrl.Manager) error {
		return (&Reconciler{Provisioner: fix, Config: cfg, skipNameValidation: true}).SetupWithManager(ctx, mgr)
	})
	return op
}

func newHost(t *testing.T, fix *fixture.Fixture, ns, name string) *metal3.BareMetalHost {
	t.Helper()
	return companiontest.NewHost(t, env.Client, fix, ns, name)
}

func register(t *testing.T, fix *fixture.Fixture, h *metal3.BareMetalHost) {
	t.Helper()
	companiontest.Register(t, env.Client, fix, h)
}

func setHostStatus(t *testing.T, h *metal3.BareMetalHost, change func(*metal3.BareMetalHostStatus)) {
	t.Helper()
	companiontest.SetHostStatus(t, env.Client, h, change)
}

// waitHostCached waits until the controller's cache shows the host as cond wants it.
func (o *operator) waitHostCached(t *testing.T, h *metal3.BareMetalHost, what string, cond func(*metal3.BareMetalHost) bool) {
	t.Helper()
	cached := &metal3.BareMetalHost{}
	companiontest.Wait(t, o.cache, h.Namespace, h.Name, what, cached, func() bool { return cond(cached) })
}

func getHFS(t *testing.T, ns, name string) (*metal3.HostFirmwareSettings, bool) {
	t.Helper()
	hfs := &metal3.HostFirmwareSettings{}
	return hfs, companiontest.Get(t, env.Client, ns, name, hfs)
}

// waitHFS waits until the host's HostFirmwareSettings exist and cond holds.
func waitHFS(t *testing.T, ns, name, what string, cond func(*metal3.HostFirmwareSettings) bool) *metal3.HostFirmwareSettings {
	t.Helper()
	hfs := &metal3.HostFirmwareSettings{}
	companiontest.Wait(t, env.Client, ns, name, what, hfs, func() bool { return cond(hfs) })
	return hfs
}

// current: the conditions were computed for the spec as it is.
func current(hfs *metal3.HostFirmwareSettings) bool {
	return companiontest.Judged(hfs.Status.Conditions, hfs.Generation)
}

func condition(hfs *metal3.HostFirmwareSettings, t metal3.SettingsConditionType) metav1.Condition {
	return companiontest.Condition(hfs.Status.Conditions, t)
}

// setSpec replaces the HostFirmwareSettings' spec.settings and returns the new generation.
func setSpec(t *testing.T, ns, name string, settings metal3.DesiredSettingsMap) int64 {
	t.Helper()
	hfs := &metal3.HostFirmwareSettings{}
	return companiontest.Update(t, env.Client, ns, name, hfs, func() { hfs.Spec.Settings = settings })
}
