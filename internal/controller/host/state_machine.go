package host

import (
	"fmt"
	"time"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

// Triggers shared by several transitions.
const (
	triggerDeleted         = "host deleted"
	triggerDeletedDetached = "host deleted while detached (skips power off and deprovisioning)"
)

// Transition is one declared edge of the state machine. The handlers may only move a host along
// these edges (moveTo refuses anything else), and the diagram in docs/ is generated from them.
type Transition struct {
	From, To metal3.ProvisioningState
	Trigger  string
}

// Transitions is THE table: every way a host can change state, as metal3 defines them.
var Transitions = []Transition{
	{metal3.StateNone, metal3.StateRegistering, "BMC address or credentials set"},
	{metal3.StateNone, metal3.StateUnmanaged, "no BMC details (operationalStatus discovered)"},
	{metal3.StateUnmanaged, metal3.StateRegistering, "BMC details added"},
	{metal3.StateRegistering, metal3.StateExternallyProvisioned, "registered, spec.externallyProvisioned"},
	{metal3.StateRegistering, metal3.StatePreparing, "registered, inspection disabled"},
	{metal3.StateRegistering, metal3.StateInspecting, "registered"},
	{metal3.StateInspecting, metal3.StatePreparing, "inspection done, HardwareData written"},
	{metal3.StateMatchProfile, metal3.StatePreparing, "legacy state, moves on at once"},
	{metal3.StatePreparing, metal3.StateAvailable, "RAID, root device hints and firmware changes applied"},
	{metal3.StateReady, metal3.StateAvailable, "legacy name of available"},
	{metal3.StateAvailable, metal3.StateExternallyProvisioned, "spec.externallyProvisioned set"},
	{metal3.StateAvailable, metal3.StateInspecting, "inspect.metal3.io annotation (re-inspection)"},
	{metal3.StateAvailable, metal3.StatePreparing, "spec.raid or spec.rootDeviceHints differ from status"},
	{metal3.StateAvailable, metal3.StateProvisioning, "online, image or custom deploy not yet provisioned, retry cap not reached"},
	{metal3.StateProvisioning, metal3.StateProvisioned, "image written"},
	{metal3.StateProvisioning, metal3.StateDeprovisioning, "provisioning failed (provisioningFailCount+1), or image removed or changed"},
	{metal3.StateProvisioned, metal3.StateDeprovisioning, "image or custom deploy changed or removed"},
	{metal3.StateExternallyProvisioned, metal3.StateProvisioned, "spec.externallyProvisioned cleared"},
	{metal3.StateDeprovisioning, metal3.StateAvailable, "image removed (cleaning done)"},
	{metal3.StateDeprovisioning, metal3.StatePoweringOffBeforeDelete, "deprovisioned while deleting, or failed more than 3 times while deleting"},
	{metal3.StatePoweringOffBeforeDelete, metal3.StateDeleting, "powered off, power off disabled, failed more than 3 times, or never registered"},
	// Deletion entry (checkInitiateDelete in metal3).
	{metal3.StateNone, metal3.StateDeleting, triggerDeleted},
	{metal3.StateUnmanaged, metal3.StateDeleting, triggerDeleted},
	{metal3.StateRegistering, metal3.StateDeleting, triggerDeleted},
	{metal3.StateProvisioning, metal3.StateDeprovisioning, triggerDeleted},
	{metal3.StateProvisioned, metal3.StateDeprovisioning, triggerDeleted},
	{metal3.StateInspecting, metal3.StatePoweringOffBeforeDelete, triggerDeleted},
	{metal3.StateMatchProfile, metal3.StatePoweringOffBeforeDelete, triggerDeleted},
	{metal3.StatePreparing, metal3.StatePoweringOffBeforeDelete, triggerDeleted},
	{metal3.StateReady, metal3.StatePoweringOffBeforeDelete, triggerDeleted},
	{metal3.StateAvailable, metal3.StatePoweringOffBeforeDelete, triggerDeleted},
	{metal3.StateExternallyProvisioned, metal3.StatePoweringOffBeforeDelete, triggerDeleted},
	{metal3.StateDeprovisioning, metal3.StateDeleting, "host deleted, registration failed more than 3 times or never registered"},
	// Detached hosts skip power off and deprovisioning (any state: force detaches from any).
	{metal3.StateInspecting, metal3.StateDeleting, triggerDeletedDetached},
	{metal3.StateMatchProfile, metal3.StateDeleting, triggerDeletedDetached},
	{metal3.StateReady, metal3.StateDeleting, triggerDeletedDetached},
	{metal3.StatePreparing, metal3.StateDeleting, triggerDeletedDetached},
	{metal3.StateAvailable, metal3.StateDeleting, triggerDeletedDetached},
	{metal3.StateProvisioning, metal3.StateDeleting, triggerDeletedDetached},
	{metal3.StateProvisioned, metal3.StateDeleting, triggerDeletedDetached},
	{metal3.StateExternallyProvisioned, metal3.StateDeleting, triggerDeletedDetached},
}

// stateHandler runs one state: it talks to the provisioner, edits s.host's status and says what comes
// next. Handlers never call the API server.
type stateHandler func(s *hostScope) outcome

// handlers maps every state to its handler. match profile and ready are legacy names.
var handlers map[metal3.ProvisioningState]stateHandler

func init() {
	handlers = map[metal3.ProvisioningState]stateHandler{
		metal3.StateNone:                    handleNone,
		metal3.StateUnmanaged:               handleUnmanaged,
		metal3.StateRegistering:             handleRegistering,
		metal3.StateInspecting:              handleInspecting,
		metal3.StateMatchProfile:            handleMatchProfile,
		metal3.StatePreparing:               handlePreparing,
		metal3.StateReady:                   handleReady,
		metal3.StateAvailable:               handleAvailable,
		metal3.StateProvisioning:            handleProvisioning,
		metal3.StateProvisioned:             handleProvisioned,
		metal3.StateExternallyProvisioned:   handleExternallyProvisioned,
		metal3.StateDeprovisioning:          handleDeprovisioning,
		metal3.StatePoweringOffBeforeDelete: handlePoweringOffBeforeDelete,
		metal3.StateDeleting:                handleDeleting,
	}
}

// busyStates start long provisioner operations; entering one needs provisioner capacity
// (operationalStatus delayed otherwise), except on the way to deletion.
var busyStates = map[metal3.ProvisioningState]bool{
	metal3.StateInspecting:     true,
	metal3.StatePreparing:      true,
	metal3.StateProvisioning:   true,
	metal3.StateDeprovisioning: true,
}

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
	// keepError keeps the error fields across a transition that a failure caused.
	keepError bool
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
			h, ok := handlers[s.state()]
			if !ok {
				return internalError(fmt.Errorf("no handler for provisioning state %q", s.state()))
			}
			out = h(s)
		}
		switch out.kind {
		case kindAdvance:
			if blocked, ok := s.moveTo(out.next, out.keepError); ok {
				return blocked
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
	if busyStates[next] && !s.deleting() {
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
	s.fx.transitions = append(s.fx.transitions, [2]metal3.ProvisioningState{from, next})
	return outcome{}, false
}
