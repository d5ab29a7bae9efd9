package bmcsim_test

import (
	"net/http"
	"path/filepath"
	"testing"
)

// TestSystemPatchAppliesAllOrNothing: like a BMC, a System PATCH with one bad property changes
// nothing, whichever property JSON lists first.
func TestSystemPatchAppliesAllOrNothing(t *testing.T) {
	pxe := map[string]string{"BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": "Continuous"}
	tests := map[string]map[string]any{
		"an IndicatorLED not in the list":           {"Boot": pxe, "IndicatorLED": "Purple"},
		"an IndicatorLED of another type":           {"Boot": pxe, "IndicatorLED": 1},
		"a LocationIndicatorActive that is no bool": {"Boot": pxe, "IndicatorLED": "Lit", "LocationIndicatorActive": "yes"},
		"an AssetTag that is no string":             {"Boot": pxe, "AssetTag": 7},
		"a Boot target not in the list":             {"Boot": map[string]string{"BootSourceOverrideTarget": "Floppy"}, "IndicatorLED": "Lit", "AssetTag": "rack-7"},
		"a read-only property":                      {"Boot": pxe, "IndicatorLED": "Lit", "PowerState": "On"},
	}
	for name, patch := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, envOptions{hosts: 1})
			before := e.must(http.StatusOK, http.MethodGet, e.sys(), nil)
			e.must(http.StatusBadRequest, http.MethodPatch, e.sys(), patch)
			after := e.must(http.StatusOK, http.MethodGet, e.sys(), nil)
			equal(t, "ETag after the refused PATCH", after.header.Get("ETag"), before.header.Get("ETag"))
			equal(t, "BootSourceOverrideTarget", str(after.body, "Boot", "BootSourceOverrideTarget"), "None")
			equal(t, "IndicatorLED", after.body["IndicatorLED"], "Off")
		})
	}
}

// TestSystemAssetTag: the AssetTag a PATCH sets is what the System shows, also after a restart.
func TestSystemAssetTag(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state.json")
	e := newEnv(t, envOptions{hosts: 1, state: state})
	e.must(http.StatusNoContent, http.MethodPatch, e.sys(), map[string]any{"AssetTag": "rack-7/u12"})
	equal(t, "AssetTag", e.get(e.sys()).body["AssetTag"], "rack-7/u12")

	e.stop()
	e.start(testConfig(1), envOptions{state: state})
	equal(t, "AssetTag after a restart", e.get(e.sys()).body["AssetTag"], "rack-7/u12")

	e.must(http.StatusNoContent, http.MethodPatch, e.sys(), map[string]any{"AssetTag": nil})
	equal(t, "AssetTag after PATCHing null", e.get(e.sys()).body["AssetTag"], "")
}
