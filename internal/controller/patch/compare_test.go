package patch

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/randfill"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
)

// TestCompareStatus: the field-by-field verdict, and StatusChanged's answer, which must be what
// the JSON diff says (checked against statusDiff for every case).
func TestCompareStatus(t *testing.T) {
	t0, t1 := metav1.NewTime(time.Unix(100, 0)), metav1.NewTime(time.Unix(200, 0))
	// t0 again, but from another clock reading: not deeply equal, encoded alike.
	t0again := metav1.NewTime(time.Unix(100, 0).In(time.FixedZone("elsewhere", 3600)))
	hfs := func(edit func(*metal3.HostFirmwareSettingsStatus)) *metal3.HostFirmwareSettings {
		h := &metal3.HostFirmwareSettings{Status: metal3.HostFirmwareSettingsStatus{
			Settings: metal3.SettingsMap{"ProcTurboMode": "Enabled"}, LastUpdated: &t0,
			Conditions: []metav1.Condition{{Type: "Valid", Status: metav1.ConditionTrue}}}}
		if edit != nil {
			edit(&h.Status)
		}
		return h
	}
	host := func(edit func(*metal3.BareMetalHostStatus)) *metal3.BareMetalHost {
		h := &metal3.BareMetalHost{Status: metal3.BareMetalHostStatus{OperationalStatus: metal3.OperationalStatusOK,
			Provisioning: metal3.ProvisionStatus{State: metal3.StateProvisioned}, LastUpdated: &t0}}
		if edit != nil {
			edit(&h.Status)
		}
		return h
	}
	for _, tc := range []struct {
		name          string
		before, after client.Object
		ignore        []string
		want          statusComparison
		wantChanged   bool
	}{
		{name: "equal statuses", before: hfs(nil), after: hfs(nil), want: statusSame},
		{name: "only an ignored field moved", before: hfs(nil), after: hfs(func(s *metal3.HostFirmwareSettingsStatus) { s.LastUpdated = &t1 }),
			ignore: []string{"lastUpdated"}, want: statusSame},
		{name: "the same field not ignored", before: hfs(nil), after: hfs(func(s *metal3.HostFirmwareSettingsStatus) { s.LastUpdated = &t1 }),
			want: statusDiffers, wantChanged: true},
		{name: "a time that differs only in memory", before: hfs(nil), after: hfs(func(s *metal3.HostFirmwareSettingsStatus) { s.LastUpdated = &t0again }),
			want: statusSame},
		{name: "a setting changed", before: hfs(nil), after: hfs(func(s *metal3.HostFirmwareSettingsStatus) { s.Settings["ProcTurboMode"] = "Disabled" }),
			ignore: []string{"lastUpdated"}, want: statusDiffers, wantChanged: true},
		{name: "nil and empty omitempty conditions are both left out", before: hfs(func(s *metal3.HostFirmwareSettingsStatus) { s.Conditions = nil }),
			after: hfs(func(s *metal3.HostFirmwareSettingsStatus) { s.Conditions = []metav1.Condition{} }), want: statusSame},
		{name: "nil and empty settings (not omitempty) encode apart", before: hfs(func(s *metal3.HostFirmwareSettingsStatus) { s.Settings = nil }),
			after: hfs(func(s *metal3.HostFirmwareSettingsStatus) { s.Settings = metal3.SettingsMap{} }), want: statusDiffers, wantChanged: true},
		{name: "a nested field", before: host(nil), after: host(func(s *metal3.BareMetalHostStatus) { s.Provisioning.State = metal3.StateDeprovisioning }),
			ignore: []string{"lastUpdated"}, want: statusDiffers, wantChanged: true},
		{name: "an error message set", before: host(nil), after: host(func(s *metal3.BareMetalHostStatus) { s.ErrorMessage = "boom" }),
			want: statusDiffers, wantChanged: true},
		{name: "powered on, not omitempty", before: host(nil), after: host(func(s *metal3.BareMetalHostStatus) { s.PoweredOn = true }),
			want: statusDiffers, wantChanged: true},
		{name: "an inlined struct is left to the JSON diff", before: &metal3.Provisioning{},
			after: &metal3.Provisioning{Status: metal3.ProvisioningStatus{OperatorStatus: metal3.OperatorStatus{Version: "1"}}}, want: statusUndecided,
			wantChanged: true},
		{name: "an inlined struct unchanged", before: &metal3.Provisioning{}, after: &metal3.Provisioning{}, want: statusSame},
		{name: "kinds without a status", before: &corev1.ConfigMap{}, after: &corev1.ConfigMap{Data: map[string]string{"a": "b"}}, want: statusSame},
		{name: "one kind with a status, one without", before: &corev1.Pod{}, after: &corev1.ConfigMap{}, want: statusUndecided},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := compareStatus(tc.before, tc.after, tc.ignore); got != tc.want {
				t.Errorf("compareStatus = %v, want %v", got, tc.want)
			}
			diff, err := statusDiff(tc.before, tc.after)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range tc.ignore {
				delete(diff, f)
			}
			if (len(diff) > 0) != tc.wantChanged {
				t.Fatalf("the case is wrong: the JSON diff is %v", diff)
			}
			h := &Helper{before: tc.before}
			if changed, err := h.StatusChanged(tc.after, IgnoringFields(tc.ignore...)); err != nil || changed != tc.wantChanged {
				t.Errorf("StatusChanged = %v, %v; want %v", changed, err, tc.wantChanged)
			}
		})
	}
}

// TestCompareStatusAgreesWithTheJSONDiff: on random statuses of the kinds the controllers write
// (the same status, or one top-level field filled anew), every verdict compareStatus gives is
// the JSON diff's.
func TestCompareStatusAgreesWithTheJSONDiff(t *testing.T) {
	f := randfill.NewWithSeed(1).NilChance(0.3).NumElements(0, 3)
	kinds := []func() client.Object{
		func() client.Object { return &metal3.BareMetalHost{} },
		func() client.Object { return &metal3.HostFirmwareSettings{} },
		func() client.Object { return &metal3.HostFirmwareComponents{} },
		func() client.Object { return &metal3.PreprovisioningImage{} },
		func() client.Object { return &sro.SpecialResource{} },
	}
	decided := map[statusComparison]int{}
	for i := range 3000 {
		newObj := kinds[i%len(kinds)]
		before := newObj()
		f.Fill(statusField(before).Addr().Interface())
		after := before.DeepCopyObject().(client.Object)
		if st := statusField(after); i%3 != 0 {
			field := st.Field(i % st.NumField())
			field.Set(reflect.Zero(field.Type()))
			f.Fill(field.Addr().Interface())
		}
		ignore := []string{"lastUpdated"}
		verdict := compareStatus(before, after, ignore)
		decided[verdict]++
		if verdict == statusUndecided {
			continue
		}
		diff, err := statusDiff(before, after)
		if err != nil {
			t.Fatal(err)
		}
		delete(diff, "lastUpdated")
		if (verdict == statusDiffers) != (len(diff) > 0) {
			t.Fatalf("%T: verdict %v, JSON diff %v", before, verdict, diff)
		}
	}
	t.Logf("verdicts: %v", decided)
	if decided[statusSame] == 0 || decided[statusDiffers] == 0 {
		t.Fatalf("verdicts %v: the cases do not cover both answers", decided)
	}
}
