package host

import (
	"errors"
	"fmt"
	"strings"
	"time"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/conditions"
	"github.com/metalforge/metalforge/internal/provisioner"
)

// Live updates (servicing) of provisioned hosts: the behaviour of the states whose row says
// liveUpdates (provisioned, externally provisioned), as metal3's design has it.
//
// A host whose HostUpdatePolicy says onReboot for firmwareSettings and/or firmwareUpdates, with
// pending valid changes of those kinds, is serviced when it would be powered on: after the reboot
// annotation powered it off (the one-shot annotation is removed then), or when spec.online turns
// it back on. The host is not powered on; instead operationalStatus becomes servicing and the
// status is written before the provisioner is asked (so that a restart in between finds the host
// servicing, never a second servicing started behind an OK status; with an image builder the
// agent image is also made ready in between). The provisioner then runs the service steps and
// does the reboots; the host ends powered on with operationalStatus OK, and applied firmware
// updates are recorded in HostFirmwareComponents' status.updates.
//
// A failure is errorType servicing error with the provisioner's (sanitized) message, reported once.
// The live update is then started again by itself after the error backoff, up to ServicingRetries
// times (metal3 retries for ever; a BMC that answered one request with a 500 should not leave a
// worker off until someone notices, nor should a BMC that refuses a value reboot it for ever).
// After that the failure is kept until the user changes the pending changes (the provisioner then
// starts over with the new ones) or removes them (the provisioner aborts, the host returns to OK).
// Servicing keeps power and detaching to the provisioner until it ends; deleting or deprovisioning
// the host ends it.

// OperationalTransition is a change of operationalStatus within a state (the live update flow).
type OperationalTransition struct {
	From, To metal3.OperationalStatus
	Trigger  string
}

// LiveUpdateTransitions is how operationalStatus moves through a live update, in the states whose
// row says liveUpdates. It documents the functions below (docs/host-state-machine.md is generated
// from it); change both together.
var LiveUpdateTransitions = []OperationalTransition{
	{metal3.OperationalStatusOK, metal3.OperationalStatusServicing,
		"reboot with allowed changes; the host would power on (after a reboot annotation, or online again) with pending valid changes its HostUpdatePolicy sets to onReboot"},
	{metal3.OperationalStatusServicing, metal3.OperationalStatusOK, "changes applied; applied updates recorded in HostFirmwareComponents status.updates"},
	{metal3.OperationalStatusServicing, metal3.OperationalStatusError, "a service step failed; errorType servicing error, with the provisioner's message"},
	{metal3.OperationalStatusError, metal3.OperationalStatusServicing, "retry; after the error backoff, up to --servicing-retries times, or at once when the pending changes changed"},
	{metal3.OperationalStatusError, metal3.OperationalStatusOK, "abort; the pending changes were removed"},
	{metal3.OperationalStatusServicing, metal3.OperationalStatusOK, "abort; the pending changes were removed while the provisioner waits"},
}

// servicing: a live update is running, or failed and waits for the user.
func (s *hostScope) servicing() bool {
	st := s.host.Status
	return st.OperationalStatus == metal3.OperationalStatusServicing || st.ErrorType == metal3.ServicingError
}

// liveUpdate is what the host may apply on reboot: the pending valid changes its policy allows,
// with the time its servicing started (the Ready condition turned to Servicing then; zero after a
// failure, whose request the provisioner recognises by its content).
// unchecked: the spec asks for changes of an allowed kind that their controller has not judged yet.
func (s *hostScope) liveUpdate() (data provisioner.ServiceData, unchecked bool) {
	if ready := conditions.Get(s.host.Status.Conditions, metal3.ReadyCondition); ready != nil && ready.Reason == metal3.ServicingReason {
		data.Since = ready.LastTransitionTime.Time
	}
	fw, policy := s.in.firmware, s.in.policy
	if policy.settings {
		data.FirmwareSettings, unchecked = fw.settings, fw.uncheckedSettings
	}
	if policy.updates {
		data.FirmwareUpdates, unchecked = fw.updates, unchecked || fw.uncheckedUpdates
	}
	return data, unchecked
}

// waitingChecked is the Progressing message while changes wait for their controller's verdict.
const waitingChecked = "the firmware changes in spec to be checked by their controller"

// startServicing is called when the host would be powered on. It starts a live update when there
// is one, answering true; false lets the host power on as usual.
func (s *hostScope) startServicing() (outcome, bool) {
	if s.servicedNow {
		return outcome{}, false
	}
	data, unchecked := s.liveUpdate()
	if unchecked {
		return waitFor(s.cfg.InputRetryDelay, waitingChecked), true
	}
	if data.Empty() {
		return outcome{}, false
	}
	supported, err := s.prov.ServicingSupported(s.ctx)
	if err != nil {
		return s.provError(err, "asking about servicing for"), true
	}
	s.fx.servicingSupported = &supported
	if !supported {
		return outcome{}, false // powered on as usual; the LiveUpdates condition says why
	}
	if out, wait := s.checkCapacity(); wait {
		return out, true
	}
	s.clearError()
	s.host.Status.OperationalStatus = metal3.OperationalStatusServicing
	s.event(eventNormal, reasonServicingStarted, "Servicing", "Live update started: "+describeServiceData(data))
	// Written before the provisioner starts anything (see above); the next reconcile continues.
	return waitFor(time.Millisecond, "the live update to start"), true
}

// continueServicing follows a live update that started, or failed and waits for the user.
func (s *hostScope) continueServicing() outcome {
	data, unchecked := s.liveUpdate()
	if unchecked {
		return waitFor(s.cfg.InputRetryDelay, waitingChecked)
	}
	if s.finished.has(s.host.UID, data.Since) {
		// The provisioner finished this live update, and the status write that ended it failed.
		// Asked again, the request would differ (applied updates are recorded by then, settings
		// still show their old values): a request never run, which it would run again.
		return s.completeServicing(data)
	}
	st := &s.host.Status
	retryLeft := st.ErrorType == metal3.ServicingError && st.ErrorCount <= s.cfg.ServicingRetries
	backoff, backingOff := s.backingOff(metal3.ServicingError)
	data.RetryFailed = retryLeft && !backingOff
	res, err := s.prov.Service(s.ctx, s.provHost(), data)
	if errors.Is(err, provisioner.ErrServicingUnsupported) {
		supported := false
		s.fx.servicingSupported = &supported
		s.endServicing(eventNormal, reasonServicingAborted, "Live update not started: the provisioner cannot service provisioned hosts")
		return repeat()
	}
	if err != nil {
		return s.provError(err, "servicing")
	}
	switch {
	case res.Failed():
		if !data.RetryFailed && st.ErrorType == metal3.ServicingError && st.ErrorMessage == res.ErrorMessage {
			// The same failure, reported already: retried once its backoff is over, or, with no
			// retry left, it stays until the changes do. (Asked to retry, a failure is the
			// retry's own, even with the same message.)
			if retryLeft && backingOff {
				return backoff
			}
			return s.waitForChangedServicing()
		}
		s.fx.servicingFailed = true
		out := s.fail(metal3.ServicingError, res.ErrorMessage)
		if st.ErrorCount > s.cfg.ServicingRetries {
			return s.waitForChangedServicing()
		}
		return out // retried after the backoff
	case res.Busy && data.Empty():
		// The changes were taken back: the provisioner aborts what failed or waited; the error
		// stays shown until the host is back to OK.
		return waitOn(res, "the provisioner to abort the live update")
	}
	if st.OperationalStatus != metal3.OperationalStatusServicing && !data.Empty() && (res.Busy || data.RetryFailed) {
		// A failed one started again: retried (perhaps done at once), or with changed changes.
		s.restartedServicing(data)
	}
	if res.Busy {
		return waitOn(res, "the provisioner to apply the live update (servicing)")
	}
	if data.Empty() {
		if len(res.StagedSettings) > 0 {
			s.endServicing(eventWarning, reasonServicingAborted, abortedWithStagedSettings(res.StagedSettings))
		} else {
			s.endServicing(eventNormal, reasonServicingAborted, "Live update aborted: its changes were removed")
		}
		return repeat()
	}
	s.finished.record(s.host.UID, data.Since)
	return s.completeServicing(data)
}

// completeServicing ends a live update the provisioner finished: applied updates recorded, the
// host back to OK and powered as spec.online says.
func (s *hostScope) completeServicing(data provisioner.ServiceData) outcome {
	if !data.Since.IsZero() {
		d := s.now.Sub(data.Since)
		s.fx.serviced = &d
	}
	if len(data.FirmwareUpdates) > 0 {
		s.recordAppliedUpdates()
	}
	s.endServicing(eventNormal, reasonServicingComplete, "Live update complete: "+describeServiceData(data))
	// Power as spec.online says (the provisioner left the host on). The changes' controllers have
	// not read the host again yet, so the same changes still look pending: no new live update may
	// start from them in this reconcile.
	s.servicedNow = true
	return repeat()
}

// waitForChangedServicing: a failed live update with no retry left waits for its changes to change.
func (s *hostScope) waitForChangedServicing() outcome {
	return waitFor(s.cfg.PowerPoll, fmt.Sprintf("the live update's changes to be changed or removed (it failed %d times)", s.host.Status.ErrorCount))
}

// restartedServicing records a failed live update started again: by itself (a retry, which keeps
// errorCount so that the retries stop at ServicingRetries) or with a changed request.
func (s *hostScope) restartedServicing(data provisioner.ServiceData) {
	st := &s.host.Status
	note := "Live update started again: " + describeServiceData(data)
	if data.RetryFailed {
		note = fmt.Sprintf("Live update started again (retry %d of %d) after: %s", st.ErrorCount, s.cfg.ServicingRetries, st.ErrorMessage)
		st.ErrorType, st.ErrorMessage = "", ""
	} else {
		s.clearError()
	}
	st.OperationalStatus = metal3.OperationalStatusServicing
	s.event(eventNormal, reasonServicingStarted, "Servicing", note)
}

// endServicing returns the host to OK with an event.
func (s *hostScope) endServicing(eventType, reason, note string) {
	st := &s.host.Status
	st.ErrorType, st.ErrorMessage, st.ErrorCount = "", "", 0
	st.OperationalStatus = metal3.OperationalStatusOK
	s.event(eventType, reason, "Servicing", note)
}

// abortedWithStagedSettings is the note of an abort that could not take back the BIOS settings the
// provisioner had already sent to the BMC: the server's next boot applies them, and nothing shows
// them until the provisioner reads the BIOS again.
func abortedWithStagedSettings(names []string) string {
	return sanitizeMessage("Live update aborted: its changes were removed, but the BMC had already been sent BIOS settings " +
		strings.Join(names, ", ") + " and applies them at the server's next boot; HostFirmwareSettings shows them " +
		"only once the provisioner reads the BIOS again (the next live update or cleaning)")
}

// recordAppliedUpdates asks the driver to record HostFirmwareComponents' spec.updates (as read) in
// its status.updates.
func (s *hostScope) recordAppliedUpdates() {
	if s.in.firmware.specUpdates != nil {
		s.fx.appliedUpdates, s.fx.recordUpdates = s.in.firmware.specUpdates, true
	}
}

// describeServiceData names what a live update changes, for events.
func describeServiceData(d provisioner.ServiceData) string {
	var parts []string
	if n := len(d.FirmwareSettings); n > 0 {
		parts = append(parts, fmt.Sprintf("%d firmware setting(s)", n))
	}
	for _, u := range d.FirmwareUpdates {
		parts = append(parts, "firmware update of "+u.Component)
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}
