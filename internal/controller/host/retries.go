package host

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/conditions"
)

// retryTimes remembers, per host, when the operation that last failed may be tried again (memory
// only). The error backoff used to be only a requeue delay: any earlier reconcile retried at once,
// and the provisioner's watch wakes a failed host early by itself (Ironic's power sync erases the
// node's last_error about a minute after a failure), so a deploy or a live update that kept
// failing was retried every minute instead of after 2, 4, 8... minutes, rebooting the server each
// time. After an operator restart the memory is empty and the time is recalled from the status
// (recallRetry).
type retryTimes struct {
	m sync.Map // types.UID → retryAt
}

// retryAt is when the failure of one operation may be retried. The failure is the host's
// errorType and errorCount, under the spec generation it failed with: a changed spec is the user
// acting on the failure, which is retried at once.
type retryAt struct {
	errorType  metal3.ErrorType
	errorCount int
	generation int64
	at         time.Time
}

// wait is how long the host must still wait before retrying a failure of type t, if it must.
func (r *retryTimes) wait(host *metal3.BareMetalHost, t metal3.ErrorType, now time.Time) (time.Duration, bool) {
	st := host.Status
	if r == nil || st.ErrorType != t {
		return 0, false
	}
	v, ok := r.m.Load(host.UID)
	if !ok {
		return 0, false
	}
	ra := v.(retryAt)
	if ra.errorType != t || ra.errorCount != st.ErrorCount || ra.generation != host.Generation || !now.Before(ra.at) {
		return 0, false
	}
	return ra.at.Sub(now), true
}

// known reports whether anything is remembered for the host.
func (r *retryTimes) known(uid types.UID) bool {
	if r == nil {
		return false
	}
	_, ok := r.m.Load(uid)
	return ok
}

func (r *retryTimes) record(uid types.UID, ra retryAt) {
	if r != nil {
		r.m.Store(uid, ra)
	}
}

func (r *retryTimes) forget(uid types.UID) {
	if r != nil {
		r.m.Delete(uid)
	}
}

// backingOff answers a wait outcome while the failure of type t is still in its backoff: the
// handler then leaves the failed operation alone instead of starting it again.
func (s *hostScope) backingOff(t metal3.ErrorType) (outcome, bool) {
	d, ok := s.retries.wait(s.host, t, s.wall)
	if !ok {
		return outcome{}, false
	}
	return waitFor(d, waitingRetry(t)), true
}

// recallRetry rebuilds, when nothing is remembered for the host (the first reconcile of an
// operator process, before anything writes the status), when its failure may be retried: the
// backoff of its errorCount after the Ready condition turned to Error. Without it every restart
// retried every failed host at once, and a BMC that keeps failing (retried past
// --servicing-retries) rebooted its server once per restart. Approximations, all towards an early
// retry: a failure that did not move Ready (Error twice in a row) counts from the first; a host
// that entered its state after the failure was released by its backoff already (a deployment's
// failure carried into deprovisioning) and is not held; a time written by a clock ahead of this
// one is held for at most one backoff from now. The generation is the one the condition was
// written with: a spec changed since (the user acting on the failure) is retried at once, unless
// the earlier process wrote the status again after the edit.
func (s *hostScope) recallRetry() {
	st := &s.host.Status
	if st.ErrorType == "" || s.retries.known(s.host.UID) {
		return
	}
	ready := conditions.Get(st.Conditions, metal3.ReadyCondition)
	if ready == nil || ready.Reason != metal3.ErrorReason {
		return
	}
	if om := s.host.OperationMetricForState(s.state()); om != nil && !om.Start.Before(&ready.LastTransitionTime) {
		return
	}
	d := s.cfg.Backoff(s.backoffCount(st.ErrorType))
	at := ready.LastTransitionTime.Add(d)
	if latest := s.wall.Add(d); at.After(latest) {
		at = latest
	}
	s.retries.record(s.host.UID, retryAt{errorType: st.ErrorType, errorCount: st.ErrorCount, generation: ready.ObservedGeneration, at: at})
}
