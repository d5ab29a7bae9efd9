package specialresource

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/controller/cacheview"
	"github.com/metalforge/metalforge/internal/controller/conditions"
	"github.com/metalforge/metalforge/internal/controller/nodekernel"
	"github.com/metalforge/metalforge/internal/sro/build"
	"github.com/metalforge/metalforge/internal/sro/naming"
	"github.com/metalforge/metalforge/internal/test/poll"
	"github.com/metalforge/metalforge/internal/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{CRDPaths: []string{"internal/test/crds"}}, &env)
}

// harness is one test's world: an OCI registry, the operator (SpecialResource and node-kernel
// controllers) in-process, and canned pod logs (envtest runs no kubelet).
type harness struct {
	t        *testing.T
	registry string
	// id is unique to the test: node labels, SpecialResource and namespace names use it.
	id string

	mu   sync.Mutex
	logs map[string]string // pod name → log
	// clusterVersion is what the operator reads as the cluster's version (setClusterVersion).
	clusterVersion string

	// reconciler is the operator's controller (a test makes it forget, as a restart does).
	reconciler *Reconciler
	// builder is the reconciler's build backend, counting the builds it was asked to start.
	builder *countingBuilder
	// client is the reconciler's client, counting the SpecialResources it was asked to create.
	client *countingClient
}

// countingClient counts, per name, the SpecialResources the controller asked to create (refused
// ones too): a test that asserts something did not happen waits for the controller to ask again.
type countingClient struct {
	client.Client
	mu      sync.Mutex
	creates map[string]int
}

func (c *countingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if sr, ok := obj.(*sro.SpecialResource); ok {
		c.mu.Lock()
		c.creates[sr.Name]++
		c.mu.Unlock()
	}
	return c.Client.Create(ctx, obj, opts...)
}

// dependencyCreates is how many times the controller asked to create SpecialResource name.
func (h *harness) dependencyCreates(name string) int {
	h.client.mu.Lock()
	defer h.client.mu.Unlock()
	return h.client.creates[name]
}

// countingBuilder counts, per namespace, the builds the controller asked to start (refused ones
// too): a test that asserts something did not happen waits for the controller to ask again.
type countingBuilder struct {
	build.Builder
	mu     sync.Mutex
	starts map[string]int
}

func (b *countingBuilder) Start(ctx context.Context, req build.Request) error {
	b.mu.Lock()
	b.starts[req.Namespace]++
	b.mu.Unlock()
	return b.Builder.Start(ctx, req)
}

// started is how many builds of the namespace the controller asked to start.
func (b *countingBuilder) started(namespace string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.starts[namespace]
}

// options tune the operator a test starts.
type options struct {
	openShiftBuilds bool
	// resync replaces the suite's Resync (a minute).
	resync time.Duration
	// readerUser, when set, is the user the operator's API reader (its uncached reads) acts as,
	// so that RBAC applies to them (the suite's own user may do anything).
	readerUser string
}

func start(t *testing.T, opts ...func(*options)) *harness {
	t.Helper()
	var o options
	for _, f := range opts {
		f(&o)
	}
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(reg.Close)
	h := &harness{t: t, registry: strings.TrimPrefix(reg.URL, "http://"), id: "t" + naming.Hash(t.Name()), logs: map[string]string{}, clusterVersion: "4.14.3"}

	cacheOpts, clientOpts, err := cacheview.Options(nil, CacheViews(true)...)
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme: env.Scheme, Cache: cacheOpts, Client: clientOpts,
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.WaitPoll, cfg.RetryDelay, cfg.Resync = 100*time.Millisecond, 200*time.Millisecond, time.Minute
	if o.resync != 0 {
		cfg.Resync = o.resync
	}
	r := &Reconciler{Config: cfg, skipNameValidation: true,
		Logs: func(_ context.Context, _, pod, _ string, _ int64) (string, error) {
			h.mu.Lock()
			defer h.mu.Unlock()
			return h.logs[pod], nil
		},
		ClusterVersion: func(context.Context) (string, error) {
			h.mu.Lock()
			defer h.mu.Unlock()
			return h.clusterVersion, nil
		},
	}
	h.client = &countingClient{Client: mgr.GetClient(), creates: map[string]int{}}
	r.Client = h.client
	if o.readerUser != "" {
		cfg := rest.CopyConfig(env.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: o.readerUser}
		if r.APIReader, err = client.New(cfg, client.Options{Scheme: env.Scheme, Mapper: mgr.GetRESTMapper()}); err != nil {
			t.Fatal(err)
		}
	}
	h.reconciler = r
	var backend build.Builder = build.Job{Client: r.Client}
	if o.openShiftBuilds {
		backend = build.OpenShift{Client: r.Client}
	}
	h.builder = &countingBuilder{Builder: backend, starts: map[string]int{}}
	r.Builder = h.builder
	ctx, cancel := context.WithCancel(context.Background())
	if err := r.SetupWithManager(ctx, mgr); err != nil {
		cancel()
		t.Fatal(err)
	}
	nk := &nodekernel.Reconciler{SkipNameValidation: true}
	if err := nk.SetupWithManager(mgr); err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	return h
}

func withOpenShiftBuilds(o *options) { o.openShiftBuilds = true }

// withReaderAs makes the operator's API reader act as user (see options.readerUser).
func withReaderAs(user string) func(*options) { return func(o *options) { o.readerUser = user } }

// withResync sets Resync: an hour makes anything that would only be seen at the resync fail the
// test instead.
func withResync(d time.Duration) func(*options) { return func(o *options) { o.resync = d } }

// name is a cluster-unique name for this test.
func (h *harness) name(s string) string { return h.id + "-" + s }

// hardware is the node label the test's SpecialResources select.
func (h *harness) hardware() map[string]string {
	return map[string]string{"test.metalforge.io/hw": h.id}
}

// node creates a node with the test's hardware label (unless bare) running kernel k.
func (h *harness) node(name, k string, hardware bool) {
	h.t.Helper()
	ctx := context.Background()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: h.name(name), Labels: map[string]string{"test.metalforge.io/id": h.id}}}
	if hardware {
		for key, v := range h.hardware() {
			n.Labels[key] = v
		}
	}
	if err := env.Client.Create(ctx, n); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { _ = env.Client.Delete(context.Background(), n) })
	h.setKernel(name, k)
}

// setKernel makes a node report kernel k (what the kubelet does after a reboot).
func (h *harness) setKernel(name, k string) {
	h.t.Helper()
	// The operator labels the node meanwhile (its kernel label): a conflict reads it again.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n := &corev1.Node{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Name: h.name(name)}, n); err != nil {
			return err
		}
		n.Status.NodeInfo.KernelVersion = k
		return env.Client.Status().Update(context.Background(), n)
	})
	if err != nil {
		h.t.Fatal(err)
	}
}

// push puts a small random image into the test's registry.
func (h *harness) push(repoTag string) string {
	h.t.Helper()
	ref := h.registry + "/" + repoTag
	img, err := random.Image(128, 1)
	if err != nil {
		h.t.Fatal(err)
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		h.t.Fatal(err)
	}
	return ref
}

// specialResource is a SpecialResource of the built-in recipe selecting the test's hardware,
// with its image in the test's registry.
// setClusterVersion changes the cluster's version, as an upgrade's start does (ClusterVersion's
// desired version).
func (h *harness) setClusterVersion(v string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.clusterVersion = v
}

func (h *harness) specialResource(name string) *sro.SpecialResource {
	return &sro.SpecialResource{
		ObjectMeta: metav1.ObjectMeta{Name: h.name(name)},
		Spec: sro.SpecialResourceSpec{
			NodeSelector: h.hardware(),
			DriverContainer: sro.SpecialResourceDriverContainer{
				Image:   h.registry + "/vendor/" + name + ":{{.KernelFullVersion}}",
				Modules: []string{"simple-kmod"},
			},
		},
	}
}

// create creates a SpecialResource and, at the end of the test, deletes it and waits until the
// operator let it go (so that no finalizer outlives the test's operator).
func (h *harness) create(sr *sro.SpecialResource) {
	h.t.Helper()
	if err := env.Client.Create(context.Background(), sr); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { h.deleteAndWait(sr.Name) })
}

func (h *harness) deleteAndWait(name string) {
	h.t.Helper()
	sr := &sro.SpecialResource{ObjectMeta: metav1.ObjectMeta{Name: name}}
	// The driver pods stop at once (no kubelet; no garbage collector deletes them either).
	var pods corev1.PodList
	if err := env.Client.List(context.Background(), &pods, client.MatchingLabels{sro.OwnedLabel: naming.OwnerValue(name)}); err != nil {
		h.t.Fatal(err)
	}
	for i := range pods.Items {
		if err := env.Client.Delete(context.Background(), &pods.Items[i], client.GracePeriodSeconds(0)); err != nil && !apierrors.IsNotFound(err) {
			h.t.Fatal(err)
		}
	}
	if err := env.Client.Delete(context.Background(), sr); err != nil && !apierrors.IsNotFound(err) {
		h.t.Fatal(err)
	}
	poll.Until(h.t, "SpecialResource "+name+" gone", func() (bool, string) {
		err := env.Client.Get(context.Background(), client.ObjectKey{Name: name}, sr)
		return apierrors.IsNotFound(err), fmt.Sprintf("finalizers %v, err %v", sr.Finalizers, err)
	})
}

// update changes a SpecialResource's spec, retrying on conflicts with the operator's writes.
func (h *harness) update(name string, mutate func(*sro.SpecialResource)) {
	h.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sr := h.get(name)
		mutate(sr)
		return env.Client.Update(context.Background(), sr)
	})
	if err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) get(name string) *sro.SpecialResource {
	h.t.Helper()
	sr := &sro.SpecialResource{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: name}, sr); err != nil {
		h.t.Fatal(err)
	}
	return sr
}

// waitSR waits until cond holds for the SpecialResource.
func (h *harness) waitSR(name, what string, cond func(*sro.SpecialResource) bool) *sro.SpecialResource {
	h.t.Helper()
	var sr *sro.SpecialResource
	poll.Until(h.t, name+": "+what, func() (bool, string) {
		sr = h.get(name)
		return cond(sr), describe(sr)
	})
	return sr
}

func isTrue(cond, reason string) func(*sro.SpecialResource) bool {
	return func(sr *sro.SpecialResource) bool {
		c := conditions.Get(sr.Status.Conditions, cond)
		return c != nil && c.Status == metav1.ConditionTrue && (reason == "" || c.Reason == reason) && c.ObservedGeneration == sr.Generation
	}
}

func describe(sr *sro.SpecialResource) string {
	var b strings.Builder
	for _, c := range sr.Status.Conditions {
		if c.Status == metav1.ConditionTrue {
			fmt.Fprintf(&b, "%s (%s): %s; ", c.Type, c.Reason, c.Message)
		}
	}
	fmt.Fprintf(&b, "state %q nodes %d/%d kernels %+v", sr.Status.State, sr.Status.NodesServed, sr.Status.NodesMatching, sr.Status.Kernels)
	return b.String()
}

// daemonSets lists the driver DaemonSets of a SpecialResource, by kernel.
func (h *harness) daemonSets(srName string) map[string]appsv1.DaemonSet {
	h.t.Helper()
	var list appsv1.DaemonSetList
	if err := env.Client.List(context.Background(), &list, client.MatchingLabels{sro.OwnedLabel: naming.OwnerValue(srName)}); err != nil {
		h.t.Fatal(err)
	}
	out := map[string]appsv1.DaemonSet{}
	for _, ds := range list.Items {
		if ds.DeletionTimestamp.IsZero() {
			out[ds.Annotations[sro.KernelAnnotation]] = ds
		}
	}
	return out
}

// waitDaemonSets waits until the SpecialResource has driver DaemonSets for exactly kernels.
func (h *harness) waitDaemonSets(srName string, kernels ...string) map[string]appsv1.DaemonSet {
	h.t.Helper()
	var got map[string]appsv1.DaemonSet
	poll.Until(h.t, fmt.Sprintf("DaemonSets of %s for kernels %v", srName, kernels), func() (bool, string) {
		got = h.daemonSets(srName)
		var have []string
		for k := range got {
			have = append(have, k)
		}
		if len(got) != len(kernels) {
			return false, fmt.Sprintf("have %v", have)
		}
		for _, k := range kernels {
			if _, ok := got[k]; !ok {
				return false, fmt.Sprintf("have %v", have)
			}
		}
		return true, ""
	})
	return got
}

// runDaemonSet plays the DaemonSet controller: every node its node selector matches (the
// selected nodes with its kernel) and whose taints it tolerates gets an available pod, a pod on
// any other node goes, and the status counts nodes pods.
func (h *harness) runDaemonSet(ds appsv1.DaemonSet, nodes int32) {
	h.t.Helper()
	h.runPods(ds, nodes)
	poll.Until(h.t, "DaemonSet "+ds.Name+" status written", func() (bool, string) {
		cur := &appsv1.DaemonSet{}
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(&ds), cur); err != nil {
			return false, err.Error()
		}
		cur.Status = appsv1.DaemonSetStatus{ObservedGeneration: cur.Generation, DesiredNumberScheduled: nodes, CurrentNumberScheduled: nodes,
			NumberReady: nodes, NumberAvailable: nodes, UpdatedNumberScheduled: nodes}
		err := env.Client.Status().Update(context.Background(), cur)
		return err == nil, fmt.Sprint(err)
	})
}

// runPods makes the DaemonSet's pods match the nodes it runs on (see runDaemonSet). The pods
// are deleted at once at the end of the test and when their SpecialResource is deleted
// (deleteAndWait), as the kubelet would confirm them stopped.
func (h *harness) runPods(ds appsv1.DaemonSet, count int32) {
	h.t.Helper()
	ctx := context.Background()
	want := map[string]bool{}
	// The node-kernel controller may not have labelled every node yet.
	poll.Until(h.t, fmt.Sprintf("%d nodes for DaemonSet %s", count, ds.Name), func() (bool, string) {
		var nodes corev1.NodeList
		if err := env.Client.List(ctx, &nodes, client.MatchingLabels(ds.Spec.Template.Spec.NodeSelector)); err != nil {
			return false, err.Error()
		}
		clear(want)
		for _, n := range nodes.Items {
			if tolerates(ds.Spec.Template.Spec.Tolerations, n.Spec.Taints) {
				want[n.Name] = true
			}
		}
		return len(want) == int(count), fmt.Sprint(len(want))
	})
	var pods corev1.PodList
	if err := env.Client.List(ctx, &pods, client.InNamespace(ds.Namespace), client.MatchingLabels(ds.Spec.Selector.MatchLabels)); err != nil {
		h.t.Fatal(err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if !want[p.Spec.NodeName] {
			if err := env.Client.Delete(ctx, p, client.GracePeriodSeconds(0)); err != nil && !apierrors.IsNotFound(err) {
				h.t.Fatal(err)
			}
		}
		delete(want, p.Spec.NodeName)
	}
	for node := range want {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ds.Namespace, Name: ds.Name[:min(len(ds.Name), 40)] + "-" + naming.Hash(node),
			Labels: ds.Spec.Template.Labels}, Spec: *ds.Spec.Template.Spec.DeepCopy()}
		p.Spec.NodeName = node
		if err := env.Client.Create(ctx, p); err != nil {
			h.t.Fatal(err)
		}
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		if err := env.Client.Status().Update(ctx, p); err != nil {
			h.t.Fatal(err)
		}
		h.t.Cleanup(func() { _ = env.Client.Delete(context.Background(), p, client.GracePeriodSeconds(0)) })
	}
}

// tolerates: every NoSchedule and NoExecute taint is tolerated (the DaemonSet controller's rule;
// it adds tolerations of the node.kubernetes.io/ condition taints, such as the not-ready taint
// the API server puts on new nodes, to every DaemonSet pod).
func tolerates(tols []corev1.Toleration, taints []corev1.Taint) bool {
	for i := range taints {
		t := &taints[i]
		if t.Effect == corev1.TaintEffectPreferNoSchedule || strings.HasPrefix(t.Key, "node.kubernetes.io/") {
			continue
		}
		if !slices.ContainsFunc(tols, func(tol corev1.Toleration) bool { return tol.ToleratesTaint(klog.Background(), t, false) }) {
			return false
		}
	}
	return true
}
