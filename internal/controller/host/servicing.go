package host

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/conditions"
	"github.com/metalforge/metalforge/internal/controller/events"
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
// A failure the provisioner says was the BMC's (Result.Transient: a server error or no answer) is
// retried past that limit, with the growing backoff, as metal3 does: under BMC faults (fault
// campaign seed 32) four of them in a row left a host waiting for a user with nothing to change.
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
	{metal3.OperationalStatusError, metal3.OperationalStatusServicing, "retry; after the error backoff, up to --servicing-retries times (past that when the BMC failed: a server error or no answer), or at once when the pending changes changed"},
	{metal3.OperationalStatusError, metal3.OperationalStatusOK, "abort; the pending changes were removed, or an edit their controller judged invalid left none"},
	{metal3.OperationalStatusServicing, metal3.OperationalStatusOK, "abort; the pending changes were removed (or judged invalid) while the provisioner waits"},
}

// servicing: a live update is running, or failed and waits for the user.
func (s *hostScope) servicing() bool {
	st := s.host.Status
	return st.OperationalStatus == metal3.OperationalStatusServicing || st.ErrorType == metal3.ServicingError
}

// liveUpdate is what the host may apply on reboot: the pending valid changes its policy allows,
// with the time its servicing attempt started (the Ready condition turned to Servicing then, in
// whole seconds; zero after a failure, kept while a running one waits for its agent image). The
// provisioner keeps that time with the run it starts and recognises the attempt's run by it
// (waitNewSecond keeps attempts apart).
// unchecked: the spec asks for changes of an allowed kind that their controller has not judged yet.
func (s *hostScope) liveUpdate() (data provisioner.ServiceData, unchecked bool) {
	if since, ok := servicingSince(&s.host.Status); ok {
		data.Since = since
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

// servicingSince is when the live update's attempt started: the Ready condition's turn to its
// Servicing reason (whole seconds). ok is false when Ready does not say Servicing.
func servicingSince(st *metal3.BareMetalHostStatus) (since time.Time, ok bool) {
	if ready := conditions.Get(st.Conditions, metal3.ReadyCondition); ready != nil && ready.Reason == metal3.ServicingReason {
		return ready.LastTransitionTime.Time, true
	}
	return time.Time{}, false
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
	// No capacity check (metal3 has none for servicing, and servicing states are not among those
	// PROVISIONING_LIMIT counts): a host powered off for the reboot that starts its live update
	// stayed off for as long as other hosts filled the limit.
	if out, wait := s.waitNewSecond(); wait {
		return out, true
	}
	s.clearError()
	s.host.Status.OperationalStatus = metal3.OperationalStatusServicing
	s.event(eventNormal, reasonServicingStarted, "Servicing", "Live update started: "+describeServiceData(data))
	// Written before the provisioner starts anything (see above); the next reconcile continues.
	return waitFor(time.Millisecond, "the live update to start"), true
}

// continueServicing follows a live update that started, or failed and waits for the user. A
// failed one is started again (a retry after its backoff, or changed changes at once) by writing
// the status first, as a first start is: the provisioner is asked with the new attempt's time
// (liveUpdate's Since) only by the next reconcile, so its record of the run always names the
// attempt the status shows.
func (s *hostScope) continueServicing() outcome {
	data, unchecked := s.liveUpdate()
	if unchecked {
		return waitFor(s.cfg.InputRetryDelay, waitingChecked)
	}
	if run, ok := s.finished.has(s.host.UID, data.Since); ok {
		// The provisioner finished this live update, and the status write that ended it failed:
		// ended again, announced as the first time (an abort stays an abort).
		if run.ended != nil {
			return s.completeServicing(run.applied, *run.ended)
		}
		return s.completeServicing(run.applied)
	}
	st := &s.host.Status
	failed := st.OperationalStatus != metal3.OperationalStatusServicing
	retryLeft := failed && st.ErrorCount <= s.cfg.ServicingRetries
	backoff, backingOff := s.backingOff(metal3.ServicingError)
	if failed && !data.Empty() {
		if retryLeft && !backingOff {
			return s.restartServicing(data, true)
		}
		data.AfterFailure = true // report or follow; a restart is the host's to write first
	}
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
		bmcFault := res.Transient && s.cfg.ServicingRetries > 0
		if failed && st.ErrorMessage == res.ErrorMessage {
			// The same failure, reported already: retried once its backoff is over, or, with no
			// retry left, it stays until the changes do. A BMC's failure is retried past the
			// limit (the retries within it started before the provisioner was asked).
			switch {
			case (retryLeft || bmcFault) && backingOff:
				return backoff
			case bmcFault:
				return s.restartServicing(data, true)
			}
			return s.waitForChangedServicing()
		}
		s.fx.servicingFailed = true
		out := s.fail(metal3.ServicingError, res.ErrorMessage)
		if st.ErrorCount > s.cfg.ServicingRetries && !bmcFault {
			return s.waitForChangedServicing()
		}
		return out // retried after the backoff
	case res.Restart:
		// Not the request that failed (the user changed the changes; the settings shown stay as
		// they were while the host is in servicing error, so the change is the user's), or one
		// only interrupted: started again at once.
		return s.restartServicing(data, false)
	case res.Busy && data.Empty():
		// The changes were taken back: the provisioner aborts what failed or waited; the error
		// stays shown until the host is back to OK.
		return waitOn(res, "the provisioner to abort the live update")
	case res.Busy:
		return waitOn(res, "the provisioner to apply the live update (servicing)")
	}
	applied := res.Serviced
	switch {
	case applied == nil && data.Empty():
		if len(res.StagedSettings) > 0 {
			s.endServicing(eventWarning, reasonServicingAborted, abortedWithStagedSettings(s.abortCause(), res.StagedSettings))
		} else {
			s.endServicing(eventNormal, reasonServicingAborted, "Live update aborted: "+s.abortCause())
		}
		return repeat()
	case applied == nil:
		// A provisioner that keeps no record of its runs: what was asked is what ran.
		applied = &provisioner.Serviced{Settings: slices.Sorted(maps.Keys(data.FirmwareSettings)), Updates: data.FirmwareUpdates}
	}
	if data.Empty() {
		// The changes were taken back and the provisioner aborted, after steps that applied
		// something: recorded as a finished run, announced as the abort it was.
		ended := abortedAfter(*applied, s.abortCause(), res.StagedSettings)
		s.finished.record(s.host.UID, data.Since, *applied, &ended)
		return s.completeServicing(*applied, ended)
	}
	s.finished.record(s.host.UID, data.Since, *applied, nil)
	return s.completeServicing(*applied)
}

// abortedAfter is the event of an abort that reports what its steps applied before it (and
// which BIOS settings the BMC was sent and applies at the next boot, if any).
func abortedAfter(applied provisioner.Serviced, cause string, staged []string) events.Event {
	note := "Live update aborted after applying " + describeServiced(applied) + ": " + cause
	if len(staged) > 0 {
		return events.Event{Type: eventWarning, Reason: reasonServicingAborted, Note: stagedSettingsNote(note, staged)}
	}
	return events.Event{Type: eventNormal, Reason: reasonServicingAborted, Note: note}
}

// completeServicing ends a live update the provisioner finished: the updates it applied recorded
// (what its run applied, not the request of the moment: changes made while it ran wait for the
// next reboot), the host back to OK and powered as spec.online says. ended, when given, is the
// event instead of "complete" (an abort that applied something).
func (s *hostScope) completeServicing(applied provisioner.Serviced, ended ...events.Event) outcome {
	if since, ok := servicingSince(&s.host.Status); ok {
		d := s.now.Sub(since)
		s.fx.serviced = &d
	}
	if len(applied.Updates) > 0 {
		s.recordServicedUpdates(applied.Updates)
	}
	if len(ended) > 0 {
		s.endServicing(ended[0].Type, ended[0].Reason, ended[0].Note)
	} else {
		s.endServicing(eventNormal, reasonServicingComplete, "Live update complete: "+describeServiced(applied))
	}
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

// restartServicing starts a failed live update again: by itself (a retry, which keeps errorCount
// so that the retries stop at ServicingRetries, and the backoff keeps growing past it after BMC
// failures) or with changed changes. Like a first start, it is written before the provisioner is
// asked, in a second after the Ready condition's last transition, so that the new attempt's time
// (the Since the provisioner keeps with its run) is one no earlier attempt had.
func (s *hostScope) restartServicing(data provisioner.ServiceData, retry bool) outcome {
	if out, wait := s.waitNewSecond(); wait {
		return out
	}
	st := &s.host.Status
	note := "Live update started again: " + describeServiceData(data)
	if retry {
		which := fmt.Sprintf("retry %d of %d", st.ErrorCount, s.cfg.ServicingRetries)
		if st.ErrorCount > s.cfg.ServicingRetries {
			which = fmt.Sprintf("retry %d, past the limit of %d: the BMC failed", st.ErrorCount, s.cfg.ServicingRetries)
		}
		note = fmt.Sprintf("Live update started again (%s) after: %s", which, st.ErrorMessage)
		st.ErrorType, st.ErrorMessage = "", ""
	} else {
		s.clearError()
	}
	st.OperationalStatus = metal3.OperationalStatusServicing
	s.event(eventNormal, reasonServicingStarted, "Servicing", note)
	return waitFor(time.Millisecond, "the live update to start again")
}

// waitNewSecond holds a live update's start until the second after the Ready condition's last
// transition (times are whole seconds): every earlier attempt's time is at or before it. The
// wait is at most maxNewSecondWait: a transition further ahead of this process's clock was
// written by an earlier leader whose clock ran ahead, and waiting out the skew would hold every
// start for as long; the attempt's time only has to differ from the earlier ones (the
// provisioner compares it with itself, never orders it), and a time before them does.
func (s *hostScope) waitNewSecond() (outcome, bool) {
	ready := conditions.Get(s.host.Status.Conditions, metal3.ReadyCondition)
	if ready == nil || s.now.Truncate(time.Second).After(ready.LastTransitionTime.Time) {
		return outcome{}, false
	}
	wait := ready.LastTransitionTime.Add(time.Second).Sub(s.now.Time)
	if wait > maxNewSecondWait {
		return outcome{}, false
	}
	return waitFor(wait, "the live update to start"), true
}

// maxNewSecondWait bounds waitNewSecond: the next second, and a second of clock skew.
const maxNewSecondWait = 2 * time.Second

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
func abortedWithStagedSettings(cause string, names []string) string {
	return stagedSettingsNote("Live update aborted: "+cause, names)
}

// abortCause says why a live update's changes are gone: removed, or (an edit their controller
// judged invalid) no longer valid, which the object's Valid condition explains; metal3 aborts
// then too, and the valid part of the spec is applied at a later reboot once it is fixed.
func (s *hostScope) abortCause() string {
	fw, policy := s.in.firmware, s.in.policy
	var invalid []string
	if policy.settings && fw.invalidSettings {
		invalid = append(invalid, "HostFirmwareSettings")
	}
	if policy.updates && fw.invalidUpdates {
		invalid = append(invalid, "HostFirmwareComponents")
	}
	if len(invalid) == 0 {
		// Pending changes the policy does not allow (onPreparing, or the policy deleted) are not
		// removed: they apply when the host is next prepared. Whether the policy changed or the
		// allowed changes were removed, the host cannot tell (it does not know what the run
		// carried): both are said.
		if (!policy.settings && len(fw.settings) > 0) || (!policy.updates && len(fw.updates) > 0) {
			return "its changes were removed, or its HostUpdatePolicy no longer allows live updates of them " +
				"(changes the policy does not allow apply the next time the host is prepared)"
		}
		return "its changes were removed"
	}
	return "its changes are no longer valid (see the Valid condition of " + strings.Join(invalid, " and ") +
		"); fixed, they apply at a later reboot"
}

// stagedSettingsNote adds the BIOS settings the BMC was sent and applies at the next boot to an
// abort's note.
func stagedSettingsNote(note string, names []string) string {
	return sanitizeMessage(note + ", but the BMC had already been sent BIOS settings " +
		strings.Join(names, ", ") + " and applies them at the server's next boot; HostFirmwareSettings shows them " +
		"only once the provisioner reads the BIOS again (the next live update or cleaning)")
}

// recordAppliedUpdates asks the driver to record HostFirmwareComponents' spec.updates (as read) in
// its status.updates (preparing applied every pending one).
func (s *hostScope) recordAppliedUpdates() {
	if s.in.firmware.specUpdates != nil {
		s.fx.appliedUpdates, s.fx.recordUpdates = s.in.firmware.specUpdates, true
	}
}

// recordServicedUpdates asks the driver to record the updates a live update (or a preparation
// whose request was edited while it ran) applied in
// HostFirmwareComponents' status.updates: those recorded before, each component's replaced by
// what was applied to it.
func (s *hostScope) recordServicedUpdates(applied []metal3.FirmwareUpdate) {
	if s.in.firmware.specUpdates == nil {
		return // no HostFirmwareComponents
	}
	out := slices.DeleteFunc(slices.Clone(s.in.firmware.statusUpdates), func(u metal3.FirmwareUpdate) bool {
		return slices.ContainsFunc(applied, func(a metal3.FirmwareUpdate) bool { return a.Component == u.Component })
	})
	s.fx.appliedUpdates, s.fx.recordUpdates = append(out, applied...), true
}

// describeServiced names what a finished live update applied, for events.
func describeServiced(a provisioner.Serviced) string {
	settings := make(metal3.DesiredSettingsMap, len(a.Settings))
	for _, name := range a.Settings {
		settings[name] = intstr.IntOrString{}
	}
	return describeServiceData(provisioner.ServiceData{FirmwareSettings: settings, FirmwareUpdates: a.Updates})
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
