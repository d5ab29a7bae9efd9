package conditions

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestSet(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC)
	t1 := t0.Add(time.Minute)
	start := func() []metav1.Condition {
		return []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Waiting", Message: "m",
			ObservedGeneration: 1, LastTransitionTime: metav1.NewTime(t0.Truncate(time.Second))}}
	}
	for name, tc := range map[string]struct {
		set         metav1.Condition
		generation  int64
		wantChanged bool
		wantMoved   bool // transition time moved to t1
		wantLen     int
	}{
		"same everything":            {False("Ready", "Waiting", "m"), 1, false, false, 1},
		"new message only":           {False("Ready", "Waiting", "other"), 1, true, false, 1},
		"new generation only":        {False("Ready", "Waiting", "m"), 2, true, false, 1},
		"new reason, same status":    {False("Ready", "Failed", "m"), 1, true, true, 1},
		"new status":                 {True("Ready", "Waiting", "m"), 1, true, true, 1},
		"another type is appended":   {Unknown("Healthy", "Unknown", ""), 1, true, true, 2},
		"unknown to same type again": {metav1.Condition{Type: "Ready", Status: metav1.ConditionUnknown, Reason: "Waiting"}, 1, true, true, 1},
	} {
		t.Run(name, func(t *testing.T) {
			conds := start()
			changed := Set(&conds, tc.set, tc.generation, t1)
			if changed != tc.wantChanged {
				t.Errorf("changed = %v, want %v", changed, tc.wantChanged)
			}
			if len(conds) != tc.wantLen {
				t.Fatalf("%d conditions, want %d", len(conds), tc.wantLen)
			}
			c := Get(conds, tc.set.Type)
			if c.Status != tc.set.Status || c.Reason != tc.set.Reason || c.Message != tc.set.Message || c.ObservedGeneration != tc.generation {
				t.Errorf("condition %+v, want %+v at generation %d", *c, tc.set, tc.generation)
			}
			want := t0.Truncate(time.Second)
			if tc.wantMoved {
				want = t1.Truncate(time.Second)
			}
			if !c.LastTransitionTime.Time.Equal(want) {
				t.Errorf("transition time %v, want %v", c.LastTransitionTime, want)
			}
		})
	}
}

func TestQueries(t *testing.T) {
	conds := []metav1.Condition{}
	Set(&conds, True("Ready", "Done", ""), 3, time.Now())
	Set(&conds, False("Error", "None", ""), 3, time.Now())
	if !IsTrue(conds, "Ready") || IsTrue(conds, "Error") || IsTrue(conds, "Missing") {
		t.Error("IsTrue answers wrong")
	}
	if !IsCurrent(conds, "Ready", 3) || IsCurrent(conds, "Ready", 4) || IsCurrent(conds, "Error", 3) {
		t.Error("IsCurrent answers wrong")
	}
	if !Remove(&conds, "Ready") || Remove(&conds, "Ready") || len(conds) != 1 || conds[0].Type != "Error" {
		t.Errorf("Remove: %+v", conds)
	}
}
