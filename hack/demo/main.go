// Command demo runs the whole system on this machine (`make demo`): a Kubernetes API server
// (bin/kube-apiserver + bin/etcd), Ironic (hack/ironic-up.sh, instance "demo"), bin/bmcsim with 8
// simulated servers, and bin/baremetal-operator with --provisioner=ironic. It creates a Secret and a
// BareMetalHost for every server of bmcsim's inventory, with an image served from this process,
// shows the hosts' states until all are provisioned, then says how to use kubectl against the API
// server and keeps everything running until Ctrl-C, which stops all of it.
//
// With -once (make demo DEMO_ONCE=1) it exits 0 as soon as every host is provisioned, and 1 as soon
// as one shows an error (printed).
//
// With -images (make demo DEMO_IMAGES=1) every host boots its own agent image: the operator runs
// with --build-preprov-image, bin/image-customization-controller builds each host's ISO from a
// CoreOS-layout base with the host's own static address (nmstate network data), and the table
// shows the address each host's agent came up with (from its HardwareData).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/bmcsim"
	"github.com/metalforge/metalforge/internal/test/builder"
	"github.com/metalforge/metalforge/internal/test/ironicenv"
	"github.com/metalforge/metalforge/internal/test/loopback"
	"github.com/metalforge/metalforge/internal/test/subprocess"
	"github.com/metalforge/metalforge/internal/test/testenv"
)

const namespace = "demo"

// ironicConf: the simulated servers are fast, so Ironic checks for timeouts every 5 s and polls
// the power state 1 s after the agent powered a server off (5 s by default).
const ironicConf = `
[conductor]
check_provision_state_interval = 5

[agent]
post_deploy_get_power_state_retry_interval = 1
post_deploy_get_power_state_retries = 60
`

// operatorArgs: waits sized for simulated servers (the defaults are metal3's, for real ones).
var operatorArgs = []string{
	"--provisioner=ironic", "--webhook-port=0", "--namespace=" + namespace,
	"--error-backoff-base=5s", "--power-poll-interval=10s", "--provisioner-unavailable-delay=5s",
	"--ironic-short-poll=1s", "--ironic-long-poll=2s",
}

type options struct {
	hosts   int
	once    bool
	images  bool
	timeout time.Duration
	bin     string
}

func main() {
	var o options
	flag.IntVar(&o.hosts, "hosts", 8, "Simulated servers (and hosts).")
	flag.BoolVar(&o.once, "once", os.Getenv("DEMO_ONCE") != "", "Exit as soon as every host is provisioned (0) or one has an error (1).")
	flag.BoolVar(&o.images, "images", os.Getenv("DEMO_IMAGES") != "", "Per-host agent images: run the image-customization-controller and give every host its own static address.")
	flag.DurationVar(&o.timeout, "timeout", 15*time.Minute, "With -once: give up after this long.")
	flag.StringVar(&o.bin, "bin", filepath.Join(ironicenv.RepoRoot(), "bin"), "Where baremetal-operator, bmcsim, kube-apiserver and etcd are.")
	flag.Parse()
	d := &demo{o: o, start: time.Now()}
	err := d.run()
	d.stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

type demo struct {
	o      options
	start  time.Time
	dir    string
	kube   *testenv.Env
	ironic *ironicenv.Instance
	bmcsim *subprocess.Process
	op     *subprocess.Process
	icc    *subprocess.Process
	images *ironicenv.ImageServer
	// control is bmcsim's control endpoint.
	control string
}

func (d *demo) run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	if d.dir, err = os.MkdirTemp("", "metalforge-demo-"); err != nil {
		return err
	}
	if why := ironicenv.Unavailable(); why != "" {
		return errors.New("Ironic cannot run here: " + why)
	}
	d.step("starting the Kubernetes API server (bin/kube-apiserver, bin/etcd)")
	_ = os.Setenv("KUBEBUILDER_ASSETS", d.o.bin)
	if d.kube, err = testenv.Start(testenv.Options{}); err != nil {
		return err
	}
	if err := d.kube.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		return err
	}

	d.step("starting Ironic (hack/ironic-up.sh, instance demo)")
	if d.ironic, err = ironicenv.Start(ironicenv.Options{
		Instance: "demo", ExtraConf: ironicConf, WipeDB: true, OwnerPID: os.Getpid(),
	}); err != nil {
		return err
	}
	d.step(fmt.Sprintf("Ironic %s at %s", d.ironic.Vars["IRONIC_VERSION"], d.ironic.Endpoint()))

	d.step(fmt.Sprintf("starting bmcsim with %d servers", d.o.hosts))
	inventory := filepath.Join(d.dir, "inventory.json")
	d.control = loopback.FreeAddr()
	if d.bmcsim, err = d.startProcess("bmcsim", filepath.Join(d.o.bin, "bmcsim"), nil,
		"--hosts", fmt.Sprint(d.o.hosts), "--listen", "127.0.0.1:0", "--inventory", inventory,
		"--control", d.control, "--boot-time", "500ms", "--ironic-url", d.ironic.URL(), "--quiet"); err != nil {
		return err
	}
	servers, err := waitInventory(ctx, inventory, d.bmcsim)
	if err != nil {
		return err
	}

	if d.o.images {
		if err := d.startICC(ctx); err != nil {
			return err
		}
	}
	d.step("starting bin/baremetal-operator --provisioner=ironic")
	metrics, probe := loopback.FreeAddr(), loopback.FreeAddr()
	env := append([]string{"KUBECONFIG=" + d.kube.KubeconfigPath, "METAL3_AUTH_ROOT_DIR=" + filepath.Join(d.dir, "no-ironic-auth")},
		d.ironic.OperatorEnv()...)
	args := append([]string{"--metrics-bind-address=" + metrics, "--health-probe-bind-address=" + probe}, operatorArgs...)
	if d.o.images {
		args = append(args, "--build-preprov-image", "--external-preprov-image-builder")
	}
	if d.op, err = d.startProcess("operator", filepath.Join(d.o.bin, "baremetal-operator"), env, args...); err != nil {
		return err
	}
	if err := d.op.WaitHTTP(ctx, "http://"+probe+"/readyz"); err != nil {
		return err
	}

	d.images = ironicenv.NewImageServer()
	raw := "raw"
	image := metal3.Image{URL: d.images.URL + "/disk.img", Checksum: d.images.SHA256("/disk.img"), ChecksumType: metal3.SHA256, DiskFormat: &raw}
	d.step(fmt.Sprintf("creating %d BareMetalHosts (and their BMC Secrets) from bmcsim's inventory, image %s", len(servers), image.URL))
	for i, s := range servers {
		secret := builder.BMCSecret(namespace, s.Name+"-bmc", s.Username, s.Password)
		// No automated cleaning: one ramdisk boot less per host keeps the demo short (the
		// end-to-end tests run it).
		host := builder.BareMetalHost(namespace, s.Name).WithBMC(s.BMCAddress, secret.Name).
			WithBootMACAddress(s.BootMACAddress).WithOnline(true).WithImageSpec(image).
			WithAutomatedCleaningMode(metal3.CleaningModeDisabled).Build()
		objs := []client.Object{secret}
		if d.o.images {
			nd := networkData(s.Name, s.BootMACAddress, i)
			host.Spec.PreprovisioningNetworkDataName = nd.Name
			objs = append(objs, nd)
		}
		for _, obj := range append(objs, host) {
			if err := d.kube.Client.Create(ctx, obj); err != nil {
				return fmt.Errorf("creating %s: %w", obj.GetName(), err)
			}
		}
	}

	if err := d.watch(ctx, len(servers)); err != nil {
		return err
	}
	if d.o.once {
		return nil
	}
	d.usage()
	<-ctx.Done()
	fmt.Println("\nstopping the operator, bmcsim, Ironic and the API server")
	return nil
}

// watch shows the hosts until every one is provisioned. With -once an error ends it.
func (d *demo) watch(ctx context.Context, n int) error {
	tty := isTerminal(os.Stdout)
	var deadline <-chan time.Time
	if d.o.once {
		deadline = time.After(d.o.timeout)
	}
	watchStart := time.Now()
	drawn, last := 0, ""
	for {
		var list metal3.BareMetalHostList
		if err := d.kube.Client.List(ctx, &list, client.InNamespace(namespace)); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		slices.SortFunc(list.Items, func(a, b metal3.BareMetalHost) int { return strings.Compare(a.Name, b.Name) })
		lines, provisioned, failed := table(list.Items, d.agentAddresses(ctx))
		header := fmt.Sprintf("%d/%d hosts provisioned, %s since they were created", provisioned, n, time.Since(watchStart).Round(time.Second))
		body := strings.Join(lines, "\n")
		switch {
		case tty:
			if drawn > 0 {
				fmt.Printf("\033[%dA", drawn)
			}
			for _, l := range append([]string{header}, lines...) {
				fmt.Printf("\033[K%s\n", l)
			}
			drawn = len(lines) + 1
		case body != last:
			fmt.Printf("--- %s\n%s\n", header, body)
		}
		last = body
		if provisioned == n {
			fmt.Printf("\nall %d hosts provisioned %s after they were created (%s after the demo started)\n",
				n, time.Since(watchStart).Round(time.Second), time.Since(d.start).Round(time.Second))
			return nil
		}
		if d.o.once && failed != "" {
			return fmt.Errorf("a host has an error: %s", failed)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return fmt.Errorf("only %d of %d hosts provisioned after %s", provisioned, n, d.o.timeout)
		case <-d.op.Done:
			return fmt.Errorf("the operator exited, see %s:\n%s", d.op.Log, d.op.Tail(20))
		case <-time.After(time.Second):
		}
	}
}

// table renders the hosts; it returns the rows, how many are provisioned, and the first error.
// With addresses (per-host images) it shows the address each host's agent came up with.
func table(hosts []metal3.BareMetalHost, addresses map[string]string) ([]string, int, string) {
	col := func(string) string { return "" }
	if addresses != nil {
		col = func(v string) string { return fmt.Sprintf("%-16s ", v) }
	}
	rows := []string{fmt.Sprintf("%-10s %-14s %-12s %-8s %s%s", "NAME", "STATE", "STATUS", "POWER", col("AGENT ADDRESS"), "ERROR")}
	provisioned, failed := 0, ""
	for _, h := range hosts {
		st := h.Status
		state := string(st.Provisioning.State)
		if state == "" {
			state = "-"
		}
		power := "off"
		if st.PoweredOn {
			power = "on"
		}
		errText := ""
		if st.ErrorType != "" {
			errText = fmt.Sprintf("%s: %s", st.ErrorType, st.ErrorMessage)
			if failed == "" {
				failed = h.Name + ": " + errText
			}
		}
		if len(errText) > 70 {
			errText = errText[:67] + "..."
		}
		addr := addresses[h.Name]
		if addr == "" {
			addr = "-"
		}
		rows = append(rows, fmt.Sprintf("%-10s %-14s %-12s %-8s %s%s", h.Name, state, st.OperationalStatus, power, col(addr), errText))
		if st.Provisioning.State == metal3.StateProvisioned && st.ErrorType == "" {
			provisioned++
		}
	}
	return rows, provisioned, failed
}

func (d *demo) usage() {
	k := d.kube.KubeconfigPath
	fmt.Printf(`
Everything keeps running until Ctrl-C. Use any kubectl (make tools builds bin/kubectl) against the API server:

    export KUBECONFIG=%s
    kubectl get bmh -n %[2]s                            # hosts, states, power
    kubectl describe bmh host-0 -n %[2]s                # status, conditions, events
    kubectl get hardwaredata host-0 -n %[2]s -o yaml    # what inspection found
    kubectl get events -n %[2]s --sort-by=.lastTimestamp
    kubectl annotate bmh host-0 -n %[2]s reboot.metal3.io=          # reboot it
    kubectl patch bmh host-1 -n %[2]s --type merge -p '{"spec":{"image":null}}'   # deprovision
    kubectl delete bmh host-2 -n %[2]s                 # deprovision, power off, remove from Ironic

A live update of a BIOS setting on a provisioned host (docs/user-guide.md#a-live-update-step-by-step-a-kubernetes-worker):

    kubectl get hfs host-3 -n %[2]s -o yaml             # its BIOS settings, FirmwareSchema, conditions
    kubectl get hostfirmwarecomponents host-3 -n %[2]s -o yaml   # its firmware components, versions
    echo '{"apiVersion":"metal3.io/v1alpha1","kind":"HostUpdatePolicy","metadata":{"name":"host-3"},"spec":{"firmwareSettings":"onReboot"}}' | kubectl apply -n %[2]s -f -
    kubectl patch hfs host-3 -n %[2]s --type merge -p '{"spec":{"settings":{"ProcTurboMode":"Disabled"}}}'
    kubectl annotate bmh host-3 -n %[2]s reboot.metal3.io=          # serviced on this reboot
    kubectl get bmh host-3 -n %[2]s -o wide -w          # STATUS servicing, then OK; STATE provisioned
    kubectl get hfs host-3 -n %[2]s -o jsonpath='{.status.settings.ProcTurboMode}'   # Disabled

Logs: operator %s, bmcsim %s, Ironic %s
bmcsim's control API (servers' state, fault injection, docs/bmcsim.md): %s
`, k, namespace, d.op.Log, d.bmcsim.Log, d.ironic.Vars["IRONIC_LOG"], "http://"+d.control)
	if d.icc != nil {
		fmt.Printf(`
Per-host agent images (docs/image-customization.md):
    kubectl get ppimg -n %[1]s                          # each host's image: Ready, reason
    kubectl get ppimg host-0 -n %[1]s -o yaml           # its URL, network data version, checksum
    kubectl get secret host-0-network -n %[1]s -o jsonpath='{.data.nmstate}' | base64 -d
image-customization-controller log: %[2]s
`, namespace, d.icc.Log)
	}
}

// stop stops everything that was started, in reverse order.
func (d *demo) stop() {
	for _, p := range []*subprocess.Process{d.op, d.icc, d.bmcsim} {
		if p != nil {
			p.Stop()
		}
	}
	if d.images != nil {
		d.images.Close()
	}
	if d.ironic != nil {
		if err := d.ironic.Purge(); err != nil {
			fmt.Fprintln(os.Stderr, "demo: stopping Ironic:", err)
		}
	}
	if d.kube != nil {
		if err := d.kube.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "demo: stopping the API server:", err)
		}
	}
	if d.dir != "" && !d.o.once {
		fmt.Println("stopped; logs kept in", d.dir)
	}
}

func (d *demo) step(msg string) {
	fmt.Printf("[%5.1fs] %s\n", time.Since(d.start).Seconds(), msg)
}

func (d *demo) startProcess(name, binary string, env []string, args ...string) (*subprocess.Process, error) {
	// Its own process group, so the terminal's Ctrl-C reaches only the demo, which stops it in
	// order; and it dies with the demo if the demo is killed.
	return subprocess.Start(name, binary, d.dir, subprocess.Options{Env: env, OwnGroup: true}, args...)
}

func waitInventory(ctx context.Context, path string, p *subprocess.Process) ([]bmcsim.InventoryEntry, error) {
	for {
		if b, err := os.ReadFile(path); err == nil {
			var inv []bmcsim.InventoryEntry
			if err := json.Unmarshal(b, &inv); err != nil {
				return nil, fmt.Errorf("reading bmcsim's inventory: %w", err)
			}
			return inv, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-p.Done:
			return nil, fmt.Errorf("bmcsim exited, see %s:\n%s", p.Log, p.Tail(20))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
