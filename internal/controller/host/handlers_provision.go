package host

import (
	"fmt"

	apiequality "k8s.io/apimachinery/pkg/api/equality"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner"
)

func handleReady(*hostScope) outcome { return advance(metal3.StateAvailable) }

// handleAvailable checks, in metal3's order, what the host should do next; with nothing to do it
// keeps the power in line with spec.online.
func handleAvailable(s *hostScope) outcome {
	if s.host.Spec.ExternallyProvisioned {
		return advance(metal3.StateExternallyProvisioned)
	}
	if v, ok := s.annotation(metal3.InspectAnnotationPrefix); ok && v != metal3.InspectAnnotationValueDisabled {
		return advance(metal3.StateInspecting) // handleInspecting removes the annotation
	}
	if s.needsPreparing() {
		return advance(metal3.StatePreparing)
	}
	if out, ok := s.checkProvisioning(); ok {
		return out
	}
	return s.reconcilePower()
}

// needsProvisioning is metal3's NeedsProvisioning: online, and an image or custom deploy that is
// not on the host yet.
func (s *hostScope) needsProvisioning() bool {
	spec, st := s.host.Spec, s.host.Status.Provisioning
	if !spec.Online {
		return false
	}
	if spec.Image != nil && spec.Image.URL != "" && spec.Image.URL != st.Image.URL {
		return true
	}
	return spec.CustomDeploy != nil && spec.CustomDeploy.Method != "" &&
		(st.CustomDeploy == nil || st.CustomDeploy.Method != spec.CustomDeploy.Method)
}

// checkProvisioning starts provisioning unless the retry cap is reached or the user data is
// missing; both are errors the user fixes, shown in status without leaving available.
func (s *hostScope) checkProvisioning() (outcome, bool) {
	st := &s.host.Status
	spec := s.host.Spec
	if spec.Image == nil && spec.CustomDeploy == nil {
		// Image and custom deploy removed: a fresh start.
		st.ProvisioningFailCount, st.LastAttemptedImage, st.LastAttemptedCustomDeploy = 0, nil, nil
	}
	if !s.needsProvisioning() {
		s.clearErrorOf(metal3.ProvisioningError)
		return outcome{}, false
	}
	if !apiequality.Semantic.DeepEqual(st.LastAttemptedImage, spec.Image) ||
		!apiequality.Semantic.DeepEqual(st.LastAttemptedCustomDeploy, spec.CustomDeploy) {
		// A changed image or custom deploy resets the retry cap: any field (a fixed checksum or
		// format of the same URL is a new attempt), as the cap's message promises.
		st.ProvisioningFailCount = 0
	}
	if limit := s.cfg.MaxProvisioningRetries; limit > 0 && st.ProvisioningFailCount >= limit {
		field, what := "spec.image", "the image"
		if spec.Image == nil {
			field, what = "spec.customDeploy", "the custom deploy"
		}
		return s.inputFailure(metal3.ProvisioningError, fmt.Errorf(
			"%s: provisioning failed %d times (limit --max-provisioning-retries=%d); change or remove %s to try again",
			field, st.ProvisioningFailCount, limit, what)), true
	}
	// A live ISO gets no config drive (the provisioner never reads the user, network or meta
	// data for it): a broken Secret of those does not hold it back, as in metal3.
	liveISO := spec.Image.IsLiveISO() && spec.CustomDeploy == nil
	if s.in.hostConfigErr != nil && !liveISO {
		return s.inputFailure(metal3.ProvisioningError, s.in.hostConfigErr), true
	}
	st.LastAttemptedImage, st.LastAttemptedCustomDeploy = spec.Image.DeepCopy(), spec.CustomDeploy.DeepCopy()
	return advance(metal3.StateProvisioning), true
}

func handleProvisioning(s *hostScope) outcome {
	st := &s.host.Status
	if out, wait := s.backingOff(metal3.ProvisioningError); wait {
		return out // the failed attempt stays as it is until the retry (a changed image is at once)
	}
	if st.ErrorType == metal3.ProvisioningError {
		// The failed attempt is cleaned up before the next one (metal3 goes through
		// deprovisioning too); the cap in available ends the loop. Counted once the host moves:
		// held back for capacity, it would count the same failure at every look.
		return advanceKeepingError(metal3.StateDeprovisioning).then(func() { st.ProvisioningFailCount++ })
	}
	if s.provisioningCancelled() {
		return advance(metal3.StateDeprovisioning)
	}
	res, err := s.prov.Provision(s.ctx, s.provHost(), s.provisionData(), s.restartOnFailure(metal3.ProvisioningError))
	if err != nil {
		return s.provError(err, "provisioning")
	}
	if !res.Failed() {
		// The deployment powers the host as it needs (metal3 clears the one-shot request here too;
		// one with force has been handed over above).
		s.clearRebootAnnotations()
	}
	if res.ForcedReboot {
		s.event(eventNormal, reasonRebootForced, "Reboot",
			"Forced reboot: the deployment waiting for its agent was stopped and starts again")
	}
	if out, done := s.follow(res, metal3.ProvisioningError, "the provisioner to write the image"); !done {
		return out
	}
	s.recordProvisioned()
	st.ProvisioningFailCount = 0
	return advance(metal3.StateProvisioned)
}

// provisioningCancelled: the image (or custom deploy) was removed or changed while provisioning:
// a new URL, or a new custom deploy method, or one of them added or removed (an image attempt
// that gets a custom deploy, or the reverse): what would be recorded as provisioned otherwise is
// not what runs on the host. An attempt with nothing recorded (an older operator's) is not
// judged.
func (s *hostScope) provisioningCancelled() bool {
	spec, st := s.host.Spec, s.host.Status
	if spec.Image == nil && spec.CustomDeploy == nil {
		return true
	}
	if st.LastAttemptedImage == nil && st.LastAttemptedCustomDeploy == nil {
		return false
	}
	return imageURL(spec.Image) != imageURL(st.LastAttemptedImage) ||
		deployMethod(spec.CustomDeploy) != deployMethod(st.LastAttemptedCustomDeploy)
}

func imageURL(i *metal3.Image) string {
	if i == nil {
		return ""
	}
	return i.URL
}

func deployMethod(c *metal3.CustomDeploy) string {
	if c == nil {
		return ""
	}
	return c.Method
}

// recordProvisioned copies what is now on the host from spec to status.
func (s *hostScope) recordProvisioned() {
	spec, st := s.host.Spec, &s.host.Status.Provisioning
	st.Image = metal3.Image{}
	if spec.Image != nil {
		st.Image = *spec.Image.DeepCopy()
	}
	st.CustomDeploy = spec.CustomDeploy.DeepCopy()
	st.BootMode = s.host.BootMode()
	st.RootDeviceHints = spec.RootDeviceHints.DeepCopy()
}

func (s *hostScope) provisionData() provisioner.ProvisionData {
	spec := s.host.Spec
	data := provisioner.ProvisionData{
		Image:           spec.Image.DeepCopy(),
		CustomDeploy:    spec.CustomDeploy.DeepCopy(),
		BootMode:        s.host.BootMode(),
		RootDeviceHints: spec.RootDeviceHints.DeepCopy(),
		HostConfig:      s.in.hostConfig,
		ImagePullSecret: s.in.imagePullSecret,
		ForceReboot:     s.rebootRequests().forcedOneShot,
	}
	if s.in.hostConfigErr != nil {
		data.HostConfigError = s.in.hostConfigErr.Error()
	}
	return data
}

// imageChanged: the spec no longer matches what is on a provisioned host (metal3's
// provisioningCancelled).
func (s *hostScope) imageChanged() bool {
	return provisionedChanged(s.host.Spec, s.host.Status.Provisioning)
}

// provisionedChanged is metal3's rule for when a provisioned host is deprovisioned. With a custom
// deploy in spec: another method, or an image that was provisioned and is now changed or removed;
// an image added to a custom deploy, or a custom deploy added to the image on the host, keeps the
// host (hosts installed by the assisted installer's custom deploy get an image later). A custom
// deploy removed from spec: deprovisioned. Otherwise an image removed, emptied or changed; one
// added where none was provisioned keeps the host.
func provisionedChanged(spec metal3.BareMetalHostSpec, st metal3.ProvisionStatus) bool {
	specURL, specMethod, stMethod := imageURL(spec.Image), deployMethod(spec.CustomDeploy), deployMethod(st.CustomDeploy)
	switch {
	case specMethod != "":
		if stMethod != "" && specMethod != stMethod {
			return true
		}
		return st.Image.URL != "" && specURL != st.Image.URL
	case stMethod != "":
		return true
	case specURL == "":
		return true
	}
	return st.Image.URL != "" && specURL != st.Image.URL
}

func handleProvisioned(s *hostScope) outcome {
	if s.imageChanged() {
		return advance(metal3.StateDeprovisioning)
	}
	return s.steadyState()
}

func handleExternallyProvisioned(s *hostScope) outcome {
	if !s.host.Spec.ExternallyProvisioned {
		// Copy the spec first, so that nothing is deprovisioned unless it is empty.
		s.recordProvisioned()
		return advance(metal3.StateProvisioned)
	}
	return s.steadyState()
}

// steadyState adopts the host (a no-op unless the provisioner lost it) and manages its power.
func (s *hostScope) steadyState() outcome {
	errType := metal3.ProvisionedRegistrationError
	if s.regs.adoptionFailed(s.host.UID) {
		if out, wait := s.backingOff(errType); wait {
			// The failed adoption is retried after its backoff, not at every wake-up (watch
			// events, Secret edits, annotations), as handleDeprovisioning does with cleaning.
			return out
		}
	}
	retried := s.restartOnFailure(errType)
	res, err := s.prov.Adopt(s.ctx, s.provHost(), s.provisionData(), retried)
	if err != nil {
		return s.provError(err, "adopting")
	}
	s.retryUnderWay(errType, retried, res)
	if out, done := s.follow(res, errType, "the provisioner to adopt the host"); !done {
		if res.Failed() {
			s.regs.setAdoptionFailed(s.host.UID, true)
		}
		return out
	}
	adoptionHadFailed := s.regs.adoptionFailed(s.host.UID)
	s.regs.setAdoptionFailed(s.host.UID, false)
	s.clearErrorOf(errType)
	if adoptionHadFailed && s.host.Status.ErrorType == "" {
		// A retried adoption answered busy first (retryUnderWay took its error away, keeping the
		// count for a next failure's backoff) and has now succeeded: the count of its failure
		// goes too. Left, it made every later power off and reboot hard (errorCount > 0).
		s.clearError()
	}
	if s.servicing() {
		return s.continueServicing() // the provisioner has the power until servicing ends
	}
	return s.reconcilePower()
}

func handleDeprovisioning(s *hostScope) outcome {
	if out, wait := s.backingOff(metal3.ProvisioningError); wait {
		return out // failed cleaning is not restarted (rebooting the server) before its backoff
	}
	retried := s.restartOnFailure(metal3.ProvisioningError)
	res, err := s.prov.Deprovision(s.ctx, s.provHost(), retried)
	if err != nil {
		return s.provError(err, "deprovisioning")
	}
	s.retryUnderWay(metal3.ProvisioningError, retried, res)
	if res.Failed() {
		out := s.fail(metal3.ProvisioningError, res.ErrorMessage)
		if s.deleting() && s.host.Status.ErrorCount > maxDeleteErrors {
			return advanceKeepingError(metal3.StatePoweringOffBeforeDelete)
		}
		return out
	}
	if res.Busy {
		return waitOn(res, "the provisioner to remove the image (cleaning)")
	}
	// What asked the old deployment to stay off or reboot is over with it (as metal3).
	s.clearRebootAnnotations()
	st := &s.host.Status.Provisioning
	st.Image, st.CustomDeploy = metal3.Image{}, nil
	if s.deleting() {
		return advance(metal3.StatePoweringOffBeforeDelete)
	}
	return advance(metal3.StateAvailable)
}
