// Command chaos is the fault campaign (`make chaos N=100`): N bmcsim servers go through register →
// inspect → provision → a live update (a BIOS setting and a reboot: servicing) → deprovision →
// provision again → delete through bin/baremetal-operator on real Ironic, while a seeded schedule
// of faults fires at random moments: the operator SIGKILLed and restarted every 20–60 s; Ironic
// SIGKILLed and restarted, once with its database wiped while the hosts are provisioned, once
// while hosts deploy or clean and once while they are serviced; the kube-apiserver restarted once
// (etcd kept); bmcsim answering 10 % of Redfish requests with 500 or not at all; one BMC changing
// its password, its Secret updated a minute later; one server's agent crashing in the middle of its
// deploy.
//
// It prints the seed and the schedule first (the same seed gives the same schedule; the Redfish
// faults are drawn per request, so which requests fail differs between runs), each fault as it
// fires, and at the end, per run: the hosts that reached each step's state, the hosts stuck (no
// progress for 10 minutes, with state and message), the hosts whose server was written more
// often than they were asked to be deployed, the servers whose BIOS settings were applied more
// often than the live update asked or outside it, the nodes left in Ironic, the HardwareData and
// Secrets left behind, every BMC password, Ironic credential or Secret value found in the
// operator's log, the Events or any object's status, and the operator's restarts with its
// recovery time after each. It exits 1 when a check found something.
//
// Like the benchmarks it is a program, not a test: `go test ./...` does not run it.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	mathrand "math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/noauth"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/test/hostfleet"
	"github.com/metalforge/metalforge/internal/test/ironicenv"
	"github.com/metalforge/metalforge/internal/test/operatorproc"
	"github.com/metalforge/metalforge/internal/test/testenv"
)

type options struct {
	n               int
	seed            uint64
	faults          bool
	killMin         time.Duration
	killMax         time.Duration
	passwordDelay   time.Duration
	redfishErrors   float64
	redfishTimeouts float64
	stuckAfter      time.Duration
	stepTimeout     time.Duration
	heartbeat       time.Duration
	concurrency     int
	operator        string
	logDir          string
	pbkdf2Memo      bool
}

// namespace holds the campaign's hosts.
const namespace = "chaos"

// ironicConf is added to ironicenv.RackConf. A crashed agent fails its deploy after 3 minutes
// without a heartbeat (Ironic's default is 30, checked every minute), checked every 10 s. bmcsim
// answers Redfish in milliseconds except the requests the campaign leaves unanswered; Ironic's 60 s
// read timeout would make each of those hold a conductor worker a minute, so it waits 10 s.
const ironicConf = `
[conductor]
check_provision_state_interval = 10
deploy_callback_timeout = 180

[redfish]
read_timeout = 10
`

func main() {
	var o options
	flag.IntVar(&o.n, "n", 100, "Hosts.")
	flag.Uint64Var(&o.seed, "seed", 0, "Seed of the fault schedule (0: a random one, printed).")
	flag.BoolVar(&o.faults, "faults", true, "Inject the faults (false: the same lifecycle without any, for comparison).")
	flag.DurationVar(&o.killMin, "kill-min", 20*time.Second, "Shortest time from an operator restart to the next SIGKILL.")
	flag.DurationVar(&o.killMax, "kill-max", 60*time.Second, "Longest time from an operator restart to the next SIGKILL.")
	flag.DurationVar(&o.passwordDelay, "password-delay", time.Minute, "Time from the BMC password change to the Secret update.")
	flag.Float64Var(&o.redfishErrors, "redfish-errors", 0.05, "Share of Redfish requests bmcsim answers 500.")
	flag.Float64Var(&o.redfishTimeouts, "redfish-timeouts", 0.05, "Share of Redfish requests bmcsim never answers.")
	flag.DurationVar(&o.stuckAfter, "stuck-after", 10*time.Minute, "A host whose provisioning state has not changed this long is stuck.")
	flag.DurationVar(&o.stepTimeout, "step-timeout", 90*time.Minute, "Give up on a step after this long (hosts still changing are reported).")
	flag.DurationVar(&o.heartbeat, "heartbeat", 10*time.Second, "Heartbeat interval of the simulated agents.")
	flag.IntVar(&o.concurrency, "concurrency", 50, "Operator --concurrency.")
	flag.StringVar(&o.operator, "operator", "", "Operator binary (default: build ./cmd/baremetal-operator into bin/).")
	flag.StringVar(&o.logDir, "log-dir", "", "Keep the operator's and Ironic's logs here (default: a temporary directory, printed).")
	flag.BoolVar(&o.pbkdf2Memo, "pbkdf2-memo", true, "Start Ironic with IRONIC_PBKDF2_MEMO=1 (docs/ironic-notes.md): without it 100 hosts take hours on 2 cores.")
	flag.Parse()
	if o.seed == 0 {
		o.seed = mathrand.Uint64N(1<<31) + 1
	}
	ok, err := run(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(2)
	}
	if !ok {
		os.Exit(1)
	}
}

func hostName(i int) string { return fmt.Sprintf("chaos-%03d", i) }

// hostIndex is hostName's inverse: host i runs on bmcsim's i-th server.
func hostIndex(name string) int {
	var i int
	_, _ = fmt.Sscanf(name, "chaos-%d", &i)
	return i
}

func run(o options) (bool, error) {
	if why := ironicenv.Unavailable(); why != "" {
		return false, errors.New("Ironic cannot run here: " + why)
	}
	if o.n < 2 || o.killMin <= 0 || o.killMax < o.killMin {
		return false, fmt.Errorf("-n %d -kill-min %s -kill-max %s: want at least 2 hosts and 0 < kill-min <= kill-max", o.n, o.killMin, o.killMax)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if o.logDir == "" {
		dir, err := os.MkdirTemp("", "metalforge-chaos-")
		if err != nil {
			return false, err
		}
		o.logDir = dir
	}
	if err := os.MkdirAll(o.logDir, 0o755); err != nil {
		return false, err
	}
	cp := &campaign{o: o, sched: newSchedule(o), passwords: map[string]string{}}
	fmt.Printf("chaos: seed %d, %d hosts, logs in %s\n", o.seed, o.n, o.logDir)
	if o.faults {
		fmt.Print(cp.sched.describe(hostName))
	} else {
		fmt.Println("no faults (-faults=false)")
	}
	defer cp.stop()
	if err := cp.setUp(ctx); err != nil {
		return false, err
	}
	cp.runCampaign(ctx)
	if ctx.Err() != nil {
		return false, fmt.Errorf("interrupted: %w", ctx.Err())
	}
	return cp.report(), nil
}

// setUp starts Ironic, the API server, bmcsim with its agents, the image server and the operator,
// in that order, and the watch of the hosts.
func (cp *campaign) setUp(ctx context.Context) error {
	o := cp.o
	if o.operator == "" {
		fmt.Println("building bin/baremetal-operator")
		var err error
		if o.operator, err = operatorproc.Build(); err != nil {
			return err
		}
	}
	var env []string
	if o.pbkdf2Memo && os.Getenv("IRONIC_PBKDF2_MEMO") == "" {
		env = append(env, "IRONIC_PBKDF2_MEMO=1")
	}
	fmt.Println("starting Ironic")
	var err error
	cp.ironic, err = ironicenv.Start(ironicenv.Options{Instance: fmt.Sprintf("chaos-%d", os.Getpid()),
		ExtraConf: ironicenv.RackConf + ironicConf, WipeDB: true, OwnerPID: os.Getpid(), Env: env})
	if err != nil {
		return err
	}
	fmt.Printf("Ironic %s at %s, log %s (IRONIC_PBKDF2_MEMO=%s, IRONIC_USE_MARIADB=%s)\n", cp.ironic.Vars["IRONIC_VERSION"],
		cp.ironic.Endpoint(), cp.ironic.Vars["IRONIC_LOG"], envOr(env, "IRONIC_PBKDF2_MEMO", "0"), envOr(nil, "IRONIC_USE_MARIADB", "false"))
	cp.nodes, err = noauth.NewBareMetalNoAuth(noauth.EndpointOpts{IronicEndpoint: cp.ironic.Endpoint()})
	if err != nil {
		return err
	}
	cp.nodes.Microversion = "1.89"

	fmt.Println("starting kube-apiserver and etcd")
	if cp.kube, err = testenv.Start(testenv.Options{}); err != nil {
		return err
	}
	if cp.c, err = client.New(hostfleet.Unlimited(cp.kube.Config), client.Options{Scheme: cp.kube.Scheme}); err != nil {
		return err
	}
	if err := cp.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		return err
	}

	agent := ironicenv.FastAgent(cp.ironic.URL())
	agent.HeartbeatInterval = o.heartbeat
	simCfg := ironicenv.FastConfig(o.n)
	simCfg.NamePrefix = "srv-"
	simLog, err := os.Create(filepath.Join(o.logDir, "bmcsim.log"))
	if err != nil {
		return err
	}
	cp.closers = append(cp.closers, simLog.Close)
	cp.sim, err = ironicenv.StartSim(ironicenv.SimOptions{Config: simCfg, Agent: agent,
		Logger: slog.New(slog.NewTextHandler(simLog, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		return err
	}
	cp.images = ironicenv.NewImageServer()
	for path, img := range map[string]*metal3.Image{"/chaos-a.img": &cp.imageA, "/chaos-b.img": &cp.imageB} {
		disk := make([]byte, 1<<20)
		_, _ = rand.Read(disk)
		cp.images.Add(path, disk)
		*img = metal3.Image{URL: cp.images.URL + path, Checksum: cp.images.SHA256(path), ChecksumType: metal3.SHA256}
	}
	for _, h := range cp.sim.Hosts() {
		cp.passwords[h.Password] = "the BMC password of " + h.Name
	}

	// The operator gets Ironic credentials (noauth Ironic ignores them) so that the campaign can
	// look for them where they must not be.
	auth := filepath.Join(o.logDir, "auth")
	cp.ironicUser, cp.ironicPassword = "chaos-ironic-user-"+randomHex(4), "chaos-ironic-password-"+randomHex(12)
	for name, value := range map[string]string{"username": cp.ironicUser, "password": cp.ironicPassword} {
		if err := os.MkdirAll(filepath.Join(auth, "ironic"), 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(auth, "ironic", name), []byte(value), 0o600); err != nil {
			return err
		}
	}
	cp.passwords[cp.ironicPassword] = "the Ironic password"

	cp.tr = newTracker()
	if err := hostfleet.Watch(ctx, cp.kube.Config, namespace, cp.tr.observe); err != nil {
		return err
	}
	args := []string{"--provisioner=ironic", "--webhook-port=0", "--namespace=" + namespace,
		"--concurrency=" + strconv.Itoa(o.concurrency),
		// metal3's Ironic poll intervals and the benchmark's error backoff (10 s, doubling).
		"--ironic-short-poll=3s", "--ironic-long-poll=10s", "--error-backoff-base=10s", "--provisioner-unavailable-delay=5s",
		// Verbose, so that the credential search reads what the operator logs at its most talkative.
		"-v=2"}
	cp.op, err = operatorproc.Start(ctx, operatorproc.Options{Binary: o.operator, Args: args,
		LogPath: filepath.Join(o.logDir, "operator.log"),
		Env:     append([]string{"KUBECONFIG=" + cp.kube.KubeconfigPath, "METAL3_AUTH_ROOT_DIR=" + auth}, cp.ironic.OperatorEnv()...)})
	if err != nil {
		return err
	}
	fmt.Printf("operator ready (pid %d), log %s\n", cp.op.Pid(), cp.op.LogPath())
	return nil
}

// stop stops everything setUp started, keeping the logs.
func (cp *campaign) stop() {
	if cp.op != nil {
		cp.op.Stop()
	}
	if cp.sim != nil {
		_ = cp.sim.Close()
	}
	if cp.images != nil {
		cp.images.Close()
	}
	for _, c := range cp.closers {
		_ = c()
	}
	if cp.ironic != nil {
		if err := copyFile(cp.ironic.Vars["IRONIC_LOG"], filepath.Join(cp.o.logDir, "ironic.log")); err != nil {
			fmt.Fprintln(os.Stderr, "keeping Ironic's log:", err)
		}
		if err := cp.ironic.Purge(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping Ironic:", err)
		}
	}
	if cp.kube != nil {
		_ = cp.kube.Stop()
	}
}

func envOr(env []string, key, def string) string {
	for _, kv := range env {
		if len(kv) > len(key) && kv[:len(key)+1] == key+"=" {
			return kv[len(key)+1:]
		}
	}
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}
