// Command sro benchmarks the special-resource-operator on a simulated cluster
// (internal/test/kwokenv: a real kube-apiserver, kube-controller-manager and kube-scheduler, and
// kwok playing N nodes): N nodes spread over five kernels and over -groups hardware groups, and
// -srs SpecialResources, SpecialResource j selecting hardware group j mod groups, with every
// driver image in an OCI registry run by the benchmark. It reports the time from creating the
// SpecialResources until every one is Ready (every driver pod of every kernel available), the
// operator's API writes (from its own request counter), and its peak RSS and CPU.
//
// It measures; it never fails on a figure. Run it with `make bench-sro N=1000`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
	"github.com/metalforge/metalforge/internal/controller/conditions"
	"github.com/metalforge/metalforge/internal/test/apirequests"
	"github.com/metalforge/metalforge/internal/test/kwokenv"
	"github.com/metalforge/metalforge/internal/test/loopback"
	"github.com/metalforge/metalforge/internal/test/procstat"
	"github.com/metalforge/metalforge/internal/test/testenv"
)

var kernels = []string{
	"5.14.0-284.30.1.el9_2.x86_64",
	"5.14.0-362.8.1.el9_3.x86_64",
	"5.14.0-427.13.1.el9_4.x86_64",
	"5.14.0-503.11.1.el9_5.x86_64",
	"5.14.0-570.12.1.el9_6.x86_64",
}

type options struct {
	nodes, srs, groups, creators int
	timeout                      time.Duration
	operatorArgs                 string
}

func main() {
	var o options
	flag.IntVar(&o.nodes, "n", 1000, "Nodes.")
	flag.IntVar(&o.srs, "srs", 20, "SpecialResources.")
	flag.IntVar(&o.groups, "groups", 4, "Hardware groups: node i has group i mod groups, SpecialResource j selects group j mod groups.")
	flag.IntVar(&o.creators, "creators", 16, "Concurrent node creators.")
	flag.DurationVar(&o.timeout, "timeout", 30*time.Minute, "Give up waiting after this long.")
	flag.StringVar(&o.operatorArgs, "operator-args", "", "Extra operator arguments, space separated.")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "bench-sro:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	fmt.Printf("starting the cluster (kube-apiserver, etcd, kube-controller-manager, kube-scheduler, kwok)\n")
	c, err := kwokenv.Start(kwokenv.Options{})
	if err != nil {
		return err
	}
	defer func() {
		if err := c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the cluster:", err)
		}
	}()
	ctx := context.Background()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	reg := strings.TrimPrefix(srv.URL, "http://")
	for j := range o.srs {
		for _, k := range kernels {
			if err := push(fmt.Sprintf("%s/vendor/kmod-%d:%s", reg, j, k)); err != nil {
				return err
			}
		}
	}

	metricsAddr := loopback.FreeAddr()
	op, err := startOperator(c, metricsAddr, o.operatorArgs)
	if err != nil {
		return err
	}
	defer func() { _ = op.Process.Signal(os.Interrupt); _ = op.Wait() }()

	fmt.Printf("creating %d nodes (%d kernels, %d hardware groups)\n", o.nodes, len(kernels), o.groups)
	start := time.Now()
	if err := createNodes(ctx, c, o); err != nil {
		return err
	}
	fmt.Printf("nodes created in %s\n", time.Since(start).Round(time.Millisecond))
	if err := waitLabelled(ctx, c, o); err != nil {
		return err
	}
	before, err := apirequests.Scrape("http://" + metricsAddr + "/metrics")
	if err != nil {
		return err
	}
	cpuBefore := procstat.CPUSeconds(op.Process.Pid)

	fmt.Printf("creating %d SpecialResources\n", o.srs)
	start = time.Now()
	for j := range o.srs {
		sr := &sro.SpecialResource{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("kmod-%d", j)}, Spec: sro.SpecialResourceSpec{
			NodeSelector: map[string]string{"bench.metalforge.io/hw": strconv.Itoa(j % o.groups)},
			DriverContainer: sro.SpecialResourceDriverContainer{
				Image: fmt.Sprintf("%s/vendor/kmod-%d:{{.KernelFullVersion}}", reg, j), Modules: []string{fmt.Sprintf("kmod_%d", j)},
			},
		}}
		if err := c.Client.Create(ctx, sr); err != nil {
			return fmt.Errorf("creating SpecialResource %s: %w", sr.Name, err)
		}
	}
	wall, served, err := waitReady(ctx, c, o, start)
	if err != nil {
		return err
	}
	after, err := apirequests.Scrape("http://" + metricsAddr + "/metrics")
	if err != nil {
		return err
	}
	report(o, wall, served, before, after, procstat.PeakRSS(op.Process.Pid), procstat.CPUSeconds(op.Process.Pid)-cpuBefore)
	return nil
}

func push(ref string) error {
	img, err := random.Image(256, 1)
	if err != nil {
		return fmt.Errorf("making an image: %w", err)
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		return fmt.Errorf("parsing %s: %w", ref, err)
	}
	if err := remote.Write(r, img); err != nil {
		return fmt.Errorf("pushing %s: %w", ref, err)
	}
	return nil
}

func startOperator(c *kwokenv.Cluster, metricsAddr, extra string) (*exec.Cmd, error) {
	root, err := testenv.RepoRoot()
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(c.Dir, "special-resource-operator")
	build := exec.Command("go", "build", "-o", bin, "./cmd/special-resource-operator")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building the operator: %w\n%s", err, out)
	}
	logFile, err := os.Create(filepath.Join(c.Dir, "special-resource-operator.log"))
	if err != nil {
		return nil, fmt.Errorf("creating the operator log: %w", err)
	}
	args := append([]string{"--kubeconfig=" + c.KubeconfigPath, "--webhook-port=0", "--health-probe-bind-address=0",
		"--metrics-bind-address=" + metricsAddr}, strings.Fields(extra)...)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the operator: %w", err)
	}
	return cmd, loopback.WaitOK(context.Background(), "http://"+metricsAddr+"/metrics")
}

func createNodes(ctx context.Context, c *kwokenv.Cluster, o options) error {
	work := make(chan int)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for range o.creators {
		wg.Go(func() {
			for i := range work {
				n := kwokenv.Node(fmt.Sprintf("node-%04d", i), kernels[i%len(kernels)], map[string]string{"bench.metalforge.io/hw": strconv.Itoa(i % o.groups)})
				if err := c.CreateNode(ctx, n); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for i := range o.nodes {
		work <- i
	}
	close(work)
	wg.Wait()
	return errors.Join(errs...)
}

// waitLabelled waits until every node reports its kernel and carries its kernel label, so that
// the timing starts from a settled cluster.
func waitLabelled(ctx context.Context, c *kwokenv.Cluster, o options) error {
	deadline := time.Now().Add(o.timeout)
	for {
		var nodes corev1.NodeList
		if err := c.Client.List(ctx, &nodes); err != nil {
			return fmt.Errorf("listing nodes: %w", err)
		}
		done := 0
		for _, n := range nodes.Items {
			if n.Status.NodeInfo.KernelVersion != "" && n.Labels[sro.KernelLabel] == n.Status.NodeInfo.KernelVersion {
				done++
			}
		}
		if done == o.nodes {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d nodes labelled with their kernel", done, o.nodes)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// waitReady polls until every SpecialResource is Ready for its current generation.
func waitReady(ctx context.Context, c *kwokenv.Cluster, o options, start time.Time) (time.Duration, int32, error) {
	deadline := start.Add(o.timeout)
	lastReport := time.Now()
	for {
		var list sro.SpecialResourceList
		if err := c.Client.List(ctx, &list); err != nil {
			return 0, 0, fmt.Errorf("listing SpecialResources: %w", err)
		}
		ready := 0
		var served int32
		for _, sr := range list.Items {
			served += sr.Status.NodesServed
			if conditions.IsCurrent(sr.Status.Conditions, sro.ConditionReady, sr.Generation) {
				ready++
			}
		}
		if ready == o.srs {
			return time.Since(start), served, nil
		}
		if time.Now().After(deadline) {
			return 0, 0, fmt.Errorf("after %s only %d of %d SpecialResources Ready (%d driver pods available)", o.timeout, ready, o.srs, served)
		}
		if time.Since(lastReport) > 10*time.Second {
			fmt.Printf("  %s: %d/%d Ready, %d driver pods available\n", time.Since(start).Round(time.Second), ready, o.srs, served)
			lastReport = time.Now()
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func report(o options, wall time.Duration, served int32, before, after apirequests.Sample, rss int64, cpu float64) {
	writes := 0.0
	byKind := map[string]float64{}
	for series, v := range after {
		d := v - before[series]
		verb, resource, sub := apirequests.Label(series, "verb"), apirequests.Label(series, "resource"), apirequests.Label(series, "subresource")
		switch verb {
		case "create", "update", "patch", "delete", "apply":
		default:
			continue
		}
		if d <= 0 {
			continue
		}
		writes += d
		key := resource + " " + verb
		if sub != "" {
			key = resource + "/" + sub + " " + verb
		}
		byKind[key] += d
	}
	var kinds []string
	for k, v := range byKind {
		kinds = append(kinds, fmt.Sprintf("%s %.0f", k, v))
	}
	sort.Strings(kinds)
	fmt.Printf("\nbench-sro: %d nodes, %d kernels, %d SpecialResources (%d hardware groups)\n", o.nodes, len(kernels), o.srs, o.groups)
	fmt.Printf("  time to all Ready:       %s\n", wall.Round(100*time.Millisecond))
	fmt.Printf("  driver pods available:   %d\n", served)
	fmt.Printf("  operator API writes:     %.0f (%.1f per driver pod): %s\n", writes, writes/float64(max(served, 1)), strings.Join(kinds, ", "))
	fmt.Printf("  operator peak RSS:       %.0f MiB\n", float64(rss)/(1<<20))
	fmt.Printf("  operator CPU:            %.1f s\n", cpu)
}
