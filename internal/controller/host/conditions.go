package host

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/conditions"
)

// stateConditions is what a state says about the host, before errors and detaching are applied
// (the conditions field of its row in states.go).
type stateConditions struct {
	manageable  bool   // registered with the provisioner
	provisioned string // Provisioned condition reason: Provisioned, Provisioning or NotProvisioned
	available   string // AvailableForProvisioning reason: Available, Inspecting, NotAvailable, NotManageable
	progressing string // Progressing reason; NotProgressing for stable states
	// doing says what a progressing state waits for (the Progressing message).
	doing string
}

const (
	reasonProvisionerUnavailable = "ProvisionerUnavailable"
	internalErrorMessage         = "internal error, see the operator logs"
)

type cond struct {
	status          metav1.ConditionStatus
	reason, message string
}

// setConditions recomputes every condition from the state, the operational status and the
// reconcile's outcome. Only the transition time of a condition whose status or reason changed
// moves, so it tells since when the host is in its current situation.
func setConditions(host *metal3.BareMetalHost, out outcome, now metav1.Time) {
	st := host.Status
	row := stateOf(st.Provisioning.State).conditions
	erred := st.OperationalStatus == metal3.OperationalStatusError
	// A live update whose registration failed keeps operationalStatus servicing (keepServicing):
	// Manageable shows the failure, Ready keeps its Servicing reason (its transition time is when
	// the live update started, which the provisioner is told) and quotes the error. A failed live
	// update keeps its servicing error: the registration's failure is only in Manageable
	// (outcome.registrationFailure).
	servicing := st.OperationalStatus == metal3.OperationalStatusServicing
	regFailed := (erred || servicing) && (st.ErrorType == metal3.RegistrationError || st.ErrorType == metal3.ProvisionedRegistrationError)
	detached := st.OperationalStatus == metal3.OperationalStatusDetached
	// A running live update whose agent image failed is a servicing error that the image's fix
	// resumes (clearImageError): the provisioner's run may go on meanwhile, so Ready keeps its
	// Servicing reason and with it the attempt's time, by which the provisioner recognises that
	// run. An image failing after the live update had failed (Ready already Error) is no running
	// live update: Ready stays Error.
	if _, wasServicing := servicingSince(&st); wasServicing && erred && st.ErrorType == metal3.ServicingError && imageErrorShown(&st) {
		erred, servicing = false, true
	}

	manageable := cond{metav1.ConditionFalse, metal3.NotManagedReason, "The host has no BMC details"}
	switch {
	case detached:
		manageable = cond{metav1.ConditionFalse, metal3.NotManagedReason, "The host is detached from the provisioner"}
	case regFailed:
		manageable = cond{metav1.ConditionFalse, metal3.RegistrationFailedReason, st.ErrorMessage}
	case out.registrationFailure != "":
		manageable = cond{metav1.ConditionFalse, metal3.RegistrationFailedReason, out.registrationFailure}
	case erred && st.ErrorType == metal3.PowerManagementError:
		manageable = cond{metav1.ConditionFalse, metal3.PowerFailureReason, st.ErrorMessage}
	case row.manageable:
		manageable = cond{metav1.ConditionTrue, metal3.ManageableReason, "The host is registered with the provisioner"}
	case st.Provisioning.State == metal3.StateRegistering:
		manageable = cond{metav1.ConditionFalse, metal3.RegisteringReason, "The host is being registered"}
	case st.Provisioning.State == metal3.StateDeleting:
		manageable = cond{metav1.ConditionFalse, metal3.NotManagedReason, "The host is being deleted"}
	}

	provisioned := cond{metav1.ConditionFalse, row.provisioned, ""}
	if row.provisioned == metal3.ProvisionedReason {
		provisioned.status = metav1.ConditionTrue
	}

	available := cond{metav1.ConditionFalse, row.available, ""}
	if row.available == metal3.AvailableReason && !erred && !detached {
		available.status = metav1.ConditionTrue
	}

	progressing := cond{metav1.ConditionFalse, row.progressing, ""}
	if row.progressing != metal3.NotProgressingReason {
		progressing = cond{metav1.ConditionTrue, row.progressing, "Waiting for " + row.doing}
	}
	switch {
	case out.err != nil:
		progressing.message = internalErrorMessage
	case out.progressReason != "":
		// A wait of its own (the agent image): its reason makes lastTransitionTime the time the
		// wait started, and the message says it too.
		since := now
		if old := conditions.Get(host.Status.Conditions, metal3.ProgressingCondition); old != nil && old.Reason == out.progressReason {
			since = old.LastTransitionTime
		}
		progressing = cond{metav1.ConditionTrue, out.progressReason, "Waiting for " + out.waitingFor + " since " + waitingSince(since.Time)}
	case out.waitingFor == waitingProvisioner:
		progressing.reason = reasonProvisionerUnavailable
		progressing.message = "Waiting for " + waitingProvisioner
	case out.waitingFor != "":
		progressing.message = "Waiting for " + out.waitingFor
	}

	ready := cond{metav1.ConditionFalse, row.progressing, "The host is not provisioned"}
	switch {
	case erred:
		ready = cond{metav1.ConditionFalse, metal3.ErrorReason, st.ErrorMessage}
	case detached:
		ready = cond{metav1.ConditionFalse, metal3.DetachedReason, "The host is detached"}
	case servicing && st.ErrorMessage != "":
		ready = cond{metav1.ConditionFalse, metal3.ServicingReason, "A live update is running; " + st.ErrorMessage}
	case servicing:
		ready = cond{metav1.ConditionFalse, metal3.ServicingReason, "A live update is running"}
	case provisioned.status == metav1.ConditionTrue:
		ready = cond{metav1.ConditionTrue, metal3.ProvisionedReason, "The host is provisioned"}
	case row.progressing == metal3.NotProgressingReason:
		ready.reason = metal3.NotProvisionedReason
	}

	healthy := cond{metav1.ConditionUnknown, metal3.UnknownHealthReason, "The provisioner does not report health"}

	for _, c := range []struct {
		t string
		c cond
	}{
		{metal3.ManageableCondition, manageable},
		{metal3.ProvisionedCondition, provisioned},
		{metal3.AvailableForProvisioningCondition, available},
		{metal3.ProgressingCondition, progressing},
		{metal3.HealthyCondition, healthy},
		{metal3.ReadyCondition, ready},
	} {
		setCondition(host, c.t, c.c, now)
	}
}

// setCondition sets one condition through the shared setter: the generation is stamped, and the
// transition time moves only when the status or the reason changes.
func setCondition(host *metal3.BareMetalHost, condType string, c cond, now metav1.Time) {
	conditions.Set(&host.Status.Conditions, metav1.Condition{Type: condType, Status: c.status, Reason: c.reason, Message: c.message},
		host.Generation, now.Time)
}

// setLiveUpdatesCondition records what the provisioner said about servicing in this reconcile:
// unable to service → LiveUpdates False (with one Event, when it turns so); able → the condition
// goes (metal3 has none; it only shows when something is wrong). Not asked → unchanged.
func (s *hostScope) setLiveUpdatesCondition() {
	supported := s.fx.servicingSupported
	if supported == nil {
		return
	}
	host := s.host
	if *supported {
		conditions.Remove(&host.Status.Conditions, metal3.LiveUpdatesCondition)
		return
	}
	msg := "The host has live updates its HostUpdatePolicy allows, but the provisioner cannot service provisioned hosts " +
		"(it reports no servicing support); the changes wait, and the host reboots without them"
	if prev := conditions.Get(host.Status.Conditions, metal3.LiveUpdatesCondition); prev == nil || prev.Status != metav1.ConditionFalse {
		s.event(eventWarning, reasonLiveUpdatesUnsupported, "Servicing", msg)
	}
	conditions.Set(&host.Status.Conditions, conditions.False(metal3.LiveUpdatesCondition, metal3.ServicingUnsupportedReason, msg),
		host.Generation, s.now.Time)
}
