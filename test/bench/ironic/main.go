// Command ironic benchmarks the baremetal-operator on real Ironic: N hosts of bmcsim (zero
// simulated latency) go through the whole lifecycle — register → inspect → available →
// provisioned → deprovisioned → deleted — twice on a fresh Ironic each time:
//
//   - baseline: a minimal Go program drives Ironic directly with gophercloud (enroll + port,
//     manage, inspect, provide, deploy, undeploy, power off, delete), one goroutine per host,
//     polling each node every --short-poll / --long-poll, with the same phases and barriers as the
//     operator run and the operator's HTTP connection settings. Its wall time is the time Ironic
//     itself needs.
//   - operator: the API server (bin/kube-apiserver + bin/etcd), bin/baremetal-operator with
//     --provisioner=ironic as a subprocess, and N Secrets + BareMetalHosts created at once; each
//     phase is started through the Kubernetes API (image set, image removed, host deleted).
//
// It prints wall time per phase side by side, Ironic API calls per host (the operator's own
// metalforge_ironic_requests_total; the baseline counts its requests), CPU seconds and peak RSS of
// the operator and of Ironic's processes, and how many hosts errored. It measures; it never fails
// on a figure. Run it with `make bench-ironic N=100`.
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/metalforge/metalforge/internal/test/ironicenv"
	"github.com/metalforge/metalforge/internal/test/procstat"
	"github.com/metalforge/metalforge/internal/test/testenv"
)

type options struct {
	n            int
	mode         string
	shortPoll    time.Duration
	longPoll     time.Duration
	heartbeat    time.Duration
	operator     string
	operatorArgs string
	concurrency  int
	timeout      time.Duration
	ironicConf   string
	simLog       string
	keepLogs     string
}

func main() {
	var o options
	flag.IntVar(&o.n, "n", 100, "Hosts.")
	flag.StringVar(&o.mode, "mode", "both", "What to run: both, baseline or operator.")
	flag.DurationVar(&o.shortPoll, "short-poll", 3*time.Second, "Poll interval of quick operations (manage, delete) for the baseline and the operator's --ironic-short-poll (metal3: 3s).")
	flag.DurationVar(&o.longPoll, "long-poll", 10*time.Second, "Poll interval of long operations (inspect, provide, deploy, undeploy) for the baseline and the operator's --ironic-long-poll (metal3: 10s).")
	flag.DurationVar(&o.heartbeat, "heartbeat", 10*time.Second, "Heartbeat interval of the simulated agents (they also heartbeat when a command ends).")
	flag.StringVar(&o.operator, "operator", "", "Operator binary (default: build ./cmd/baremetal-operator into bin/).")
	flag.StringVar(&o.operatorArgs, "operator-args", "", "Extra operator arguments, space separated.")
	flag.IntVar(&o.concurrency, "concurrency", 50, "Operator --concurrency (hosts reconciled at once).")
	flag.DurationVar(&o.timeout, "timeout", 60*time.Minute, "Give up after this long per run.")
	flag.StringVar(&o.ironicConf, "ironic-conf", "", "A file appended to ironic.conf after the benchmark's own settings.")
	flag.StringVar(&o.simLog, "sim-log", "", "Write bmcsim's and its agents' log to this file (discarded by default).")
	flag.StringVar(&o.keepLogs, "keep-logs", "", "Copy Ironic's log and the operator's log into this directory before they are removed.")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "bench-ironic:", err)
		os.Exit(1)
	}
}

// env is what both runs share: bmcsim, the image server, and the Ironic instance (restarted with
// an empty database before each run, so each run's Ironic CPU and memory are its own).
type env struct {
	o      options
	ironic *ironicenv.Instance
	sim    *ironicenv.Sim
	images *ironicenv.ImageServer
	image  imageSpec
}

type imageSpec struct{ url, sha256 string }

func run(o options) error {
	if why := ironicenv.Unavailable(); why != "" {
		return errors.New("Ironic cannot run here: " + why)
	}
	if o.mode != "both" && o.mode != "baseline" && o.mode != "operator" {
		return fmt.Errorf("-mode=%q: want both, baseline or operator", o.mode)
	}
	conf := ironicenv.RackConf
	if o.ironicConf != "" {
		b, err := os.ReadFile(o.ironicConf)
		if err != nil {
			return err
		}
		conf += "\n" + string(b)
	}
	if o.mode != "baseline" && o.operator == "" {
		fmt.Println("building bin/baremetal-operator")
		var err error
		if o.operator, err = testenv.BuildOperator(os.Stdout); err != nil {
			return err
		}
	}

	fmt.Println("starting Ironic")
	ironic, err := ironicenv.Start(ironicenv.Options{
		Instance: fmt.Sprintf("bench-%d", os.Getpid()), ExtraConf: conf, WipeDB: true, OwnerPID: os.Getpid(),
	})
	if err != nil {
		return err
	}
	defer func() {
		if o.keepLogs != "" {
			if err := copyFile(ironic.Vars["IRONIC_LOG"], filepath.Join(o.keepLogs, "ironic.log")); err != nil {
				fmt.Fprintln(os.Stderr, "keeping Ironic's log:", err)
			}
		}
		if err := ironic.Purge(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping Ironic:", err)
		}
	}()
	fmt.Printf("Ironic %s at %s (started in %s)\n", ironic.Vars["IRONIC_VERSION"], ironic.Endpoint(), ironic.StartTime.Round(time.Second))

	agent := ironicenv.FastAgent(ironic.URL())
	agent.HeartbeatInterval = o.heartbeat
	simOpts := ironicenv.SimOptions{Config: ironicenv.FastConfig(o.n), Agent: agent}
	if o.simLog != "" {
		f, err := os.Create(o.simLog)
		if err != nil {
			return err
		}
		defer f.Close()
		simOpts.Logger = slog.New(slog.NewTextHandler(f, nil))
	}
	sim, err := ironicenv.StartSim(simOpts)
	if err != nil {
		return err
	}
	defer sim.Close()
	images := ironicenv.NewImageServer()
	defer images.Close()
	disk := make([]byte, 1<<20)
	_, _ = rand.Read(disk)
	images.Add("/bench.img", disk)
	e := &env{o: o, ironic: ironic, sim: sim, images: images,
		image: imageSpec{url: images.URL + "/bench.img", sha256: images.SHA256("/bench.img")}}

	var results []*result
	if o.mode != "operator" {
		r, err := e.runBaseline()
		if err != nil {
			return fmt.Errorf("baseline: %w", err)
		}
		results = append(results, r)
	}
	if o.mode != "baseline" {
		if len(results) > 0 {
			fmt.Println("restarting Ironic with an empty database")
			if err := ironic.Restart(true); err != nil {
				return err
			}
		}
		r, err := e.runOperator()
		if err != nil {
			return fmt.Errorf("operator: %w", err)
		}
		results = append(results, r)
	}
	report(o, results)
	return nil
}

// phases, in order; "registered" ends inside "available" (both start at the first create).
var phases = []string{"registered", "available", "provisioned", "deprovisioned", "deleted"}

var phaseTitles = map[string]string{
	"registered":    "create → all registered (manage, inspect asked)",
	"available":     "create → all available (+ agent inspection)",
	"provisioned":   "image set → all provisioned (provide/clean, deploy)",
	"deprovisioned": "image removed → all available (undeploy, clean)",
	"deleted":       "delete → all gone (power off, delete)",
}

// result is one run's figures.
type result struct {
	name  string
	wall  map[string]time.Duration
	total time.Duration
	// hostTimes are, per phase, each host's time from the phase's start to its end for that host:
	// the wall time is their maximum, the median shows whether a phase is slow for all hosts or
	// only for a tail.
	hostTimes map[string][]time.Duration
	// calls are Ironic API requests by phase (baseline) or provisioner operation (operator).
	calls      map[string]float64
	errored    int
	gaveUp     int // baseline: hosts dropped after an error it does not retry
	stalled    int // hosts Ironic left in a working state with nobody working on them (stalls.go)
	errors     []string
	ironicCPU  float64
	ironicRSS  int64
	dbCPU      float64 // MariaDB's (IRONIC_USE_MARIADB=true), restarted with each run
	dbRSS      int64
	driverCPU  float64 // operator process, or this program's driving goroutines (with bmcsim)
	driverRSS  int64
	apiCPU     float64 // kube-apiserver + etcd (operator run)
	benchCPU   float64 // this process during the run: bmcsim, agents, image server, watch/driver
	loadBefore string
	loadAfter  string
	// logFrom is the size of Ironic's log when the run started: its counts read only what follows.
	logFrom int64
	// sqliteLocked and inspectFailed count Ironic log lines of this run: "database is locked"
	// (sqlite contention) and nodes moved to "inspect failed".
	sqliteLocked, inspectFailed int
}

func (e *env) ironicUsage(r *result) {
	pids := e.ironic.PIDs()
	r.ironicCPU = procstat.CPUSeconds(pids...)
	r.ironicRSS = procstat.PeakRSS(pids...)
	db := e.ironic.DatabasePIDs()
	r.dbCPU, r.dbRSS = procstat.CPUSeconds(db...), procstat.PeakRSS(db...)
	r.sqliteLocked, r.inspectFailed = e.ironicLogCounts(r.logFrom)
}

// ironicLogSize is where the next run's part of Ironic's log starts (the log is appended to across
// restarts).
func (e *env) ironicLogSize() int64 {
	fi, err := os.Stat(e.ironic.Vars["IRONIC_LOG"])
	if err != nil {
		return 0
	}
	return fi.Size()
}

// ironicLogCounts counts, in Ironic's log from offset on, the lines telling of sqlite lock
// contention and of failed inspections: the two go together at N=100 on 2 cores.
func (e *env) ironicLogCounts(offset int64) (locked, inspectFailed int) {
	f, err := os.Open(e.ironic.Vars["IRONIC_LOG"])
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return 0, 0
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		l := sc.Text()
		if strings.Contains(l, "database is locked") {
			locked++
		}
		if strings.Contains(l, `moved to provision state "inspect failed"`) {
			inspectFailed++
		}
	}
	return locked, inspectFailed
}

func report(o options, results []*result) {
	fmt.Println()
	fmt.Printf("hosts: %d, bmcsim at zero latency, agents heartbeat every %s, Ironic polled every %s (quick operations) / %s (long ones)\n",
		o.n, o.heartbeat, o.shortPoll, o.longPoll)
	// The scripts read these from this program's environment (hack/ironic-up.sh); say which were on,
	// since they change Ironic's cost a lot.
	fmt.Printf("Ironic: IRONIC_FAST_TRACK=%s, IRONIC_PBKDF2_MEMO=%s, IRONIC_USE_MARIADB=%s, -ironic-conf %q\n",
		envOr("IRONIC_FAST_TRACK", "true"), envOr("IRONIC_PBKDF2_MEMO", "0"), envOr("IRONIC_USE_MARIADB", "false"), o.ironicConf)
	head := fmt.Sprintf("%-52s", "wall time")
	for _, r := range results {
		head += fmt.Sprintf(" %14s", r.name)
	}
	if len(results) == 2 {
		head += fmt.Sprintf(" %10s", "operator +")
	}
	fmt.Println(head)
	row := func(title string, get func(*result) time.Duration) {
		line := fmt.Sprintf("%-52s", title)
		for _, r := range results {
			line += fmt.Sprintf(" %13.1fs", get(r).Seconds())
		}
		if len(results) == 2 && get(results[0]) > 0 {
			line += fmt.Sprintf(" %9.1f%%", 100*(get(results[1]).Seconds()/get(results[0]).Seconds()-1))
		}
		fmt.Println(line)
	}
	for _, p := range phases {
		row(phaseTitles[p], func(r *result) time.Duration { return r.wall[p] })
	}
	row("whole lifecycle (sum of the phases after registered)", func(r *result) time.Duration { return r.total })
	fmt.Println()
	fmt.Printf("%-52s", "per host: median / 90th percentile / max")
	for _, r := range results {
		fmt.Printf(" %22s", r.name)
	}
	fmt.Println()
	for _, p := range phases {
		line := fmt.Sprintf("%-52s", p)
		for _, r := range results {
			q := quantiles(r.hostTimes[p], 0.5, 0.9, 1)
			line += fmt.Sprintf(" %6.1fs /%6.1fs /%6.1fs", q[0].Seconds(), q[1].Seconds(), q[2].Seconds())
		}
		fmt.Println(line)
	}
	fmt.Println()
	for _, r := range results {
		var keys []string
		sum := 0.0
		for k, v := range r.calls {
			keys = append(keys, k)
			sum += v
		}
		slices.Sort(keys)
		parts := make([]string, 0, len(keys))
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s %.1f", k, r.calls[k]/float64(o.n)))
		}
		fmt.Printf("%s: Ironic API calls per host %.1f (%s)\n", r.name, sum/float64(o.n), strings.Join(parts, ", "))
	}
	fmt.Println()
	for _, r := range results {
		fmt.Printf("%s: hosts errored %d", r.name, r.errored)
		if r.gaveUp > 0 {
			fmt.Printf(", %d of them dropped out of the run", r.gaveUp)
		}
		if r.stalled > 0 {
			fmt.Printf(", %d of them stalled in Ironic and dropped out", r.stalled)
		}
		if len(r.errors) > 0 {
			fmt.Printf(" (first: %s)", r.errors[0])
		}
		fmt.Println()
		fmt.Printf("    Ironic CPU %.1f s, peak RSS %.0f MiB (sum of its processes' VmHWM)\n", r.ironicCPU, mib(r.ironicRSS))
		if r.dbRSS > 0 {
			fmt.Printf("    MariaDB CPU %.1f s, peak RSS %.0f MiB\n", r.dbCPU, mib(r.dbRSS))
		}
		fmt.Printf("    Ironic log: %d \"database is locked\" lines, %d nodes moved to \"inspect failed\"\n", r.sqliteLocked, r.inspectFailed)
		if r.name == "operator" {
			fmt.Printf("    operator CPU %.1f s, peak RSS %.0f MiB; kube-apiserver + etcd CPU %.1f s\n", r.driverCPU, mib(r.driverRSS), r.apiCPU)
		}
		fmt.Printf("    this program (bmcsim, agents, image server, %s) CPU %.1f s\n", map[bool]string{true: "the baseline driver", false: "watch and creators"}[r.name == "baseline"], r.benchCPU)
		fmt.Printf("    load average before / after: %s / %s\n", r.loadBefore, r.loadAfter)
	}
}

// copyFile copies src to dst, creating dst's directory.
func copyFile(src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// record sets phase's per-host times, from start to each time in at, and its wall time, the
// longest of them.
func (r *result) record(phase string, start time.Time, at []time.Time) {
	d := make([]time.Duration, 0, len(at))
	for _, t := range at {
		d = append(d, t.Sub(start))
	}
	r.hostTimes[phase] = d
	r.wall[phase] = slices.Max(append([]time.Duration{0}, d...))
}

// quantiles returns the q-quantiles of d (nearest rank; zero for an empty d).
func quantiles(d []time.Duration, qs ...float64) []time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	out := make([]time.Duration, len(qs))
	for i, q := range qs {
		if len(s) > 0 {
			rank := int(math.Ceil(q * float64(len(s))))
			out[i] = s[min(max(rank, 1), len(s))-1]
		}
	}
	return out
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// waitAll waits until done is closed, printing progress every 10 s.
func waitAll(ctx context.Context, what string, start time.Time, count func() int, n int, done <-chan struct{}) error {
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return nil
		case <-tick.C:
			fmt.Printf("  %6.0f s: %d/%d %s\n", time.Since(start).Seconds(), count(), n, what)
		case <-ctx.Done():
			return fmt.Errorf("%d of %d hosts %s after %s", count(), n, what, time.Since(start).Round(time.Second))
		}
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
