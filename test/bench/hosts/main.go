// Command hosts benchmarks the baremetal-operator at scale: it starts a real API server (the
// bin/kube-apiserver and bin/etcd that envtest runs), runs the operator binary as a subprocess
// with the fixture provisioner at zero latency, creates N hosts at once (each with a BMC Secret,
// online, a boot MAC, a Redfish address and an image with an md5 checksum) and reports how long
// they take to be provisioned and what it cost: API writes and Events per host (from the
// operator's own request counter), operator peak RSS and CPU, API server and etcd CPU.
//
// It measures; it never fails on a figure. Run it with `make bench-hosts N=1000`.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/scheme"
	"github.com/metalforge/metalforge/internal/test/apirequests"
	"github.com/metalforge/metalforge/internal/test/builder"
	"github.com/metalforge/metalforge/internal/test/loopback"
	"github.com/metalforge/metalforge/internal/test/procstat"
	"github.com/metalforge/metalforge/internal/test/testenv"
)

type options struct {
	n           int
	creators    int
	operator    string
	concurrency int
	qps         int
	burst       int
	timeout     time.Duration
	extraArgs   string
	apiProfile  string
}

func main() {
	var o options
	flag.IntVar(&o.n, "n", 1000, "Hosts to create.")
	flag.IntVar(&o.creators, "creators", 32, "Concurrent creators.")
	flag.StringVar(&o.operator, "operator", "", "Operator binary (default: build ./cmd/baremetal-operator into bin/).")
	flag.IntVar(&o.concurrency, "concurrency", 0, "Operator --concurrency (0: its default).")
	flag.IntVar(&o.qps, "kube-api-qps", 0, "Operator --kube-api-qps (0: its default).")
	flag.IntVar(&o.burst, "kube-api-burst", 0, "Operator --kube-api-burst (0: its default).")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Minute, "Give up waiting after this long.")
	flag.StringVar(&o.extraArgs, "operator-args", "", "Extra operator arguments, space separated.")
	flag.StringVar(&o.apiProfile, "apiserver-cpu-profile", "", "Write a 20 s CPU profile of kube-apiserver, taken while the hosts are created, to this file.")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "bench-hosts:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	var err error
	if o.operator == "" {
		fmt.Println("building bin/baremetal-operator")
		if o.operator, err = testenv.BuildOperator(os.Stdout); err != nil {
			return err
		}
	}

	fmt.Println("starting kube-apiserver and etcd")
	env, err := testenv.Start(testenv.Options{})
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	apiPIDs := procstat.Children(os.Getpid(), "kube-apiserver", "etcd")

	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	const ns = "bench"
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return fmt.Errorf("creating namespace: %w", err)
	}

	metricsAddr, probeAddr := loopback.FreeAddr(), loopback.FreeAddr()
	args := []string{"--provisioner=fixture", "--webhook-port=0", "--namespace=" + ns,
		"--metrics-bind-address=" + metricsAddr, "--health-probe-bind-address=" + probeAddr, "-v=0"}
	if o.concurrency > 0 {
		args = append(args, fmt.Sprintf("--concurrency=%d", o.concurrency))
	}
	if o.qps > 0 {
		args = append(args, fmt.Sprintf("--kube-api-qps=%d", o.qps))
	}
	if o.burst > 0 {
		args = append(args, fmt.Sprintf("--kube-api-burst=%d", o.burst))
	}
	args = append(args, strings.Fields(o.extraArgs)...)
	logPath := filepath.Join(os.TempDir(), "bench-hosts-operator.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	op := exec.Command(o.operator, args...)
	op.Env = append(os.Environ(), "KUBECONFIG="+env.KubeconfigPath)
	op.Stdout, op.Stderr = logFile, logFile
	if err := op.Start(); err != nil {
		return fmt.Errorf("starting the operator: %w", err)
	}
	defer func() {
		_ = op.Process.Signal(syscall.SIGTERM)
		_ = op.Wait()
	}()
	if err := loopback.WaitOK(ctx, "http://"+probeAddr+"/readyz"); err != nil {
		return fmt.Errorf("operator not ready (log: %s): %w", logPath, err)
	}
	fmt.Printf("operator ready (pid %d, %s), log %s\n", op.Process.Pid, strings.Join(args, " "), logPath)

	watcher, err := watchProvisioned(ctx, env.Config, ns, o.n)
	if err != nil {
		return err
	}
	before, err := apirequests.Scrape("http://" + metricsAddr + "/metrics")
	if err != nil {
		return err
	}
	apiCPU0 := procstat.CPUSeconds(apiPIDs...)

	if o.apiProfile != "" {
		profiled := make(chan struct{})
		go func() { profileAPIServer(env.Config, o.apiProfile); close(profiled) }()
		defer func() { <-profiled }() // before the API server stops
	}
	fmt.Printf("creating %d hosts with %d concurrent creators\n", o.n, o.creators)
	start := time.Now()
	if err := createHosts(ctx, env.Config, ns, o); err != nil {
		return err
	}
	created := time.Since(start)
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
wait:
	for {
		select {
		case <-watcher.done:
			break wait
		case <-tick.C:
			fmt.Printf("  %5.1f s: %d provisioned\n", time.Since(start).Seconds(), watcher.count.Load())
		case <-ctx.Done():
			return fmt.Errorf("only %d of %d hosts provisioned after %s", watcher.count.Load(), o.n, o.timeout)
		}
	}
	wall := watcher.last.Sub(start)
	// Let trailing reconciles (woken by the operator's own last writes) and queued Events land,
	// so that they are counted too.
	time.Sleep(3 * time.Second)
	after, err := apirequests.Scrape("http://" + metricsAddr + "/metrics")
	if err != nil {
		return err
	}
	report(o, wall, created, before, after, op.Process.Pid, procstat.CPUSeconds(apiPIDs...)-apiCPU0)
	return nil
}

// createHosts creates the Secrets and hosts from o.creators goroutines at once.
func createHosts(ctx context.Context, cfg *rest.Config, ns string, o options) error {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return err
	}
	next := atomic.Int64{}
	var wg sync.WaitGroup
	errs := make(chan error, o.creators)
	for range o.creators {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= o.n {
					return
				}
				name := fmt.Sprintf("host-%05d", i)
				secret := builder.BMCSecret(ns, "bmc-"+name, "admin", "password")
				host := builder.BareMetalHost(ns, name).
					WithBMC(fmt.Sprintf("redfish://10.%d.%d.%d/redfish/v1/Systems/1", i>>16&255, i>>8&255, i&255), secret.Name).
					WithBootMACAddress(fmt.Sprintf("52:54:00:%02x:%02x:%02x", i>>16&255, i>>8&255, i&255)).
					WithOnline(true).
					WithImageSpec(metal3.Image{URL: "http://images.example/fedora-40.qcow2",
						Checksum: "d41d8cd98f00b204e9800998ecf8427e", ChecksumType: metal3.MD5}).Build()
				for _, obj := range []client.Object{secret, host} {
					if err := c.Create(ctx, obj); err != nil {
						errs <- fmt.Errorf("creating %s: %w", obj.GetName(), err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

type provisionedWatcher struct {
	count atomic.Int64
	last  time.Time
	done  chan struct{}
}

// watchProvisioned counts hosts reaching provisioned through an informer (a poll would put a
// list of every host on the API server every time).
func watchProvisioned(ctx context.Context, cfg *rest.Config, ns string, n int) (*provisionedWatcher, error) {
	c, err := cache.New(cfg, cache.Options{Scheme: scheme.New(), DefaultNamespaces: map[string]cache.Config{ns: {}},
		DefaultTransform: cache.TransformStripManagedFields()})
	if err != nil {
		return nil, err
	}
	inf, err := c.GetInformer(ctx, &metal3.BareMetalHost{})
	if err != nil {
		return nil, err
	}
	w := &provisionedWatcher{done: make(chan struct{})}
	var mu sync.Mutex
	seen := map[string]bool{}
	check := func(obj any) {
		h, ok := obj.(*metal3.BareMetalHost)
		if !ok || h.Status.Provisioning.State != metal3.StateProvisioned {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if seen[h.Name] {
			return
		}
		seen[h.Name] = true
		w.last = time.Now()
		if w.count.Add(1) == int64(n) {
			close(w.done)
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: check, UpdateFunc: func(_, obj any) { check(obj) },
	}); err != nil {
		return nil, err
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("bench watch did not sync")
	}
	return w, nil
}

func report(o options, wall, created time.Duration, before, after apirequests.Sample, opPID int, apiCPU float64) {
	writes, events := 0.0, 0.0
	byKind, reads := map[string]float64{}, map[string]float64{}
	for series, v := range after {
		d := v - before[series]
		verb, resource, sub := apirequests.Label(series, "verb"), apirequests.Label(series, "resource"), apirequests.Label(series, "subresource")
		switch verb {
		case "create", "update", "patch", "delete":
		default:
			if d > 0 {
				reads[resource+" "+verb] += d
			}
			continue
		}
		if resource == "events" {
			events += d
			continue
		}
		writes += d
		kind := resource
		if sub != "" {
			kind += "/" + sub
		}
		byKind[kind+" "+verb] += d
	}
	n := float64(o.n)
	fmt.Println()
	fmt.Printf("hosts:                          %d\n", o.n)
	fmt.Printf("created all (Secrets + hosts):  %.1f s\n", created.Seconds())
	fmt.Printf("first create → all provisioned: %.1f s\n", wall.Seconds())
	fmt.Printf("operator API writes per host:   %.2f (excluding Events)\n", writes/n)
	keys := make([]string, 0, len(byKind))
	for k := range byKind {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Printf("    %-34s %.2f\n", k, byKind[k]/n)
	}
	fmt.Printf("operator Events per host:       %.2f\n", events/n)
	keys = keys[:0]
	for k := range reads {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Printf("operator reads per host:\n")
	for _, k := range keys {
		fmt.Printf("    %-34s %.2f\n", k, reads[k]/n)
	}
	fmt.Printf("operator peak RSS (VmHWM):      %.1f MiB\n", float64(procstat.PeakRSS(opPID))/(1<<20))
	fmt.Printf("operator CPU:                   %.1f s\n", procstat.CPUSeconds(opPID))
	fmt.Printf("kube-apiserver + etcd CPU:      %.1f s\n", apiCPU)
	fmt.Printf("this benchmark's own CPU:       %.1f s (creators and watch)\n", procstat.CPUSeconds(os.Getpid()))
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Printf("load average (1/5/15 min):      %s\n", strings.Join(strings.Fields(string(b))[:3], " "))
	}
}

// profileAPIServer saves a CPU profile of kube-apiserver (its /debug/pprof is on by default).
// envtest's Host ends with a slash: joined as it was, the URL had two and the answer was a 404
// page, which was saved as the profile.
func profileAPIServer(cfg *rest.Config, path string) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "apiserver profile:", err)
		return
	}
	url := strings.TrimSuffix(cfg.Host, "/") + "/debug/pprof/profile?seconds=20"
	resp, err := hc.Get(url) //nolint:noctx // bench
	if err != nil {
		fmt.Fprintln(os.Stderr, "apiserver profile:", err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		fmt.Fprintf(os.Stderr, "apiserver profile: GET %s: %s: %s\n", url, resp.Status, strings.TrimSpace(string(body)))
		return
	}
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "apiserver profile:", err)
		return
	}
	defer f.Close()
	_, _ = io.Copy(f, resp.Body)
}
