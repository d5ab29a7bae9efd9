package host

import (
	"fmt"
	"testing"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner/fixture"
	"github.com/metalforge/metalforge/internal/test/poll"
)

// TestFailedAdoptionIsRetried: a provisioned host whose node the provisioner lost is enrolled and
// adopted again; an adoption that fails (provisioned registration error) is retried as a retry
// after its backoff, not asked again as new at every registration (the provisioner keeps
// reporting a failed adoption until it is asked to restart it), and the host ends OK with its
// error cleared.
func TestFailedAdoptionIsRetried(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	startOperator(t, ns, fix)
	createHost(t, withImage(ns))
	waitState(t, ns, "h", metal3.StateProvisioned)

	fix.FailNextFor(ns, "h", fixture.OpAdopt, 1)
	fix.Forget(ns, "h")
	poll.Until(t, "the adoption to fail", func() (bool, string) {
		h := getHost(t, ns, "h")
		return h.Status.ErrorType == metal3.ProvisionedRegistrationError, string(h.Status.ErrorType)
	})
	poll.Until(t, "the failed adoption retried and the host OK", func() (bool, string) {
		h := getHost(t, ns, "h")
		n, ok := fix.Node(ns, "h")
		st := h.Status
		return ok && n.Provisioned && st.ErrorType == "" && st.ErrorCount == 0 && st.OperationalStatus == metal3.OperationalStatusOK,
			fmt.Sprintf("node provisioned %v; %s %q count %d %s", n.Provisioned, st.ErrorType, st.ErrorMessage, st.ErrorCount, st.OperationalStatus)
	})
}
