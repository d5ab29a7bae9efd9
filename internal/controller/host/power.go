package host

import (
	"errors"
	"fmt"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner"
)

// reconcilePower keeps a host in a steady state (available, provisioned, externally provisioned)
// powered as spec.online asks, and carries out reboot annotations: any reboot annotation wants a
// provisioned host off (an available one only a forced one, as metal3); the one-shot one is
// removed once the host is off, so it comes back on; suffixed ones keep it off until their owner
// removes them. A host whose power off is disabled is never asked
// to power off: see rebootInPlace.
func (s *hostScope) reconcilePower() outcome {
	on, known, err := s.prov.PowerState(s.ctx, s.provHost())
	if err != nil {
		return s.provError(err, "reading the power state of")
	}
	if !known {
		return waitFor(s.cfg.PowerPoll/4, "the provisioner to report the power state")
	}
	st := &s.host.Status
	st.PoweredOn = on
	// A host off has done the one-shot reboot (or needs none): removed in any state, as metal3.
	if _, ok := s.annotation(metal3.RebootAnnotationPrefix); ok && !on {
		s.removeAnnotation(metal3.RebootAnnotationPrefix)
	}
	// Only a provisioned host takes any reboot annotation; the others only forced ones (metal3).
	state := s.state()
	reboot := s.rebootRequestsOf(state != metal3.StateProvisioned && state != metal3.StateExternallyProvisioned)
	if s.host.Spec.DisablePowerOff {
		if err := keptOff(s.host, reboot); err != nil {
			return s.inputFailure(metal3.PowerManagementError, err)
		}
		if on && reboot.oneShot {
			return s.rebootInPlace(reboot)
		}
	}
	wantOn := s.host.Spec.Online && !reboot.any()
	if on == wantOn {
		s.clearErrorOf(metal3.PowerManagementError)
		return waitFor(s.cfg.PowerPoll, "")
	}
	if wantOn && stateOf(s.state()).liveUpdates.is() {
		// The moment metal3's design services a host: it would be powered on.
		if out, ok := s.startServicing(); ok {
			return out
		}
		// And the moment its DataImage is attached or detached (dataimage.go): after servicing,
		// whose agent boots from the virtual CD (Ironic ejects whatever it held).
		if out, wait := s.syncDataImage(); wait {
			return out
		}
	}
	// A failed power change is asked again after the error backoff, as metal3 does: Ironic's
	// power sync wakes the host about a minute after each failure (it erases last_error), which
	// otherwise asked a BMC that refuses every minute for ever, a Warning each time.
	if out, wait := s.backingOff(metal3.PowerManagementError); wait {
		return out
	}
	host := s.provHost()
	var res provisioner.Result
	what := "the host to power on"
	// Forced after a power failure, as metal3 does; a reboot annotation's "force" is not a hard
	// power off (it restarts an agent wait, and metal3 still shuts the OS down with ACPI first:
	// a hard cut lost an etcd or database node's unwritten data).
	force := st.ErrorType == metal3.PowerManagementError
	if wantOn {
		res, err = s.prov.PowerOn(s.ctx, host, force)
	} else {
		mode := reboot.mode
		if st.ErrorCount > 0 {
			mode = metal3.RebootModeHard // a soft power off that failed is not tried again
		}
		res, err = s.prov.PowerOff(s.ctx, host, mode, force)
		what = "the host to power off"
	}
	if err != nil {
		return s.provError(err, "changing the power of")
	}
	if out, done := s.follow(res, metal3.PowerManagementError, what); !done {
		return out
	}
	st.PoweredOn = wantOn
	s.clearErrorOf(metal3.PowerManagementError)
	if wantOn {
		s.event(eventNormal, reasonPoweredOn, "PowerOn", "Host powered on")
	} else {
		s.event(eventNormal, reasonPoweredOff, "PowerOff", "Host powered off")
	}
	return repeat() // look again: a one-shot reboot now turns the host back on
}

// keptOff names what asks a host whose power off is disabled to stay off, which cannot be done:
// spec.online false (the webhook refuses it; a host written without the webhook gets this error)
// or a held reboot annotation (accepted by the webhook, as metal3's does), instead of power offs
// the provisioner refuses.
func keptOff(host *metal3.BareMetalHost, reboot rebootRequest) error {
	switch {
	case !host.Spec.Online:
		return errors.New("spec.disablePowerOff: cannot be true while spec.online is false: set online: true or disablePowerOff: false")
	case reboot.held:
		return fmt.Errorf("metadata.annotations: a %s/<key> annotation keeps a host off until it is removed, but spec.disablePowerOff is true: use the %s annotation (a reboot) or set disablePowerOff: false",
			metal3.RebootAnnotationPrefix, metal3.RebootAnnotationPrefix)
	}
	return nil
}

// rebootInPlace carries out the one-shot reboot annotation on a powered-on host whose power off
// is disabled (metal3: reboot replaces power off): the provisioner reboots the host, and the
// annotation is removed once the reboot is done. A live update starts at the moment the host
// would be powered on; such a host never is, so the reboot is that moment: the live update starts
// instead, and no reboot is asked (the provisioner's servicing reboots the host itself).
func (s *hostScope) rebootInPlace(reboot rebootRequest) outcome {
	if stateOf(s.state()).liveUpdates.is() {
		if out, ok := s.startServicing(); ok {
			if s.host.Status.OperationalStatus == metal3.OperationalStatusServicing {
				// Removed once the status write that records the live update (which carries the
				// reboot on) succeeded, so that a failed write leaves the request to ask again.
				s.removeAnnotation(metal3.RebootAnnotationPrefix)
			}
			return out
		}
		// Its DataImage changes here too (dataimage.go): this reboot is such a host's power on.
		if out, wait := s.syncDataImage(); wait {
			return out
		}
	}
	// A reboot that failed (the server may have restarted all the same) is asked again after the
	// error backoff, not at every wake-up.
	if out, wait := s.backingOff(metal3.PowerManagementError); wait {
		return out
	}
	mode := reboot.mode
	if s.host.Status.ErrorCount > 0 {
		mode = metal3.RebootModeHard // a soft reboot that failed is not tried again
	}
	res, err := s.prov.Reboot(s.ctx, s.provHost(), mode)
	if err != nil {
		return s.provError(err, "rebooting")
	}
	if out, done := s.follow(res, metal3.PowerManagementError, "the host to reboot"); !done {
		return out
	}
	// A write of this removal that fails (a conflict) means one more reboot: at least once, as
	// for any reboot request.
	s.removeAnnotation(metal3.RebootAnnotationPrefix)
	s.clearErrorOf(metal3.PowerManagementError)
	s.event(eventNormal, reasonRebooted, "Reboot", "Host rebooted (its power off is disabled)")
	return repeat()
}
