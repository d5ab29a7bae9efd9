package hostfirmwaresettings

import (
	"errors"
	"maps"
	"slices"
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
	reasonSettingsValid    = "ValidationSucceeded"
)

// observed is what one reconcile read from the provisioner: the host's current settings and their
// schema (as the provisioner reports it, password settings included: they are told by type as well
// as by name), and the FirmwareSchema that holds the published schema.
type observed struct {
	settings  metal3.SettingsMap
	schema    map[string]metal3.SettingSchema
	schemaRef metal3.SchemaReference
}

// errNoSettings: the provisioner reports no settings at all for the host (its BMC driver has no
// BIOS interface, or the BMC answered none), so nothing in the spec can be applied.
var errNoSettings = errors.New("spec.settings: the host reports no firmware settings (its BMC or driver does not support BIOS settings)")

// setStatus computes the status from what was observed: the current settings (passwords left
// out), the schema reference, and the ChangeDetected and Valid conditions for the current
// generation. It returns the events to emit: a validation failure when the Valid condition turns
// false or its message changes (a periodic re-read of the same invalid spec emits nothing), and a
// success when it turns true again.
func setStatus(hfs *metal3.HostFirmwareSettings, obs observed, now time.Time) events.List {
	st := &hfs.Status
	st.Settings = metal3.SettingsMap{}
	for name, v := range obs.settings {
		if !isPassword(name, obs.schema[name]) {
			st.Settings[name] = v
		}
	}
	st.FirmwareSchema = &metal3.SchemaReference{Namespace: obs.schemaRef.Namespace, Name: obs.schemaRef.Name}
	gen := hfs.Generation

	changed := slices.Sorted(maps.Keys(hfs.PendingSettings(obs.schema)))
	change := conditions.False(string(metal3.FirmwareSettingsChangeDetected), metal3.FirmwareSuccessReason, "")
	if len(changed) > 0 {
		change = conditions.True(string(metal3.FirmwareSettingsChangeDetected), metal3.FirmwareSuccessReason,
			statustext.Cap("Settings that differ from the host's: "+strings.Join(changed, ", "), statustext.ConditionMessageLimit))
	}
	conditions.Set(&st.Conditions, change, gen, now)

	// Only the settings that differ from the host's are judged: a copy of status.settings,
	// read-only settings included, is valid, and stays so when one of its other settings is
	// changed (judging the whole spec then refused the read-only copies, and the host dropped the
	// change). Only those settings reach Ironic, which checks only what it is sent. metal3 judges
	// the whole spec once anything differs. Unknown and password names are never in status, so
	// they always differ and are always judged.
	var errs []error
	if len(changed) > 0 {
		errs = validateSettings(hfs.PendingSettings(obs.schema), obs.schema)
		if len(obs.settings) == 0 {
			errs = []error{errNoSettings}
		}
	}
	prev := conditions.Get(st.Conditions, string(metal3.FirmwareSettingsValid))
	wasInvalid, prevMsg := prev != nil && prev.Status == metav1.ConditionFalse, ""
	if prev != nil {
		prevMsg = prev.Message
	}
	var list events.List
	if len(errs) > 0 {
		msg := statustext.Clean("Invalid BIOS setting: "+joinErrors(errs), statustext.ConditionMessageLimit)
		conditions.Set(&st.Conditions, conditions.False(string(metal3.FirmwareSettingsValid), metal3.FirmwareConfigurationErrorReason, msg), gen, now)
		if !wasInvalid || prevMsg != msg {
			list.Warning(reasonValidationFailed, "Validate", msg)
		}
		return list
	}
	conditions.Set(&st.Conditions, conditions.True(string(metal3.FirmwareSettingsValid), metal3.FirmwareSuccessReason, ""), gen, now)
	if wasInvalid {
		list.Normal(reasonSettingsValid, "Validate", "The firmware settings in spec are valid")
	}
	return list
}

func joinErrors(errs []error) string {
	parts := make([]string, len(errs))
	for i, err := range errs {
		parts[i] = err.Error()
	}
	return strings.Join(parts, "; ")
}
