// Package companiontest is the envtest harness of the controllers of a host's companion objects
// (HostFirmwareSettings, HostFirmwareComponents): a manager with the binary's cache views, hosts
// registered in a fixture provisioner with the status the host controller would give them, a
// record of finished reconciles (the controllers' Reconciled seam) to wait on, and Event lookups.
package companiontest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

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
	"github.com/metalforge/metalforge/internal/provisioner"
	"github.com/metalforge/metalforge/internal/provisioner/fixture"
	"github.com/metalforge/metalforge/internal/test/builder"
	"github.com/metalforge/metalforge/internal/test/poll"
	"github.com/metalforge/metalforge/internal/test/testenv"
)

// Reconciles records the reconciles a controller reported through its Reconciled seam: per host,
// the resourceVersion of its companion after each.
type Reconciles struct {
	mu   sync.Mutex
	seen map[types.NamespacedName][]string
}

// Record is the Reconciled seam.
func (r *Reconciles) Record(key types.NamespacedName, resourceVersion string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = map[types.NamespacedName][]string{}
	}
	r.seen[key] = append(r.seen[key], resourceVersion)
}

// Mark is how many reconciles of the host have ended so far; take it before the change the test
// wants looked at, then WaitAfter.
func (r *Reconciles) Mark(key types.NamespacedName) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen[key])
}

// WaitAfter waits until n reconciles of the host ended after mark and returns the
// resourceVersions they ended with.
func (r *Reconciles) WaitAfter(t *testing.T, key types.NamespacedName, mark, n int) []string {
	t.Helper()
	var got []string
	poll.Until(t, fmt.Sprintf("%d reconciles of %s", n, key), func() (bool, string) {
		r.mu.Lock()
		defer r.mu.Unlock()
		got = nil
		if len(r.seen[key]) > mark {
			got = append(got, r.seen[key][mark:]...)
		}
		return len(got) >= n, fmt.Sprintf("%d so far", len(got))
	})
	return got
}

// StartManager starts a manager watching ns with the cache views (pass the host controller's with
// the controller's own, as the binary does), sets up the controllers with setup, and stops it when
// the test ends. It returns the manager's cache: what the controllers read, which a test waits on
// when a reconcile must see a change the test wrote (a reconcile that starts later may still read
// the object from before it).
func StartManager(t *testing.T, env *testenv.Env, restCfg *rest.Config, ns string, views []cacheview.View, setup func(context.Context, ctrl.Manager) error) client.Reader {
	t.Helper()
	cache, _ := StartStoppableManager(t, env, restCfg, ns, views, setup)
	return cache
}

// StartStoppableManager is StartManager that also returns a function stopping the manager before
// the test ends (an operator restart: stop it, start another).
func StartStoppableManager(t *testing.T, env *testenv.Env, restCfg *rest.Config, ns string, views []cacheview.View,
	setup func(context.Context, ctrl.Manager) error) (client.Reader, func()) {
	t.Helper()
	cacheOpts, clientOpts, err := cacheview.Options([]string{ns}, views...)
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
	if err := setup(ctx, mgr); err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("manager: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return mgr.GetCache(), stop
}

// NewHost creates a host; with fix, it is registered there and its status says provisioned.
func NewHost(t *testing.T, c client.Client, fix *fixture.Fixture, ns, name string) *metal3.BareMetalHost {
	t.Helper()
	h := builder.BareMetalHost(ns, name).WithBMC("redfish://192.0.2.1/redfish/v1/Systems/1", "bmc-"+name).WithOnline(true).Build()
	if err := c.Create(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	if fix != nil {
		Register(t, c, fix, h)
	}
	return h
}

// Register makes the host's node in the fixture and writes the host's status as the host
// controller leaves a registered, provisioned host.
func Register(t *testing.T, c client.Client, fix *fixture.Fixture, h *metal3.BareMetalHost) {
	t.Helper()
	_, id, err := fix.Register(context.Background(), provisioner.Host{Namespace: h.Namespace, Name: h.Name, BMCAddress: h.Spec.BMC.Address}, provisioner.RegisterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	SetHostStatus(t, c, h, func(st *metal3.BareMetalHostStatus) {
		st.Provisioning.ID, st.Provisioning.State, st.OperationalStatus = id, metal3.StateProvisioned, metal3.OperationalStatusOK
	})
}

// SetHostStatus changes the host's status (retrying conflicts) and leaves h as stored.
func SetHostStatus(t *testing.T, c client.Client, h *metal3.BareMetalHost, change func(*metal3.BareMetalHostStatus)) {
	t.Helper()
	for range 10 {
		cur := &metal3.BareMetalHost{}
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(h), cur); err != nil {
			t.Fatal(err)
		}
		change(&cur.Status)
		err := c.Status().Update(context.Background(), cur)
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

// Events lists "reason: message" of the Events about the object of that kind and name.
func Events(t *testing.T, c client.Client, ns, kind, name string) []string {
	t.Helper()
	var list corev1.EventList
	if err := c.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
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

// WaitEvent waits until exactly one Event about the object contains text.
func WaitEvent(t *testing.T, c client.Client, ns, kind, name, text string) {
	t.Helper()
	poll.Until(t, fmt.Sprintf("one event on %s %s with %q", kind, name, text), func() (bool, string) {
		list := Events(t, c, ns, kind, name)
		return Count(list, text) == 1, strings.Join(list, "\n")
	})
}

// Count is how many entries contain s.
func Count(list []string, s string) int {
	n := 0
	for _, e := range list {
		if strings.Contains(e, s) {
			n++
		}
	}
	return n
}

// Get reads obj (ns/name); false when it does not exist.
func Get(t *testing.T, c client.Reader, ns, name string, obj client.Object) bool {
	t.Helper()
	err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, obj)
	if apierrors.IsNotFound(err) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

// Wait polls obj (ns/name) until it exists and cond (which reads obj) holds.
func Wait(t *testing.T, c client.Reader, ns, name, what string, obj client.Object, cond func() bool) {
	t.Helper()
	poll.Until(t, fmt.Sprintf("%T %s: %s", obj, name, what), func() (bool, string) {
		if !Get(t, c, ns, name, obj) {
			return false, "not found"
		}
		return cond(), fmt.Sprintf("%+v", obj)
	})
}

// Update re-reads obj (ns/name), applies change and writes it, retrying conflicts; it returns the
// new generation.
func Update(t *testing.T, c client.Client, ns, name string, obj client.Object, change func()) int64 {
	t.Helper()
	for range 10 {
		if !Get(t, c, ns, name, obj) {
			t.Fatalf("%T %s not found", obj, name)
		}
		change()
		err := c.Update(context.Background(), obj)
		if err == nil {
			return obj.GetGeneration()
		}
		if !apierrors.IsConflict(err) {
			t.Fatal(err)
		}
	}
	t.Fatal("too many conflicts")
	return 0
}

// Judged reports whether the two conditions of a companion (ChangeDetected and Valid) were
// computed for the generation.
func Judged(conds []metav1.Condition, generation int64) bool {
	n := 0
	for _, c := range conds {
		if c.ObservedGeneration != generation {
			return false
		}
		n++
	}
	return n == 2
}

// Condition returns the condition of type t (zero when absent).
func Condition[T ~string](conds []metav1.Condition, t T) metav1.Condition {
	for _, c := range conds {
		if c.Type == string(t) {
			return c
		}
	}
	return metav1.Condition{}
}
