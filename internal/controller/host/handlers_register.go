package host

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner"
)

func handleNone(s *hostScope) outcome {
	if s.host.HasBMCDetails() {
		return advance(metal3.StateRegistering)
	}
	return advance(metal3.StateUnmanaged)
}

func handleUnmanaged(s *hostScope) outcome {
	if s.host.HasBMCDetails() {
		return advance(metal3.StateRegistering)
	}
	s.host.Status.OperationalStatus = metal3.OperationalStatusDiscovered
	return waitFor(s.cfg.UnmanagedPoll, "BMC details (spec.bmc.address and spec.bmc.credentialsName)")
}

// handleRegistering enrolls the host; registration is complete once the agent image the next
// step boots is ready too (seed 002), so the image is built while the host registers.
func handleRegistering(s *hostScope) outcome {
	if !s.registered {
		if out, done := s.register(); !done {
			return out
		}
	}
	next := metal3.StateInspecting
	switch {
	case s.host.Spec.ExternallyProvisioned:
		next = metal3.StateExternallyProvisioned
	case s.host.InspectionDisabled():
		next = metal3.StatePreparing
	}
	if out, wait := s.awaitImage(next); wait {
		return out
	}
	return advance(next)
}

// ensureRegistered is the guard that registers the host again when the provisioner forgot it,
// the credentials Secret changed, the spec changed, the last registration failed, or the host
// comes back from being detached.
func (s *hostScope) ensureRegistered() (outcome, bool) {
	// A detached host with its annotation never gets here (checkDetached holds it); without the
	// annotation it is registered again.
	if !stateOf(s.state()).registered.is() || s.registered {
		return outcome{}, false
	}
	if s.deleting() && s.in.bmcErr != nil {
		return outcome{}, false // deletion goes on with the node the provisioner already has
	}
	if !s.registrationNeeded() {
		return outcome{}, false
	}
	if out, done := s.register(); !done {
		return out, true
	}
	return outcome{}, false
}

func (s *hostScope) registrationNeeded() bool {
	st := &s.host.Status
	// An error of the agent image is not the registration's: registering again cannot fix it.
	failed := (st.ErrorType == metal3.RegistrationError || st.ErrorType == metal3.ProvisionedRegistrationError) && !imageErrorShown(st)
	return s.needsRegistration || st.Provisioning.ID == "" || failed ||
		st.OperationalStatus == metal3.OperationalStatusDetached ||
		s.credentialsChanged() || s.registrationInputsChanged()
}

// registrationInputsChanged: what the spec and the preprovisioning network data decide of the
// registration (registrationInputs) differs from what the last successful one sent. It is compared
// on every reconcile while the memory has the host: a spec change whose registration did not
// finish (busy, the provisioner unavailable, an internal error) was forgotten once the status
// recorded the new generation, and an edited network data Secret changes no generation at all;
// either never reached the provisioner. Without the memory (a new operator) only a spec change
// since the last status write registers again: registering every host after a restart would
// flood the provisioner.
func (s *hostScope) registrationInputsChanged() bool {
	if changed, known := s.regs.differs(s.host.UID, s.provHost()); known {
		return changed
	}
	return s.specChanged()
}

// specChanged: the spec changed since the last status write (every condition carries the
// generation it was computed for), so the provisioner may need the new BMC details.
func (s *hostScope) specChanged() bool {
	for _, c := range s.host.Status.Conditions {
		if c.Type == metal3.ReadyCondition {
			return c.ObservedGeneration != s.host.Generation
		}
	}
	return false
}

// credentialsChanged: the Secret is not the version that last worked or, while none has worked yet,
// not the version last tried: a wrong password fixed in the Secret must reach the provisioner,
// which cannot compare passwords itself (Ironic masks them).
func (s *hostScope) credentialsChanged() bool {
	last := s.host.Status.GoodCredentials
	if last.Reference == nil {
		last = s.host.Status.TriedCredentials
	}
	return s.in.credsRef != nil && last.Reference != nil &&
		(last.Reference.Name != s.in.credsRef.Name || last.Version != s.in.credsVersion)
}

// registrationErrorType: a provisioned host failing registration is a different error (metal3).
func (s *hostScope) registrationErrorType() metal3.ErrorType {
	switch s.state() {
	case metal3.StateProvisioned, metal3.StateExternallyProvisioned:
		return metal3.ProvisionedRegistrationError
	}
	return metal3.RegistrationError
}

// register enrolls the host, or updates its enrollment, and records the credentials it used.
func (s *hostScope) register() (outcome, bool) {
	errType := s.registrationErrorType()
	defer s.keepServicing(s.liveUpdateUnderWay())
	if s.in.bmcErr != nil {
		return s.inputFailure(errType, s.in.bmcErr), false
	}
	st := &s.host.Status
	current := metal3.CredentialsStatus{Reference: s.in.credsRef, Version: s.in.credsVersion}
	changed := s.credentialsChanged()
	if !sameCredentials(st.TriedCredentials, current) {
		st.TriedCredentials = *current.DeepCopy()
	}
	opts := provisioner.RegisterOptions{
		CredentialsChanged: changed,
		RestartOnFailure:   s.restartOnFailure(errType),
	}
	res, id, err := s.prov.Register(s.ctx, s.provHost(), opts)
	if err != nil {
		return s.provError(err, "registering"), false
	}
	if id != "" {
		st.Provisioning.ID = id
	}
	if out, done := s.follow(res, errType, "the provisioner to register the host and check its BMC"); !done {
		return out, false
	}
	if !sameCredentials(st.GoodCredentials, current) {
		if old := st.GoodCredentials.Reference; old != nil && old.Name != current.Reference.Name {
			s.fx.replacedSecrets = append(s.fx.replacedSecrets, old.Name)
		}
		st.GoodCredentials = *current.DeepCopy()
		if changed {
			s.event(eventNormal, reasonCredentialsUpdated, "Register", "BMC credentials updated")
		}
	}
	s.registered, s.needsRegistration = true, false
	s.regs.record(s.host.UID, s.provHost())
	// The image's error stays until the image is fine (awaitImage); an adoption's failure until
	// an adoption succeeds (setAdoptionFailed).
	adoptionFailed := errType == metal3.ProvisionedRegistrationError && s.regs.adoptionFailed(s.host.UID)
	if !imageErrorShown(st) && !adoptionFailed {
		s.clearErrorOf(errType)
	}
	if st.OperationalStatus == metal3.OperationalStatusDetached {
		st.OperationalStatus = metal3.OperationalStatusOK
		s.event(eventNormal, reasonAttached, "Register", "Host attached to the provisioner again")
	}
	return outcome{}, true
}

// liveUpdateUnderWay: the host runs or failed a live update (servicing.go), which registration
// must not end.
func (s *hostScope) liveUpdateUnderWay() bool {
	return stateOf(s.state()).liveUpdates.is() && s.servicing()
}

// keepServicing keeps a live update recognisable when registration fails during it (bad BMC
// input, a wrong new password): the registration error is shown, but operationalStatus stays
// servicing instead of error. An error status would end the live update for the host (the agent
// image deleted while the provisioner still services, the host shown OK once registration works
// again, the finished run never recorded); kept, the live update goes on once registration
// succeeds (clearError leaves servicing alone). A failed live update (servicing error) is then
// asked about again, and the provisioner reports its failure anew.
func (s *hostScope) keepServicing(wasServicing bool) {
	st := &s.host.Status
	if wasServicing && st.OperationalStatus == metal3.OperationalStatusError &&
		(st.ErrorType == metal3.RegistrationError || st.ErrorType == metal3.ProvisionedRegistrationError) {
		st.OperationalStatus = metal3.OperationalStatusServicing
	}
}

func sameCredentials(a, b metal3.CredentialsStatus) bool {
	return a.Version == b.Version && equalRef(a.Reference, b.Reference)
}

func equalRef(a, b *corev1.SecretReference) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// bmcInputError names the field in a bad-input message.
func bmcInputError(field string, err error) error { return fmt.Errorf("%s: %w", field, err) }
