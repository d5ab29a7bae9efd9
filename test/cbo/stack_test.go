package cbo

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/provisioning/clusteroperator"
	"github.com/metalforge/metalforge/internal/controller/provisioning/platform"
	"github.com/metalforge/metalforge/internal/controller/provisioning/render"
	"github.com/metalforge/metalforge/internal/controller/provisioning/secrets"
	"github.com/metalforge/metalforge/internal/release"
	"github.com/metalforge/metalforge/internal/test/builder"
	"github.com/metalforge/metalforge/internal/test/ironicenv"
	"github.com/metalforge/metalforge/internal/test/kubelet"
	"github.com/metalforge/metalforge/internal/test/testenv"
)

const ns = release.Namespace

// TestStack: the release manifests, the operator they deploy, the stack it renders, one host
// provisioned through it.
func TestStack(t *testing.T) {
	if skipReason != "" {
		t.Skip(skipReason)
	}
	ctx := context.Background()
	env := startCluster(t)
	c := env.Client
	node := startNode(t, env)

	// The operator, from the manifests, on a bare-metal platform without a Provisioning object.
	waitCO(t, c, "Available", "True", clusteroperator.ReasonWaitingForProvisioningCR, 5*time.Minute, node)

	// Its webhook, reached by the API server through the webhook Service's endpoints, refuses
	// an invalid object naming the field.
	bad := &metal3.Provisioning{ObjectMeta: metav1.ObjectMeta{Name: metal3.ProvisioningSingletonName},
		Spec: metal3.ProvisioningSpec{ProvisioningNetwork: metal3.ProvisioningNetworkManaged, ProvisioningIP: "172.22.0.3"}}
	err := eventuallyErr(2*time.Minute, func() error { return c.Create(ctx, bad.DeepCopy()) }, func(err error) bool {
		return err != nil && strings.Contains(err.Error(), "denied the request")
	})
	if err == nil || !strings.Contains(err.Error(), "spec.provisioningNetworkCIDR") {
		t.Fatalf("an invalid Provisioning: %v; want a webhook denial naming spec.provisioningNetworkCIDR", err)
	}

	// No provisioning network (virtual media): Ironic listens on the node's address.
	if err := c.Create(ctx, &metal3.Provisioning{ObjectMeta: metav1.ObjectMeta{Name: metal3.ProvisioningSingletonName},
		Spec: metal3.ProvisioningSpec{ProvisioningNetwork: metal3.ProvisioningNetworkDisabled}}); err != nil {
		t.Fatal(err)
	}
	waitCO(t, c, "Available", "True", clusteroperator.ReasonDeployComplete, 10*time.Minute, node)
	co := getCO(t, c)
	if v := co.Status.Versions; len(v) != 1 || v[0].Version != "0.0.1-snapshot" {
		t.Errorf("versions %v", v)
	}

	// Ironic speaks TLS with the operator's certificate and wants the operator's credentials.
	creds := secret(t, c, secrets.IronicCredentials)
	tlsSecret := secret(t, c, secrets.IronicTLS)
	checkIronicAuth(t, tlsSecret, creds)

	// A host, through the baremetal-operator's webhook (reached like the operator's).
	// The agent serves its API over TLS as ironic-python-agent does: the operator's Ironic keeps
	// Ironic's default of refusing plain-HTTP callbacks.
	agentCfg := ironicenv.FastAgent("")
	agentCfg.AutoTLS = true
	// A server takes a few seconds to boot the agent (real ones take minutes): an agent that
	// reports its inspection before Ironic has finished powering the server on is turned away.
	simCfg := ironicenv.FastConfig(1)
	simCfg.BootTime.Duration = 5 * time.Second
	sim, err := ironicenv.StartSim(ironicenv.SimOptions{Config: simCfg, Agent: agentCfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	images := ironicenv.NewImageServer()
	t.Cleanup(images.Close)
	srv := sim.Hosts()[0]
	secretObj := builder.BMCSecret(ns, "worker-0-bmc", srv.Username, srv.Password)
	raw := "raw"
	img := metal3.Image{URL: images.URL + "/disk.img", Checksum: images.SHA256("/disk.img"), ChecksumType: metal3.SHA256, DiskFormat: &raw}
	host := builder.BareMetalHost(ns, "worker-0").WithBMC(srv.Addresses["redfish-virtualmedia+http"], secretObj.Name).
		WithBootMACAddress(srv.BootMAC).WithOnline(true).Build()
	host.Spec.Image = &img
	if err := c.Create(ctx, secretObj); err != nil {
		t.Fatal(err)
	}
	if err := eventuallyErr(2*time.Minute, func() error { return c.Create(ctx, host.DeepCopy()) }, func(err error) bool { return err == nil }); err != nil {
		t.Fatalf("creating the host: %v", err)
	}
	// While it provisions, an upgrade would break it: Upgradeable must say so at some point.
	var sawBusy atomic.Bool
	stopWatch := watchUpgradeable(t, c, &sawBusy)
	// The baremetal-operator deletes the host's PreprovisioningImage once it is provisioned:
	// watch it while it exists.
	stopImage := watchHostImage(t, c, "worker-0")
	start := time.Now()
	h := waitHost(t, c, "worker-0", metal3.StateProvisioned, 15*time.Minute, node)
	stopWatch()
	image := stopImage()
	t.Logf("worker-0 provisioned %s after creation", time.Since(start).Round(time.Second))
	if h.Status.Provisioning.Image.URL != img.URL {
		t.Errorf("provisioned image %q", h.Status.Provisioning.Image.URL)
	}
	if !sawBusy.Load() {
		t.Error("Upgradeable never went False while the host was provisioning")
	}
	waitCO(t, c, "Upgradeable", "True", clusteroperator.ReasonAsExpected, 2*time.Minute, node)
	waitCO(t, c, "Available", "True", clusteroperator.ReasonDeployComplete, time.Minute, node)

	// It booted the agent image the image-customization-controller built for it.
	checkHostImage(t, image, node)
	checkICCDeployed(t, c)

	// The operator's metrics: reconciles, and the conditions it reports.
	checkMetrics(t, podIPs[0])

	// The password appears in no log of the stack.
	password := string(creds.Data[secrets.KeyPassword])
	logs, _ := filepath.Glob(filepath.Join(node.Dir, "logs", "*.log"))
	for _, l := range logs {
		data, _ := os.ReadFile(l)
		if bytes.Contains(data, []byte(password)) {
			t.Errorf("%s shows the Ironic password", filepath.Base(l))
		}
	}
}

// startCluster starts the API server (webhooks routed to Service endpoints, as
// --enable-aggregator-routing does), creates the machine-api-operator's namespace and the
// platform, and applies the release manifests.
func startCluster(t *testing.T) *testenv.Env {
	t.Helper()
	crds, err := testenv.OpenShiftCRDs(
		"0000_00_cluster-version-operator_01_clusteroperators.crd.yaml",
		"0000_10_config-operator_01_infrastructures-Default.crd.yaml",
		"0000_03_config-operator_01_proxies.crd.yaml",
	)
	if err != nil {
		t.Fatal(err)
	}
	env, err := testenv.Start(testenv.Options{NoProjectCRDs: true, CRDPaths: crds,
		APIServerFlags: map[string]string{"enable-aggregator-routing": "true",
			// No default route in the namespace: the API server cannot guess its address.
			"advertise-address": nodeIP}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx := context.Background()
	c := env.Client
	// The stack's namespace (the machine-api-operator's) and the cluster's configuration namespace,
	// where the manifests grant the operator its read of the cluster's pull secret.
	for _, name := range []string{ns, secrets.ClusterPullSecretNamespace} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	infra := &configv1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: platform.InfrastructureName}}
	if err := c.Create(ctx, infra); err != nil {
		t.Fatal(err)
	}
	infra.Status = configv1.InfrastructureStatus{PlatformStatus: &configv1.PlatformStatus{Type: configv1.BareMetalPlatformType},
		ControlPlaneTopology: configv1.HighlyAvailableTopologyMode, InfrastructureTopology: configv1.HighlyAvailableTopologyMode,
		APIServerURL: "https://api.test:6443", APIServerInternalURL: "https://api-int.test:6443", InfrastructureName: "test"}
	if err := c.Status().Update(ctx, infra); err != nil {
		t.Fatal(err)
	}
	root, _ := testenv.RepoRoot()
	files, err := release.ReadDir(filepath.Join(root, "manifests"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range files {
			if n != "image-references" && !yield(n) {
				return
			}
		}
	}) {
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(files[name]), 4096)
		for {
			obj := &unstructured.Unstructured{}
			if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if len(obj.Object) == 0 {
				continue
			}
			if err := c.Create(ctx, obj); err != nil {
				t.Fatalf("%s: creating %s %s: %v", name, obj.GetKind(), obj.GetName(), err)
			}
		}
	}
	return env
}

// startNode runs the namespace's Deployments with the prepared images.
func startNode(t *testing.T, env *testenv.Env) *kubelet.Node {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(env.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	a := prepared
	n := &kubelet.Node{
		Name: "master-0", IP: nodeIP, PodIPs: podIPs, AddAddress: kubelet.AddLoopbackAddress,
		Dir: t.TempDir(), Client: env.Client, Namespace: ns,
		APIHost: u.Hostname(), APIPort: u.Port(), CAData: env.Config.CAData,
		Images: map[string]kubelet.Image{
			release.Images["clusterBaremetalOperator"]:     {Layers: []string{a.Operator}, UID: 65534, GID: 65534},
			release.Images["baremetalOperator"]:            {Layers: []string{a.BMO}, UID: 65534, GID: 65534},
			release.Images["baremetalIronic"]:              {Layers: []string{a.Runner, a.ESP, a.IronicRoot}},
			release.Images["machineOSImages"]:              {Layers: []string{a.CopyMetal}},
			release.Images["imageCustomizationController"]: {Layers: []string{a.ICC}},
		},
		Token: func(ctx context.Context, namespace, sa string) (string, error) {
			exp := int64(3600)
			tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, sa,
				&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
			if err != nil {
				return "", err
			}
			return tr.Status.Token, nil
		},
		Logf: func(format string, args ...any) { t.Logf("kubelet: "+format, args...) },
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = n.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		if t.Failed() {
			dumpLogs(t, n)
			if keep := os.Getenv("CBO_E2E_KEEP_LOGS"); keep != "" {
				keepLogs(t, n, keep)
			}
		}
	})
	return n
}

// keepLogs copies the containers' logs to dir (CBO_E2E_KEEP_LOGS), which outlives the test.
func keepLogs(t *testing.T, n *kubelet.Node, dir string) {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(n.Dir, "logs", "*.log"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Log(err)
		return
	}
	for _, l := range logs {
		if data, err := os.ReadFile(l); err == nil {
			_ = os.WriteFile(filepath.Join(dir, filepath.Base(l)), data, 0o644) //nolint:gosec // test logs
		}
	}
	t.Logf("container logs kept in %s", dir)
}

func dumpLogs(t *testing.T, n *kubelet.Node) {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(n.Dir, "logs", "*.log"))
	for _, l := range logs {
		data, _ := os.ReadFile(l)
		t.Logf("==== %s (last lines)\n%s", filepath.Base(l), ironicenv.LastLines(string(data), 40))
	}
}

// crashing fails the test when a container keeps exiting: what it waits for will not come.
func crashing(t *testing.T, node *kubelet.Node) {
	t.Helper()
	if c := node.CrashLooping(5); c != "" {
		t.Fatalf("container %s keeps exiting (see its log below)", c)
	}
}

func getCO(t *testing.T, c client.Client) *configv1.ClusterOperator {
	t.Helper()
	co := &configv1.ClusterOperator{}
	if err := c.Get(context.Background(), types.NamespacedName{Name: clusteroperator.Name}, co); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return co
}

// waitCO waits until a condition of the ClusterOperator has the status and reason.
func waitCO(t *testing.T, c client.Client, typ, status, reason string, timeout time.Duration, node *kubelet.Node) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		co := getCO(t, c)
		cond := clusteroperator.Condition(co, configv1.ClusterStatusConditionType(typ))
		if cond != nil && string(cond.Status) == status && cond.Reason == reason {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ClusterOperator's %s is not %s/%s after %s: conditions %+v", typ, status, reason, timeout, co.Status.Conditions)
		}
		crashing(t, node)
		time.Sleep(500 * time.Millisecond)
	}
}

func waitHost(t *testing.T, c client.Client, name string, state metal3.ProvisioningState, timeout time.Duration, node *kubelet.Node) *metal3.BareMetalHost {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := metal3.ProvisioningState("")
	for {
		h := &metal3.BareMetalHost{}
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, h); err != nil {
			t.Fatal(err)
		}
		if h.Status.Provisioning.State != last {
			last = h.Status.Provisioning.State
			t.Logf("%s: %s %s %s", name, last, h.Status.OperationalStatus, h.Status.ErrorMessage)
		}
		if h.Status.Provisioning.State == state && h.Status.OperationalStatus == metal3.OperationalStatusOK {
			return h
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is %s (%s %q) after %s, not %s", name, h.Status.Provisioning.State, h.Status.OperationalStatus, h.Status.ErrorMessage, timeout, state)
		}
		crashing(t, node)
		time.Sleep(500 * time.Millisecond)
	}
}

// watchUpgradeable notes when Upgradeable is False with HostsBusy.
func watchUpgradeable(t *testing.T, c client.Client, saw *atomic.Bool) func() {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			co := &configv1.ClusterOperator{}
			if err := c.Get(ctx, types.NamespacedName{Name: clusteroperator.Name}, co); err == nil {
				if u := clusteroperator.Condition(co, configv1.OperatorUpgradeable); u != nil && u.Status == configv1.ConditionFalse &&
					u.Reason == clusteroperator.ReasonHostsBusy && strings.Contains(u.Message, "worker-0") {
					saw.Store(true)
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return func() { cancel(); <-done }
}

func secret(t *testing.T, c client.Client, name string) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{}
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, s); err != nil {
		t.Fatal(err)
	}
	return s
}

// checkIronicAuth: Ironic's API at the metal3-state name's address answers over TLS verified with
// the operator's CA, 401 without credentials and 200 with the operator's.
func checkIronicAuth(t *testing.T, tlsSecret, creds *corev1.Secret) {
	t.Helper()
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(tlsSecret.Data[secrets.KeyCA]) {
		t.Fatal("no CA in the TLS Secret")
	}
	serverName := render.StateService + "." + ns + ".svc"
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: serverName}}}
	get := func(user, pass string) int {
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("https://%s:%d/v1/nodes", nodeIP, render.IronicPort), nil)
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("GET /v1/nodes: %v", err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get("", ""); code != http.StatusUnauthorized {
		t.Errorf("without credentials Ironic answered %d", code)
	}
	if code := get(string(creds.Data[secrets.KeyUsername]), string(creds.Data[secrets.KeyPassword])); code != http.StatusOK {
		t.Errorf("with the operator's credentials Ironic answered %d", code)
	}
}

// hostImage is what watchHostImage saw of the host's PreprovisioningImage.
type hostImage struct {
	url    string
	format metal3.ImageFormat
	// served is what the image-customization-controller answered for the URL, through the
	// Service's port on its pod ("" until the image was Ready).
	served string
}

// watchHostImage follows the host's PreprovisioningImage until stopped; the first time it is
// Ready it downloads the image from the image-customization-controller's pod, as Ironic does
// through the Service's name (which resolves to that pod, port 80 as the Service says).
func watchHostImage(t *testing.T, c client.Client, name string) func() hostImage {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan hostImage)
	go func() {
		var seen hostImage
		defer func() { done <- seen }()
		for ctx.Err() == nil {
			time.Sleep(200 * time.Millisecond)
			ppi := &metal3.PreprovisioningImage{}
			if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, ppi); err != nil {
				continue
			}
			ready := meta.FindStatusCondition(ppi.Status.Conditions, string(metal3.ConditionImageReady))
			if ready == nil || ready.Status != metav1.ConditionTrue || ppi.Status.ImageURL == "" || seen.served != "" {
				continue
			}
			seen.url, seen.format = ppi.Status.ImageURL, ppi.Status.Format
			seen.served = download(ctx, c, ppi.Status.ImageURL)
		}
	}()
	return func() hostImage { cancel(); return <-done }
}

// download fetches an image URL of the image-customization-controller's Service from its pod and
// says what came back.
func download(ctx context.Context, c client.Client, imageURL string) string {
	u, err := url.Parse(imageURL)
	if err != nil {
		return err.Error()
	}
	var eps discoveryv1.EndpointSliceList
	if err := c.List(ctx, &eps, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: render.ICCService}); err != nil {
		return err.Error()
	}
	if len(eps.Items) == 0 || len(eps.Items[0].Endpoints) == 0 {
		return "no endpoints for " + render.ICCService
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+eps.Items[0].Endpoints[0].Addresses[0]+":80"+u.Path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	// An ISO 9660 image: "CD001" in the primary volume descriptor at 32 KiB.
	if resp.StatusCode == http.StatusOK && len(data) > 0x8006 && string(data[0x8001:0x8006]) == "CD001" {
		return "ISO"
	}
	return fmt.Sprintf("status %d, %d bytes, not an ISO", resp.StatusCode, len(data))
}

// checkHostImage: the host's PreprovisioningImage was Ready with a URL of the
// image-customization-controller's Service, the controller's process served an ISO there, and
// Ironic downloaded it (its log names the URL: it boots the host from its copy).
func checkHostImage(t *testing.T, img hostImage, node *kubelet.Node) {
	t.Helper()
	prefix := "http://" + render.ICCService + "." + ns + ".svc.cluster.local/"
	if !strings.HasPrefix(img.url, prefix) || img.format != metal3.ImageFormatISO {
		t.Fatalf("the host's PreprovisioningImage was Ready with %q (format %q), want an ISO under %s", img.url, img.format, prefix)
	}
	t.Logf("the host's image: %s", img.url)
	if img.served != "ISO" {
		t.Errorf("the image-customization-controller served %s", img.served)
	}
	log, err := os.ReadFile(node.LogPath(render.Metal3Deployment, "metal3-ironic"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(log, []byte(img.url)) {
		t.Errorf("Ironic's log never names the host's image %s", img.url)
	}
}

// checkICCDeployed: the image-customization-controller's Deployment is available and the
// ClusterOperator lists it.
func checkICCDeployed(t *testing.T, c client.Client) {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: render.ICCDeployment}, d); err != nil {
		t.Fatal(err)
	}
	if d.Status.AvailableReplicas != 1 {
		t.Errorf("%s: %d available replicas", render.ICCDeployment, d.Status.AvailableReplicas)
	}
	co := getCO(t, c)
	if !slices.ContainsFunc(co.Status.RelatedObjects, func(r configv1.ObjectReference) bool {
		return r.Resource == "deployments" && r.Name == render.ICCDeployment
	}) {
		t.Errorf("the ClusterOperator's related objects lack %s: %v", render.ICCDeployment, co.Status.RelatedObjects)
	}
}

// checkMetrics reads the operator's /metrics (its pod is the first to get a pod IP).
func checkMetrics(t *testing.T, ip string) {
	t.Helper()
	resp, err := http.Get("http://" + ip + ":8080/metrics") //nolint:noctx // a test's one request
	if err != nil {
		t.Fatalf("reading the operator's metrics: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{`cluster_baremetal_operator_condition{condition="Available"} 1`,
		`cluster_baremetal_operator_condition{condition="Degraded"} 0`, "cluster_baremetal_operator_reconcile_total "} {
		if !strings.Contains(string(body), want) {
			t.Errorf("the operator's metrics lack %q", want)
		}
	}
}

// eventuallyErr retries f until done(err) or the timeout; it returns the last error.
func eventuallyErr(timeout time.Duration, f func() error, done func(error) bool) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if done(err) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(time.Second)
	}
}
