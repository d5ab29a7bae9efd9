package hostfirmwaresettings

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/cacheview"
	"github.com/metalforge/metalforge/internal/controller/host"
	"github.com/metalforge/metalforge/internal/provisioner"
	"github.com/metalforge/metalforge/internal/provisioner/fixture"
	"github.com/metalforge/metalforge/internal/test/builder"
	"github.com/metalforge/metalforge/internal/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{}, &env) }

// operator runs the controller in-process against one namespace, with the cache views main uses.
type operator struct {
	cancel context.CancelFunc
	done   chan error

	mu   sync.Mutex
	seen map[types.NamespacedName][]string // resourceVersions after each reconcile
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

func (o *operator) reconciled(key types.NamespacedName, rv string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seen[key] = append(o.seen[key], rv)
}

// mark is how many reconciles of the host have ended so far (see waitAfter).
func (o *operator) mark(key types.NamespacedName) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.seen[key])
}

// waitAfter waits until n reconciles of the host ended after mark (taken before the change the
// test wants looked at) and returns the resourceVersions they ended with.
func (o *operator) waitAfter(t *testing.T, key types.NamespacedName, mark, n int) []string {
	t.Helper()
	var got []string
	eventually(t, fmt.Sprintf("%d reconciles of %s", n, key), func() (bool, string) {
		o.mu.Lock()
		defer o.mu.Unlock()
		got = nil
		if len(o.seen[key]) > mark {
			got = append(got, o.seen[key][mark:]...)
		}
		return len(got) >= n, fmt.Sprintf("%d so far", len(got))
	})
	return got
}

// testConfig re-reads often, so that resyncs happen within a test.
func testConfig() Config {
	return Config{Resync: 200 * time.Millisecond, ChangeResync: 100 * time.Millisecond, SchemaGrace: 300 * time.Millisecond, Concurrency: 4}
}

func startOperator(t *testing.T, restCfg *rest.Config, ns string, fix *fixture.Fixture, tune ...func(*Config)) *operator {
	t.Helper()
	cfg := testConfig()
	for _, f := range tune {
		f(&cfg)
	}
	cacheOpts, clientOpts, err := cacheview.Options([]string{ns}, append(host.CacheViews(), CacheViews()...)...)
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme: env.Scheme, Cache: cacheOpts, Client: clientOpts,
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	op := &operator{cancel: cancel, done: make(chan error, 1), seen: map[types.NamespacedName][]string{},
		checked: map[types.NamespacedName][]bool{}}
	cfg.Reconciled, cfg.SchemaChecked = op.reconciled, op.schemaChecked
	r := &Reconciler{Provisioner: fix, Config: cfg, skipNameValidation: true}
	if err := r.SetupWithManager(ctx, mgr); err != nil {
		cancel()
		t.Fatal(err)
	}
	go func() { op.done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-op.done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	return op
}

const waitTimeout = 30 * time.Second

func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	var last string
	for time.Now().Before(deadline) {
		ok, msg := cond()
		if ok {
			return
		}
		last = msg
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s: %s", what, last)
}

// newHost creates a host; with fix, it is registered there and its status says provisioned, as
// the host controller leaves it.
func newHost(t *testing.T, fix *fixture.Fixture, ns, name string) *metal3.BareMetalHost {
	t.Helper()
	h := builder.BareMetalHost(ns, name).WithBMC("redfish://192.0.2.1/redfish/v1/Systems/1", "bmc-"+name).WithOnline(true).Build()
	if err := env.Client.Create(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	if fix != nil {
		register(t, fix, h)
	}
	return h
}

// register makes the host's node in the fixture and writes the host's status as registered and
// provisioned.
func register(t *testing.T, fix *fixture.Fixture, h *metal3.BareMetalHost) {
	t.Helper()
	_, id, err := fix.Register(context.Background(), provisioner.Host{Namespace: h.Namespace, Name: h.Name, BMCAddress: h.Spec.BMC.Address}, provisioner.RegisterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	setHostStatus(t, h, func(st *metal3.BareMetalHostStatus) {
		st.Provisioning.ID, st.Provisioning.State, st.OperationalStatus = id, metal3.StateProvisioned, metal3.OperationalStatusOK
	})
}

func setHostStatus(t *testing.T, h *metal3.BareMetalHost, change func(*metal3.BareMetalHostStatus)) {
	t.Helper()
	for range 10 {
		cur := &metal3.BareMetalHost{}
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(h), cur); err != nil {
			t.Fatal(err)
		}
		change(&cur.Status)
		err := env.Client.Status().Update(context.Background(), cur)
		if err == nil {
			*h = *cur
			return
		}
		if !apierrors.IsConflict(err) {
			t.Fatal(err)
		}
	}
	t.Fatal("too many conflicts writing the host's status")
}

func getHFS(t *testing.T, ns, name string) (*metal3.HostFirmwareSettings, bool) {
	t.Helper()
	hfs := &metal3.HostFirmwareSettings{}
	err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, hfs)
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return hfs, true
}

// waitHFS waits until the host's HostFirmwareSettings exist and cond holds.
func waitHFS(t *testing.T, ns, name, what string, cond func(*metal3.HostFirmwareSettings) bool) *metal3.HostFirmwareSettings {
	t.Helper()
	var hfs *metal3.HostFirmwareSettings
	eventually(t, name+": "+what, func() (bool, string) {
		var ok bool
		if hfs, ok = getHFS(t, ns, name); !ok {
			return false, "no HostFirmwareSettings"
		}
		return cond(hfs), fmt.Sprintf("status %+v", hfs.Status)
	})
	return hfs
}

// current: the conditions were computed for the spec as it is.
func current(hfs *metal3.HostFirmwareSettings) bool {
	for _, c := range hfs.Status.Conditions {
		if c.ObservedGeneration != hfs.Generation {
			return false
		}
	}
	return len(hfs.Status.Conditions) == 2
}

func condition(hfs *metal3.HostFirmwareSettings, t metal3.SettingsConditionType) metav1.Condition {
	for _, c := range hfs.Status.Conditions {
		if c.Type == string(t) {
			return c
		}
	}
	return metav1.Condition{}
}

// setSpec replaces the HostFirmwareSettings' spec.settings and returns the new generation.
func setSpec(t *testing.T, ns, name string, settings metal3.DesiredSettingsMap) int64 {
	t.Helper()
	for range 10 {
		hfs, ok := getHFS(t, ns, name)
		if !ok {
			t.Fatalf("no HostFirmwareSettings %s", name)
		}
		hfs.Spec.Settings = settings
		err := env.Client.Update(context.Background(), hfs)
		if err == nil {
			return hfs.Generation
		}
		if !apierrors.IsConflict(err) {
			t.Fatal(err)
		}
	}
	t.Fatal("too many conflicts")
	return 0
}

// eventsFor lists "reason: message" of the Events about an object of the kind.
func eventsFor(t *testing.T, ns, kind, name string) []string {
	t.Helper()
	var list corev1.EventList
	if err := env.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == kind && e.InvolvedObject.Name == name {
			out = append(out, e.Reason+": "+e.Message)
		}
	}
	return out
}

func countContaining(list []string, s string) int {
	n := 0
	for _, e := range list {
		if strings.Contains(e, s) {
			n++
		}
	}
	return n
}
