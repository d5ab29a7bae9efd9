package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/scheme"
	"github.com/metalforge/metalforge/internal/test/builder"
	"github.com/metalforge/metalforge/internal/test/hostfleet"
	"github.com/metalforge/metalforge/internal/test/loopback"
	"github.com/metalforge/metalforge/internal/test/procstat"
	"github.com/metalforge/metalforge/internal/test/testenv"
)

const benchNS = "bench"

// operator is the API server, the operator process and a watch of the hosts.
type operator struct {
	kube    *testenv.Env
	c       client.Client
	proc    *exec.Cmd
	apiPIDs []int
	hosts   *hostWatch
	once    sync.Once
}

func (b *bench) startOperator(ctx context.Context) (*operator, error) {
	fmt.Println("starting kube-apiserver and etcd")
	kube, err := testenv.Start(testenv.Options{})
	if err != nil {
		return nil, err
	}
	op := &operator{kube: kube, apiPIDs: procstat.Children(os.Getpid(), "kube-apiserver", "etcd")}
	if err := kube.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNS}}); err != nil {
		op.close()
		return nil, err
	}
	unlimited := rest.CopyConfig(kube.Config)
	unlimited.QPS, unlimited.Burst = -1, 0
	if op.c, err = client.New(unlimited, client.Options{Scheme: scheme.New()}); err != nil {
		op.close()
		return nil, err
	}
	if op.hosts, err = watchHosts(ctx, kube.Config); err != nil {
		op.close()
		return nil, err
	}
	if err := op.start(ctx, b); err != nil {
		op.close()
		return nil, err
	}
	return op, nil
}

// start runs the operator process (again: rounds after the first restart it, as the script ran
// behind its back).
func (op *operator) start(ctx context.Context, b *bench) error {
	probe := loopback.FreeAddr()
	args := []string{"--provisioner=ironic", "--webhook-port=0", "--namespace=" + benchNS, "--metrics-bind-address=0",
		"--health-probe-bind-address=" + probe, "--concurrency=50",
		"--ironic-short-poll=" + b.o.shortPoll.String(), "--ironic-long-poll=" + b.o.longPoll.String(), "-v=0"}
	logPath := filepath.Join(os.TempDir(), "bench-servicing-operator.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	op.proc = exec.Command(b.o.operator, args...)
	op.proc.Env = append(os.Environ(), "KUBECONFIG="+op.kube.KubeconfigPath, "METAL3_AUTH_ROOT_DIR="+filepath.Join(os.TempDir(), "bench-servicing-no-auth"))
	op.proc.Env = append(op.proc.Env, b.ironic.OperatorEnv()...)
	op.proc.Stdout, op.proc.Stderr = logFile, logFile
	op.proc.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := op.proc.Start(); err != nil {
		return err
	}
	if err := loopback.WaitOK(ctx, "http://"+probe+"/readyz"); err != nil {
		return fmt.Errorf("operator not ready (log %s): %w", logPath, err)
	}
	fmt.Printf("operator ready (pid %d, %s), log %s\n", op.proc.Process.Pid, strings.Join(args, " "), logPath)
	return nil
}

// stop stops the operator process (idempotent); close also stops the API server.
func (op *operator) stop() {
	if op.proc != nil && op.proc.Process != nil {
		_ = op.proc.Process.Signal(syscall.SIGTERM)
		_ = op.proc.Wait()
	}
	op.proc = nil
}

func (op *operator) close() {
	op.stop()
	op.once.Do(func() { _ = op.kube.Stop() })
}

func hostName(i int) string { return fmt.Sprintf("host-%04d", i) }

// setup provisions every host (no inspection, no cleaning: only servicing is measured), gives each
// a HostUpdatePolicy and a valid pending HostFirmwareSettings change, and returns the Ironic node
// of each host.
func (b *bench) setup(ctx context.Context, op *operator) ([]string, error) {
	hosts := b.sim.Hosts()
	fmt.Printf("setup: provisioning %d hosts through the operator\n", len(hosts))
	start := time.Now()
	raw := "raw"
	image := metal3.Image{URL: b.imageURL, Checksum: b.imageSHA, ChecksumType: metal3.SHA256, DiskFormat: &raw}
	err := hostfleet.Parallel(len(hosts), func(i int) error {
		h := hosts[i]
		secret := builder.BMCSecret(benchNS, hostName(i)+"-bmc", h.Username, h.Password)
		host := builder.BareMetalHost(benchNS, hostName(i)).WithBMC(h.Addresses["redfish-virtualmedia+http"], secret.Name).
			WithBootMACAddress(h.BootMAC).WithOnline(true).WithImageSpec(image).
			WithInspectionMode(metal3.InspectionModeDisabled).WithAutomatedCleaningMode(metal3.CleaningModeDisabled).Build()
		for _, obj := range []client.Object{secret, host} {
			if err := op.c.Create(ctx, obj); err != nil {
				return fmt.Errorf("creating %s: %w", obj.GetName(), err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := op.hosts.waitAll(ctx, "provisioned and on", len(hosts), func(h *metal3.BareMetalHost) bool {
		return h.Status.Provisioning.State == metal3.StateProvisioned && h.Status.PoweredOn && h.Status.OperationalStatus == metal3.OperationalStatusOK
	}); err != nil {
		return nil, err
	}
	fmt.Printf("setup: provisioned in %s\n", time.Since(start).Round(time.Second))
	err = hostfleet.Parallel(len(hosts), func(i int) error {
		return hostfleet.AllowLiveSettings(ctx, op.c, benchNS, hostName(i))
	})
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(hosts))
	for i := range hosts {
		ids[i] = op.hosts.get(hostName(i)).Status.Provisioning.ID
	}
	return ids, nil
}

// runOperator asks every host for ProcTurboMode: Disabled in its HostFirmwareSettings, waits until
// every change is judged valid (not measured), then adds the reboot annotation to every host at once
// and waits until each went through servicing back to OK.
func (b *bench) runOperator(ctx context.Context, op *operator) (*result, error) {
	hosts := b.sim.Hosts()
	err := hostfleet.Parallel(len(hosts), func(i int) error {
		return retry(ctx, func() error {
			return hostfleet.SetFirmwareSetting(ctx, op.c, benchNS, hostName(i), "ProcTurboMode", "Disabled")
		})
	})
	if err != nil {
		return nil, err
	}
	for i := range hosts {
		key := types.NamespacedName{Namespace: benchNS, Name: hostName(i)}
		if err := retry(ctx, func() error {
			hfs := &metal3.HostFirmwareSettings{}
			if err := op.c.Get(ctx, key, hfs); err != nil {
				return err
			}
			if hostfleet.ChangeJudged(hfs) {
				return nil
			}
			return fmt.Errorf("%s: the change is not judged valid yet", key.Name)
		}); err != nil {
			return nil, err
		}
	}
	ironic0, api0 := ironicCPU(b.ironic), procstat.CPUSeconds(op.apiPIDs...)
	op0 := procstat.CPUSeconds(op.proc.Process.Pid)
	fmt.Printf("operator: reboot annotation on %d hosts\n", len(hosts))
	start := time.Now()
	op.hosts.reset()
	err = hostfleet.Parallel(len(hosts), func(i int) error { return hostfleet.Reboot(ctx, op.c, benchNS, hostName(i)) })
	if err != nil {
		return nil, err
	}
	if err := op.hosts.waitAll(ctx, "serviced and OK", len(hosts), func(h *metal3.BareMetalHost) bool {
		_, rebooting := h.Annotations[metal3.RebootAnnotationPrefix]
		return op.hosts.servicedSince(h.Name) && !rebooting && h.Status.OperationalStatus == metal3.OperationalStatusOK &&
			h.Status.PoweredOn && h.Status.Provisioning.State == metal3.StateProvisioned
	}); err != nil {
		return nil, err
	}
	r := &result{name: "operator", hostTimes: op.hosts.doneTimes(start), errors: op.hosts.errorList(),
		ironicCPU: ironicCPU(b.ironic) - ironic0, apiCPU: procstat.CPUSeconds(op.apiPIDs...) - api0,
		driverCPU: procstat.CPUSeconds(op.proc.Process.Pid) - op0, load: procstat.LoadAverage()}
	for i, srv := range hosts {
		d, err := b.sim.Control.Server(srv.Name)
		if err != nil {
			return nil, err
		}
		if v := d.State.BIOS["ProcTurboMode"]; v != "Disabled" {
			r.errors = append(r.errors, fmt.Sprintf("%s: bmcsim ProcTurboMode %v after servicing", hostName(i), v))
		}
	}
	return r, nil
}

// hostWatch follows the hosts through an informer: whether each went servicing, when each met the
// condition waited for, and the errors shown.
type hostWatch struct {
	inf  cache.Informer
	mu   sync.Mutex
	last map[string]*metal3.BareMetalHost
	svc  map[string]bool
	done map[string]time.Time
	errs map[string]string
	cond func(*metal3.BareMetalHost) bool
	wake chan struct{}
}

func watchHosts(ctx context.Context, cfg *rest.Config) (*hostWatch, error) {
	c, err := cache.New(cfg, cache.Options{Scheme: scheme.New(), DefaultNamespaces: map[string]cache.Config{benchNS: {}},
		DefaultTransform: cache.TransformStripManagedFields()})
	if err != nil {
		return nil, err
	}
	inf, err := c.GetInformer(ctx, &metal3.BareMetalHost{})
	if err != nil {
		return nil, err
	}
	w := &hostWatch{inf: inf, last: map[string]*metal3.BareMetalHost{}, svc: map[string]bool{}, done: map[string]time.Time{},
		errs: map[string]string{}, wake: make(chan struct{}, 1)}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: w.observe, UpdateFunc: func(_, obj any) { w.observe(obj) },
	}); err != nil {
		return nil, err
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("the benchmark's watch did not sync")
	}
	return w, nil
}

func (w *hostWatch) observe(obj any) {
	h, ok := obj.(*metal3.BareMetalHost)
	if !ok {
		return
	}
	now := time.Now()
	w.mu.Lock()
	w.last[h.Name] = h
	if h.Status.OperationalStatus == metal3.OperationalStatusServicing {
		w.svc[h.Name] = true
	}
	if h.Status.ErrorType != "" && w.errs[h.Name] == "" {
		w.errs[h.Name] = fmt.Sprintf("%s: %s: %s", h.Name, h.Status.ErrorType, h.Status.ErrorMessage)
	}
	cond := w.cond
	w.mu.Unlock()
	if cond != nil && cond(h) {
		w.mu.Lock()
		if _, seen := w.done[h.Name]; !seen {
			w.done[h.Name] = now
		}
		w.mu.Unlock()
	}
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// reset starts a new measurement: nothing serviced, nothing done, no errors.
func (w *hostWatch) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.svc, w.done, w.errs = map[string]bool{}, map[string]time.Time{}, map[string]string{}
}

func (w *hostWatch) servicedSince(name string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.svc[name]
}

func (w *hostWatch) get(name string) *metal3.BareMetalHost {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last[name]
}

// waitAll waits until n hosts met cond (checked on every event, and on the hosts as they are now),
// printing progress every 10 s.
func (w *hostWatch) waitAll(ctx context.Context, what string, n int, cond func(*metal3.BareMetalHost) bool) error {
	w.mu.Lock()
	w.cond, w.done = cond, map[string]time.Time{}
	now := make([]*metal3.BareMetalHost, 0, len(w.last))
	for _, h := range w.last {
		now = append(now, h)
	}
	w.mu.Unlock()
	for _, h := range now { // cond may read the watch: not under its lock
		if cond(h) {
			w.mu.Lock()
			if _, seen := w.done[h.Name]; !seen {
				w.done[h.Name] = time.Now()
			}
			w.mu.Unlock()
		}
	}
	start := time.Now()
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for {
		w.mu.Lock()
		got := len(w.done)
		w.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-w.wake:
		case <-tick.C:
			fmt.Printf("  %6.0f s: %d/%d %s\n", time.Since(start).Seconds(), got, n, what)
		case <-ctx.Done():
			return fmt.Errorf("%d of %d hosts %s after %s", got, n, what, time.Since(start).Round(time.Second))
		}
	}
}

func (w *hostWatch) doneTimes(start time.Time) []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []time.Duration
	for _, t := range w.done {
		out = append(out, t.Sub(start))
	}
	return out
}

func (w *hostWatch) errorList() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, e := range w.errs {
		out = append(out, e)
	}
	return out
}

// retry calls fn until it succeeds, every 200 ms.
func retry(ctx context.Context, fn func() error) error {
	for {
		err := fn()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %w)", ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
