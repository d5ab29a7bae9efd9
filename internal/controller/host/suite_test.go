package host

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/cacheview"
	"github.com/metalforge/metalforge/internal/controller/hostfirmwaresettings"
	"github.com/metalforge/metalforge/internal/provisioner/fixture"
	"github.com/metalforge/metalforge/internal/test/builder"
	"github.com/metalforge/metalforge/internal/test/poll"
	"github.com/metalforge/metalforge/internal/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{AfterTests: everyTransitionTaken}, &env)
}

// testConfig has short delays, so that backoff, retries and polls happen within a test.
func testConfig() Config {
	cfg := DefaultConfig()
	cfg.Backoff = ExponentialBackoff(10 * time.Millisecond)
	cfg.InputRetryDelay = 100 * time.Millisecond
	cfg.UnavailableDelay = 100 * time.Millisecond
	cfg.DelayedRequeue = 100 * time.Millisecond
	cfg.PowerPoll = 300 * time.Millisecond
	cfg.UnmanagedPoll = 300 * time.Millisecond
	cfg.Concurrency = 4
	return cfg
}

// operator is the operator running in-process against the test's namespace.
type operator struct {
	t      *testing.T
	cancel context.CancelFunc
	done   chan error
	once   sync.Once

	// seen counts, per host, the reconciles that ended, by the resourceVersion they started from;
	// secretsSeen the same for the Secrets (the secretReleaser's).
	mu          sync.Mutex
	seen        map[types.NamespacedName][]uint64
	secretsSeen map[types.NamespacedName][]uint64
}

func (o *operator) reconciled(key types.NamespacedName, resourceVersion string) {
	o.record(o.seen, key, resourceVersion)
}

func (o *operator) secretReconciled(key types.NamespacedName, resourceVersion string) {
	o.record(o.secretsSeen, key, resourceVersion)
}

func (o *operator) record(seen map[types.NamespacedName][]uint64, key types.NamespacedName, resourceVersion string) {
	v, err := strconv.ParseUint(resourceVersion, 10, 64)
	if err != nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	seen[key] = append(seen[key], v)
}

// waitSeen waits until the operator has finished n reconciles of the host that started from a
// copy at least as new as resourceVersion: whatever the operator does about that version of the
// host is then written. Tests use it to assert that something did NOT happen without sleeping.
func (o *operator) waitSeen(t *testing.T, ns, name, resourceVersion string, n int) {
	t.Helper()
	o.waitIn(t, o.seen, "host", ns, name, resourceVersion, n)
}

// waitSecretSeen is waitSeen for a Secret and the controller that releases deleted Secrets.
func (o *operator) waitSecretSeen(t *testing.T, ns, name, resourceVersion string, n int) {
	t.Helper()
	o.waitIn(t, o.secretsSeen, "secret", ns, name, resourceVersion, n)
}

func (o *operator) waitIn(t *testing.T, seen map[types.NamespacedName][]uint64, kind, ns, name, resourceVersion string, n int) {
	t.Helper()
	min, err := strconv.ParseUint(resourceVersion, 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q: %v", resourceVersion, err)
	}
	poll.Until(t, fmt.Sprintf("%d reconciles of %s %s at resourceVersion %s or later", n, kind, name, resourceVersion), func() (bool, string) {
		o.mu.Lock()
		defer o.mu.Unlock()
		count := 0
		for _, v := range seen[types.NamespacedName{Namespace: ns, Name: name}] {
			if v >= min {
				count++
			}
		}
		return count >= n, fmt.Sprintf("%d so far", count)
	})
}

// startOperator starts a manager with the host controller watching ns, as main wires it, with the
// given fixture (which outlives the operator). It stops when the test ends.
func startOperator(t *testing.T, ns string, fix *fixture.Fixture, tune ...func(*Config)) *operator {
	t.Helper()
	return startOperatorWith(t, env.Config, ns, fix, tune...)
}

// startOperatorWith is startOperator with the operator's own REST config (to count its requests).
func startOperatorWith(t *testing.T, restCfg *rest.Config, ns string, fix *fixture.Fixture, tune ...func(*Config)) *operator {
	t.Helper()
	return startManager(t, restCfg, ns, fix, nil, tune...)
}

// startManager is startOperatorWith, with more controllers (alongside) in the same manager.
func startManager(t *testing.T, restCfg *rest.Config, ns string, fix *fixture.Fixture, alongside func(ctrl.Manager) error, tune ...func(*Config)) *operator {
	t.Helper()
	cfg := testConfig()
	for _, f := range tune {
		f(&cfg)
	}
	// The views of cmd/baremetal-operator's manager, which runs the firmware controllers too
	// (their FirmwareSchemas are cached without their schema).
	cacheOpts, clientOpts, err := cacheview.Options([]string{ns}, append(CacheViews(), hostfirmwaresettings.CacheViews()...)...)
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                 env.Scheme,
		Cache:                  cacheOpts,
		Client:                 clientOpts,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatalf("creating manager: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	op := &operator{t: t, cancel: cancel, done: make(chan error, 1), seen: map[types.NamespacedName][]uint64{},
		secretsSeen: map[types.NamespacedName][]uint64{}}
	cfg.Reconciled = op.reconciled
	cfg.SecretReconciled = op.secretReconciled
	r := &Reconciler{Provisioner: fix, Config: cfg, skipNameValidation: true}
	if err := r.SetupWithManager(ctx, mgr); err != nil {
		cancel()
		t.Fatalf("setting up the controller: %v", err)
	}
	if alongside != nil {
		if err := alongside(mgr); err != nil {
			cancel()
			t.Fatalf("setting up the other controllers: %v", err)
		}
	}
	go func() { op.done <- mgr.Start(ctx) }()
	t.Cleanup(op.stop)
	return op
}

// stop stops the manager and waits for it (idempotent).
func (o *operator) stop() {
	o.once.Do(func() {
		o.cancel()
		// An error, not a panic: a panic would skip TestMain and leave the API server running.
		if err := <-o.done; err != nil {
			o.t.Errorf("manager stopped with an error: %v", err)
		}
	})
}

func getHost(t *testing.T, ns, name string) *metal3.BareMetalHost {
	t.Helper()
	h := &metal3.BareMetalHost{}
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, h); err != nil {
		t.Fatalf("getting host %s/%s: %v", ns, name, err)
	}
	return h
}

func describe(h *metal3.BareMetalHost) string {
	return fmt.Sprintf("state %q opStatus %q errorType %q errorMessage %q errorCount %d poweredOn %v",
		h.Status.Provisioning.State, h.Status.OperationalStatus, h.Status.ErrorType, h.Status.ErrorMessage,
		h.Status.ErrorCount, h.Status.PoweredOn)
}

// waitHost waits until cond holds for the host.
func waitHost(t *testing.T, ns, name, what string, cond func(h *metal3.BareMetalHost) bool) *metal3.BareMetalHost {
	t.Helper()
	var h *metal3.BareMetalHost
	poll.Until(t, fmt.Sprintf("host %s: %s", name, what), func() (bool, string) {
		h = getHost(t, ns, name)
		return cond(h), describe(h)
	})
	return h
}

func waitState(t *testing.T, ns, name string, state metal3.ProvisioningState) *metal3.BareMetalHost {
	t.Helper()
	return waitHost(t, ns, name, "state "+string(state), func(h *metal3.BareMetalHost) bool {
		return h.Status.Provisioning.State == state
	})
}

func waitGone(t *testing.T, ns, name string) {
	t.Helper()
	poll.Until(t, "host "+name+" to be gone", func() (bool, string) {
		h := &metal3.BareMetalHost{}
		err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, h)
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		return false, describe(h)
	})
}

const (
	testBMC   = "redfish://192.0.2.10/redfish/v1/Systems/1"
	testImage = "http://images.example/fedora.qcow2"
)

// newHost is a host ready to provision: BMC, credentials Secret "bmc-<name>", boot MAC, online,
// image with an md5 checksum.
func newHost(ns, name string) *builder.BareMetalHostBuilder {
	return builder.BareMetalHost(ns, name).
		WithBMC(testBMC, "bmc-"+name).
		WithBootMACAddress("52:54:00:00:00:01").
		WithOnline(true).
		WithImageSpec(metal3.Image{URL: testImage, Checksum: "d41d8cd98f00b204e9800998ecf8427e", ChecksumType: metal3.MD5})
}

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := env.Client.Create(context.Background(), o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

// createHost creates the host's BMC Secret and the host.
func createHost(t *testing.T, h *metal3.BareMetalHost) {
	t.Helper()
	create(t, builder.BMCSecret(h.Namespace, h.Spec.BMC.CredentialsName, "admin", "password"), h)
}

// update re-reads the object, applies change and writes it back, retrying conflicts with the
// operator's own writes. It returns the resourceVersion of the write.
func update[T client.Object](t *testing.T, obj T, change func(T)) string {
	t.Helper()
	ctx := context.Background()
	for range 20 {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			t.Fatalf("getting %s: %v", obj.GetName(), err)
		}
		change(obj)
		err := env.Client.Update(ctx, obj)
		if err == nil {
			return obj.GetResourceVersion()
		}
		if !apierrors.IsConflict(err) {
			t.Fatalf("updating %s: %v", obj.GetName(), err)
		}
	}
	t.Fatalf("updating %s: too many conflicts", obj.GetName())
	return ""
}

func annotate(t *testing.T, ns, name, key, value string) string {
	t.Helper()
	return update(t, &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, func(h *metal3.BareMetalHost) {
		if h.Annotations == nil {
			h.Annotations = map[string]string{}
		}
		h.Annotations[key] = value
	})
}

func unannotate(t *testing.T, ns, name, key string) string {
	t.Helper()
	return update(t, &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, func(h *metal3.BareMetalHost) {
		delete(h.Annotations, key)
	})
}

func deleteHost(t *testing.T, ns, name string) {
	t.Helper()
	h := &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := env.Client.Delete(context.Background(), h); err != nil {
		t.Fatalf("deleting host %s: %v", name, err)
	}
}

// eventsFor lists the reasons (and with notes, "reason: note") of the events about a host.
func eventsFor(t *testing.T, ns, name string, notes ...bool) []string {
	t.Helper()
	var reasons []string
	for _, e := range hostEvents(t, ns, name, "") {
		if len(notes) > 0 {
			reasons = append(reasons, e.Reason+": "+e.Message)
		} else {
			reasons = append(reasons, e.Reason)
		}
	}
	return reasons
}

// hostEvents returns the host's Events with reason ("": all of them).
func hostEvents(t *testing.T, ns, name, reason string) []corev1.Event {
	t.Helper()
	var list corev1.EventList
	if err := env.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatalf("listing events: %v", err)
	}
	var out []corev1.Event
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == "BareMetalHost" && e.InvolvedObject.Name == name && (reason == "" || e.Reason == reason) {
			out = append(out, e)
		}
	}
	return out
}

func waitEvent(t *testing.T, ns, name, reason string) {
	t.Helper()
	poll.Until(t, "event "+reason+" on "+name, func() (bool, string) {
		got := eventsFor(t, ns, name)
		for _, r := range got {
			if r == reason {
				return true, ""
			}
		}
		return false, strings.Join(got, ",")
	})
}

// waitTransition waits for an event naming a move into state.
func waitTransition(t *testing.T, ns, name string, state metal3.ProvisioningState) {
	t.Helper()
	poll.Until(t, "an event for the move to "+string(state), func() (bool, string) {
		got := eventsFor(t, ns, name, true)
		for _, e := range got {
			if strings.Contains(e, "→ "+string(state)) {
				return true, ""
			}
		}
		return false, strings.Join(got, "; ")
	})
}

func condition(h *metal3.BareMetalHost, t string) *metav1.Condition {
	return meta.FindStatusCondition(h.Status.Conditions, t)
}

func getSecret(t *testing.T, ns, name string) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{}
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, s); err != nil {
		t.Fatalf("getting secret %s: %v", name, err)
	}
	return s
}

func getHardwareData(ns, name string) (*metal3.HardwareData, error) {
	hd := &metal3.HardwareData{}
	err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, hd)
	if apierrors.IsNotFound(err) {
		return nil, errors.New("not found")
	}
	return hd, err
}
