package host

import (
	"errors"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner"
)

// maxDeleteErrors: after this many consecutive errors a deleting host skips the failing step
// (deprovisioning or powering off) rather than block deletion forever (metal3: errorCount > 3).
const maxDeleteErrors = 3

// checkDeletion is the guard that starts deletion (metal3's checkInitiateDelete) and lets a
// detached host skip power off and deprovisioning (one whose annotation went is attached again
// first, and then deleted as any other).
func (s *hostScope) checkDeletion() (outcome, bool) {
	if !s.deleting() {
		return outcome{}, false
	}
	st := s.state()
	// A detached host, or one whose detached annotation takes effect here but was not carried out
	// yet (deleted right after it was annotated), leaves without power off and deprovisioning. An
	// annotation that does not take effect in this state (no force, a busy state) is not a detach:
	// the host is deprovisioned as any other (metal3 looks at operationalStatus detached only);
	// deleting its node would cut the provisioner's operation short.
	args, annotated := s.detachedArgs()
	// Attaching again is tried only in a state where a host is registered (not deleting or
	// registering, which it could never leave otherwise) and with usable BMC input. A failed
	// attempt shows its error (the host is no longer detached) and deletion goes on as for any
	// host, whose failures past maxDeleteErrors let it go.
	if s.detached() && !annotated && s.in.bmcErr == nil && stateOf(st).registered.is() {
		// Detached, and the annotation removed: the host is attached again first, then deleted as
		// any other (metal3's delayDeleteForDetachedHost). This is how assisted-service's
		// deleteAction: delay ends: it removes the annotation once it cleaned up, for the host to
		// be deprovisioned; going to deleting at once left the server running its old OS.
		s.needsRegistration = true
		if out, ok := s.ensureRegistered(); ok || s.detached() {
			if !ok {
				out = waitFor(s.cfg.UnmanagedPoll, "the host to be attached again before deletion")
			}
			return out, true
		}
		// Attached: this once, the state's handler runs as in metal3 (a provisioned host is
		// adopted, so that its deprovisioning undeploys what it runs); the next reconcile takes
		// the deletion edges.
		return outcome{}, false
	}
	if s.detached() || (annotated && s.detachTakesEffect(args)) {
		if annotated && args.DeleteAction == metal3.DetachedDeleteActionDelay {
			if !s.detached() {
				// Detached first: the delay holds a host the provisioner has let go, as asked.
				if out, done := s.detach(); !done {
					return out, true
				}
			}
			s.fx.deleteDelayed = true
			return waitFor(s.cfg.UnmanagedPoll, "the detached annotation (deleteAction: delay) to be removed before deletion"), true
		}
		if st != metal3.StateDeleting {
			return advance(metal3.StateDeleting), true
		}
		return outcome{}, false
	}
	if to, ok := deletionEdges[st]; ok {
		return advance(to), true
	}
	// Already on the way out (deprovisioning, powering off): a host that cannot get further skips
	// to deleting rather than block deletion forever.
	// A host the provisioner does not know (never registered, or its node lost: needsRegistration)
	// cannot be registered again with unusable BMC input (ensureRegistered leaves a deleting
	// host alone then): nothing more can be done there.
	stuck := s.host.Status.ErrorType == metal3.RegistrationError && s.host.Status.ErrorCount > maxDeleteErrors
	unknown := (s.host.Status.Provisioning.ID == "" || s.needsRegistration) && s.in.bmcErr != nil
	if st != metal3.StateDeleting && (stuck || unknown) {
		return advanceKeepingError(metal3.StateDeleting), true
	}
	return outcome{}, false
}

func handlePoweringOffBeforeDelete(s *hostScope) outcome {
	st := &s.host.Status
	if s.host.Spec.DisablePowerOff || st.Provisioning.ID == "" {
		return advance(metal3.StateDeleting)
	}
	// Only its own failures skip the power off: a host whose cleaning was given up (errorCount
	// above maxDeleteErrors, kept) is still powered off, or tried once more at least.
	if st.ErrorType == metal3.PowerManagementError && st.ErrorCount > maxDeleteErrors {
		return advanceKeepingError(metal3.StateDeleting)
	}
	// What the provisioner does with the host ends first: an inspection or a manual cleaning
	// waiting for the agent held the power off until the provisioner's timeout (30 min), and a
	// server still off at the start of one is powered on by the provisioner after it.
	res, err := s.prov.StopForDeletion(s.ctx, s.provHost())
	if err != nil {
		return s.provError(err, "stopping the operation of")
	}
	if out, done := s.follow(res, metal3.PowerManagementError, "the provisioner to stop its operation before deletion"); !done {
		return out
	}
	on, known, err := s.prov.PowerState(s.ctx, s.provHost())
	if err != nil {
		return s.provError(err, "reading the power state of")
	}
	if known && !on {
		st.PoweredOn = false
		return advance(metal3.StateDeleting)
	}
	res, err = s.prov.PowerOff(s.ctx, s.provHost(), metal3.RebootModeHard, true)
	if err != nil {
		return s.provError(err, "powering off")
	}
	if out, done := s.follow(res, metal3.PowerManagementError, "the host to power off before deletion"); !done {
		return out
	}
	st.PoweredOn = false
	return advance(metal3.StateDeleting)
}

func handleDeleting(s *hostScope) outcome {
	res, err := s.prov.Delete(s.ctx, s.provHost())
	switch {
	case errors.Is(err, provisioner.ErrNeedsRegistration):
		// The provisioner does not know the host: nothing to delete there.
	case err != nil:
		return s.provError(err, "deleting")
	case res.Failed():
		return s.fail(metal3.RegistrationError, res.ErrorMessage)
	case res.Busy:
		return waitOn(res, "the provisioner to delete the host")
	}
	s.fx.finalize = true
	return outcome{kind: kindDone}
}
