package host

import (
	"flag"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// everyTransitionTaken is the suite's closing check: across all the envtest tests of this package
// (real API server, operator running in-process) every edge of the Transitions table was taken at
// least once. TestTransitions drives each edge through the handlers in a unit test; this check
// makes sure each one also happens in a running operator. The operator counts the moves it wrote
// in metal3_provisioning_state_change_total, which only successful status writes increment, so the
// unit tests do not count. Edges that differ only by trigger count once.
func everyTransitionTaken() error {
	if f := flag.Lookup("test.run"); (f != nil && f.Value.String() != "") || testing.Short() {
		return nil // a partial run cannot cover the table
	}
	var missing []string
	for _, tr := range Transitions {
		if testutil.ToFloat64(metricStateChanges.WithLabelValues(string(tr.From), string(tr.To))) == 0 {
			missing = append(missing, fmt.Sprintf("%q → %q (%s)", tr.From, tr.To, tr.Trigger))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("no envtest test took these transitions of the state table:\n  %s", strings.Join(missing, "\n  "))
	}
	return nil
}
