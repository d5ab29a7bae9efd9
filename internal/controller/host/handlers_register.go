package host

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/conditions"
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
	failed := (isRegistrationError(st.ErrorType) && !imageErrorShown(st)) || s.registrationFailedBesideServicing()
	// Broken BMC input on a registered host (a credentials Secret that lost a key, a cleared
	// credentialsName) is shown at once, as metal3 validates credentials at every reconcile:
	// registering turns it into the input error naming the field, without calling the provisioner.
	return s.needsRegistration || st.Provisioning.ID == "" || failed || s.in.bmcErr != nil ||
		st.OperationalStatus == metal3.OperationalStatusDetached ||
		conditions.Get(st.Conditions, metal3.RegistrationPendingCondition) != nil ||
		s.credentialsChanged() || s.registrationInputsChanged()
}

// registrationNotSent records that the registration did not finish (the provisioner unavailable
// or busy, an internal error): a new operator process, which has no memory of the change,
// registers again. Not while registering: that state registers until done by itself, and its
// busy answers (a new node checking its BMC) would each cost a status write. A change already
// marked pending keeps its reason (and time): a deferred change polled while Ironic waits for the
// agent wrote the status at every poll when the reason went back and forth.
func (s *hostScope) registrationNotSent() {
	st := &s.host.Status
	// A confirmation of the network data after a restart carries no change known to be owed: it
	// is asked again anyway (the memory stays empty), and marking it would cost every such host
	// two status writes and a false condition while the provisioner is down.
	if s.confirmingNetworkData || st.Provisioning.ID == "" || st.Provisioning.State == metal3.StateRegistering ||
		conditions.Get(st.Conditions, metal3.RegistrationPendingCondition) != nil {
		return
	}
	s.setRegistrationPending(metal3.RegistrationNotSentReason, "A change of the host's registration (BMC access, boot MAC, boot mode, "+
		"disablePowerOff or preprovisioning network data) has not reached the provisioner yet; it is sent again")
}

// setRegistrationPending records in the status that a registration change waits for the
// provisioner (RegistrationPendingCondition), until a registration is recorded as sent.
func (s *hostScope) setRegistrationPending(reason, message string) {
	conditions.Set(&s.host.Status.Conditions, conditions.True(metal3.RegistrationPendingCondition, reason, message),
		s.host.Generation, s.now.Time)
}

// registrationInputsChanged: what the spec and the preprovisioning network data decide of the
// registration (registrationInputs) differs from what the last successful one sent. It is compared
// on every reconcile while the memory has the host: a spec change whose registration did not
// finish (busy, the provisioner unavailable, an internal error) was forgotten once the status
// recorded the new generation, and an edited network data Secret changes no generation at all;
// either never reached the provisioner. Without the memory (a new operator) only a spec change
// since the last status write, or network data the provisioner keeps (networkDataUnconfirmed),
// registers again: registering every host after a restart would flood the provisioner. A change
// a registration did not finish is in the status (RegistrationPendingCondition). Called last in
// registrationNeeded, so confirmingNetworkData is set only when nothing else asks for the
// registration.
func (s *hostScope) registrationInputsChanged() bool {
	if changed, known := s.regs.differs(s.host.UID, s.provHost()); known {
		return changed
	}
	if s.specChanged() {
		return true
	}
	s.confirmingNetworkData = s.networkDataUnconfirmed()
	return s.confirmingNetworkData
}

// networkDataUnconfirmed: the host names preprovisioning network data that the provisioner keeps
// itself (no image builder puts it into the agent image), and this process has not registered
// the host yet. A Secret edited while no operator ran moves no generation and sends no event
// to the new process, whose first listing is not an edit: only a registration compares the
// provisioner's copy with the Secret. It costs one registration per such host and restart, which
// writes nothing when the copy is current (Ironic's node is read and left alone); hosts without
// network data, or whose data goes into their image (the PreprovisioningImage follows the
// Secret's version), are not registered again.
func (s *hostScope) networkDataUnconfirmed() bool {
	return s.host.Spec.PreprovisioningNetworkDataName != "" && !s.imagesUsed()
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

// register enrolls the host, or updates its enrollment, and records the credentials it used. A
// live update of the host is kept as it was (keepServicing).
func (s *hostScope) register() (outcome, bool) {
	g := s.guardLiveUpdate()
	out, done := s.registerOnce()
	return s.keepServicing(g, out), done
}

func (s *hostScope) registerOnce() (outcome, bool) {
	errType := s.registrationErrorType()
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
		RestartOnFailure:   s.restartOnFailure(errType) || s.registrationFailedBesideServicing(),
	}
	res, id, err := s.prov.Register(s.ctx, s.provHost(), opts)
	if err != nil {
		s.registrationNotSent()
		return s.provError(err, "registering"), false
	}
	if id != "" {
		st.Provisioning.ID = id
	}
	if out, done := s.follow(res, errType, "the provisioner to register the host and check its BMC"); !done {
		if res.Failed() {
			// The registration error says it, and makes the host register again until fixed.
			conditions.Remove(&st.Conditions, metal3.RegistrationPendingCondition)
		} else {
			s.registrationNotSent()
		}
		if res.Busy {
			// Followed until it ends, whatever else the next reconcile sees: a host registered
			// anew on a new node (its node lost) has the node's ID and unchanged inputs, and
			// would act on a node still checking its BMC, which a BMC check that fails leaves
			// (Ironic's enroll) with only an internal error to show.
			s.regs.deferred(s.host.UID)
		}
		return out, false
	}
	s.registered, s.needsRegistration = true, false
	if res.RegistrationDeferred {
		// The provisioner keeps the change to apply later (its engine waits for its agent): the
		// host goes on, but nothing records the registration as sent (the credentials as good,
		// the inputs as registered, an error as fixed), so the next reconcile, or a new operator
		// process (through the credentials), asks again.
		s.regs.deferred(s.host.UID)
		// The memory mark is lost with the operator process, and a new one registers a host
		// again only for a spec change since the last status write: a disablePowerOff or network
		// data change deferred before a restart would never be sent. The condition keeps it.
		s.setRegistrationPending(metal3.RegistrationDeferredReason, "A change of the host's registration (BMC access, disablePowerOff or "+
			"preprovisioning network data) waits for the provisioner, which applies it once the node takes updates again (Ironic refuses "+
			"them while the node waits for its agent)")
		// An error of the BMC input itself (a Secret without a password) is over, though: the
		// input is valid now, only sending it waits.
		if bmcInputErrorShown(st, errType) {
			s.clearErrorOf(errType)
		}
		return outcome{}, true
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
	s.regs.record(s.host.UID, s.provHost())
	conditions.Remove(&st.Conditions, metal3.RegistrationPendingCondition)
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

// liveUpdateGuard is what a registration must leave of the host's live update (keepServicing):
// the error fields and operationalStatus before it, the retry memory and the effects so far.
type liveUpdateGuard struct {
	// running: a live update runs (operationalStatus servicing); failed: one failed (servicing
	// error) and waits for its retry or for the user.
	running, failed bool
	status          metal3.BareMetalHostStatus
	retryAt         *retryAt
	events, errors  int
}

func (s *hostScope) guardLiveUpdate() liveUpdateGuard {
	st := s.host.Status
	g := liveUpdateGuard{status: st, retryAt: s.fx.retryAt, events: len(s.fx.events), errors: len(s.fx.hostErrors)}
	if stateOf(s.state()).liveUpdates.is() {
		g.failed = st.ErrorType == metal3.ServicingError
		g.running = !g.failed && st.OperationalStatus == metal3.OperationalStatusServicing
	}
	return g
}

// keepServicing keeps a live update as it was when registration fails during it (bad BMC input,
// a wrong new password), and when a registration succeeds after such a failure.
//
// A running one (operationalStatus servicing) shows the registration error, but operationalStatus
// stays servicing instead of error: an error status would end the live update for the host (the
// agent image deleted while the provisioner still services, the host shown OK once registration
// works again, the finished run never recorded); kept, the live update goes on once registration
// succeeds (clearError leaves servicing alone). Its errorCount is the live update's (a retry
// keeps the count that stops the retries): the registration neither adds to it nor, once it
// works again, resets it.
//
// A failed one (servicing error) keeps its error whole: type, message, count, operationalStatus
// error, and so the Ready condition and its time. Turned back to servicing, or cleared by the
// registration that works again, it was started again at once as a new attempt (a new Ready
// time), its retry cap and backoff skipped. The registration's failure is shown by its Event and
// in the Manageable condition (outcome.registrationFailure), which also makes the next reconcile
// register again (registrationFailedBesideServicing); bad input shown there already is not
// announced again.
func (s *hostScope) keepServicing(g liveUpdateGuard, out outcome) outcome {
	st := &s.host.Status
	switch {
	case g.failed:
		if st.ErrorType != g.status.ErrorType {
			out.registrationFailure = st.ErrorMessage
			if c := conditions.Get(st.Conditions, metal3.ManageableCondition); s.in.bmcErr != nil && c != nil &&
				c.Reason == metal3.RegistrationFailedReason && c.Message == st.ErrorMessage {
				// The same bad input, shown already: not announced again (inputFailure).
				s.fx.events, s.fx.hostErrors = s.fx.events[:g.events], s.fx.hostErrors[:g.errors]
			}
		}
		st.ErrorType, st.ErrorMessage, st.ErrorCount = g.status.ErrorType, g.status.ErrorMessage, g.status.ErrorCount
		st.OperationalStatus = g.status.OperationalStatus
		s.fx.retryAt = g.retryAt
	case g.running:
		if st.OperationalStatus == metal3.OperationalStatusError && isRegistrationError(st.ErrorType) {
			st.OperationalStatus = metal3.OperationalStatusServicing
		}
		st.ErrorCount = g.status.ErrorCount
		s.fx.retryAt = g.retryAt
	}
	return out
}

// registrationFailedBesideServicing: the last registration failed while the host's live update
// had failed (keepServicing): the servicing error is in status, the registration's failure in
// the Manageable condition.
func (s *hostScope) registrationFailedBesideServicing() bool {
	c := conditions.Get(s.host.Status.Conditions, metal3.ManageableCondition)
	return s.host.Status.ErrorType == metal3.ServicingError && stateOf(s.state()).liveUpdates.is() &&
		c != nil && c.Reason == metal3.RegistrationFailedReason
}

func isRegistrationError(t metal3.ErrorType) bool {
	return t == metal3.RegistrationError || t == metal3.ProvisionedRegistrationError
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

// bmcInputErrorShown: the host shows a registration error of type t about its BMC input
// (loadCredentials's errors name spec.bmc's fields), not one the provisioner reported.
func bmcInputErrorShown(st *metal3.BareMetalHostStatus, t metal3.ErrorType) bool {
	return st.ErrorType == t && strings.HasPrefix(st.ErrorMessage, "spec.bmc.")
}
