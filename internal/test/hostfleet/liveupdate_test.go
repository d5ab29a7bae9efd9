package hostfleet

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

// TestLiveUpdateSteps: the policy is created once (again: no error), a setting is added to those
// asked for, and the reboot annotation is set, all without reading first.
func TestLiveUpdateSteps(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	key := types.NamespacedName{Namespace: ns, Name: "h"}
	for range 2 {
		if err := AllowLiveSettings(ctx, env.Client, ns, "h"); err != nil {
			t.Fatalf("allowing live settings (a second time: a retry after a lost answer): %v", err)
		}
	}
	policy := &metal3.HostUpdatePolicy{}
	if err := env.Client.Get(ctx, key, policy); err != nil || policy.Spec.FirmwareSettings != metal3.HostUpdatePolicyOnReboot || policy.Spec.FirmwareUpdates != "" {
		t.Errorf("policy %+v, %v; want firmwareSettings onReboot only", policy.Spec, err)
	}

	hfs := &metal3.HostFirmwareSettings{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h"},
		Spec: metal3.HostFirmwareSettingsSpec{Settings: metal3.DesiredSettingsMap{"LogicalProc": intstr.FromString("Disabled")}}}
	if err := env.Client.Create(ctx, hfs); err != nil {
		t.Fatal(err)
	}
	if err := SetFirmwareSetting(ctx, env.Client, ns, "h", "ProcTurboMode", "Disabled"); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, key, hfs); err != nil {
		t.Fatal(err)
	}
	if want := (metal3.DesiredSettingsMap{"LogicalProc": intstr.FromString("Disabled"), "ProcTurboMode": intstr.FromString("Disabled")}); len(hfs.Spec.Settings) != 2 ||
		hfs.Spec.Settings["LogicalProc"] != want["LogicalProc"] || hfs.Spec.Settings["ProcTurboMode"] != want["ProcTurboMode"] {
		t.Errorf("settings %v, want %v (the one set added to those asked for)", hfs.Spec.Settings, want)
	}

	host := &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h"}, Spec: metal3.BareMetalHostSpec{Online: true}}
	if err := env.Client.Create(ctx, host); err != nil {
		t.Fatal(err)
	}
	if err := Reboot(ctx, env.Client, ns, "h"); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, key, host); err != nil {
		t.Fatal(err)
	}
	if v, ok := host.Annotations[metal3.RebootAnnotationPrefix]; !ok || v != "" {
		t.Errorf("annotations %v, want %s with an empty value", host.Annotations, metal3.RebootAnnotationPrefix)
	}
}

func TestChangeJudged(t *testing.T) {
	cond := func(typ metal3.SettingsConditionType, status metav1.ConditionStatus, gen int64) metav1.Condition {
		return metav1.Condition{Type: string(typ), Status: status, ObservedGeneration: gen}
	}
	for name, c := range map[string]struct {
		conds []metav1.Condition
		want  bool
	}{
		"both true for this generation": {[]metav1.Condition{cond(metal3.FirmwareSettingsChangeDetected, metav1.ConditionTrue, 2),
			cond(metal3.FirmwareSettingsValid, metav1.ConditionTrue, 2)}, true},
		"judged for the generation before": {[]metav1.Condition{cond(metal3.FirmwareSettingsChangeDetected, metav1.ConditionTrue, 1),
			cond(metal3.FirmwareSettingsValid, metav1.ConditionTrue, 2)}, false},
		"invalid": {[]metav1.Condition{cond(metal3.FirmwareSettingsChangeDetected, metav1.ConditionTrue, 2),
			cond(metal3.FirmwareSettingsValid, metav1.ConditionFalse, 2)}, false},
		"no change": {[]metav1.Condition{cond(metal3.FirmwareSettingsChangeDetected, metav1.ConditionFalse, 2),
			cond(metal3.FirmwareSettingsValid, metav1.ConditionTrue, 2)}, false},
		"not judged yet": {nil, false},
	} {
		hfs := &metal3.HostFirmwareSettings{ObjectMeta: metav1.ObjectMeta{Generation: 2}, Status: metal3.HostFirmwareSettingsStatus{Conditions: c.conds}}
		if got := ChangeJudged(hfs); got != c.want {
			t.Errorf("%s: ChangeJudged = %t, want %t", name, got, c.want)
		}
	}
}
