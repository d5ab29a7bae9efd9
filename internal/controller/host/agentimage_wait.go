package host

import (
	"errors"
	"fmt"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner"
)

// What the handlers do with the host's PreprovisioningImage: wait for it before a step that boots
// the agent, show its build error, hand it to the provisioner. None of this writes: the image
// itself is created, updated or deleted by the driver (planImage).

// imagesUsed: the operator runs with --build-preprov-image and the provisioner boots built images
// on this host (it named the formats it accepts).
func (s *hostScope) imagesUsed() bool { return s.in.imageFormats != nil }

// imageCheck says whether the host's image is usable now.
func (s *hostScope) imageCheck() imageCheck {
	if len(s.in.imageFormats) == 0 {
		return imageCheck{err: imageErrorPrefix + "cannot be used: the provisioner boots no image format on this host's BMC"}
	}
	if s.in.image == nil && s.in.imageCreateRefused {
		return imageCheck{err: fmt.Sprintf("%s%q cannot be created: namespace %s is being deleted", imageErrorPrefix, s.host.Name, s.host.Namespace)}
	}
	return checkImage(s.host, s.in.image, imageSpec(s.host, s.in.imageFormats), s.in.preprovNetworkDataVersion)
}

// readyImage is the image handed to the provisioner: the host's image when it is usable, else nil
// (the provisioner then refuses what needs the agent, see imageRefused).
func (s *hostScope) readyImage() *provisioner.PreprovisioningImage {
	if !s.imagesUsed() {
		return nil
	}
	return s.imageCheck().ready
}

// awaitImage holds a host whose next step, in state, boots the agent until its image is ready:
// the image's build error becomes a registration error (metal3), anything else a wait that says
// what for (Progressing reason WaitingForPreprovisioningImage). It runs as a guard before every
// handler, and in registering before the host moves on.
func (s *hostScope) awaitImage(state metal3.ProvisioningState) (outcome, bool) {
	if !s.imagesUsed() || stateOf(state).agentImage(s.host) != imageBooted {
		return outcome{}, false
	}
	if stateOf(state).liveUpdates.is() {
		if data, unchecked := s.liveUpdate(); data.Empty() && !unchecked {
			// The live update's changes were taken back: ending it (an abort) boots nothing.
			return outcome{}, false
		}
	}
	c := s.imageCheck()
	if c.err != "" {
		return s.imageFailed(c.err), true
	}
	s.clearImageError()
	if c.ready == nil {
		return s.waitImage(c.waiting), true
	}
	return outcome{}, false
}

// imageFailed shows the image's error on the host as bad input: recorded once, looked at again
// when the image changes (the image watch) or after InputRetryDelay. A host being deleted does not
// wait for a fix: cleaning cannot run without the agent, so it goes on to power off (as after
// repeated failures).
func (s *hostScope) imageFailed(msg string) outcome {
	errType := s.registrationErrorType()
	st := &s.host.Status
	if stateOf(s.state()).liveUpdates.is() && s.servicing() {
		if st.ErrorType == metal3.ServicingError && !imageErrorShown(st) {
			// A live update that failed keeps its failure, count and backoff: its retry (or the
			// user's changed changes) waits for the image and then starts as any retry does.
			return outcome{kind: kindWait, after: s.cfg.InputRetryDelay, progressReason: reasonWaitingForImage,
				waitingFor: "the agent image the failed live update's retry boots, which failed: " + msg}
		}
		// A running live update that cannot boot the agent failed: shown as a servicing error,
		// which keeps the image (its fix resumes the live update) and the host off, and lets the
		// user abort by taking the changes back. A registration error would end the live update,
		// delete the image and let the next power-on start it all over again.
		errType = metal3.ServicingError
	}
	// The builder's next message about the same image is the same failure: not counted again.
	count, again := st.ErrorCount, imageErrorShown(st) && st.ErrorType == errType
	out := s.inputFailure(errType, errors.New(msg))
	if again {
		st.ErrorCount = count
	}
	if s.deleting() && s.state() == metal3.StateDeprovisioning {
		return advanceKeepingError(metal3.StatePoweringOffBeforeDelete)
	}
	return out
}

// clearImageError forgets an error the image caused once the image is fine or being rebuilt.
func (s *hostScope) clearImageError() {
	st := &s.host.Status
	if imageErrorShown(st) {
		resume := st.ErrorType == metal3.ServicingError
		count := st.ErrorCount - 1 // before the image's error: retries of the live update stay counted
		s.clearError()
		if resume {
			st.OperationalStatus = metal3.OperationalStatusServicing // the live update goes on
			st.ErrorCount = max(count, 0)
		}
	}
}

func (s *hostScope) waitImage(what string) outcome {
	s.fx.waitedForImage = true
	return outcome{kind: kindWait, after: s.cfg.PreprovImageDelay, waitingFor: what, progressReason: reasonWaitingForImage}
}

// imageRefused handles the provisioner's provisioner.ErrNeedsPreprovisioningImage: it needs the
// agent where the state's row did not expect it (fast inspection on a BMC without out-of-band
// inspection), or it refused the image it was given (metal3: "not acceptable to provisioner").
func (s *hostScope) imageRefused() outcome {
	if !s.imagesUsed() {
		return waitFor(s.cfg.PreprovImageDelay, "a preprovisioning image, which the provisioner needs (the operator runs without --build-preprov-image)")
	}
	c := s.imageCheck()
	switch {
	case c.err != "":
		return s.imageFailed(c.err)
	case c.ready == nil:
		return s.waitImage(c.waiting)
	}
	return s.imageFailed(fmt.Sprintf("%s%q is not acceptable to the provisioner (format %s)", imageErrorPrefix, s.host.Name, c.ready.Format))
}

// planImage is what the driver writes to the image after the handlers, from the state they left
// the host in.
func (s *hostScope) planImage() imageWrite {
	if !s.cfg.PreprovisioningImages {
		return imageWrite{}
	}
	use := stateOf(s.state()).agentImage(s.host)
	if use != imageDeleted && len(s.in.imageFormats) == 0 {
		return imageWrite{} // no image is asked for (or the BMC details are bad)
	}
	return planImage(s.host, s.in.image, use, imageSpec(s.host, s.in.imageFormats))
}
