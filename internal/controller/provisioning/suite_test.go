package provisioning

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/provisioning/clusteroperator"
	"github.com/metalforge/metalforge/internal/controller/provisioning/platform"
	"github.com/metalforge/metalforge/internal/controller/provisioning/render"
	"github.com/metalforge/metalforge/internal/test/poll"
	"github.com/metalforge/metalforge/internal/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	crds, err := testenv.OpenShiftCRDs(
		"0000_00_cluster-version-operator_01_clusteroperators.crd.yaml",
		"0000_10_config-operator_01_infrastructures-Default.crd.yaml",
		"0000_03_config-operator_01_proxies.crd.yaml",
	)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testenv.Main(m, testenv.Options{CRDPaths: crds}, &env)
}

const testImages = `{"baremetalOperator": "registry.example.com/mf/baremetal-operator:1",
 "baremetalIronic": "registry.example.com/mf/ironic:1", "machineOSImages": "registry.example.com/mf/machine-os-images:1"}`

// testImagesICC add the image-customization-controller and the agent image it builds in.
const testImagesICC = `{"baremetalOperator": "registry.example.com/mf/baremetal-operator:1",
 "baremetalIronic": "registry.example.com/mf/ironic:1", "machineOSImages": "registry.example.com/mf/machine-os-images:1",
 "imageCustomizationController": "registry.example.com/mf/image-customization-controller:1",
 "baremetalIronicAgent": "registry.example.com/mf/ironic-agent:1"}`

// clock is a settable clock for certificate renewal tests.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// operator is the controller running in-process for one test.
type operator struct {
	ns      string
	images  string
	clock   *clock
	webhook bool
	stop    func()
}

type options struct {
	platform configv1.PlatformType
	release  string
	images   string
	noStart  bool
	// webhook: the operator serves its webhook (it then configures it; nothing serves it in
	// these tests, so the Provisioning object cannot be written while it is configured).
	webhook bool
}

// setup prepares a cluster for one test: a namespace for the stack, the Infrastructure object of
// the platform, no Provisioning object or ClusterOperator left from another test. The tests share
// one API server and the singletons are cluster-scoped, so they run one after the other.
func setup(t *testing.T, o options) *operator {
	t.Helper()
	ns := env.Namespace(t)
	resetCluster(t)
	if o.platform == "" {
		o.platform = configv1.BareMetalPlatformType
	}
	setPlatform(t, o.platform, "")
	images := filepath.Join(t.TempDir(), "images.json")
	if o.images == "" {
		o.images = testImages
	}
	if err := os.WriteFile(images, []byte(o.images), 0o600); err != nil {
		t.Fatal(err)
	}
	op := &operator{ns: ns, images: images, clock: &clock{now: time.Now()}}
	t.Cleanup(func() {
		if op.stop != nil {
			op.stop()
		}
		resetCluster(t)
	})
	op.webhook = o.webhook
	if !o.noStart {
		op.start(t, o.release)
	}
	return op
}

// start runs a manager with the controller, as main wires it.
func (op *operator) start(t *testing.T, release string) {
	t.Helper()
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 env.Scheme,
		Cache:                  CacheOptions(op.ns),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{Config: Config{Namespace: op.ns, ImagesPath: op.images, ReleaseVersion: release, Now: op.clock.Now, Resync: time.Minute,
		ImagesPoll: 100 * time.Millisecond, RetryInvalid: 200 * time.Millisecond},
		skipNameValidation: true}
	if op.webhook {
		r.WebhookCerts = NewCertStore()
	}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	op.stop = func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
		op.stop = nil
	}
}

// resetCluster deletes the cluster-scoped objects a test leaves: the Provisioning singleton (its
// finalizer removed), the ClusterOperator, the Infrastructure and Proxy objects and the webhook
// configurations.
func resetCluster(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for _, name := range []string{render.BMOWebhookConfig, render.CBOWebhookConfig} {
		w := &metav1.PartialObjectMetadata{}
		w.SetGroupVersionKind(admissionGVK)
		w.SetName(name)
		if err := env.Client.Delete(ctx, w); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("deleting %s: %v", name, err)
		}
	}
	prov := &metal3.Provisioning{}
	if err := env.Client.Get(ctx, types.NamespacedName{Name: metal3.ProvisioningSingletonName}, prov); err == nil {
		if len(prov.Finalizers) > 0 {
			prov.Finalizers = nil
			if err := env.Client.Update(ctx, prov); err != nil && !apierrors.IsNotFound(err) {
				t.Fatalf("removing the Provisioning finalizer: %v", err)
			}
		}
	}
	for _, obj := range []client.Object{
		&metal3.Provisioning{ObjectMeta: metav1.ObjectMeta{Name: metal3.ProvisioningSingletonName}},
		&configv1.ClusterOperator{ObjectMeta: metav1.ObjectMeta{Name: clusteroperator.Name}},
		&configv1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: platform.InfrastructureName}},
		&configv1.Proxy{ObjectMeta: metav1.ObjectMeta{Name: proxyName}},
	} {
		if err := env.Client.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("deleting %T: %v", obj, err)
		}
	}
	poll.Until(t, "the singletons to be gone", func() (bool, string) {
		err := env.Client.Get(ctx, types.NamespacedName{Name: metal3.ProvisioningSingletonName}, &metal3.Provisioning{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}

// setPlatform writes the Infrastructure object of a platform.
func setPlatform(t *testing.T, p configv1.PlatformType, topology configv1.TopologyMode) {
	t.Helper()
	ctx := context.Background()
	infra := &configv1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: platform.InfrastructureName}}
	if err := env.Client.Create(ctx, infra); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(infra), infra); err != nil {
		t.Fatal(err)
	}
	infra.Status.PlatformStatus = &configv1.PlatformStatus{Type: p}
	infra.Status.ControlPlaneTopology, infra.Status.InfrastructureTopology = configv1.HighlyAvailableTopologyMode, configv1.HighlyAvailableTopologyMode
	if topology != "" {
		infra.Status.ControlPlaneTopology = topology
	}
	infra.Status.APIServerURL, infra.Status.APIServerInternalURL = "https://api.test:6443", "https://api-int.test:6443"
	infra.Status.EtcdDiscoveryDomain, infra.Status.InfrastructureName = "", "test-abcde"
	if err := env.Client.Status().Update(ctx, infra); err != nil {
		t.Fatalf("writing the Infrastructure status: %v", err)
	}
}

// co reads the ClusterOperator (nil when missing).
func co(t *testing.T) *configv1.ClusterOperator {
	t.Helper()
	c := &configv1.ClusterOperator{}
	err := env.Client.Get(context.Background(), types.NamespacedName{Name: clusteroperator.Name}, c)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// conditions renders the ClusterOperator's conditions as "Type=Status/Reason".
func conditions(c *configv1.ClusterOperator) map[string]string {
	out := map[string]string{}
	if c == nil {
		return out
	}
	for _, cond := range c.Status.Conditions {
		out[string(cond.Type)] = string(cond.Status) + "/" + cond.Reason
	}
	return out
}

// waitCO waits until the ClusterOperator's conditions include want ("Type": "Status/Reason").
func waitCO(t *testing.T, want map[string]string) *configv1.ClusterOperator {
	t.Helper()
	var last *configv1.ClusterOperator
	poll.Until(t, fmt.Sprintf("the ClusterOperator to show %v", want), func() (bool, string) {
		last = co(t)
		got := conditions(last)
		for k, v := range want {
			if got[k] != v {
				return false, fmt.Sprintf("conditions %v; messages %s", got, messages(last))
			}
		}
		return true, ""
	})
	return last
}

func messages(c *configv1.ClusterOperator) string {
	if c == nil {
		return "(no ClusterOperator)"
	}
	var b strings.Builder
	for _, cond := range c.Status.Conditions {
		if cond.Message != "" {
			fmt.Fprintf(&b, " %s: %q;", cond.Type, cond.Message)
		}
	}
	return b.String()
}

// provisioning creates the singleton with spec.
func createProvisioning(t *testing.T, spec metal3.ProvisioningSpec, annotations map[string]string) *metal3.Provisioning {
	t.Helper()
	p := &metal3.Provisioning{ObjectMeta: metav1.ObjectMeta{Name: metal3.ProvisioningSingletonName, Annotations: annotations}, Spec: spec}
	if err := env.Client.Create(context.Background(), p); err != nil {
		t.Fatalf("creating the Provisioning object: %v", err)
	}
	return p
}

func getProvisioning(t *testing.T) *metal3.Provisioning {
	t.Helper()
	p := &metal3.Provisioning{}
	if err := env.Client.Get(context.Background(), types.NamespacedName{Name: metal3.ProvisioningSingletonName}, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// updateSpec changes the singleton's spec (retrying conflicts with the operator's writes).
func updateSpec(t *testing.T, change func(*metal3.Provisioning)) {
	t.Helper()
	for {
		p := getProvisioning(t)
		change(p)
		err := env.Client.Update(context.Background(), p)
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) {
			t.Fatal(err)
		}
	}
}

func deployment(t *testing.T, ns, name string) *appsv1.Deployment {
	t.Helper()
	d := &appsv1.Deployment{}
	err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, d)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func waitDeployment(t *testing.T, ns, name string) *appsv1.Deployment {
	t.Helper()
	var d *appsv1.Deployment
	poll.Until(t, "deployment "+name, func() (bool, string) {
		d = deployment(t, ns, name)
		return d != nil, "not created"
	})
	return d
}

// markAvailable plays the deployment controller: the Deployment's current generation runs with
// every replica available.
func markAvailable(t *testing.T, ns, name string) {
	t.Helper()
	for {
		d := waitDeployment(t, ns, name)
		d.Status = appsv1.DeploymentStatus{
			ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
			Conditions: []appsv1.DeploymentCondition{
				{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
				{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"},
			},
		}
		err := env.Client.Status().Update(context.Background(), d)
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) {
			t.Fatal(err)
		}
	}
}

// deployComplete brings a fresh stack to DeployComplete.
func deployComplete(t *testing.T, ns string) *configv1.ClusterOperator {
	t.Helper()
	markAvailable(t, ns, render.Metal3Deployment)
	markAvailable(t, ns, render.BMODeployment)
	return waitCO(t, map[string]string{"Available": "True/DeployComplete", "Progressing": "False/AsExpected", "Degraded": "False/AsExpected"})
}

// provisioningEvents lists the events about the Provisioning object (events.k8s.io, in "default").
func provisioningEvents(t *testing.T) []eventsv1.Event {
	t.Helper()
	var list eventsv1.EventList
	if err := env.Client.List(context.Background(), &list, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Kind == "Provisioning" && e.Regarding.Name == metal3.ProvisioningSingletonName {
			out = append(out, e)
		}
	}
	return out
}

// waitEvent waits for an event with the reason whose note contains text; it returns the note.
func waitEvent(t *testing.T, since time.Time, reason, text string) string {
	t.Helper()
	var note string
	poll.Until(t, fmt.Sprintf("a %s event containing %q", reason, text), func() (bool, string) {
		var seen []string
		for _, e := range provisioningEvents(t) {
			if e.CreationTimestamp.Time.Before(since.Truncate(time.Second)) {
				continue
			}
			seen = append(seen, e.Reason+": "+e.Note)
			if e.Reason == reason && strings.Contains(e.Note, text) {
				note = e.Note
				return true, ""
			}
		}
		return false, fmt.Sprintf("events %q", seen)
	})
	return note
}

var admissionGVK = admissionv1.SchemeGroupVersion.WithKind("ValidatingWebhookConfiguration")
