package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metalforge/metalforge/internal/bmcsim/fault"
	"github.com/metalforge/metalforge/internal/test/hostfleet"
)

// restart is one operator kill and what the new process took to recover.
type restart struct {
	at       time.Duration // since the campaign started
	down     time.Duration // dead on purpose before the restart
	attempts int           // starts until one became ready (the API server may be down)
	ready    time.Duration // start → /readyz answered
	// caughtUp is the start that succeeded → every host that existed reconciled once by the new
	// process; -1 when the next kill or the end of the campaign came first.
	caughtUp time.Duration
	hosts    int
}

// startFaults starts the faults that run through the whole campaign: the Redfish errors and the
// operator killer.
func (cp *campaign) startFaults(ctx context.Context, wg *sync.WaitGroup) {
	s := cp.sched
	if err := cp.sim.Control.SetGlobalFaults(fault.Set{ErrorRate: s.redfishErrors, TimeoutRate: s.redfishTimeouts}); err != nil {
		cp.fault("bmcsim: setting the Redfish faults failed: %v", err)
	} else {
		cp.fault("bmcsim: %.0f %% of Redfish requests answer 500, %.0f %% are never answered", 100*s.redfishErrors, 100*s.redfishTimeouts)
	}
	wg.Go(func() { cp.killOperator(ctx) })
}

// endFaults clears bmcsim's faults and makes sure the operator runs for the checks.
func (cp *campaign) endFaults(ctx context.Context) {
	if cp.o.faults {
		if err := cp.sim.Control.ClearAllFaults(); err != nil {
			cp.logf("clearing bmcsim's faults: %v", err)
		}
	}
	if !cp.op.Running() {
		cp.retry(ctx, "starting the operator for the checks", func() error { return cp.op.Start(ctx) })
	}
}

// killOperator SIGKILLs the operator on the schedule and starts it again, until ctx ends.
func (cp *campaign) killOperator(ctx context.Context) {
	readyAt := time.Now()
	for i := 0; ; i++ {
		k := cp.sched.kill(i)
		if !sleep(ctx, time.Until(readyAt.Add(k.after))) {
			return
		}
		r := restart{at: time.Since(cp.start), down: k.down, caughtUp: -1, hosts: cp.tr.existing()}
		cp.op.Kill()
		// The dead time is not cut short by the end of the campaign: endFaults starts it again.
		time.Sleep(k.down)
		started := time.Now()
		// up is when the start that succeeded began: the catch-up is measured from it, not from
		// the first attempt (while the API server is down, the failed attempts can take longer
		// than the whole window).
		var up time.Time
		// A killed operator is always started again, even when the campaign ends meanwhile.
		for {
			r.attempts++
			up = time.Now()
			err := cp.op.Start(context.Background())
			if err == nil {
				break
			}
			cp.logf("operator start %d after kill %d failed (starting again in 5 s): %v", r.attempts, i+1, firstLine(err))
			time.Sleep(5 * time.Second)
		}
		r.ready = time.Since(started)
		readyAt = time.Now()
		// Every host the new process knows is reconciled once (controller-runtime lists them all
		// at start): until then some host may still wait for a decision the killed process had
		// not written.
		for time.Since(up) < cp.sched.killMin {
			got, err := cp.op.Scrape(context.Background(), "controller_runtime_reconcile_total", "controller")
			if err == nil && int(got["baremetalhost"]) >= r.hosts {
				r.caughtUp = time.Since(up)
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		cp.mu.Lock()
		cp.restarts = append(cp.restarts, r)
		cp.mu.Unlock()
		caught := "not within " + cp.sched.killMin.String()
		if r.caughtUp >= 0 {
			caught = r.caughtUp.Round(100 * time.Millisecond).String()
		}
		cp.logf("operator killed (%d), down %s, ready %s after its start (%d attempts), %d hosts reconciled after %s",
			i+1, k.down.Round(100*time.Millisecond), r.ready.Round(100*time.Millisecond), r.attempts, r.hosts, caught)
	}
}

// stepFaults starts the faults the schedule puts in this step.
func (cp *campaign) stepFaults(ctx context.Context, step int, wg *sync.WaitGroup) {
	s := cp.sched
	if step == stepAdopted {
		wg.Go(func() { cp.wipeIronic(ctx) })
	}
	if step == s.ironicKill.step {
		wg.Go(func() { cp.killIronic(ctx, s.ironicKill, s.ironicDown, deployOrCleanStates) })
	}
	if step == s.serviceKill.step {
		wg.Go(func() { cp.killIronic(ctx, s.serviceKill, s.serviceDown, servicingStates) })
	}
	if step == s.apiRestart.step {
		wg.Go(func() {
			if !sleep(ctx, s.apiRestart.after) {
				return
			}
			cp.fault("kube-apiserver stopped (SIGTERM; etcd kept), starting again in %s", s.apiDown.Round(time.Second))
			at := time.Now()
			stopped, err := cp.kube.RestartAPIServer(ctx, s.apiDown)
			if err != nil {
				cp.fault("kube-apiserver restart FAILED: %v", err)
				return
			}
			cp.fault("kube-apiserver serving again, %s after SIGTERM (its graceful stop took %s)",
				time.Since(at).Round(100*time.Millisecond), stopped.Round(100*time.Millisecond))
		})
	}
	if step == s.password.step {
		wg.Go(func() { cp.changePassword(ctx) })
	}
	if step == s.crashStep {
		// Set before the image is, so that the deploy meets it.
		cp.crashAgent(ctx, step, wg)
	}
}

// wipeIronic kills Ironic and starts it with an empty database while every host is provisioned.
func (cp *campaign) wipeIronic(ctx context.Context) {
	if !sleep(ctx, cp.sched.wipeAfter) {
		return
	}
	before := map[string]string{}
	for name, r := range cp.tr.snapshot() {
		before[name] = r.nodeID
	}
	cp.mu.Lock()
	cp.beforeWipe = before
	cp.mu.Unlock()
	counts := cp.nodeStates(ctx)
	if err := cp.ironic.Kill(); err != nil {
		cp.fault("killing Ironic FAILED: %v", err)
	}
	cp.fault("Ironic SIGKILLed (nodes: %s); starting it with an empty database", counts)
	at := time.Now()
	err := cp.ironic.Restart(true)
	cp.mu.Lock()
	cp.wiped = true
	cp.mu.Unlock()
	if err != nil {
		cp.fault("Ironic restart with an empty database FAILED: %v", firstLine(err))
		return
	}
	cp.fault("Ironic serving again with an empty database, %s after the kill", time.Since(at).Round(100*time.Millisecond))
}

// deployOrCleanStates are Ironic's states of a node that deploys or cleans; servicingStates of
// one that is serviced.
var (
	deployOrCleanStates = map[string]bool{"deploying": true, "wait call-back": true, "cleaning": true, "clean wait": true}
	servicingStates     = map[string]bool{"servicing": true, "service wait": true}
)

// killIronic kills Ironic while nodes are in one of the busy states (waiting for some, after the
// scheduled delay, until the step ends) and starts it again with its database down later.
func (cp *campaign) killIronic(ctx context.Context, when at, down time.Duration, busy map[string]bool) {
	if !sleep(ctx, when.after) {
		return
	}
	var counts string
	for {
		n := 0
		counts = cp.nodeStatesCounting(ctx, func(state string, count int) {
			if busy[state] {
				n += count
			}
		})
		if n > 0 || int(cp.step.Load()) != when.step {
			break
		}
		if !sleep(ctx, time.Second) {
			return
		}
	}
	if err := cp.ironic.Kill(); err != nil {
		cp.fault("killing Ironic FAILED: %v", err)
	}
	cp.fault("Ironic SIGKILLed (nodes: %s); starting it again in %s", counts, down.Round(time.Second))
	time.Sleep(down)
	at := time.Now()
	if err := cp.ironic.Resume(); err != nil {
		cp.fault("Ironic restart FAILED: %v", firstLine(err))
		return
	}
	cp.fault("Ironic serving again, %s after its start", time.Since(at).Round(100*time.Millisecond))
}

// changePassword changes one BMC's password and updates its Secret a minute later.
func (cp *campaign) changePassword(ctx context.Context) {
	s := cp.sched
	if !sleep(ctx, s.password.after) {
		return
	}
	server := cp.sim.Hosts()[s.passwordHost]
	name := hostName(s.passwordHost)
	password := "changed-" + randomHex(10)
	cp.mu.Lock()
	cp.passwords[password] = "the changed BMC password of " + server.Name
	cp.mu.Unlock()
	if err := cp.sim.Control.SetFaults(server.Name, fault.Set{Password: password}); err != nil {
		cp.fault("changing the password of %s FAILED: %v", server.Name, err)
		return
	}
	cp.fault("the BMC of %s (%s) changed its password; its Secret follows in %s", name, server.Name, s.passwordDelay)
	// Not cut short by the end of the campaign: the Secret must end up right.
	time.Sleep(s.passwordDelay)
	cp.retry(context.Background(), "updating the Secret of "+name, func() error {
		var secret corev1.Secret
		key := types.NamespacedName{Namespace: namespace, Name: hostfleet.SecretName(name)}
		if err := cp.c.Get(context.Background(), key, &secret); err != nil {
			return err
		}
		secret.Data["password"] = []byte(password)
		return cp.c.Update(context.Background(), &secret)
	})
	cp.fault("the Secret of %s now has the new password", name)
}

// crashAgent makes one server's agent crash in the middle of its deploy and clears the fault once
// the host recorded the failed deploy (or reached the step's state without one).
func (cp *campaign) crashAgent(ctx context.Context, step int, wg *sync.WaitGroup) {
	server := cp.sim.Hosts()[cp.sched.crashHost].Name
	name := hostName(cp.sched.crashHost)
	if err := cp.sim.Control.SetFaults(server, fault.Set{FailDeploy: true}); err != nil {
		cp.fault("arming the agent crash of %s FAILED: %v", server, err)
		return
	}
	cp.fault("the agent of %s (%s) will crash in the middle of its deploy", name, server)
	wg.Go(func() {
		defer func() {
			if err := cp.sim.Control.ClearFaults(server); err != nil {
				cp.logf("clearing the agent crash of %s: %v", server, err)
			}
		}()
		for sleep(ctx, 2*time.Second) {
			r := cp.tr.snapshot()[name]
			switch {
			case r.failures[step] > 0:
				cp.fault("%s recorded its failed deploy (%s: %s); the agent works again", name, r.errType, r.errMsg)
				return
			case !r.reached[step].IsZero():
				cp.fault("%s was provisioned without recording a failed deploy: the crash did not happen", name)
				return
			}
		}
	})
}

// nodeStates counts Ironic's nodes by provision state, as a short text.
func (cp *campaign) nodeStates(ctx context.Context) string {
	return cp.nodeStatesCounting(ctx, nil)
}

func (cp *campaign) nodeStatesCounting(ctx context.Context, each func(state string, n int)) string {
	list, err := cp.listNodes(ctx)
	if err != nil {
		return "unknown: " + firstLine(err)
	}
	counts := map[string]int{}
	for _, n := range list {
		counts[n.ProvisionState]++
	}
	var parts []string
	for state, n := range counts {
		parts = append(parts, fmt.Sprintf("%d %s", n, state))
		if each != nil {
			each(state, n)
		}
	}
	sort.Strings(parts)
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// activeNodes are the ids of Ironic's active nodes (nil when Ironic does not answer).
func (cp *campaign) activeNodes(ctx context.Context) map[string]bool {
	list, err := cp.listNodes(ctx)
	if err != nil {
		return nil
	}
	out := map[string]bool{}
	for _, n := range list {
		if n.ProvisionState == "active" {
			out[n.UUID] = true
		}
	}
	return out
}

func (cp *campaign) listNodes(ctx context.Context) ([]nodes.Node, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	pages, err := nodes.List(cp.nodes, nodes.ListOpts{Fields: []string{"uuid", "name", "provision_state", "last_error"}}).AllPages(ctx)
	if err != nil {
		return nil, err
	}
	return nodes.ExtractNodes(pages)
}

// serverCounts reads bmcsim's counts of disk writes and of BIOS applications per server.
func (cp *campaign) serverCounts(ctx context.Context) (writes, applies map[string]int) {
	writes, applies = map[string]int{}, map[string]int{}
	cp.retry(ctx, "reading bmcsim's servers", func() error {
		list, err := cp.sim.Control.Servers()
		if err != nil {
			return err
		}
		for _, s := range list {
			writes[s.Name], applies[s.Name] = s.DiskWrites, s.BIOSApplies
		}
		return nil
	})
	return writes, applies
}

// retry calls fn until it succeeds or ctx ends, once a second (the API server or the operator may
// be restarting); it logs the first failure.
func (cp *campaign) retry(ctx context.Context, what string, fn func() error) {
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil {
			return
		}
		if attempt == 1 {
			cp.logf("%s failed, retrying every second: %v", what, firstLine(err))
		}
		if !sleep(ctx, time.Second) {
			return
		}
	}
}

// sleep waits d; false when ctx ended first.
func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}
