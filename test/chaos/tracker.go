package main

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

// tracker follows every host through a watch: its current status, when its provisioning state
// last changed (progress), which step targets it reached and when, and the provisioning failures
// it recorded in each step.
type tracker struct {
	mu    sync.Mutex
	step  int
	hosts map[string]*hostRec
}

// hostRec is what the tracker knows of one host.
type hostRec struct {
	name      string
	exists    bool
	deleted   bool
	state     metal3.ProvisioningState
	nodeID    string
	poweredOn bool
	opStatus  metal3.OperationalStatus
	// rebooting: the reboot annotation is on the host.
	rebooting bool
	errType   metal3.ErrorType
	errMsg    string
	errCount  int
	// progressing is the Progressing condition's message: what the host says it waits for.
	progressing string
	// changed is when the provisioning state, the operational status or the node last changed:
	// progress.
	changed time.Time
	// reached is, per step, when the host first met the step's target.
	reached [numSteps]time.Time
	// stuck is, per step, the host's state when it was declared stuck ("" when it was not).
	stuck [numSteps]string
	// failures counts, per step, the provisioning errors the host recorded (errorCount increases
	// while errorType is provisioning error): a failed deploy that the operator will retry.
	failures [numSteps]int
	// serviceFailures counts, per step, the servicing errors the host recorded the same way.
	serviceFailures [numSteps]int
	// servicing says, per step, that the host was seen servicing.
	servicing [numSteps]bool
	// interrupted counts, per step, the servicings of the host's node that Ironic failed for a
	// reason that was not the request's (read from the node's history at the end of the step).
	interrupted [numSteps]int
	// states are the provisioning states the host was seen in, in order, without repeats.
	states []metal3.ProvisioningState
}

func newTracker() *tracker { return &tracker{hosts: map[string]*hostRec{}} }

// expect adds a host before it exists, so that a host the watch never sees is still reported.
func (tr *tracker) expect(name string, now time.Time) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.hosts[name] = &hostRec{name: name, changed: now}
}

// setStep starts a step: progress is counted from now on for every host still there.
func (tr *tracker) setStep(step int, now time.Time) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.step = step
	for _, r := range tr.hosts {
		r.changed = now
	}
}

// observe records a host as the watch reports it.
func (tr *tracker) observe(h *metal3.BareMetalHost, deleted bool) {
	now := time.Now()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	r := tr.hosts[h.Name]
	if r == nil {
		r = &hostRec{name: h.Name, changed: now}
		tr.hosts[h.Name] = r
	}
	st := &h.Status
	if deleted {
		if !r.deleted {
			r.deleted, r.changed = true, now
		}
		r.exists = false
		return
	}
	r.exists = true
	if st.Provisioning.State != r.state || st.Provisioning.ID != r.nodeID || st.OperationalStatus != r.opStatus {
		r.changed = now
	}
	if st.Provisioning.State != r.state && st.Provisioning.State != "" {
		r.states = append(r.states, st.Provisioning.State)
	}
	// A provisioning or servicing error is counted by errorCount's increase: the watch may miss a
	// status in between (a relist after an API server restart), the count does not.
	if st.ErrorType == metal3.ProvisioningError || st.ErrorType == metal3.ServicingError {
		before := r.errCount // kept while a failed live update is retried (errorType cleared)
		if r.errType != st.ErrorType && r.errType != "" {
			before = 0
		}
		if more := st.ErrorCount - before; more > 0 && st.ErrorType == metal3.ProvisioningError {
			r.failures[tr.step] += more
		} else if more > 0 {
			r.serviceFailures[tr.step] += more
		}
	}
	if st.OperationalStatus == metal3.OperationalStatusServicing {
		r.servicing[tr.step] = true
	}
	_, r.rebooting = h.Annotations[metal3.RebootAnnotationPrefix]
	r.state, r.nodeID, r.poweredOn, r.opStatus = st.Provisioning.State, st.Provisioning.ID, st.PoweredOn, st.OperationalStatus
	r.errType, r.errMsg, r.errCount = st.ErrorType, st.ErrorMessage, st.ErrorCount
	r.progressing = ""
	if c := meta.FindStatusCondition(st.Conditions, string(metal3.ProgressingCondition)); c != nil {
		r.progressing = c.Message
	}
}

// snapshot copies every host's record.
func (tr *tracker) snapshot() map[string]hostRec {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	out := make(map[string]hostRec, len(tr.hosts))
	for k, r := range tr.hosts {
		out[k] = r.clone()
	}
	return out
}

// update runs fn on a host's record under the lock.
func (tr *tracker) update(name string, fn func(r *hostRec)) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if r := tr.hosts[name]; r != nil {
		fn(r)
	}
}

// existing counts the hosts that exist now.
func (tr *tracker) existing() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	n := 0
	for _, r := range tr.hosts {
		if r.exists {
			n++
		}
	}
	return n
}

// get copies one host's record.
func (tr *tracker) get(name string) (hostRec, bool) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	r := tr.hosts[name]
	if r == nil {
		return hostRec{}, false
	}
	return r.clone(), true
}

func (r *hostRec) clone() hostRec {
	c := *r
	c.states = append([]metal3.ProvisioningState(nil), r.states...)
	return c
}
