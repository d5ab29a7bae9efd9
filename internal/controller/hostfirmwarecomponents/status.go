package hostfirmwarecomponents

import (
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/conditions"
	"github.com/metalforge/metalforge/internal/controller/events"
	"github.com/metalforge/metalforge/internal/statustext"
)

// Event reasons (metal3's for a validation failure).
const (
	reasonValidationFailed = "ValidationFailed"
	reasonUpdatesValid     = "ValidationSucceeded"
)

// setStatus computes the status from the components the provisioner reports and the spec:
// status.components, and the ChangeDetected (updates not applied yet) and Valid conditions for
// the current generation; unsupported, when not nil, says why the host cannot take any update.
// status.updates is left alone: the host controller records there what preparing or servicing
// applied. It returns the events: a validation failure when Valid turns
// false or its message changes, a success when it turns true again.
func setStatus(hfc *metal3.HostFirmwareComponents, components []metal3.FirmwareComponentStatus, unsupported error, now time.Time) events.List {
	st := &hfc.Status
	st.Components = components
	gen := hfc.Generation

	change := conditions.False(string(metal3.HostFirmwareComponentsChangeDetected), metal3.FirmwareComponentsValidReason, "")
	if pending := hfc.PendingUpdates(); len(pending) > 0 {
		names := make([]string, len(pending))
		for i, u := range pending {
			names[i] = u.Component
		}
		change = conditions.True(string(metal3.HostFirmwareComponentsChangeDetected), metal3.FirmwareComponentsValidReason,
			"Updates not applied yet: "+strings.Join(names, ", "))
	}
	conditions.Set(&st.Conditions, change, gen, now)

	prev := conditions.Get(st.Conditions, string(metal3.HostFirmwareComponentsValid))
	wasInvalid, prevMsg := prev != nil && prev.Status == metav1.ConditionFalse, ""
	if prev != nil {
		prevMsg = prev.Message
	}
	var list events.List
	if errs := validateUpdates(hfc.Spec.Updates, components, unsupported); len(errs) > 0 {
		parts := make([]string, len(errs))
		for i, err := range errs {
			parts[i] = err.Error()
		}
		msg := statustext.Clean("Invalid Firmware Components: "+strings.Join(parts, "; "), statustext.ConditionMessageLimit)
		conditions.Set(&st.Conditions, conditions.False(string(metal3.HostFirmwareComponentsValid), metal3.FirmwareComponentsInvalidReason, msg), gen, now)
		if !wasInvalid || prevMsg != msg {
			list.Warning(reasonValidationFailed, "Validate", msg)
		}
		return list
	}
	conditions.Set(&st.Conditions, conditions.True(string(metal3.HostFirmwareComponentsValid), metal3.FirmwareComponentsValidReason, ""), gen, now)
	if wasInvalid {
		list.Normal(reasonUpdatesValid, "Validate", "The firmware updates in spec are valid")
	}
	return list
}
