// Package sro is the special-resource-operator's end-to-end suite on a simulated cluster
// (internal/test/kwokenv): a real API server, controller manager and scheduler, kwok's fake
// nodes, an OCI registry in the test, and the operator binary.
package sro

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/controller/conditions"
	"github.com/metalforge/metalforge/internal/sro/naming"
	"github.com/metalforge/metalforge/internal/sro/recipe"
	"github.com/metalforge/metalforge/internal/test/kwokenv"
	"github.com/metalforge/metalforge/internal/test/loopback"
	"github.com/metalforge/metalforge/internal/test/poll"
	"github.com/metalforge/metalforge/internal/test/testenv"
)

const (
	kernelX = "5.14.0-284.30.1.el9_2.x86_64"
	kernelY = "5.14.0-362.8.1.el9_3.x86_64"
	hwLabel = "feature.node.kubernetes.io/pci-1af4.present"
	// loadedLine is what the driver container logs once its modules are in (the built-in
	// recipe's entrypoint says so); the recipe waits for it.
	loadedLine = "specialresource: driver loaded for kernel"
)

// TestRollingKernelUpgrade: five nodes on kernel X with the hardware label and one without;
// the operator serves exactly the five, and waits for the driver pods' logs (served by kwok)
// before it says Ready. Then the nodes move to kernel Y one at a time; a sampler checks every
// second whether each node runs a Running driver pod for its current kernel, and the seconds
// without one are reported per node. Nodes still on X never lose their driver; at the end
// every node runs Y's driver and X's DaemonSet is gone.
func TestRollingKernelUpgrade(t *testing.T) {
	c, err := kwokenv.Start(kwokenv.Options{Logs: "specialresource: loading simple-kmod\n", LogContainer: "driver"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range []string{"special-resource-operator", "kube-controller-manager", "kwok"} {
				t.Logf("--- %s (end of its log)\n%s", p, c.ProcessLog(p))
			}
		}
		if err := c.Stop(); err != nil {
			t.Errorf("stopping the cluster: %v", err)
		}
	})
	ctx := context.Background()
	reg := startRegistry(t)
	for _, k := range []string{kernelX, kernelY} {
		push(t, reg+"/vendor/simple-kmod:"+k)
	}
	startOperator(t, c)

	var hw []string
	for i := range 5 {
		n := fmt.Sprintf("worker-%d", i)
		hw = append(hw, n)
		if err := c.CreateNode(ctx, kwokenv.Node(n, kernelX, map[string]string{hwLabel: "true"})); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.CreateNode(ctx, kwokenv.Node("worker-plain", kernelX, nil)); err != nil {
		t.Fatal(err)
	}

	// The built-in recipe, from a ConfigMap, with the driver DaemonSet waiting for its logs.
	files, err := recipe.BuiltinFiles(sro.DriverContainerRecipe)
	if err != nil {
		t.Fatal(err)
	}
	const driverState = "1000-driver-container.yaml"
	files[driverState] = strings.Replace(files[driverState], `specialresource.openshift.io/wait: "true"`,
		`specialresource.openshift.io/wait-for-logs: "`+loadedLine+`"`, 1)
	mustCreate(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "recipes"}})
	mustCreate(t, c, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "recipes", Name: "simple-kmod"}, Data: files})
	sr := &sro.SpecialResource{ObjectMeta: metav1.ObjectMeta{Name: "simple-kmod"}, Spec: sro.SpecialResourceSpec{
		NodeSelector: map[string]string{hwLabel: "true"},
		Recipe:       sro.SpecialResourceRecipe{ConfigMap: &sro.RecipeConfigMap{Namespace: "recipes", Name: "simple-kmod"}},
		DriverContainer: sro.SpecialResourceDriverContainer{
			Image: reg + "/vendor/simple-kmod:{{.KernelFullVersion}}", Modules: []string{"simple-kmod"},
		},
	}}
	mustCreate(t, c, sr)

	// The pods run, but their logs do not say the driver is loaded yet: not Ready.
	waitSR(t, c, "waiting for the driver logs", func(s *sro.SpecialResource) bool {
		return conditions.IsTrue(s.Status.Conditions, sro.ConditionProgressing) && strings.Contains(message(s), "logs match") &&
			s.Status.NodesServed == 5
	})
	if err := os.WriteFile(c.LogFile, []byte(criLine("specialresource: loading simple-kmod")+criLine(loadedLine+" "+kernelX)), 0o600); err != nil {
		t.Fatal(err)
	}
	got := waitSR(t, c, "Ready on kernel X", func(s *sro.SpecialResource) bool {
		return conditions.IsCurrent(s.Status.Conditions, sro.ConditionReady, s.Generation)
	})
	if got.Status.NodesMatching != 5 || got.Status.NodesServed != 5 || len(got.Status.Kernels) != 1 {
		t.Fatalf("status: matching %d served %d kernels %+v", got.Status.NodesMatching, got.Status.NodesServed, got.Status.Kernels)
	}
	served := driverPods(t, c)
	if len(served) != 5 || served["worker-plain"] != "" {
		t.Fatalf("driver pods on %v: want exactly the five hardware nodes", served)
	}

	s := startSampler(t, c, hw)
	for _, n := range hw {
		start := time.Now()
		setKernel(t, c, n, kernelY)
		poll.Within(t, 3*time.Minute, "node "+n+" served on kernel Y", func() (bool, string) {
			p := driverPods(t, c)
			return p[n] == naming.LabelValue(kernelY), fmt.Sprint(p)
		})
		took := time.Since(start)
		// As an upgrade waits for a node to be back before the next: the SpecialResource Ready
		// again (its new pod's log matched), and two samples of the node on its new kernel.
		waitSR(t, c, "Ready after "+n, func(s *sro.SpecialResource) bool {
			return conditions.IsCurrent(s.Status.Conditions, sro.ConditionReady, s.Generation)
		})
		s.waitSamples(2)
		t.Logf("%s: on kernel Y at %s, its driver Running after %s, Ready again after %s", n, start.Format("15:04:05.0"),
			took.Round(10*time.Millisecond), time.Since(start).Round(10*time.Millisecond))
	}
	waitSR(t, c, "Ready on kernel Y", func(s *sro.SpecialResource) bool {
		return conditions.IsCurrent(s.Status.Conditions, sro.ConditionReady, s.Generation) && len(s.Status.Kernels) == 1 &&
			s.Status.Kernels[0].KernelVersion == kernelY
	})
	poll.Within(t, 3*time.Minute, "X's DaemonSet gone", func() (bool, string) {
		var list appsv1.DaemonSetList
		if err := c.Client.List(ctx, &list, client.InNamespace(sr.Name)); err != nil {
			return false, err.Error()
		}
		var names []string
		for _, ds := range list.Items {
			names = append(names, ds.Name+"="+ds.Annotations[sro.KernelAnnotation])
			if ds.Annotations[sro.KernelAnnotation] == kernelX {
				return false, strings.Join(names, ", ")
			}
		}
		return len(list.Items) == 1, strings.Join(names, ", ")
	})
	report := s.stop()
	t.Logf("seconds without a Running driver pod for the node's current kernel (sampled every second):\n%s", report.String())
	if report.beforeUpgrade > 0 {
		t.Errorf("nodes still on kernel X lost their driver for %d samples", report.beforeUpgrade)
	}
}

// sampler checks every second, for each node, whether it runs a Running driver pod for its
// current kernel.
type sampler struct {
	t     *testing.T
	c     *kwokenv.Cluster
	nodes []string
	done  chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	res   sampleReport
}

type sampleReport struct {
	samples int
	// missing counts, per node, the samples after its kernel changed without its driver.
	missing map[string]int
	// beforeUpgrade counts samples where a node still on kernel X had no driver.
	beforeUpgrade int
}

func (r sampleReport) String() string {
	var lines []string
	total := 0
	for n, m := range r.missing {
		lines = append(lines, fmt.Sprintf("  %s: %d s", n, m))
		total += m
	}
	sort.Strings(lines)
	return fmt.Sprintf("%s\n  total: %d s over %d samples; nodes still on the old kernel: %d s", strings.Join(lines, "\n"), total, r.samples, r.beforeUpgrade)
}

func startSampler(t *testing.T, c *kwokenv.Cluster, nodes []string) *sampler {
	t.Helper()
	s := &sampler{t: t, c: c, nodes: nodes, done: make(chan struct{}), res: sampleReport{missing: map[string]int{}}}
	s.wg.Go(func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-s.done:
				return
			case <-tick.C:
				s.sample()
			}
		}
	})
	return s
}

func (s *sampler) sample() {
	ctx := context.Background()
	pods := driverPods(s.t, s.c)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.res.samples++
	for _, n := range s.nodes {
		node := &corev1.Node{}
		if err := s.c.Client.Get(ctx, client.ObjectKey{Name: n}, node); err != nil {
			continue
		}
		k := node.Status.NodeInfo.KernelVersion
		if pods[n] == naming.LabelValue(k) {
			continue
		}
		if k == kernelX {
			s.res.beforeUpgrade++
		} else {
			s.res.missing[n]++
		}
	}
}

// waitSamples waits until the sampler took n more samples.
func (s *sampler) waitSamples(n int) {
	s.mu.Lock()
	want := s.res.samples + n
	s.mu.Unlock()
	poll.Within(s.t, 3*time.Minute, fmt.Sprintf("%d samples", n), func() (bool, string) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.res.samples >= want, ""
	})
}

func (s *sampler) stop() sampleReport {
	close(s.done)
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.nodes {
		s.res.missing[n] += 0
	}
	return s.res
}

// driverPods maps each node to the kernel label of the Running driver pod on it.
func driverPods(t *testing.T, c *kwokenv.Cluster) map[string]string {
	t.Helper()
	var pods corev1.PodList
	if err := c.Client.List(context.Background(), &pods, client.InNamespace("simple-kmod"), client.HasLabels{sro.KernelLabel}); err != nil {
		t.Errorf("listing driver pods: %v", err)
		return nil
	}
	out := map[string]string{}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp.IsZero() && p.Spec.NodeName != "" {
			out[p.Spec.NodeName] = p.Labels[sro.KernelLabel]
		}
	}
	return out
}

// setKernel is the node's reboot into kernel k (kwok reports the annotation as its kernel).
func setKernel(t *testing.T, c *kwokenv.Cluster, node, k string) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n := &corev1.Node{}
		if err := c.Client.Get(context.Background(), client.ObjectKey{Name: node}, n); err != nil {
			return err
		}
		n.Annotations[kwokenv.KernelAnnotation] = k
		return c.Client.Update(context.Background(), n)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func startRegistry(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func push(t *testing.T, ref string) {
	t.Helper()
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatal(err)
	}
}

// startOperator builds and runs cmd/special-resource-operator against the cluster.
func startOperator(t *testing.T, c *kwokenv.Cluster) {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(c.Dir, "special-resource-operator")
	build := exec.Command("go", "build", "-o", bin, "./cmd/special-resource-operator")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the operator: %v\n%s", err, out)
	}
	out, err := os.Create(filepath.Join(c.Dir, "special-resource-operator.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--kubeconfig="+c.KubeconfigPath, "--webhook-port=0", "--health-probe-bind-address=0",
		"--metrics-bind-address="+loopback.FreeAddr(), "--v=2")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	})
}

func mustCreate(t *testing.T, c *kwokenv.Cluster, obj client.Object) {
	t.Helper()
	if err := c.Client.Create(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
}

func waitSR(t *testing.T, c *kwokenv.Cluster, what string, cond func(*sro.SpecialResource) bool) *sro.SpecialResource {
	t.Helper()
	sr := &sro.SpecialResource{}
	poll.Within(t, 3*time.Minute, what, func() (bool, string) {
		if err := c.Client.Get(context.Background(), client.ObjectKey{Name: "simple-kmod"}, sr); err != nil {
			return false, err.Error()
		}
		return cond(sr), fmt.Sprintf("%s; served %d/%d; kernels %+v", message(sr), sr.Status.NodesServed, sr.Status.NodesMatching, sr.Status.Kernels)
	})
	return sr
}

func message(sr *sro.SpecialResource) string {
	for _, c := range sr.Status.Conditions {
		if c.Status == metav1.ConditionTrue {
			return c.Type + ": " + c.Message
		}
	}
	return "no condition"
}

func criLine(s string) string {
	return time.Now().UTC().Format(time.RFC3339Nano) + " stdout F " + s + "\n"
}
