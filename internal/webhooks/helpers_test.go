package webhooks

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// summarize renders each error as "<field>: <type>", e.g. "spec.bootMACAddress: Required value".
func summarize(errs field.ErrorList) []string {
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		out = append(out, e.Field+": "+e.Type.String())
	}
	slices.Sort(out)
	return out
}

// checkErrors fails unless errs are exactly want (in any order) and, when detail is not empty,
// the errors' text contains it.
func checkErrors(t *testing.T, errs field.ErrorList, want []string, detail string) {
	t.Helper()
	got := summarize(errs)
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(got, want) {
		t.Fatalf("errors = %q, want %q\nfull: %v", got, want, errs.ToAggregate())
	}
	if detail != "" && !strings.Contains(errs.ToAggregate().Error(), detail) {
		t.Errorf("errors %q do not contain %q", errs.ToAggregate(), detail)
	}
}

func ptr[T any](v T) *T { return &v }
