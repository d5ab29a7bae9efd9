package host

import (
	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner"
)

// reconcilePower keeps a host in a steady state (available, provisioned, externally provisioned)
// powered as spec.online asks, and carries out reboot annotations: any reboot annotation wants the
// host off; the one-shot one is removed once the host is off, so it comes back on; suffixed ones
// keep it off until their owner removes them.
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
	reboot := s.rebootRequests()
	if !on && reboot.oneShot {
		s.removeAnnotation(metal3.RebootAnnotationPrefix)
		reboot = s.rebootRequests()
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
	}
	host := s.provHost()
	var res provisioner.Result
	what := "the host to power on"
	if wantOn {
		res, err = s.prov.PowerOn(s.ctx, host, reboot.force)
	} else {
		mode := reboot.mode
		if st.ErrorCount > 0 {
			mode = metal3.RebootModeHard // a soft power off that failed is not tried again
		}
		res, err = s.prov.PowerOff(s.ctx, host, mode, reboot.force)
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
