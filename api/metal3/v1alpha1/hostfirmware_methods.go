package v1alpha1

import (
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/intstr"
)

// PendingSettings are the spec settings whose value differs from the host's (or that the host does
// not report): what preparing or servicing would apply. Nil when there are none.
func (h *HostFirmwareSettings) PendingSettings() DesiredSettingsMap {
	var out DesiredSettingsMap
	for name, want := range h.Spec.Settings {
		if got, ok := h.Status.Settings[name]; !ok || !SameSetting(got, want) {
			if out == nil {
				out = DesiredSettingsMap{}
			}
			out[name] = want
		}
	}
	return out
}

// SameSetting reports whether a value the host reports (as Ironic stores it: a Python str, so
// True for a Boolean) is the desired one: the same text, the same boolean in any case ("True" is
// true), or the same integer however written (30, "030", "+30"). Otherwise a Boolean or an integer
// written another way than Ironic prints it stayed pending for ever, applied again at every live
// update.
func SameSetting(got string, want intstr.IntOrString) bool {
	w := want.String()
	switch {
	case got == w:
		return true
	case strings.EqualFold(got, w):
		return strings.EqualFold(w, "true") || strings.EqualFold(w, "false")
	}
	g, gerr := strconv.Atoi(got)
	n, werr := strconv.Atoi(w)
	return gerr == nil && werr == nil && g == n
}

// PendingUpdates are the spec updates not yet applied (not in status.updates), in spec order. Nil
// when there are none.
func (h *HostFirmwareComponents) PendingUpdates() []FirmwareUpdate {
	var out []FirmwareUpdate
	for _, u := range h.Spec.Updates {
		if !slices.Contains(h.Status.Updates, u) {
			out = append(out, u)
		}
	}
	return out
}
