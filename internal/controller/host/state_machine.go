package host

import (
	"fmt"
	"time"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

// stateHandler runs one state: it talks to the provisioner, edits s.host's status and says what comes
// next. Handlers never call the API server.
type stateHandler func(s *hostScope) outcome

// outcomeKind is what a handler asks the driver to do next.
type outcomeKind int

const (
	// kindWait: stay in this state and reconcile again after outcome.after.
	kindWait outcomeKind = iota
	// kindAdvance: move to outcome.next and run its handler now.
	kindAdvance
	// kindRepeat: run the (guards and) handler of the same state again now, e.g. after
	// re-registering a host the provisioner had forgotten.
	kindRepeat
	// kindDone: nothing more to do, ever (the host is gone); no requeue.
	kindDone
)

// outcome is a handler's typed result.
type outcome struct {
	kind  outcomeKind
	next  metal3.ProvisioningState
	after time.Duration
	// waitingFor says what the host waits for; it goes to the Progressing condition message.
	waitingFor string
	// progressReason, when set, is the Progressing reason of the wait (instead of the state's),
	// and the message then says since when the host waits.
	progressReason string
	// registrationFailure is the message of a registration that failed beside a failed live
	// update, whose servicing error stays in status (keepServicing): the Manageable condition
	// shows it.
	registrationFailure string
	// keepError keeps the error fields across a transition that a failure caused.
	keepError bool
	// onMove is what the handler changes only once the move is made (a failed attempt counted,
	// inspected hardware recorded): moveTo may refuse it (no provisioner capacity), and the
	// handler then runs again at every DelayedRequeue; a change made before would be repeated
	// (a count growing towards its cap) or written again each time.
	onMove func()
	// err is an internal error (API or programming): returned to controller-runtime, which logs
	// it and retries with its own backoff. Status shows a generic message.
	err error
}

func advance(to metal3.ProvisioningState) outcome { return outcome{kind: kindAdvance, next: to} }

// advanceKeepingError moves on because of a failure; the error stays visible in status.
func advanceKeepingError(to metal3.ProvisioningState) outcome {
	return outcome{kind: kindAdvance, next: to, keepError: true}
}

func waitFor(after time.Duration, what string) outcome {
	return outcome{kind: kindWait, after: after, waitingFor: what}
}

func repeat() outcome { return outcome{kind: kindRepeat} }

// then sets what the move does once it is made (outcome.onMove).
func (o outcome) then(f func()) outcome {
	o.onMove = f
	return o
}

func internalError(err error) outcome { return outcome{kind: kindWait, err: err} }

// allowed is the set of declared (from, to) pairs.
var allowed = func() map[[2]metal3.ProvisioningState]bool {
	m := map[[2]metal3.ProvisioningState]bool{}
	for _, t := range Transitions {
		m[[2]metal3.ProvisioningState{t.From, t.To}] = true
	}
	return m
}()

// maxSteps bounds how many handlers one reconcile runs (none → provisioned is six transitions).
const maxSteps = 12

// run drives the state machine for one reconcile: guards and handler, again and again, until a
// handler has to wait or maxSteps is reached.
func (s *hostScope) run() outcome {
	for range maxSteps {
		out, handled := s.guards()
		if !handled {
			row, ok := states[s.state()]
			if !ok {
				return internalError(fmt.Errorf("no handler for provisioning state %q", s.state()))
			}
			out = row.handler(s)
		}
		switch out.kind {
		case kindAdvance:
			from := s.state()
			if blocked, ok := s.moveTo(out.next, out.keepError); ok {
				return blocked
			}
			if out.onMove != nil {
				out.onMove()
			}
			if stateOf(from).writeOnLeave.is() {
				// Written before the next state acts (stateRow.writeOnLeave); the status
				// write wakes the host again at once.
				return waitFor(time.Millisecond, "")
			}
		case kindRepeat:
		default:
			return out
		}
	}
	// Still moving: come back at once (the status patch also triggers a reconcile).
	return waitFor(time.Millisecond, "")
}

// moveTo performs a declared transition. It returns (outcome, true) when the host has to wait
// instead (no provisioner capacity for a busy state) or the edge is not declared (a bug).
func (s *hostScope) moveTo(next metal3.ProvisioningState, keepError bool) (outcome, bool) {
	from := s.state()
	if !allowed[[2]metal3.ProvisioningState{from, next}] {
		return internalError(fmt.Errorf("undeclared transition %q -> %q", from, next)), true
	}
	if stateOf(next).busy.is() && !s.deleting() {
		if out, wait := s.checkCapacity(); wait {
			return out, true
		}
	}
	st := &s.host.Status
	if om := s.host.OperationMetricForState(from); om != nil && !om.Start.IsZero() && om.End.IsZero() {
		om.End = s.now
		s.fx.finishedOps = append(s.fx.finishedOps, finishedOp{state: from, duration: om.Duration()})
	}
	if om := s.host.OperationMetricForState(next); om != nil {
		om.Start, om.End = s.now, metav1Zero
	}
	st.Provisioning.State = next
	if !keepError {
		s.clearError()
	}
	if st.OperationalStatus == metal3.OperationalStatusServicing && !stateOf(next).liveUpdates.is() {
		// Deprovisioning (the image changed, or the host is deleted) ends a live update.
		st.OperationalStatus = metal3.OperationalStatusOK
	}
	s.fx.transitions = append(s.fx.transitions, [2]metal3.ProvisioningState{from, next})
	return outcome{}, false
}
