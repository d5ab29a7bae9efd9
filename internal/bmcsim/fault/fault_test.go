package fault

import "testing"

func TestMergeAndValidate(t *testing.T) {
	got := Merge(Set{ErrorRate: 0.1, IgnorePowerOn: true, RejectBIOSSetting: "A"}, Set{ErrorRate: 0.3, TimeoutRate: 0.2, FailDeploy: true, FailPowerOn: true, RejectBIOSSetting: "B"})
	want := Set{ErrorRate: 0.3, TimeoutRate: 0.2, IgnorePowerOn: true, FailPowerOn: true, FailDeploy: true, RejectBIOSSetting: "B"}
	if got != want {
		t.Errorf("Merge = %+v, want %+v", got, want)
	}
	if got := Merge(Set{Password: "global"}, Set{Password: "own"}).Password; got != "own" {
		t.Errorf("Merge password = %q, want the server's own", got)
	}
	if got := Merge(Set{Password: "global"}, Set{FailDeploy: true}).Password; got != "global" {
		t.Errorf("Merge password = %q, want the global one when the server has none", got)
	}
	for name, s := range map[string]Set{
		"negative rate":       {ErrorRate: -0.1},
		"rate above one":      {TimeoutRate: 1.5},
		"rates adding over 1": {ErrorRate: 0.6, TimeoutRate: 0.6},
	} {
		if s.Validate() == nil {
			t.Errorf("%s: Validate accepted %+v", name, s)
		}
	}
	if got := Merge(Set{RejectBIOSSetting: "A"}, Set{}); got.RejectBIOSSetting != "A" {
		t.Errorf("Merge kept rejectBIOSSetting %q, want the global A", got.RejectBIOSSetting)
	}
	if err := (Set{ErrorRate: 0.5, TimeoutRate: 0.5}).Validate(); err != nil {
		t.Errorf("rates adding to 1: %v", err)
	}
}

func TestRollExtremes(t *testing.T) {
	for range 100 {
		if Roll(Set{}) != Pass || Roll(Set{ErrorRate: 1}) != Error || Roll(Set{TimeoutRate: 1}) != Hang {
			t.Fatal("rates of 0 and 1 must decide every call")
		}
	}
}

func TestInjector(t *testing.T) {
	i := NewInjector(Set{ErrorRate: 0.1})
	if err := i.SetServer("a", Set{WrongCredentials: true}); err != nil {
		t.Fatal(err)
	}
	if got := i.For("a"); !got.WrongCredentials || got.ErrorRate != 0.1 {
		t.Errorf("For(a) = %+v, want its own faults merged with the global ones", got)
	}
	if got := i.For("b"); got.WrongCredentials {
		t.Errorf("For(b) = %+v, got a's faults", got)
	}
	if err := i.SetServer("a", Set{}); err != nil {
		t.Fatal(err)
	}
	if _, ok := i.Snapshot().Servers["a"]; ok {
		t.Error("a zero set did not remove the server's faults")
	}
	if i.SetGlobal(Set{ErrorRate: 2}) == nil {
		t.Error("SetGlobal accepted an invalid set")
	}
	i.Clear()
	if !i.For("a").IsZero() {
		t.Error("Clear left faults")
	}
}
