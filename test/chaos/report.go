package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/test/procstat"
)

// report runs the checks after the campaign and prints the figures; it returns whether every
// check passed.
func (cp *campaign) report() bool {
	ctx := context.Background()
	cp.searchLog(ctx)
	left := cp.leftovers(ctx)
	snap := cp.tr.snapshot()
	twice, unexpected, unwritten := cp.deployments(snap)
	appliedTwice, appliedOutside := cp.biosApplications(snap)

	fmt.Println()
	fmt.Printf("=== chaos: seed %d, %d hosts, faults %v, %s in all (load average now %s)\n",
		cp.o.seed, cp.o.n, cp.o.faults, time.Since(cp.start).Round(time.Second), procstat.LoadAverage())
	fmt.Println()
	fmt.Printf("%-36s %8s %8s %6s %10s %10s\n", "step", "reached", "stuck", "other", "wall", "median")
	var stuck []string
	for step := range numSteps {
		res := cp.steps[step]
		if !res.ran {
			fmt.Printf("%-36s not run\n", stepNames[step])
			continue
		}
		nStuck := 0
		for i := range cp.o.n {
			r := snap[hostName(i)]
			if r.stuck[step] != "" {
				nStuck++
				stuck = append(stuck, fmt.Sprintf("step %d, %s: %s", step+1, r.name, r.stuck[step]))
			}
		}
		median := time.Duration(0)
		if len(res.perHost) > 0 {
			median = res.perHost[len(res.perHost)/2]
		}
		fmt.Printf("%-36s %8d %8d %6d %9.0fs %9.0fs\n", stepNames[step], len(res.perHost), nStuck,
			len(res.unfinished), res.wall.Seconds(), median.Seconds())
		for _, u := range res.unfinished {
			stuck = append(stuck, fmt.Sprintf("step %d, still changing at the step's timeout: %s", step+1, u))
		}
	}
	fmt.Println()
	fmt.Println("faults fired:")
	for _, f := range cp.fired {
		fmt.Println("  " + f)
	}
	cp.reportRestarts()
	fmt.Println()
	leaks := 0
	for _, l := range cp.leaks {
		if !strings.HasPrefix(l, "(user name") {
			leaks++
		}
	}
	checks := []struct {
		what  string
		bad   []string
		count int
	}{
		{"hosts stuck or not finished", stuck, len(stuck)},
		{"hosts deployed twice for one provisioning request", twice, len(twice)},
		{"disk writes outside a provisioning request", unexpected, len(unexpected)},
		{"hosts provisioned without their image written", unwritten, len(unwritten)},
		{"BIOS applied more than once for one live update", appliedTwice, len(appliedTwice)},
		{"BIOS applied outside a live update", appliedOutside, len(appliedOutside)},
		{"nodes left in Ironic", left.nodes, len(left.nodes)},
		{"HardwareData left", left.hardwareData, len(left.hardwareData)},
		{"Secrets left (or still held by the operator's finalizer)", left.secrets, len(left.secrets)},
		{"credentials found in the log, Events or a status", cp.leaks, leaks},
	}
	ok := true
	for _, c := range checks {
		fmt.Printf("%-58s %d\n", c.what, c.count)
		for _, b := range c.bad {
			fmt.Println("    " + b)
		}
		ok = ok && c.count == 0
	}
	fmt.Printf("(credential search: %d rounds over %d object statuses and %d Events, %d MiB of operator log)\n",
		cp.searched.rounds, cp.searched.objects, cp.searched.events, cp.searched.logBytes>>20)
	if ok {
		fmt.Println("RESULT: PASS")
	} else {
		fmt.Println("RESULT: FAIL")
	}
	return ok
}

// reportRestarts prints the operator's restarts and its recovery after each.
func (cp *campaign) reportRestarts() {
	fmt.Println()
	if len(cp.restarts) == 0 {
		fmt.Println("operator restarts: none")
		return
	}
	var ready, caught []time.Duration
	attempts, late := 0, 0
	for _, r := range cp.restarts {
		ready = append(ready, r.ready)
		attempts += r.attempts - 1
		if r.caughtUp >= 0 {
			caught = append(caught, r.caughtUp)
		} else {
			late++
		}
	}
	fmt.Printf("operator restarts: %d (SIGKILL every %s–%s); besides them %d starts failed (API server down)\n",
		len(cp.restarts), cp.o.killMin, cp.o.killMax, attempts)
	fmt.Printf("  start → ready:                                median %s, max %s\n", median(ready), maxOf(ready))
	fmt.Printf("  start → every host reconciled once again:     median %s, max %s; %d restarts not caught up within %s\n",
		median(caught), maxOf(caught), late, cp.o.killMin)
	var lines []string
	for i, r := range cp.restarts {
		c := "-"
		if r.caughtUp >= 0 {
			c = r.caughtUp.Round(100 * time.Millisecond).String()
		}
		lines = append(lines, fmt.Sprintf("#%d at %s: down %s, ready %s, %d hosts caught up %s", i+1, clock(r.at),
			r.down.Round(100*time.Millisecond), r.ready.Round(100*time.Millisecond), r.hosts, c))
	}
	fmt.Println("  " + strings.Join(lines, "\n  "))
}

func median(d []time.Duration) string {
	if len(d) == 0 {
		return "-"
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2].Round(100 * time.Millisecond).String()
}

func maxOf(d []time.Duration) string {
	if len(d) == 0 {
		return "-"
	}
	return slices.Max(d).Round(100 * time.Millisecond).String()
}

// deployments compares bmcsim's disk writes per server and step with what the step asked for: one
// write per provisioning request, plus one per failed deploy the host recorded (a retry), and none
// in any other step.
func (cp *campaign) deployments(snap map[string]hostRec) (twice, unexpected, unwritten []string) {
	cp.eachStepCount(snap, cp.writes, func(r hostRec, step, w int) {
		f := r.failures[step]
		switch step {
		case stepProvisioned, stepProvisionedB:
			if w > 1+f {
				twice = append(twice, fmt.Sprintf("%s: %d disk writes in step %d (%s) with %d failed deploys recorded; states %v",
					r.name, w, step+1, stepNames[step], f, r.states))
			}
			if w == 0 && !r.reached[step].IsZero() {
				unwritten = append(unwritten, fmt.Sprintf("%s: provisioned in step %d without a disk write", r.name, step+1))
			}
		default:
			if w > 0 {
				unexpected = append(unexpected, fmt.Sprintf("%s: %d disk writes in step %d (%s)", r.name, w, step+1, stepNames[step]))
			}
		}
	})
	return twice, unexpected, unwritten
}

// biosApplications compares bmcsim's BIOS applications per server and step with what the step
// asked for: one in the live update step, plus one per failed servicing the host recorded and
// one per servicing Ironic failed for a reason that was not the request's (a restart in its
// middle, a lost agent's abort; retried without a report, so counted from the node's history
// when the step ended),
// and none in any other step (cleaning, deploying and adoption leave the BIOS alone).
func (cp *campaign) biosApplications(snap map[string]hostRec) (twice, outside []string) {
	cp.eachStepCount(snap, cp.applies, func(r hostRec, step, a int) {
		f := r.serviceFailures[step] + r.interrupted[step]
		switch {
		case step == stepServiced && a > 1+f:
			twice = append(twice, fmt.Sprintf("%s: %d BIOS applications in step %d (%s) with %d failed or interrupted servicings",
				r.name, a, step+1, stepNames[step], f))
		case step != stepServiced && a > 0:
			outside = append(outside, fmt.Sprintf("%s: %d BIOS applications in step %d (%s)", r.name, a, step+1, stepNames[step]))
		}
	})
	return twice, outside
}

// eachStepCount calls fn with every host's record and, for each step that ran, how much its
// server's count (bmcsim's, read at the start of each step and at the end) grew in it.
func (cp *campaign) eachStepCount(snap map[string]hostRec, counts [numSteps + 1]map[string]int, fn func(r hostRec, step, grew int)) {
	servers := cp.sim.Hosts()
	for i := range cp.o.n {
		server, r := servers[i].Name, snap[hostName(i)]
		r.name = hostName(i)
		for step := range numSteps {
			if before, after := counts[step], counts[step+1]; before != nil && after != nil {
				fn(r, step, after[server]-before[server])
			}
		}
	}
}

type leftovers struct{ nodes, hardwareData, secrets []string }

// leftovers lists what is left once every host was deleted: Ironic's nodes, HardwareData, and
// Secrets the operator still holds; then it deletes the BMC Secrets, as their owner would, and
// lists those that do not go.
func (cp *campaign) leftovers(ctx context.Context) leftovers {
	var l leftovers
	list, err := cp.listNodes(ctx)
	if err != nil {
		l.nodes = append(l.nodes, "could not list Ironic's nodes: "+firstLine(err))
	}
	for _, n := range list {
		l.nodes = append(l.nodes, fmt.Sprintf("%s (%s) %s %s", n.UUID, n.Name, n.ProvisionState, n.LastError))
	}
	var hd metal3.HardwareDataList
	cp.retry(ctx, "listing HardwareData", func() error { return cp.c.List(ctx, &hd, client.InNamespace(namespace)) })
	for _, h := range hd.Items {
		l.hardwareData = append(l.hardwareData, fmt.Sprintf("%s (finalizers %v)", h.Name, h.Finalizers))
	}
	var secrets corev1.SecretList
	cp.retry(ctx, "listing Secrets", func() error { return cp.c.List(ctx, &secrets, client.InNamespace(namespace)) })
	for i := range secrets.Items {
		s := &secrets.Items[i]
		if controllerutil.ContainsFinalizer(s, metal3.SecretsFinalizer) {
			l.secrets = append(l.secrets, fmt.Sprintf("%s still has the finalizer %s after its host was deleted", s.Name, metal3.SecretsFinalizer))
		}
		if err := cp.c.Delete(ctx, s); client.IgnoreNotFound(err) != nil {
			l.secrets = append(l.secrets, fmt.Sprintf("deleting %s: %v", s.Name, err))
		}
	}
	deadline := time.Now().Add(time.Minute)
	for {
		var remaining corev1.SecretList
		cp.retry(ctx, "listing Secrets", func() error { return cp.c.List(ctx, &remaining, client.InNamespace(namespace)) })
		if len(remaining.Items) == 0 || time.Now().After(deadline) {
			for _, s := range remaining.Items {
				l.secrets = append(l.secrets, fmt.Sprintf("%s still there a minute after it was deleted (finalizers %v)", s.Name, s.Finalizers))
			}
			break
		}
		time.Sleep(time.Second)
	}
	return l
}
