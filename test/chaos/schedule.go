package main

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"
)

// The campaign's steps, in order. Each is a barrier: every host gets the step's change at once,
// and the next step starts when every host reached the step's state or got stuck.
const (
	stepAvailable     = iota // create → registered, inspected, cleaned: available
	stepProvisioned          // image A set → provisioned
	stepAdopted              // (nothing changed) Ironic loses its database → every host adopted again
	stepServiced             // a BIOS setting and the reboot annotation → serviced, still provisioned
	stepDeprovisioned        // image removed → deprovisioned, cleaned: available
	stepProvisionedB         // image B set → provisioned again
	stepDeleted              // host deleted → gone
	numSteps
)

var stepNames = [numSteps]string{
	stepAvailable:     "create → available",
	stepProvisioned:   "image A → provisioned",
	stepAdopted:       "Ironic database wiped → adopted",
	stepServiced:      "BIOS setting, reboot → serviced",
	stepDeprovisioned: "image removed → available",
	stepProvisionedB:  "image B → provisioned again",
	stepDeleted:       "delete → gone",
}

// A fault fires at a moment relative to the start of a step. Steps take as long as they take, so
// the schedule is a list of (step, delay) pairs: the same seed gives the same list, and the faults
// fire at the same point of the lifecycle.
type at struct {
	step  int
	after time.Duration
}

func (a at) String() string {
	return fmt.Sprintf("%s after the start of step %d (%s)", a.after.Round(time.Second), a.step+1, stepNames[a.step])
}

// schedule is the seeded fault schedule of one run.
type schedule struct {
	seed uint64

	// Operator kills: the interval from the restarted operator's readiness to the next SIGKILL,
	// and how long it stays dead (a restart delay), drawn from their own stream so that their
	// number does not shift the other faults.
	killMu    sync.Mutex
	killRNG   *rand.Rand
	killMin   time.Duration
	killMax   time.Duration
	killDrawn []kill

	// wipeAfter: Ironic is killed and restarted with an empty database this long after every host
	// was provisioned (stepAdopted starts).
	wipeAfter time.Duration
	// ironicKill: Ironic killed (SIGKILL) and restarted with its database, while hosts deploy or
	// clean; ironicDown is how long it stays dead.
	ironicKill at
	ironicDown time.Duration
	// serviceKill: Ironic killed (SIGKILL) and restarted with its database while hosts are
	// serviced (a live update); serviceDown is how long it stays dead.
	serviceKill at
	serviceDown time.Duration
	// apiRestart: kube-apiserver stopped and started again (etcd kept) after apiDown.
	apiRestart at
	apiDown    time.Duration
	// password: one BMC changes its password; its Secret is updated passwordDelay later.
	password      at
	passwordHost  int
	passwordDelay time.Duration
	// crash: one server's agent crashes in the middle of its deploy of this step.
	crashStep int
	crashHost int
	// Redfish: the share of Redfish requests answered 500, and the share never answered.
	redfishErrors, redfishTimeouts float64
}

type kill struct {
	after time.Duration // after the previous restart was ready (or the campaign started)
	down  time.Duration
}

func newSchedule(o options) *schedule {
	rng := rand.New(rand.NewPCG(o.seed, 2))
	s := &schedule{
		seed:            o.seed,
		killRNG:         rand.New(rand.NewPCG(o.seed, 1)),
		killMin:         o.killMin,
		killMax:         o.killMax,
		redfishErrors:   o.redfishErrors,
		redfishTimeouts: o.redfishTimeouts,
		passwordDelay:   o.passwordDelay,
	}
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo)+1)) }
	pick := func(steps ...int) int { return steps[rng.IntN(len(steps))] }
	s.wipeAfter = between(5*time.Second, 30*time.Second)
	// Deploying (both provisioning steps) or cleaning (deprovisioning).
	s.ironicKill = at{pick(stepProvisioned, stepDeprovisioned, stepProvisionedB), between(5*time.Second, 40*time.Second)}
	s.ironicDown = between(2*time.Second, 10*time.Second)
	s.apiRestart = at{pick(stepAvailable, stepProvisioned, stepDeprovisioned, stepProvisionedB, stepDeleted), between(0, 60*time.Second)}
	s.apiDown = between(2*time.Second, 10*time.Second)
	s.password = at{pick(stepAvailable, stepProvisioned, stepDeprovisioned, stepProvisionedB), between(0, 60*time.Second)}
	s.passwordHost = rng.IntN(o.n)
	s.crashStep = pick(stepProvisioned, stepProvisionedB)
	s.crashHost = rng.IntN(o.n)
	if o.n > 1 {
		// Another server than the one whose password changes, so that each fault stands alone.
		for s.crashHost == s.passwordHost {
			s.crashHost = rng.IntN(o.n)
		}
	}
	// Drawn last, so that a seed keeps the rest of the schedule it had before the live update
	// step came.
	s.serviceKill = at{stepServiced, between(5*time.Second, 40*time.Second)}
	s.serviceDown = between(2*time.Second, 10*time.Second)
	return s
}

// kill returns the i-th operator kill, drawing it (and those before it) when first asked.
func (s *schedule) kill(i int) kill {
	s.killMu.Lock()
	defer s.killMu.Unlock()
	for len(s.killDrawn) <= i {
		after := s.killMin + time.Duration(s.killRNG.Int64N(int64(s.killMax-s.killMin)+1))
		down := time.Duration(s.killRNG.Int64N(int64(5 * time.Second)))
		s.killDrawn = append(s.killDrawn, kill{after: after, down: down})
	}
	return s.killDrawn[i]
}

// describe is the schedule as the run prints it first.
func (s *schedule) describe(hostName func(int) string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "fault schedule of seed %d (the same seed gives the same schedule):\n", s.seed)
	var first []string
	for i := range 5 {
		k := s.kill(i)
		first = append(first, fmt.Sprintf("%s (down %s)", k.after.Round(100*time.Millisecond), k.down.Round(100*time.Millisecond)))
	}
	fmt.Fprintf(&b, "  - the operator SIGKILLed %s–%s after each restart was ready, restarted after 0–5 s; the first: %s, …\n",
		s.killMin, s.killMax, strings.Join(first, ", "))
	fmt.Fprintf(&b, "  - bmcsim answers %.0f %% of Redfish requests 500 and leaves %.0f %% unanswered, from the start to the end\n",
		100*s.redfishErrors, 100*s.redfishTimeouts)
	fmt.Fprintf(&b, "  - Ironic SIGKILLed and restarted with an empty database %s after every host was provisioned (step %d)\n",
		s.wipeAfter.Round(time.Second), stepAdopted+1)
	fmt.Fprintf(&b, "  - Ironic SIGKILLed while hosts deploy or clean, %s, restarted %s later\n", s.ironicKill, s.ironicDown.Round(time.Second))
	fmt.Fprintf(&b, "  - Ironic SIGKILLed while hosts are serviced, %s, restarted %s later\n", s.serviceKill, s.serviceDown.Round(time.Second))
	fmt.Fprintf(&b, "  - kube-apiserver restarted (etcd kept) %s, down %s\n", s.apiRestart, s.apiDown.Round(time.Second))
	fmt.Fprintf(&b, "  - the BMC of %s changes its password %s; its Secret is updated %s later\n",
		hostName(s.passwordHost), s.password, s.passwordDelay)
	fmt.Fprintf(&b, "  - the agent of %s crashes in the middle of its deploy in step %d (%s)\n",
		hostName(s.crashHost), s.crashStep+1, stepNames[s.crashStep])
	return b.String()
}
