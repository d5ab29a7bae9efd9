package host

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

// TestFirmwareChangedSince: which pending firmware changes take an available host back to
// preparing.
func TestFirmwareChangedSince(t *testing.T) {
	since := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	before, at, after := since.Add(-time.Minute), since, since.Add(time.Second)
	settings := metal3.DesiredSettingsMap{"ProcTurboMode": intstr.FromString("Disabled")}
	updates := []metal3.FirmwareUpdate{{Component: "bmc", URL: "http://fw/bmc.bin"}}
	for _, tc := range []struct {
		name string
		fw   firmwareInputs
		want bool
	}{
		{"nothing pending", firmwareInputs{settingsChanged: after, updatesChanged: after}, false},
		{"a setting judged after the host became available", firmwareInputs{settings: settings, settingsChanged: after}, true},
		{"a setting judged in the second it became available", firmwareInputs{settings: settings, settingsChanged: at}, true},
		{"a setting pending from before (applied, not read back yet; or ignored by the BMC)", firmwareInputs{settings: settings, settingsChanged: before}, false},
		{"an update recorded after", firmwareInputs{updates: updates, updatesChanged: after}, true},
		{"an update pending from before", firmwareInputs{updates: updates, updatesChanged: before}, false},
		{"a setting from before, an update new", firmwareInputs{settings: settings, settingsChanged: before, updates: updates, updatesChanged: after}, true},
		{"an edit not judged yet", firmwareInputs{uncheckedSettings: true}, true},
		{"an update edit not judged yet", firmwareInputs{uncheckedUpdates: true}, true},
		{"new status, nothing valid pending", firmwareInputs{settingsChanged: after, updatesChanged: after}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := firmwareChangedSince(tc.fw, since); got != tc.want {
				t.Errorf("firmwareChangedSince = %t, want %t", got, tc.want)
			}
		})
	}
}
