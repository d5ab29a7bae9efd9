package host

import (
	"reflect"
	"testing"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

// TestEveryStateHasACompleteRow: the states of the transition table and the rows of the state
// table are the same set, and every row declares every field. A yes/no fact left out reads as
// unset, a missing handler as nil, a missing string as "", so adding a field to stateRow makes
// this test fail until every state says what it is.
func TestEveryStateHasACompleteRow(t *testing.T) {
	inTransitions := map[metal3.ProvisioningState]bool{}
	for _, tr := range Transitions {
		inTransitions[tr.From], inTransitions[tr.To] = true, true
	}
	for st := range inTransitions {
		if _, ok := states[st]; !ok {
			t.Errorf("state %q is in the transition table but has no row", st)
		}
	}
	for st, row := range states {
		if !inTransitions[st] {
			t.Errorf("state %q has a row but no transition", st)
		}
		for _, missing := range incompleteFields(row) {
			t.Errorf("state %q: row lacks %s", st, missing)
		}
	}
}

// incompleteFields names the fields of a row that are not declared. The Progressing message
// (conditions.doing) is required exactly for the progressing states.
func incompleteFields(row stateRow) []string {
	var missing []string
	v := reflect.ValueOf(row)
	for i := range v.NumField() {
		f, name := v.Field(i), v.Type().Field(i).Name
		if f.IsZero() && name != "conditions" {
			missing = append(missing, name)
		}
	}
	c := row.conditions
	if c.provisioned == "" || c.available == "" || c.progressing == "" {
		missing = append(missing, "conditions (a reason)")
	}
	if progressing := c.progressing != metal3.NotProgressingReason; progressing != (c.doing != "") {
		missing = append(missing, "conditions.doing (required exactly when the state is progressing)")
	}
	return missing
}

func TestIncompleteRowIsReported(t *testing.T) {
	row := states[metal3.StateProvisioned]
	row.detachable = unset
	row.enterReason = ""
	if got := incompleteFields(row); len(got) != 2 {
		t.Fatalf("incompleteFields = %v, want detachable and enterReason", got)
	}
	row = states[metal3.StateInspecting]
	row.conditions.doing = ""
	if got := incompleteFields(row); len(got) != 1 {
		t.Fatalf("a progressing state without its message: incompleteFields = %v", got)
	}
}

// TestDeletionEdgesComeFromTheTable: every state not yet on its way out has exactly one edge the
// deletion alone triggers, and the deletion guard follows it.
func TestDeletionEdgesComeFromTheTable(t *testing.T) {
	onTheWayOut := map[metal3.ProvisioningState]bool{
		metal3.StateDeprovisioning: true, metal3.StatePoweringOffBeforeDelete: true, metal3.StateDeleting: true,
	}
	count := map[metal3.ProvisioningState]int{}
	for _, tr := range Transitions {
		if tr.Trigger == triggerDeleted {
			count[tr.From]++
		}
	}
	for st := range states {
		want := 1
		if onTheWayOut[st] {
			want = 0
		}
		if count[st] != want {
			t.Errorf("state %q has %d deletion edges, want %d", st, count[st], want)
		}
	}
}
