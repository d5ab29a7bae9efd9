package host

import (
	"strings"

	corev1 "k8s.io/api/core/v1"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/events"
)

// Event reasons are CamelCase constants; notes carry the detail.
const (
	reasonDiscovered        = "Discovered"
	reasonRegistering       = "Registering"
	reasonInspectionStarted = "InspectionStarted"
	// reasonInspectionSkipped: inspection disabled while the host inspected (metal3's reason).
	reasonInspectionSkipped      = "InspectionSkipped"
	reasonPreparationStarted     = "PreparationStarted"
	reasonAvailable              = "Available"
	reasonProvisioningStarted    = "ProvisioningStarted"
	reasonProvisioningComplete   = "ProvisioningComplete"
	reasonExternallyProvisioned  = "ExternallyProvisioned"
	reasonDeprovisioningStarted  = "DeprovisioningStarted"
	reasonPoweringOffForDelete   = "PoweringOffBeforeDelete"
	reasonDeleting               = "Deleting"
	reasonStateChanged           = "StateChanged"
	reasonDelayed                = "Delayed"
	reasonDetached               = "Detached"
	reasonAttached               = "Attached"
	reasonCredentialsUpdated     = "CredentialsUpdated"
	reasonPoweredOn              = "PoweredOn"
	reasonPoweredOff             = "PoweredOff"
	reasonRebooted               = "Rebooted"
	reasonStatusRestored         = "StatusRestored"
	reasonHardwareDetails        = "HardwareDetailsSet"
	reasonBadAnnotation          = "InvalidAnnotation"
	reasonDeleteDelayed          = "DeleteDelayed"
	reasonServicingStarted       = "ServicingStarted"
	reasonServicingComplete      = "ServicingComplete"
	reasonServicingAborted       = "ServicingAborted"
	reasonLiveUpdatesUnsupported = "LiveUpdatesUnsupported"
	// reasonRebootForced: reboot.metal3.io with force restarted an operation waiting for its agent.
	reasonRebootForced = "RebootForced"
)

const (
	eventNormal  = corev1.EventTypeNormal
	eventWarning = corev1.EventTypeWarning
)

// transitionEvent is the one Event for the state changes of a reconcile. Steps that finish at once
// (a fast provisioner) pass several states in one reconcile; they share one Event whose reason is
// the last state's and whose note names every state on the way, instead of one Event object per
// state written within the same second. Slow steps still get an Event each.
func transitionEvent(transitions [][2]metal3.ProvisioningState) (events.Event, bool) {
	if len(transitions) == 0 {
		return events.Event{}, false
	}
	path := make([]string, 0, len(transitions)+1)
	path = append(path, stateName(transitions[0][0]))
	for _, t := range transitions {
		path = append(path, stateName(t[1]))
	}
	last := transitions[len(transitions)-1][1]
	return events.Event{Type: eventNormal, Reason: transitionReason(last), Action: "StateChange",
		Note: "State changed: " + strings.Join(path, " → ")}, true
}

func stateName(s metal3.ProvisioningState) string {
	if s == metal3.StateNone {
		return "(none)"
	}
	return string(s)
}

func (s *hostScope) event(eventType, reason, action, note string) {
	s.fx.events = append(s.fx.events, events.Event{Type: eventType, Reason: reason, Action: action, Note: note})
}

// transitionReason is the Event reason for entering a state (its row's enterReason).
func transitionReason(to metal3.ProvisioningState) string { return stateOf(to).enterReason }

var errorReasons = map[metal3.ErrorType]string{
	metal3.ProvisionedRegistrationError: "ProvisionedRegistrationError",
	metal3.RegistrationError:            "RegistrationError",
	metal3.InspectionError:              "InspectionError",
	metal3.PreparationError:             "PreparationError",
	metal3.ProvisioningError:            "ProvisioningError",
	metal3.PowerManagementError:         "PowerManagementError",
	metal3.ServicingError:               "ServicingError",
	metal3.DetachError:                  "DetachError",
}

// errorReason is the event reason for an error type, as metal3 names its error events.
func errorReason(t metal3.ErrorType) string {
	if r, ok := errorReasons[t]; ok {
		return r
	}
	return "Error"
}
