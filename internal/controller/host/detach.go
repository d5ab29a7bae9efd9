package host

import (
	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

func (s *hostScope) detached() bool {
	return s.host.Status.OperationalStatus == metal3.OperationalStatusDetached
}

// checkDetached is the guard for the detached annotation: it removes the host from the provisioner
// (keeping its state), then holds it until the annotation goes; ensureRegistered attaches it again.
func (s *hostScope) checkDetached() (outcome, bool) {
	if s.deleting() {
		return outcome{}, false // checkDeletion decided already
	}
	args, annotated := s.detachedArgs()
	if !annotated {
		if s.detached() {
			s.needsRegistration = true
		}
		// A detach that failed is no longer asked for: its error would stay until the next state
		// change (and make the next power off hard).
		s.clearErrorOf(metal3.DetachError)
		return outcome{}, false
	}
	const waiting = "the detached annotation to be removed"
	if s.detached() {
		return waitFor(s.cfg.UnmanagedPoll, waiting), true
	}
	if (!stateOf(s.state()).detachable.is() || s.servicing()) && !args.Force {
		return outcome{}, false // detached later, once the host reaches a state (or ends the live update) that allows it
	}
	res, err := s.prov.Detach(s.ctx, s.provHost())
	if err != nil {
		return s.provError(err, "detaching"), true
	}
	if out, done := s.follow(res, metal3.DetachError, "the provisioner to detach the host"); !done {
		return out, true
	}
	s.clearError()
	s.host.Status.OperationalStatus = metal3.OperationalStatusDetached
	s.event(eventNormal, reasonDetached, "Detach", "Host detached from the provisioner")
	return waitFor(s.cfg.UnmanagedPoll, waiting), true
}
