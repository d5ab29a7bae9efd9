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
	if !s.detachTakesEffect(args) {
		return outcome{}, false // detached later, once the host reaches a state (or ends the live update) that allows it
	}
	if out, done := s.detach(); !done {
		return out, true
	}
	return waitFor(s.cfg.UnmanagedPoll, waiting), true
}

// detachTakesEffect: the detached annotation detaches the host now: force detaches from any state,
// otherwise only a state that allows it (metal3's list), and not during a live update. Deletion
// asks it too (checkDeletion), so that an annotation waiting for its state is not taken for a
// detach.
func (s *hostScope) detachTakesEffect(args metal3.DetachedAnnotationArguments) bool {
	return args.Force || (stateOf(s.state()).detachable.is() && !s.servicing())
}

// detach removes the host from the provisioner and marks it detached; done is false while the
// provisioner works on it or failed (out says what then).
func (s *hostScope) detach() (out outcome, done bool) {
	res, err := s.prov.Detach(s.ctx, s.provHost())
	if err != nil {
		return s.provError(err, "detaching"), false
	}
	if out, done := s.follow(res, metal3.DetachError, "the provisioner to detach the host"); !done {
		return out, false
	}
	s.clearError()
	s.host.Status.OperationalStatus = metal3.OperationalStatusDetached
	s.event(eventNormal, reasonDetached, "Detach", "Host detached from the provisioner")
	return outcome{}, true
}
