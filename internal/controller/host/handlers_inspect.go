package host

import (
	"errors"
	"maps"
	"reflect"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/conditions"
	"github.com/metalforge/metalforge/internal/provisioner"
)

func handleInspecting(s *hostScope) outcome {
	if s.host.InspectionDisabled() {
		return s.skipInspection()
	}
	// The annotation asks for a new inspection. It stays until the provisioner has one under way
	// (or it ended): it is the only record of the request, and taking the host back (Ironic's
	// available → manageable) takes more than one reconcile.
	v, requested := s.annotation(metal3.InspectAnnotationPrefix)
	requested = requested && v != metal3.InspectAnnotationValueDisabled
	if !requested {
		if out, wait := s.backingOff(metal3.InspectionError); wait {
			return out
		}
		if s.host.Status.OperationalStatus == metal3.OperationalStatusDelayed {
			// Inspected, and held back from preparing by provisioner capacity: the inventory is
			// read again only once the host may move on.
			if out, wait := s.checkCapacity(); wait {
				return out
			}
		}
	}
	opts := provisioner.InspectOptions{Refresh: requested, RestartOnFailure: s.restartOnFailure(metal3.InspectionError),
		ForceReboot: s.rebootRequests().forcedOneShot}
	res, hw, err := s.prov.Inspect(s.ctx, s.provHost(), opts)
	if err != nil {
		return s.provError(err, "inspecting")
	}
	s.retryUnderWay(metal3.InspectionError, opts.RestartOnFailure, res)
	if requested && (res.Started || !res.Busy) {
		s.removeAnnotation(metal3.InspectAnnotationPrefix) // a failure is not asked for again
	}
	if res.Started {
		// The inspection reboots the host as it needs (metal3 clears them as it starts).
		s.clearRebootAnnotations()
	}
	if res.ForcedReboot {
		s.event(eventNormal, reasonRebootForced, "Reboot",
			"Forced reboot: the inspection waiting for its agent was stopped and starts again")
	}
	if out, done := s.follow(res, metal3.InspectionError, "the provisioner to finish inspecting the hardware"); !done {
		return out
	}
	if hw == nil {
		return internalError(errors.New("provisioner finished inspection without hardware details"))
	}
	// Recorded once the host moves on: the cached status holds the hardware reduced (compactHost),
	// so a copy set at every capacity look was a whole status write each time.
	return advance(metal3.StatePreparing).then(func() { s.setHardware(hw) })
}

// skipInspection moves a host whose inspection was disabled while it inspected (a failing one
// the user gave up on: spec.inspectionMode or the inspect annotation "disabled") on to preparing,
// as metal3 does, once the provisioner stopped the inspection under way; the inspection's error
// goes with it. Without it the host retried the failing inspection for ever.
func (s *hostScope) skipInspection() outcome {
	res, _, err := s.prov.Inspect(s.ctx, s.provHost(), provisioner.InspectOptions{Skip: true})
	if err != nil {
		return s.provError(err, "stopping the inspection of")
	}
	if res.Busy {
		return waitOn(res, "the provisioner to stop the inspection (inspection disabled)")
	}
	if res.Failed() {
		return s.provError(errors.New(res.ErrorMessage), "stopping the inspection of")
	}
	s.clearErrorOf(metal3.InspectionError)
	// An inspect annotation asking for an inspection the spec disables is answered by this skip:
	// left in place, it took the host from available back here at every pass, for ever.
	if v, ok := s.annotation(metal3.InspectAnnotationPrefix); ok && v != metal3.InspectAnnotationValueDisabled {
		s.removeAnnotation(metal3.InspectAnnotationPrefix)
	}
	s.event(corev1.EventTypeNormal, reasonInspectionSkipped, "Inspect", "Inspection disabled: the host goes on without it")
	return advance(metal3.StatePreparing)
}

// setHardware records inspected (or annotated) hardware in status and in the HardwareData.
func (s *hostScope) setHardware(hw *metal3.HardwareDetails) {
	s.host.Status.HardwareDetails = hw
	s.fx.hardwareData = hw
}

func handleMatchProfile(*hostScope) outcome { return advance(metal3.StatePreparing) }

func handlePreparing(s *hostScope) outcome {
	run, running := s.preparations.get(s.host.UID)
	if running && run.done {
		if !s.leftPreparingNow() {
			// The preparation ended, but the status write that recorded it failed: it is ended
			// again from memory. Asking anew would be a different request (the updates it applied
			// are recorded in HostFirmwareComponents now, no longer pending): a second cleaning
			// that applies the settings again.
			return s.endPreparation(run, true)
		}
		// Ended earlier in this reconcile, and the host came back: a new preparation.
		s.preparations.forget(s.host.UID)
		run, running = preparation{}, false
	}
	// A request is made of judged changes only: one not judged yet is waited for, unless the
	// request of a preparation under way is kept.
	unchecked := s.in.firmware.uncheckedSettings || s.in.firmware.uncheckedUpdates
	if !running && unchecked {
		return waitFor(s.cfg.InputRetryDelay, "the firmware changes in spec to be checked by their controller")
	}
	if out, wait := s.backingOff(metal3.PreparationError); wait {
		return out
	}
	retried := s.restartOnFailure(metal3.PreparationError)
	if !running || retried {
		// A retry after a failure takes the spec as it is now: the user may have fixed it.
		if unchecked {
			return waitFor(s.cfg.InputRetryDelay, "the firmware changes in spec to be checked by their controller")
		}
		run = s.newPreparation()
	}
	res, err := s.prov.Prepare(s.ctx, s.provHost(), run.data, retried)
	if err != nil {
		return s.provError(err, "preparing")
	}
	s.retryUnderWay(metal3.PreparationError, retried, res)
	if out, done := s.follow(res, metal3.PreparationError, "the provisioner to apply RAID, root device hints and firmware changes"); !done {
		if res.Busy {
			s.preparations.put(s.host.UID, run) // under way: later edits wait for the next one
		} else {
			s.preparations.forget(s.host.UID)
		}
		return out
	}
	return s.endPreparation(run, running && !retried)
}

// leftPreparingNow: this reconcile moved the host out of preparing already.
func (s *hostScope) leftPreparingNow() bool {
	return slices.ContainsFunc(s.fx.transitions, func(t [2]metal3.ProvisioningState) bool { return t[0] == metal3.StatePreparing })
}

// endPreparation records what the preparation run applied and moves the host on: to available,
// or (changedWhileRunning, when asked) to a preparation of what was asked while it ran. The run
// is remembered as done until a reconcile sees the host out of preparing, so that a failed status
// write does not make the next reconcile start it again.
func (s *hostScope) endPreparation(run preparation, changedWhileRunning bool) outcome {
	run.done = true
	s.preparations.put(s.host.UID, run)
	s.preparations.markEnded(s.host.UID, s.wall)
	st := &s.host.Status.Provisioning
	st.RAID, st.RootDeviceHints = run.raid, run.hints
	switch {
	case len(run.data.FirmwareUpdates) == 0:
	case reflect.DeepEqual(run.data.FirmwareUpdates, s.in.firmware.updates):
		s.recordAppliedUpdates() // spec.updates as read, as metal3 records them
	default:
		// The spec changed while the preparation ran: only what it applied is recorded.
		s.recordServicedUpdates(run.data.FirmwareUpdates)
	}
	if changedWhileRunning {
		if next, ok := s.changedWhileRunning(run); ok {
			// What was asked while the preparation ran goes next, at once: once available, the
			// host would take a change judged before it became available for one the preparation
			// applied (firmwareChangedSince), and never apply it.
			s.preparations.put(s.host.UID, next)
			return waitFor(time.Second, "the provisioner to apply the changes made while the last preparation ran")
		}
	}
	return advance(metal3.StateAvailable)
}

// changedWhileRunning is the preparation of what the spec asks beyond what run (and the
// preparations before it in this stay in preparing) applied, ok false when nothing: RAID and root
// device hints that differ from what run recorded, firmware settings and updates pending that were
// not applied as they are asked now. The settings the HostFirmwareSettings show are those from
// before the first of them (its controller reads the host again only once it leaves preparing),
// so the applied settings still look pending: they are left out.
func (s *hostScope) changedWhileRunning(run preparation) (preparation, bool) {
	applied := run.applied
	applied.FirmwareSettings = maps.Clone(applied.FirmwareSettings)
	if applied.FirmwareSettings == nil {
		applied.FirmwareSettings = metal3.DesiredSettingsMap{}
	}
	maps.Copy(applied.FirmwareSettings, run.data.FirmwareSettings)
	applied.FirmwareUpdates = append(slices.Clone(applied.FirmwareUpdates), run.data.FirmwareUpdates...)

	next := s.newPreparation()
	next.applied = applied
	var settings metal3.DesiredSettingsMap
	for name, v := range next.data.FirmwareSettings {
		if was, ok := applied.FirmwareSettings[name]; !ok || was.String() != v.String() {
			if settings == nil {
				settings = metal3.DesiredSettingsMap{}
			}
			settings[name] = v
		}
	}
	next.data.FirmwareSettings = settings
	next.data.FirmwareUpdates = slices.DeleteFunc(slices.Clone(next.data.FirmwareUpdates), func(u metal3.FirmwareUpdate) bool {
		return slices.Contains(applied.FirmwareUpdates, u)
	})
	if len(next.data.FirmwareUpdates) == 0 {
		next.data.FirmwareUpdates = nil
	}
	d := next.data
	return next, d.TargetRAIDConfig != nil || d.RootDeviceHints != nil || d.FirmwareSettings != nil || d.FirmwareUpdates != nil
}

// newPreparation is the request of a preparation starting now, and the spec it records.
func (s *hostScope) newPreparation() preparation {
	return preparation{data: s.prepareData(), raid: s.host.Spec.RAID.DeepCopy(), hints: s.host.Spec.RootDeviceHints.DeepCopy()}
}

// prepareData is what changed since the last preparation: RAID and root device hints that differ
// from status, and pending HostFirmwareSettings/Components changes.
func (s *hostScope) prepareData() provisioner.PrepareData {
	spec, st := s.host.Spec, s.host.Status.Provisioning
	data := provisioner.PrepareData{
		ActualRAIDConfig: st.RAID.DeepCopy(),
		FirmwareSettings: s.in.firmware.settings,
		FirmwareUpdates:  s.in.firmware.updates,
	}
	if spec.RAID != nil && !reflect.DeepEqual(spec.RAID, st.RAID) {
		data.TargetRAIDConfig = spec.RAID.DeepCopy()
	}
	if spec.RootDeviceHints != nil && !reflect.DeepEqual(spec.RootDeviceHints, st.RootDeviceHints) {
		data.RootDeviceHints = spec.RootDeviceHints.DeepCopy()
	}
	return data
}

// needsPreparing: the RAID or root device hints in spec differ from what was applied, or the
// firmware changes ask for something new since the host's last preparation (metal3 prepares an
// available host again for them).
func (s *hostScope) needsPreparing() bool {
	spec, st := s.host.Spec, s.host.Status.Provisioning
	return (spec.RAID != nil && !reflect.DeepEqual(spec.RAID, st.RAID)) ||
		(spec.RootDeviceHints != nil && !reflect.DeepEqual(spec.RootDeviceHints, st.RootDeviceHints)) ||
		firmwareChangedSince(s.in.firmware, s.firmwareCutoff())
}

// firmwareCutoff is the time from which a pending firmware change is one the host's last
// preparation did not have. It is when the host became available: its last preparation ended
// then. A host that came back from deprovisioning (its deprovisioning ended as it became
// available) had its last preparation before it started provisioning: a change made while it was
// provisioning or provisioned (a setting waiting for the next preparation, a live update that
// failed) is new to it, and the host prepares for it before it provisions again. A preparation
// ended in this process at or after that deprovisioning (the API's times are seconds: a quick one
// can end in the same second) puts the cutoff back to when the host became available. A host that
// came back from deprovisioning without ever provisioning here (externally provisioned: adopted
// hosts) has no time its last preparation could have had a change from: every pending change is
// new to it (one that was applied before and still shows as pending costs one preparation, after
// which the host is available again and the cutoff is that time).
func (s *hostScope) firmwareCutoff() time.Time {
	since := availableSince(s.host, s.now.Time)
	history := s.host.Status.OperationHistory
	provisioned, deprovisioned := history.Provision.Start.Time, history.Deprovision.End.Time
	if deprovisioned.IsZero() || deprovisioned.Before(since) || (!provisioned.IsZero() && deprovisioned.Before(provisioned)) {
		return since
	}
	if ended, ok := s.preparations.endedAt(s.host.UID); ok && !ended.Before(deprovisioned) {
		return since
	}
	return provisioned
}

// firmwareChangedSince: a firmware change waits to be judged, or a pending valid change's object
// changed status at or after since. Pending changes whose object has not changed since are the
// ones the last preparation applied, before their controller read the host again (it keeps the
// settings it showed while the host prepares), or ones the host did not take (the BMC ignored a
// setting): preparing again for them would repeat the work, and for ever in the second case.
func firmwareChangedSince(fw firmwareInputs, since time.Time) bool {
	return fw.uncheckedSettings || fw.uncheckedUpdates ||
		(len(fw.settings) > 0 && !fw.settingsChanged.Before(since)) ||
		(len(fw.updates) > 0 && !fw.updatesChanged.Before(since))
}

// availableSince is when the host became available for provisioning (its AvailableForProvisioning
// condition turned True), now when it has just arrived (the condition is written after this
// reconcile). The condition is False with reason Available while an available host shows an
// error or is detached, and True again, with a new time, once that ends: nothing was prepared
// then, so the time is the one it turned False, and a change made while the error lasted is
// applied once it is fixed (the reconcile that clears the error still sees it False). Times are
// compared at the second, as the API stores them.
func availableSince(h *metal3.BareMetalHost, now time.Time) time.Time {
	c := conditions.Get(h.Status.Conditions, metal3.AvailableForProvisioningCondition)
	if c != nil && (c.Status == metav1.ConditionTrue || c.Reason == metal3.AvailableReason) {
		return c.LastTransitionTime.Time
	}
	return now.Truncate(time.Second)
}
