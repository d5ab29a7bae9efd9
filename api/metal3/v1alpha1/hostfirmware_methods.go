package v1alpha1

import (
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/intstr"
)

// PendingSettings are the spec settings whose value differs from the host's (or that the host does
// not report): what preparing or servicing would apply. schema holds the settings' types (the
// host's FirmwareSchema; nil when unknown). Nil when there are none.
func (h *HostFirmwareSettings) PendingSettings(schema map[string]SettingSchema) DesiredSettingsMap {
	var out DesiredSettingsMap
	for name, want := range h.Spec.Settings {
		if got, ok := h.Status.Settings[name]; !ok || !SameSetting(got, want, schema[name].AttributeType) {
			if out == nil {
				out = DesiredSettingsMap{}
			}
			out[name] = want
		}
	}
	return out
}

// SameSetting reports whether a value the host reports (as Ironic stores it: a Python str, so
// True for a Boolean) is the desired one for a setting of attributeType: the same text; for a
// Boolean the same boolean in any case ("True" is true); for an Integer the same integer however
// written (30, "030", "+30"). Otherwise a Boolean or an integer written another way than Ironic
// prints it stayed pending for ever, applied again at every live update. Other types compare the
// text only: "0042" and "42" are different String values. A setting of unknown type (no schema,
// or a registry without types) is compared as either could be.
func SameSetting(got string, want intstr.IntOrString, attributeType string) bool {
	w := want.String()
	if got == w {
		return true
	}
	boolean, integer := attributeType == "Boolean" || attributeType == "", attributeType == "Integer" || attributeType == ""
	if boolean && strings.EqualFold(got, w) && (strings.EqualFold(w, "true") || strings.EqualFold(w, "false")) {
		return true
	}
	if !integer {
		return false
	}
	g, gerr := strconv.Atoi(got)
	n, werr := strconv.Atoi(w)
	return gerr == nil && werr == nil && g == n
}

// PendingUpdates are the spec updates not yet applied (not in status.updates), in spec order. Nil
// when there are none. A component listed more than once is a sequence (a BMC through an
// intermediate version): from its first entry not applied, every later entry of it is pending
// too, applied or not before, so that the versions are flashed in the order listed and the last
// one is the one left (status.updates holding the last alone must not make the first a downgrade
// that ends the run).
func (h *HostFirmwareComponents) PendingUpdates() []FirmwareUpdate {
	from := map[string]int{} // component → index of its first entry not applied
	for i, u := range h.Spec.Updates {
		if _, seen := from[u.Component]; !seen && !slices.Contains(h.Status.Updates, u) {
			from[u.Component] = i
		}
	}
	var out []FirmwareUpdate
	for i, u := range h.Spec.Updates {
		if j, ok := from[u.Component]; ok && i >= j {
			out = append(out, u)
		}
	}
	return out
}
