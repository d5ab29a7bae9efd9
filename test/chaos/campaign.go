package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner/ironic"
	"github.com/metalforge/metalforge/internal/test/hostfleet"
	"github.com/metalforge/metalforge/internal/test/ironicenv"
	"github.com/metalforge/metalforge/internal/test/operatorproc"
	"github.com/metalforge/metalforge/internal/test/testenv"
)

// campaign is one run: the parts it started, the tracker of the hosts, and what happened.
type campaign struct {
	o     options
	sched *schedule
	start time.Time

	ironic  *ironicenv.Instance
	nodes   *gophercloud.ServiceClient // Ironic, read only: fault triggers and checks
	kube    *testenv.Env
	c       client.Client
	sim     *ironicenv.Sim
	images  *ironicenv.ImageServer
	op      *operatorproc.Process
	tr      *tracker
	closers []func() error

	imageA, imageB             metal3.Image
	ironicUser, ironicPassword string

	step atomic.Int32 // the step running now

	mu sync.Mutex
	// passwords are the credential values to look for, with what each is.
	passwords map[string]string
	// fired lists the faults as they happened.
	fired    []string
	restarts []restart
	// writes and applies are bmcsim's disk writes and BIOS applications per server at the start of
	// each step, and at the end.
	writes, applies [numSteps + 1]map[string]int
	steps           [numSteps]stepResult
	// beforeWipe are the hosts' node ids before Ironic lost its database; wiped says it did.
	beforeWipe map[string]string
	wiped      bool
	// leaks are the credential values found where they must not be.
	leaks []string
	// searched counts what the credential search read.
	searched searchStats
}

// stepResult is what a step took.
type stepResult struct {
	ran     bool
	wall    time.Duration
	perHost []time.Duration
	// unfinished are the hosts still changing when the step timed out.
	unfinished []string
}

// logf prints a line stamped with the time since the campaign started.
func (cp *campaign) logf(format string, args ...any) {
	fmt.Printf("[%s] %s\n", clock(time.Since(cp.start)), fmt.Sprintf(format, args...))
}

// fault prints a fault that fired and keeps it for the report.
func (cp *campaign) fault(format string, args ...any) {
	line := fmt.Sprintf("[%s] %s", clock(time.Since(cp.start)), fmt.Sprintf(format, args...))
	fmt.Println(line)
	cp.mu.Lock()
	cp.fired = append(cp.fired, line)
	cp.mu.Unlock()
}

func clock(d time.Duration) string {
	d = d.Round(time.Second)
	return fmt.Sprintf("%02d:%02d:%02d", int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60)
}

// runCampaign runs every step with its faults, then stops the faults and leaves the operator running
// for the checks.
func (cp *campaign) runCampaign(ctx context.Context) {
	cp.start = time.Now()
	for i := range cp.o.n {
		cp.tr.expect(hostName(i), cp.start)
	}
	faultCtx, stopFaults := context.WithCancel(ctx)
	var faults sync.WaitGroup
	if cp.o.faults {
		cp.startFaults(faultCtx, &faults)
	}
	for step := range numSteps {
		if ctx.Err() != nil {
			break
		}
		cp.runStep(faultCtx, step, &faults)
	}
	writes, applies := cp.serverCounts(ctx)
	cp.mu.Lock()
	cp.writes[numSteps], cp.applies[numSteps] = writes, applies
	cp.mu.Unlock()
	stopFaults()
	faults.Wait()
	cp.endFaults(ctx)
}

// runStep applies the step's change to every host and waits until each reached the step's state,
// got stuck, or the step timed out.
func (cp *campaign) runStep(ctx context.Context, step int, faults *sync.WaitGroup) {
	start := time.Now()
	cp.step.Store(int32(step))
	cp.tr.setStep(step, start)
	writes, applies := cp.serverCounts(ctx)
	cp.mu.Lock()
	cp.writes[step], cp.applies[step] = writes, applies
	cp.mu.Unlock()
	cp.logf("step %d: %s", step+1, stepNames[step])
	if cp.o.faults {
		cp.stepFaults(ctx, step, faults)
	}
	if change := cp.change(step); change != nil {
		_ = hostfleet.Parallel(cp.o.n, func(i int) error {
			cp.retry(ctx, fmt.Sprintf("%s of %s", stepNames[step], hostName(i)), func() error { return change(hostName(i)) })
			return nil
		})
	}
	res := stepResult{ran: true}
	for ctx.Err() == nil {
		pending := cp.checkStep(ctx, step, start)
		if pending == 0 {
			break
		}
		if time.Since(start) > cp.o.stepTimeout {
			snap := cp.tr.snapshot()
			for i := range cp.o.n {
				r := snap[hostName(i)]
				if r.reached[step].IsZero() && r.stuck[step] == "" {
					res.unfinished = append(res.unfinished, fmt.Sprintf("%s: %s", r.name, describeHost(r)))
				}
			}
			cp.logf("step %d timed out after %s with %d hosts still changing", step+1, cp.o.stepTimeout, len(res.unfinished))
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
	}
	res.wall = time.Since(start)
	for _, r := range cp.tr.snapshot() {
		if !r.reached[step].IsZero() {
			res.perHost = append(res.perHost, r.reached[step].Sub(start))
		}
	}
	slices.Sort(res.perHost)
	if step == stepServiced {
		// Read now: a node's history goes with the node, and the hosts are deleted later.
		for name, r := range cp.tr.snapshot() {
			n := cp.interruptions(ctx, r.nodeID, start, time.Now())
			cp.tr.update(name, func(r *hostRec) { r.interrupted[step] = n })
		}
	}
	cp.mu.Lock()
	cp.steps[step] = res
	cp.mu.Unlock()
	cp.logf("step %d done in %s: %d of %d hosts reached it", step+1, res.wall.Round(time.Second), len(res.perHost), cp.o.n)
	cp.searchStatuses(ctx, stepNames[step])
}

// checkStep marks the hosts that reached the step's state or got stuck; it returns how many are
// still on their way.
func (cp *campaign) checkStep(ctx context.Context, step int, start time.Time) int {
	var active map[string]bool
	if step == stepAdopted {
		active = cp.activeNodes(ctx)
	}
	cp.mu.Lock()
	wiped, before := cp.wiped, cp.beforeWipe
	cp.mu.Unlock()
	now := time.Now()
	pending := 0
	for name, r := range cp.tr.snapshot() {
		if !r.reached[step].IsZero() {
			continue
		}
		reached := false
		switch step {
		case stepAvailable, stepDeprovisioned:
			reached = r.state == metal3.StateAvailable && r.errType == ""
		case stepProvisioned, stepProvisionedB:
			reached = r.state == metal3.StateProvisioned && r.errType == ""
		case stepAdopted:
			// Without faults nothing is wiped: the step passes at once.
			reached = !cp.o.faults || wiped && r.state == metal3.StateProvisioned && r.errType == "" &&
				r.nodeID != "" && r.nodeID != before[name] && active[r.nodeID]
		case stepServiced:
			reached = r.state == metal3.StateProvisioned && r.errType == "" && r.opStatus == metal3.OperationalStatusOK &&
				r.poweredOn && !r.rebooting && r.servicing[step] && cp.liveUpdateDone(ctx, name)
		case stepDeleted:
			reached = r.deleted && !r.exists
		}
		switch {
		case reached:
			cp.tr.update(name, func(r *hostRec) { r.reached[step] = now })
		case r.stuck[step] != "":
		case now.Sub(r.changed) > cp.o.stuckAfter && now.Sub(start) > cp.o.stuckAfter:
			why := describeHost(r) + cp.nodeNote(ctx, r.nodeID)
			cp.tr.update(name, func(r *hostRec) { r.stuck[step] = why })
			cp.logf("STUCK %s: %s", name, why)
		default:
			pending++
		}
	}
	return pending
}

// describeHost says where a host is and what it says it waits for.
func describeHost(r hostRec) string {
	var parts []string
	parts = append(parts, fmt.Sprintf("state %q", r.state))
	if !r.exists && !r.deleted {
		parts[0] = "never seen"
	}
	if r.errType != "" {
		parts = append(parts, fmt.Sprintf("%s (%d): %s", r.errType, r.errCount, r.errMsg))
	}
	if r.progressing != "" {
		parts = append(parts, "progressing: "+r.progressing) // the condition's message ("Waiting for …")
	}
	return strings.Join(parts, "; ")
}

// nodeNote says what Ironic shows of a node, for a stuck host.
func (cp *campaign) nodeNote(ctx context.Context, id string) string {
	if id == "" {
		return ""
	}
	n, err := nodes.Get(ctx, cp.nodes, id).Extract()
	if err != nil {
		return fmt.Sprintf("; Ironic node %s: %v", id, err)
	}
	note := fmt.Sprintf("; Ironic node %s: %s, power %s, maintenance %v %s, last_error %q", id, n.ProvisionState, n.PowerState,
		n.Maintenance, n.Fault, n.LastError)
	if ironic.Stalled(n, time.Now()) {
		note += " (stalled in Ironic: in a working state with no conductor on it)"
	}
	return note
}

// change is what a step does to each host (nil: nothing).
func (cp *campaign) change(step int) func(name string) error {
	ctx := context.Background()
	switch step {
	case stepAvailable:
		return func(name string) error {
			return hostfleet.Create(ctx, cp.c, namespace, name, cp.sim.Hosts()[hostIndex(name)])
		}
	case stepProvisioned:
		return func(name string) error { return hostfleet.PatchImage(ctx, cp.c, namespace, name, &cp.imageA) }
	case stepServiced:
		return func(name string) error { return cp.liveUpdate(ctx, name) }
	case stepDeprovisioned:
		return func(name string) error { return hostfleet.PatchImage(ctx, cp.c, namespace, name, nil) }
	case stepProvisionedB:
		return func(name string) error { return hostfleet.PatchImage(ctx, cp.c, namespace, name, &cp.imageB) }
	case stepDeleted:
		return func(name string) error {
			err := cp.c.Delete(ctx, &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		}
	}
	return nil
}
