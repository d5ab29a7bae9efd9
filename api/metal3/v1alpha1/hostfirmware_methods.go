package v1alpha1

import "slices"

// PendingSettings are the spec settings whose value differs from the host's (or that the host does
// not report): what preparing or servicing would apply. Nil when there are none.
func (h *HostFirmwareSettings) PendingSettings() DesiredSettingsMap {
	var out DesiredSettingsMap
	for name, want := range h.Spec.Settings {
		if got, ok := h.Status.Settings[name]; !ok || got != want.String() {
			if out == nil {
				out = DesiredSettingsMap{}
			}
			out[name] = want
		}
	}
	return out
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
