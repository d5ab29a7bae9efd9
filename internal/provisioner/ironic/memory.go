package ironic

import (
	"reflect"
	"sync"
	"time"
)

// nodeMemory is what the provisioner remembers about each node beyond what Ironic shows, because
// Ironic does not keep it or hides it. Every entry changes a decision or saves a request; all of
// it lives in memory only (an operator restart starts afresh, which costs at most one retry or
// lookup per node) and is dropped as a whole when the node is deleted (forget).
type nodeMemory struct {
	mu    sync.Mutex
	nodes map[string]*nodeFacts // by node UUID
}

// nodeFacts is the memory of one node. A field added here is cleared by forget with the rest;
// TestNodeMemory fails until it fills the field in too. Zero fields mean "nothing remembered".
type nodeFacts struct {
	// appliedCreds is a fingerprint of the credentials last written to the node's driver_info, so
	// that a registration that keeps failing with the same credentials is reported instead of
	// retried in a loop (Ironic masks passwords, so they cannot be compared there).
	appliedCreds string
	// powerRequest is the last power change asked, to tell "still to do" from "Ironic tried and
	// failed" when the node shows neither the state nor a pending target.
	powerRequest string
	// powerUnanswered is a power change asked that got no answer (a timeout, a 5xx): Ironic may
	// have taken it. It becomes powerRequest once the node shows a power change pending
	// (lastPower), so that a reboot Ironic did is not asked again once it ends.
	powerUnanswered string
	// restartedManage: the node's failed verification was restarted (RestartOnFailure), so that
	// its failing again is reported rather than restarted on every poll.
	restartedManage bool
	// bootPort is the boot MAC whose port this provisioner created or found on the node, so that
	// registrations after the first do not look the port up again.
	bootPort string
	// failedStarts holds, per extra key (extraPrepared, extraServiced), a fingerprint written to
	// the node whose operation Ironic then did not accept, or did not answer for (see finished;
	// confirmStarts drops it when the node shows the operation started after all).
	failedStarts map[string]string
	// lostAgentAbort is when this provisioner last aborted the node's wait for a lost agent
	// (lostagent.go), so that a second one soon after is left to Ironic's callback timeout.
	lostAgentAbort time.Time
	// staleServiceRestart: the node's servicing was started again at once after it failed on what
	// an earlier attempt left (failedOnStaleStep), so that failing so again is reported rather than
	// started again in a loop. Cleared by any other start.
	staleServiceRestart bool
	// abort is the last abort this provisioner asked of the node, until the failed state it leads
	// to is read (history.go: Ironic records no history event for an abort, and its power sync
	// erases the "By request, … was aborted" last_error within a minute).
	abort abortRequest
	// recalled is the reason of the node's failure read from its history after Ironic erased
	// last_error (history.go), for the failure that put it in its failed state at failedAt, so
	// that the history is read once per failure.
	recalled recalledError
	// dataImageFailure is the last_error of the node's last failed virtual media attach or
	// detach (dataimage.go), kept from the read that showed it until the next attach or detach:
	// Ironic's power sync erases it within a minute, and no other decision may read it.
	dataImageFailure string
}

// recalledError is a failure's reason read from the node's history ("" when it had none).
type recalledError struct {
	failedAt time.Time
	text     string
}

// abortRequest is an abort asked of a node: at (this process's clock) and the node's
// provision_updated_at then (Ironic's clock), which the failed state it leads to comes after.
type abortRequest struct {
	at         time.Time
	stateSince time.Time
}

// read calls f with the node's facts (zero when none) under the lock.
func (m *nodeMemory) read(id string, f func(nodeFacts)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if facts := m.nodes[id]; facts != nil {
		f(*facts)
		return
	}
	f(nodeFacts{})
}

// update changes the node's facts under the lock; a node left with nothing to remember is dropped.
func (m *nodeMemory) update(id string, f func(*nodeFacts)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	facts := m.nodes[id]
	if facts == nil {
		facts = &nodeFacts{}
	}
	f(facts)
	if reflect.ValueOf(*facts).IsZero() { // every field, including ones added later
		delete(m.nodes, id)
		return
	}
	if m.nodes == nil {
		m.nodes = map[string]*nodeFacts{}
	}
	m.nodes[id] = facts
}

// forget drops everything remembered about the node (it was deleted).
func (m *nodeMemory) forget(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.nodes, id)
}

// appliedCreds returns the fingerprint of the credentials this provisioner last wrote to the node.
func (m *nodeMemory) appliedCreds(id string) (fingerprint string, known bool) {
	m.read(id, func(f nodeFacts) { fingerprint = f.appliedCreds })
	return fingerprint, fingerprint != ""
}

func (m *nodeMemory) setAppliedCreds(id, fingerprint string) {
	m.update(id, func(f *nodeFacts) { f.appliedCreds = fingerprint })
}

// powerRequest returns the last power change asked for the node and not yet seen through; "" when
// none.
func (m *nodeMemory) powerRequest(id string) (target string) {
	m.read(id, func(f nodeFacts) { target = f.powerRequest })
	return target
}

// setPowerRequest records a power change asked; "" clears it (seen through, or reported). Either
// way an unanswered one is settled.
func (m *nodeMemory) setPowerRequest(id, target string) {
	m.update(id, func(f *nodeFacts) { f.powerRequest, f.powerUnanswered = target, "" })
}

// powerUnanswered returns the power change asked of the node that got no answer; "" when none.
func (m *nodeMemory) powerUnanswered(id string) (target string) {
	m.read(id, func(f nodeFacts) { target = f.powerUnanswered })
	return target
}

// setPowerUnanswered records a power change asked that got no answer.
func (m *nodeMemory) setPowerUnanswered(id, target string) {
	m.update(id, func(f *nodeFacts) { f.powerUnanswered = target })
}

// setRestartedManage records whether this provisioner restarted the node's failed verification.
func (m *nodeMemory) setRestartedManage(id string, restarted bool) {
	m.update(id, func(f *nodeFacts) { f.restartedManage = restarted })
}

// takeRestartedManage reports whether the node's failed verification was restarted, and clears
// the mark: one restart per reported failure.
func (m *nodeMemory) takeRestartedManage(id string) (restarted bool) {
	m.update(id, func(f *nodeFacts) { restarted, f.restartedManage = f.restartedManage, false })
	return restarted
}

// bootPort returns the boot MAC whose port is known to be on the node; "" when none.
func (m *nodeMemory) bootPort(id string) (mac string) {
	m.read(id, func(f nodeFacts) { mac = f.bootPort })
	return mac
}

func (m *nodeMemory) setBootPort(id, mac string) {
	m.update(id, func(f *nodeFacts) { f.bootPort = mac })
}

// failedStart returns the fingerprint under extra[key] whose operation did not start, if any.
func (m *nodeMemory) failedStart(id, key string) (fingerprint string, failed bool) {
	m.read(id, func(f nodeFacts) { fingerprint, failed = f.failedStarts[key] })
	return fingerprint, failed
}

// recordStart notes whether the operation fingerprinted fp under extra[key] started.
func (m *nodeMemory) recordStart(id, key, fp string, started bool) {
	m.update(id, func(f *nodeFacts) {
		if started {
			delete(f.failedStarts, key)
			if len(f.failedStarts) == 0 {
				f.failedStarts = nil // so that a node with nothing else to remember is dropped
			}
			return
		}
		if f.failedStarts == nil {
			f.failedStarts = map[string]string{}
		}
		f.failedStarts[key] = fp
	})
}

// staleServiceRestarted reports whether the node's last servicing start was one after a failure
// on a stale step.
func (m *nodeMemory) staleServiceRestarted(id string) (restarted bool) {
	m.read(id, func(f nodeFacts) { restarted = f.staleServiceRestart })
	return restarted
}

func (m *nodeMemory) setStaleServiceRestart(id string, restarted bool) {
	m.update(id, func(f *nodeFacts) { f.staleServiceRestart = restarted })
}

// lostAgentAbortedSince reports whether this provisioner aborted the node's wait for a lost agent
// at or after t.
func (m *nodeMemory) lostAgentAbortedSince(id string, t time.Time) (aborted bool) {
	m.read(id, func(f nodeFacts) { aborted = !f.lostAgentAbort.IsZero() && !f.lostAgentAbort.Before(t) })
	return aborted
}

func (m *nodeMemory) setLostAgentAbort(id string, at time.Time) {
	m.update(id, func(f *nodeFacts) { f.lostAgentAbort = at })
}

// recalledError returns the reason remembered for the node's failure at failedAt.
func (m *nodeMemory) recalledError(id string, failedAt time.Time) (text string, known bool) {
	m.read(id, func(f nodeFacts) {
		known = !f.recalled.failedAt.IsZero() && f.recalled.failedAt.Equal(failedAt)
		text = f.recalled.text
	})
	return text, known
}

func (m *nodeMemory) setRecalledError(id string, failedAt time.Time, text string) {
	m.update(id, func(f *nodeFacts) { f.recalled = recalledError{failedAt: failedAt, text: text} })
}

// setAbortRequested records an abort asked of the node at at, while its state dated from since.
func (m *nodeMemory) setAbortRequested(id string, at, since time.Time) {
	m.update(id, func(f *nodeFacts) { f.abort = abortRequest{at: at, stateSince: since} })
}

// abortRequested returns the abort asked of the node that a failed state dated failedAt may have
// come from: asked no earlier than notBefore, with the node's state then older than failedAt.
func (m *nodeMemory) abortRequested(id string, failedAt, notBefore time.Time) (a abortRequest, ok bool) {
	m.read(id, func(f nodeFacts) {
		a = f.abort
		ok = !a.at.IsZero() && !a.at.Before(notBefore) && a.stateSince.Before(failedAt)
	})
	return a, ok
}

// abortAskedIn reports whether an abort was asked of the node while it was in the provision state
// it entered at stateSince (Ironic takes an abort of a step that cannot be aborted as "abort
// after it": the node stays in its wait state until the step ends).
func (m *nodeMemory) abortAskedIn(id string, stateSince time.Time) (ok bool) {
	m.read(id, func(f nodeFacts) { ok = !f.abort.at.IsZero() && f.abort.stateSince.Equal(stateSince) })
	return ok
}

// clearAbortRequested drops the remembered abort (its failed state was read).
func (m *nodeMemory) clearAbortRequested(id string) {
	m.update(id, func(f *nodeFacts) { f.abort = abortRequest{} })
}
