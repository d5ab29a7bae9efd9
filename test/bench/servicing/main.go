// Command servicing benchmarks live updates (servicing) on real Ironic: N bmcsim hosts are
// provisioned by bin/baremetal-operator --provisioner=ironic (setup, not measured), then each goes
// through a BIOS-setting live update twice, on the same Ironic and the same nodes:
//
//   - operator: every host gets a HostUpdatePolicy (firmwareSettings: onReboot) and a
//     HostFirmwareSettings change (ProcTurboMode: Disabled); once every change is judged valid,
//     the reboot annotation is added to every host at once. Measured from there until every host
//     went servicing and is back to operationalStatus OK, powered on, provisioned.
//   - script: the operator is stopped, and a minimal gophercloud program drives the same steps
//     on the same nodes directly: soft power off, wait until off, service with
//     bios.apply_configuration (ProcTurboMode back to Enabled), wait until active; one goroutine
//     per node, polling each node at the operator's intervals (metal3's 3 s / 10 s). That is the
//     time Ironic itself needs.
//
// It prints both wall times, the operator's overhead in per cent, per-host median / 90th
// percentile / maximum, errors, and CPU. It measures; it never fails on a figure. Run it with
// `make bench-servicing N=50`.
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/metalforge/metalforge/internal/test/ironicenv"
	"github.com/metalforge/metalforge/internal/test/procstat"
	"github.com/metalforge/metalforge/internal/test/testenv"
)

type options struct {
	n         int
	shortPoll time.Duration
	longPoll  time.Duration
	heartbeat time.Duration
	operator  string
	rounds    int
	timeout   time.Duration
}

// ironicConf lifts Ironic's concurrency limits for a rack serviced at once (as bench-ironic does).
const ironicConf = `
[conductor]
max_concurrent_clean = 1000
max_concurrent_deploy = 1000

[agent]
post_deploy_get_power_state_retry_interval = 1
post_deploy_get_power_state_retries = 60
`

func main() {
	var o options
	flag.IntVar(&o.n, "n", 50, "Hosts.")
	flag.DurationVar(&o.shortPoll, "short-poll", 3*time.Second, "Poll interval of quick operations (power) for the script and the operator's --ironic-short-poll (metal3: 3s).")
	flag.DurationVar(&o.longPoll, "long-poll", 10*time.Second, "Poll interval of long operations (provisioning, servicing) for the script and the operator's --ironic-long-poll (metal3: 10s).")
	flag.DurationVar(&o.heartbeat, "heartbeat", 10*time.Second, "Heartbeat interval of the simulated agents (they also heartbeat when a command ends).")
	flag.StringVar(&o.operator, "operator", "", "Operator binary (default: build ./cmd/baremetal-operator into bin/).")
	flag.IntVar(&o.rounds, "rounds", 2, "Rounds of operator, then script.")
	flag.DurationVar(&o.timeout, "timeout", 60*time.Minute, "Give up after this long.")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "bench-servicing:", err)
		os.Exit(1)
	}
}

// result is one run's figures.
type result struct {
	name      string
	hostTimes []time.Duration // per host: from the start to its end
	errors    []string
	ironicCPU float64
	driverCPU float64 // the operator process; the script's own goroutines are too small to count
	apiCPU    float64
	load      string
}

func (r *result) wall() time.Duration { return slices.Max(append([]time.Duration{0}, r.hostTimes...)) }

func run(o options) error {
	if why := ironicenv.Unavailable(); why != "" {
		return errors.New("Ironic cannot run here: " + why)
	}
	if o.operator == "" {
		fmt.Println("building bin/baremetal-operator")
		var err error
		if o.operator, err = testenv.BuildOperator(os.Stdout); err != nil {
			return err
		}
	}
	fmt.Println("starting Ironic")
	ironic, err := ironicenv.Start(ironicenv.Options{
		Instance: fmt.Sprintf("bench-servicing-%d", os.Getpid()), ExtraConf: ironicConf, WipeDB: true, OwnerPID: os.Getpid(),
	})
	if err != nil {
		return err
	}
	defer func() {
		if err := ironic.Purge(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping Ironic:", err)
		}
	}()
	fmt.Printf("Ironic %s at %s\n", ironic.Vars["IRONIC_VERSION"], ironic.Endpoint())
	agent := ironicenv.FastAgent(ironic.URL())
	agent.HeartbeatInterval = o.heartbeat
	sim, err := ironicenv.StartSim(ironicenv.SimOptions{Config: ironicenv.FastConfig(o.n), Agent: agent})
	if err != nil {
		return err
	}
	defer sim.Close()
	images := ironicenv.NewImageServer()
	defer images.Close()
	disk := make([]byte, 1<<20)
	_, _ = rand.Read(disk)
	images.Add("/bench.img", disk)

	// Ctrl-C ends the run through the deferred clean-ups (Ironic, the API server, the operator).
	sigCtx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(sigCtx, o.timeout)
	defer cancel()
	b := &bench{o: o, ironic: ironic, sim: sim, imageURL: images.URL + "/bench.img", imageSHA: images.SHA256("/bench.img")}
	op, err := b.startOperator(ctx)
	if err != nil {
		return err
	}
	defer op.close()
	nodeIDs, err := b.setup(ctx, op)
	if err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	// Rounds alternate, so that a change of load on the (shared) machine does not favour one side:
	// the operator sets ProcTurboMode to Disabled, the script back to Enabled.
	var rounds [][2]*result
	for round := range o.rounds {
		if round > 0 {
			if err := op.start(ctx, b); err != nil {
				return err
			}
		}
		opResult, err := b.runOperator(ctx, op)
		if err != nil {
			return fmt.Errorf("operator run %d: %w", round+1, err)
		}
		op.stop()
		fmt.Println("operator stopped; the script services the same nodes")
		scriptResult, err := b.runScript(ctx, nodeIDs)
		if err != nil {
			return fmt.Errorf("script run %d: %w", round+1, err)
		}
		rounds = append(rounds, [2]*result{scriptResult, opResult})
	}
	report(o, rounds)
	return nil
}

// bench is what the runs share.
type bench struct {
	o                  options
	ironic             *ironicenv.Instance
	sim                *ironicenv.Sim
	imageURL, imageSHA string
}

func report(o options, rounds [][2]*result) {
	fmt.Println()
	fmt.Printf("hosts: %d, bmcsim at zero latency, agents heartbeat every %s, Ironic polled every %s / %s\n", o.n, o.heartbeat, o.shortPoll, o.longPoll)
	fmt.Println("one BIOS setting (ProcTurboMode) per host, all hosts at once: soft power off, then Ironic servicing (bios.apply_configuration)")
	var sums [2]time.Duration
	for i, pair := range rounds {
		fmt.Printf("round %d\n", i+1)
		for j, r := range pair {
			sums[j] += r.wall()
			q := quantiles(r.hostTimes, 0.5, 0.9, 1)
			fmt.Printf("  %-9s all hosts done in %7.1f s (per host median %.1f s, p90 %.1f s, max %.1f s), hosts errored %d",
				r.name, r.wall().Seconds(), q[0].Seconds(), q[1].Seconds(), q[2].Seconds(), len(r.errors))
			if len(r.errors) > 0 {
				fmt.Printf(" (first: %s)", r.errors[0])
			}
			fmt.Println()
			fmt.Printf("            Ironic CPU %.1f s", r.ironicCPU)
			if r.driverCPU > 0 {
				fmt.Printf(", operator CPU %.1f s, kube-apiserver + etcd CPU %.1f s", r.driverCPU, r.apiCPU)
			}
			fmt.Printf(", load average after %s\n", r.load)
		}
	}
	if sums[0] > 0 {
		fmt.Printf("operator against the script, all rounds: %.1f s against %.1f s: %+.1f %%\n",
			sums[1].Seconds(), sums[0].Seconds(), 100*(sums[1].Seconds()/sums[0].Seconds()-1))
	}
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

func ironicCPU(i *ironicenv.Instance) float64 { return procstat.CPUSeconds(i.PIDs()...) }
