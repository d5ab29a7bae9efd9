package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/scheme"
	"github.com/metalforge/metalforge/internal/test/hostfleet"
	"github.com/metalforge/metalforge/internal/test/operatorproc"
	"github.com/metalforge/metalforge/internal/test/procstat"
	"github.com/metalforge/metalforge/internal/test/testenv"
)

const benchNS = "bench"

func (e *env) runOperator() (*result, error) {
	o := e.o
	fmt.Println("operator: starting kube-apiserver and etcd")
	kube, err := testenv.Start(testenv.Options{})
	if err != nil {
		return nil, err
	}
	defer func() { _ = kube.Stop() }()
	apiPIDs := procstat.Children(os.Getpid(), "kube-apiserver", "etcd")
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	if err := kube.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNS}}); err != nil {
		return nil, err
	}

	args := []string{"--provisioner=ironic", "--webhook-port=0", "--namespace=" + benchNS,
		"--concurrency=" + strconv.Itoa(o.concurrency),
		"--ironic-short-poll=" + o.shortPoll.String(), "--ironic-long-poll=" + o.longPoll.String(),
		// The operator's default power poll (1 min) for hosts in a steady state: a shorter one
		// mostly adds GETs that the Ironic it shares 2 cores with must answer (at 10 s: 71 of the
		// 139 requests per host at N=100). Power changes are followed at the short poll anyway.
		"--error-backoff-base=10s", "--provisioner-unavailable-delay=5s", "-v=0"}
	args = append(args, strings.Fields(o.operatorArgs)...)
	logPath := filepath.Join(os.TempDir(), "bench-ironic-operator.log")
	if o.keepLogs != "" {
		if err := os.MkdirAll(o.keepLogs, 0o755); err != nil {
			return nil, err
		}
		logPath = filepath.Join(o.keepLogs, "operator.log")
	}
	_ = os.Remove(logPath)
	op, err := operatorproc.Start(ctx, operatorproc.Options{Binary: o.operator, Args: args, LogPath: logPath,
		Env: append([]string{"KUBECONFIG=" + kube.KubeconfigPath, "METAL3_AUTH_ROOT_DIR=" + filepath.Join(os.TempDir(), "bench-ironic-no-auth")},
			e.ironic.OperatorEnv()...)})
	if op != nil {
		defer op.Stop()
	}
	if err != nil {
		return nil, err
	}
	fmt.Printf("operator: ready (pid %d, %s), log %s\n", op.Pid(), strings.Join(args, " "), logPath)

	tr, err := startTracker(ctx, kube.Config, o.n)
	if err != nil {
		return nil, err
	}
	c, err := client.New(hostfleet.Unlimited(kube.Config), client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, err
	}
	before, err := op.Scrape(ctx, ironicRequests, "operation")
	if err != nil {
		return nil, err
	}
	r := &result{name: "operator", wall: map[string]time.Duration{}, hostTimes: map[string][]time.Duration{}, calls: map[string]float64{}, loadBefore: procstat.LoadAverage()}
	stalled := e.watchStalls(ctx, func(node string) { tr.exclude(strings.TrimPrefix(node, benchNS+"~")) })
	r.logFrom = e.ironicLogSize()
	cpu0 := procstat.CPUSeconds(os.Getpid())
	api0 := procstat.CPUSeconds(apiPIDs...)
	hosts := e.sim.Hosts()
	name := func(i int) string { return fmt.Sprintf("host-%04d", i) }

	// register → inspect → available: create every Secret and host at once.
	start := time.Now()
	tr.setPhase("available", start)
	err = hostfleet.Parallel(len(hosts), func(i int) error { return hostfleet.Create(ctx, c, benchNS, name(i), hosts[i]) })
	if err != nil {
		return nil, err
	}
	if err := tr.wait(ctx); err != nil {
		return nil, err
	}
	r.record("registered", start, tr.times("registered"))
	r.record("available", start, tr.times("available"))

	raw := "raw"
	image := metal3.Image{URL: e.image.url, Checksum: e.image.sha256, ChecksumType: metal3.SHA256, DiskFormat: &raw}
	for _, step := range []struct {
		phase  string
		change func(name string) error
	}{
		{"provisioned", func(name string) error { return hostfleet.PatchImage(ctx, c, benchNS, name, &image) }},
		{"deprovisioned", func(name string) error { return hostfleet.PatchImage(ctx, c, benchNS, name, nil) }},
		{"deleted", func(name string) error {
			return c.Delete(ctx, &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: benchNS, Name: name}})
		}},
	} {
		t := time.Now()
		tr.setPhase(step.phase, t)
		if err := hostfleet.Parallel(len(hosts), func(i int) error { return step.change(name(i)) }); err != nil {
			return nil, err
		}
		if err := tr.wait(ctx); err != nil {
			return nil, err
		}
		r.record(step.phase, t, tr.times(step.phase))
	}
	for _, p := range phases[1:] {
		r.total += r.wall[p]
	}
	after, err := op.Scrape(ctx, ironicRequests, "operation")
	if err != nil {
		return nil, err
	}
	for k, v := range after {
		r.calls[k] = v - before[k]
	}
	r.errored, r.errors = tr.errorCount()
	r.stalled = stalled.count()
	r.driverCPU = procstat.CPUSeconds(op.Pid())
	r.driverRSS = procstat.PeakRSS(op.Pid())
	r.apiCPU = procstat.CPUSeconds(apiPIDs...) - api0
	e.ironicUsage(r)
	r.benchCPU = procstat.CPUSeconds(os.Getpid()) - cpu0
	r.loadAfter = procstat.LoadAverage()
	return r, nil
}

// tracker follows every host through a watch and records when each reached the current phase's
// state, and every error a host showed.
type tracker struct {
	n      int
	mu     sync.Mutex
	phase  string
	since  time.Time
	at     map[string]map[string]time.Time // phase → host → time
	errors map[string]string
	// excluded are the hosts whose nodes stalled in Ironic: they count as done in every phase
	// from then on, and as errored.
	excluded map[string]bool
	done     chan struct{}
	count    atomic.Int64
}

func startTracker(ctx context.Context, cfg *rest.Config, n int) (*tracker, error) {
	tr := &tracker{n: n, at: map[string]map[string]time.Time{}, errors: map[string]string{}, excluded: map[string]bool{}}
	if err := hostfleet.Watch(ctx, cfg, benchNS, tr.observe); err != nil {
		return nil, err
	}
	return tr, nil
}

func (tr *tracker) setPhase(phase string, since time.Time) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.phase, tr.since = phase, since
	tr.at[phase] = map[string]time.Time{}
	if phase == "available" {
		tr.at["registered"] = map[string]time.Time{}
	}
	tr.done = make(chan struct{})
	tr.count.Store(int64(len(tr.excluded)))
	if len(tr.excluded) >= tr.n {
		close(tr.done)
	}
}

// exclude counts a host whose node stalled in Ironic as done and errored.
func (tr *tracker) exclude(name string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.excluded[name] {
		return
	}
	tr.excluded[name] = true
	if tr.errors[name] == "" {
		tr.errors[name] = name + ": its node stalled in Ironic"
	}
	if _, seen := tr.at[tr.phase][name]; seen || tr.done == nil {
		return
	}
	if tr.count.Add(1) == int64(tr.n) {
		close(tr.done)
	}
}

func (tr *tracker) observe(h *metal3.BareMetalHost, deleted bool) {
	now := time.Now()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	st := h.Status.Provisioning.State
	if h.Status.ErrorType != "" && tr.errors[h.Name] == "" {
		tr.errors[h.Name] = fmt.Sprintf("%s: %s: %s", h.Name, h.Status.ErrorType, h.Status.ErrorMessage)
	}
	if tr.phase == "available" && st != "" && st != metal3.StateRegistering && st != metal3.StateUnmanaged {
		if _, seen := tr.at["registered"][h.Name]; !seen {
			tr.at["registered"][h.Name] = now
		}
	}
	var reached bool
	switch tr.phase {
	case "available", "deprovisioned":
		reached = st == metal3.StateAvailable && h.Status.ErrorType == ""
	case "provisioned":
		reached = st == metal3.StateProvisioned && h.Status.ErrorType == ""
	case "deleted":
		reached = deleted
	}
	if !reached || tr.done == nil || tr.excluded[h.Name] {
		return
	}
	if _, seen := tr.at[tr.phase][h.Name]; seen {
		return
	}
	tr.at[tr.phase][h.Name] = now
	if tr.count.Add(1) == int64(tr.n) {
		close(tr.done)
	}
}

func (tr *tracker) wait(ctx context.Context) error {
	tr.mu.Lock()
	phase, since, done := tr.phase, tr.since, tr.done
	tr.mu.Unlock()
	return waitAll(ctx, phase, since, func() int { return int(tr.count.Load()) }, tr.n, done)
}

// times are the hosts' times of reaching phase.
func (tr *tracker) times(phase string) []time.Time {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var at []time.Time
	for _, t := range tr.at[phase] {
		at = append(at, t)
	}
	return at
}

func (tr *tracker) errorCount() (int, []string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var list []string
	for _, e := range tr.errors {
		list = append(list, e)
	}
	slices.Sort(list)
	return len(list), list
}

// ironicRequests is the operator's count of requests to Ironic, by operation.
const ironicRequests = "metalforge_ironic_requests_total"
