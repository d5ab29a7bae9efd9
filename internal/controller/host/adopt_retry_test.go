package host

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner/fixture"
	"github.com/metalforge/metalforge/internal/test/poll"
)

// TestFailedAdoptionIsRetried: a provisioned host whose node the provisioner lost is enrolled and
// adopted again; an adoption that fails (provisioned registration error) is retried as a retry
// after its backoff, not asked again as new at every registration (the provisioner keeps
// reporting a failed adoption until it is asked to restart it), nor at every wake-up during the
// backoff (watch events, annotations: each registers again), and the host ends OK with its error
// cleared.
func TestFailedAdoptionIsRetried(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	// A long backoff: the failure is retried when the test changes the spec, not before.
	op := startOperator(t, ns, fix, func(c *Config) { c.Backoff = func(int) time.Duration { return time.Hour } })
	createHost(t, withImage(ns))
	waitState(t, ns, "h", metal3.StateProvisioned)

	fix.FailNextFor(ns, "h", fixture.OpAdopt, 1)
	fix.Forget(ns, "h")
	poll.Until(t, "the adoption to fail", func() (bool, string) {
		h := getHost(t, ns, "h")
		return h.Status.ErrorType == metal3.ProvisionedRegistrationError, string(h.Status.ErrorType)
	})
	adoptions := fix.Count(ns, "h", fixture.OpAdopt)
	for i := range 4 {
		rv := annotate(t, ns, "h", "example.com/wake", strconv.Itoa(i))
		op.waitSeen(t, ns, "h", rv, 1)
	}
	if got := fix.Count(ns, "h", fixture.OpAdopt); got != adoptions {
		t.Fatalf("the failed adoption was retried %d times by wake-ups during its backoff", got-adoptions)
	}
	if h := getHost(t, ns, "h"); h.Status.ErrorType != metal3.ProvisionedRegistrationError || h.Status.ErrorCount != 1 {
		t.Fatalf("the adoption's failure during its backoff: %s", describe(h))
	}

	update(t, &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h"}}, func(h *metal3.BareMetalHost) {
		h.Spec.Description = "retry now" // a spec change retries a failure at once
	})
	poll.Until(t, "the failed adoption retried and the host OK", func() (bool, string) {
		h := getHost(t, ns, "h")
		n, ok := fix.Node(ns, "h")
		st := h.Status
		return ok && n.Provisioned && st.ErrorType == "" && st.ErrorCount == 0 && st.OperationalStatus == metal3.OperationalStatusOK,
			fmt.Sprintf("node provisioned %v; %s %q count %d %s", n.Provisioned, st.ErrorType, st.ErrorMessage, st.ErrorCount, st.OperationalStatus)
	})
	if got := fix.Count(ns, "h", fixture.OpAdopt); got != adoptions+1 {
		t.Errorf("adoptions after the spec change: %d, want %d (one retry)", got-adoptions, 1)
	}
}

// TestRetriedAdoptionClearsErrorCount: a failed adoption whose retry answers busy first (a real
// adoption takes a while) and then succeeds leaves no error count behind: a count left made every
// later power off and reboot of the host hard (a soft one is not tried again after a failure).
func TestRetriedAdoptionClearsErrorCount(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{Latency: map[fixture.Op]time.Duration{fixture.OpAdopt: 500 * time.Millisecond}})
	startOperator(t, ns, fix, func(c *Config) { c.Backoff = func(int) time.Duration { return time.Hour } })
	createHost(t, withImage(ns))
	waitState(t, ns, "h", metal3.StateProvisioned)

	fix.FailNextFor(ns, "h", fixture.OpAdopt, 1)
	fix.Forget(ns, "h")
	poll.Until(t, "the adoption to fail", func() (bool, string) {
		h := getHost(t, ns, "h")
		return h.Status.ErrorType == metal3.ProvisionedRegistrationError, string(h.Status.ErrorType)
	})
	update(t, &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h"}}, func(h *metal3.BareMetalHost) {
		h.Spec.Description = "retry now"
	})
	poll.Until(t, "the retried adoption done and no error count left", func() (bool, string) {
		h := getHost(t, ns, "h")
		n, ok := fix.Node(ns, "h")
		st := h.Status
		return ok && n.Provisioned && st.ErrorType == "" && st.ErrorCount == 0 && st.OperationalStatus == metal3.OperationalStatusOK,
			fmt.Sprintf("node provisioned %v; %s count %d %s", n.Provisioned, st.ErrorType, st.ErrorCount, st.OperationalStatus)
	})
	annotate(t, ns, "h", metal3.RebootAnnotationPrefix, "")
	poll.Until(t, "the reboot", func() (bool, string) {
		n, _ := fix.Node(ns, "h")
		return fix.Count(ns, "h", fixture.OpPowerOff) > 0, fmt.Sprintf("last power off %q", n.LastPowerOffMode)
	})
	if n, _ := fix.Node(ns, "h"); n.LastPowerOffMode != metal3.RebootModeSoft {
		t.Errorf("the reboot powered off %q, want soft", n.LastPowerOffMode)
	}
}

// TestLostNodeRegistrationFollowedToItsEnd: a provisioned host whose node the provisioner lost is
// enrolled again, and that registration (which takes a while: Ironic checks the BMC) is followed
// until it ends before the host adopts the node: a check that fails is the host's provisioned
// registration error, not an adoption of a node that never finished registering.
func TestLostNodeRegistrationFollowedToItsEnd(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{LateFailures: true, PollInterval: 50 * time.Millisecond})
	startOperator(t, ns, fix, func(c *Config) { c.Backoff = func(int) time.Duration { return time.Hour } })
	createHost(t, withImage(ns))
	waitState(t, ns, "h", metal3.StateProvisioned)
	registered := fix.RegisterCalls(ns, "h")

	fix.SetLatency(fixture.OpRegister, 500*time.Millisecond)
	fix.FailNextFor(ns, "h", fixture.OpRegister, 1)
	fix.Forget(ns, "h")
	poll.Until(t, "the failed registration reported", func() (bool, string) {
		h := getHost(t, ns, "h")
		return h.Status.ErrorType == metal3.ProvisionedRegistrationError, describe(h)
	})
	if n := fix.Count(ns, "h", fixture.OpAdopt); n != 0 {
		t.Fatalf("adopted %d times a node whose registration failed", n)
	}
	if n := fix.RegisterCalls(ns, "h") - registered; n < 2 {
		t.Fatalf("registration asked %d times: not followed to its end", n)
	}
}
