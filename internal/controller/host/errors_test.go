package host

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner/fixture"
	"github.com/metalforge/metalforge/internal/test/builder"
	"github.com/metalforge/metalforge/internal/test/poll"
)

// TestFailingProvisionerBacksOffAndRecovers: failed registrations are recorded (errorType,
// message, errorCount, event), retried with backoff and restartOnFailure, and the host recovers.
func TestFailingProvisionerBacksOffAndRecovers(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	fix.FailNextFor(ns, "h", fixture.OpRegister, 3)
	startOperator(t, ns, fix, func(c *Config) { c.Backoff = ExponentialBackoff(50 * time.Millisecond) })
	createHost(t, newHost(ns, "h").Build())
	h := waitHost(t, ns, "h", "registration error recorded", func(h *metal3.BareMetalHost) bool {
		return h.Status.ErrorType == metal3.RegistrationError && h.Status.ErrorCount >= 2
	})
	if h.Status.OperationalStatus != metal3.OperationalStatusError || !strings.Contains(h.Status.ErrorMessage, "injected register failure") {
		t.Fatalf("error status: %s", describe(h))
	}
	if c := condition(h, metal3.ManageableCondition); c == nil || c.Reason != metal3.RegistrationFailedReason {
		t.Fatalf("Manageable: %+v", c)
	}
	waitEvent(t, ns, "h", "RegistrationError")
	h = waitState(t, ns, "h", metal3.StateProvisioned)
	if h.Status.ErrorCount != 0 || h.Status.ErrorType != "" || h.Status.OperationalStatus != metal3.OperationalStatusOK {
		t.Fatalf("recovered host keeps its error: %s", describe(h))
	}
	if n := fix.Count(ns, "h", fixture.OpRegister); n != 4 {
		t.Fatalf("registered %d times, want 3 failures and 1 success", n)
	}
}

// TestProvisioningRetryWaitsForItsBackoff: a failed deployment stays as it failed until its error
// backoff is over, however often the host is looked at before (the provisioner's watch wakes a
// failed host early by itself); a changed image is the user acting on the failure, at once.
func TestProvisioningRetryWaitsForItsBackoff(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	fix.FailNextFor(ns, "h", fixture.OpProvision, 1)
	op := startOperator(t, ns, fix, func(c *Config) { c.Backoff = func(int) time.Duration { return time.Hour } })
	createHost(t, newHost(ns, "h").Build())
	waitHost(t, ns, "h", "provisioning error", func(h *metal3.BareMetalHost) bool {
		return h.Status.ErrorType == metal3.ProvisioningError
	})
	for i := range 3 {
		op.waitSeen(t, ns, "h", annotate(t, ns, "h", "touch", fmt.Sprint(i)), 1)
	}
	h := getHost(t, ns, "h")
	if h.Status.Provisioning.State != metal3.StateProvisioning || fix.Count(ns, "h", fixture.OpDeprovision) != 0 ||
		fix.Count(ns, "h", fixture.OpProvision) != 1 {
		t.Fatalf("within the backoff: %s, provisioned %d and deprovisioned %d times, want the failed attempt left alone",
			describe(h), fix.Count(ns, "h", fixture.OpProvision), fix.Count(ns, "h", fixture.OpDeprovision))
	}
	if c := condition(h, metal3.ProgressingCondition); c == nil || !strings.Contains(c.Message, "a retry after provisioning error") {
		t.Fatalf("Progressing within the backoff: %+v", c)
	}

	update(t, h, func(h *metal3.BareMetalHost) { h.Spec.Image.URL = "http://images.example/fixed.qcow2" })
	h = waitState(t, ns, "h", metal3.StateProvisioned)
	if h.Status.ErrorType != "" || fix.Count(ns, "h", fixture.OpProvision) != 2 {
		t.Fatalf("after a new image: %s, provisioned %d times", describe(h), fix.Count(ns, "h", fixture.OpProvision))
	}
}

// TestCleaningRetryWaitsForItsBackoff: failed cleaning (deprovisioning) is not started again,
// rebooting the server, by reconciles within its backoff; a spec change retries it at once.
func TestCleaningRetryWaitsForItsBackoff(t *testing.T) {
	t.Parallel()
	ns, fix, op := provisionedWithHourBackoff(t)
	fix.FailNextFor(ns, "h", fixture.OpDeprovision, 1)
	update(t, getHost(t, ns, "h"), func(h *metal3.BareMetalHost) { h.Spec.Image = nil })
	waitHost(t, ns, "h", "cleaning failed", func(h *metal3.BareMetalHost) bool {
		return h.Status.ErrorType == metal3.ProvisioningError && h.Status.Provisioning.State == metal3.StateDeprovisioning
	})
	for i := range 3 {
		op.waitSeen(t, ns, "h", annotate(t, ns, "h", "touch", fmt.Sprint(i)), 1)
	}
	if n := fix.Count(ns, "h", fixture.OpDeprovision); n != 1 {
		t.Fatalf("cleaning started %d times within its backoff, want 1", n)
	}
	update(t, getHost(t, ns, "h"), func(h *metal3.BareMetalHost) { h.Spec.Online = !h.Spec.Online })
	h := waitState(t, ns, "h", metal3.StateAvailable)
	if h.Status.ErrorType != "" || fix.Count(ns, "h", fixture.OpDeprovision) != 2 {
		t.Fatalf("after a spec change: %s, cleaning started %d times", describe(h), fix.Count(ns, "h", fixture.OpDeprovision))
	}
}

// TestRetriedFailureReportedAgain: with a provisioner whose operations fail some time after they
// start (as Ironic's do), a failed operation retried after its backoff that fails again is
// reported again (errorCount 2, a longer backoff), not started over at once by every later
// reconcile until it succeeds, rebooting the server each time unseen. For preparation, cleaning
// and inspection alike.
func TestRetriedFailureReportedAgain(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		op      fixture.Op
		errType metal3.ErrorType
		host    func(ns string) *metal3.BareMetalHost
		then    func(t *testing.T, ns string)
		final   metal3.ProvisioningState
	}{
		{fixture.OpPrepare, metal3.PreparationError, withHints, nil, metal3.StateAvailable},
		{fixture.OpInspect, metal3.InspectionError, noImage, nil, metal3.StateAvailable},
		{fixture.OpDeprovision, metal3.ProvisioningError, withImage, func(t *testing.T, ns string) {
			t.Helper()
			update(t, getHost(t, ns, "h"), func(h *metal3.BareMetalHost) { h.Spec.Image = nil })
		}, metal3.StateAvailable},
	} {
		t.Run(string(tc.op), func(t *testing.T) {
			t.Parallel()
			ns := env.Namespace(t)
			fix := fixture.New(fixture.Config{LateFailures: true, PollInterval: 20 * time.Millisecond})
			fix.SetLatency(tc.op, 100*time.Millisecond)
			var backoffs backoffRecorder
			startOperator(t, ns, fix, backoffs.record)
			if tc.then != nil {
				createHost(t, tc.host(ns))
				waitState(t, ns, "h", metal3.StateProvisioned)
				fix.FailNextFor(ns, "h", tc.op, 3)
				tc.then(t, ns)
			} else {
				fix.FailNextFor(ns, "h", tc.op, 3)
				createHost(t, tc.host(ns))
			}
			waitState(t, ns, "h", tc.final)
			if asked, want := backoffs.asked(), []int{1, 2, 3}; !slices.Equal(asked, want) {
				t.Errorf("backoff asked for failures %v, want %v (each failure reported, once)", asked, want)
			}
			if n := fix.Count(ns, "h", tc.op); n != 4 {
				t.Errorf("%s started %d times, want 4 (three failures, one success)", tc.op, n)
			}
		})
	}
}

// provisionedWithHourBackoff starts an operator whose failed operations wait an hour before a
// retry, with one provisioned host "h".
func provisionedWithHourBackoff(t *testing.T) (string, *fixture.Fixture, *operator) {
	t.Helper()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	op := startOperator(t, ns, fix, func(c *Config) { c.Backoff = func(int) time.Duration { return time.Hour } })
	createHost(t, newHost(ns, "h").Build())
	waitState(t, ns, "h", metal3.StateProvisioned)
	return ns, fix, op
}

// TestProvisioningBackoffGrowsAcrossAttempts: each failed deployment of an image is cleaned up
// (deprovisioning, which ends with errorCount 0) before the next; the backoff still grows with
// the attempts that failed before (provisioningFailCount), not restarting at its first step.
func TestProvisioningBackoffGrowsAcrossAttempts(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	fix.FailNextFor(ns, "h", fixture.OpProvision, 3)
	var backoffs backoffRecorder
	startOperator(t, ns, fix, backoffs.record)
	createHost(t, newHost(ns, "h").Build())
	waitState(t, ns, "h", metal3.StateProvisioned)
	if asked, want := backoffs.asked(), []int{1, 2, 3}; !slices.Equal(asked, want) {
		t.Errorf("backoff asked for failures %v, want %v", asked, want)
	}
}

// TestProvisioningRetryCap: each failed attempt goes through deprovisioning; after
// --max-provisioning-retries the host stays available with a clear error; a new image starts over.
func TestProvisioningRetryCap(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	fix.FailNext(fixture.OpProvision, 100)
	op := startOperator(t, ns, fix, func(c *Config) { c.MaxProvisioningRetries = 2 })
	createHost(t, newHost(ns, "h").Build())
	h := waitHost(t, ns, "h", "retry cap reached", func(h *metal3.BareMetalHost) bool {
		return h.Status.Provisioning.State == metal3.StateAvailable && h.Status.ProvisioningFailCount == 2 &&
			strings.Contains(h.Status.ErrorMessage, "--max-provisioning-retries=2")
	})
	if h.Status.ErrorType != metal3.ProvisioningError || h.Status.LastAttemptedImage == nil || h.Status.LastAttemptedImage.URL != testImage {
		t.Fatalf("capped host: %s, last attempted %+v", describe(h), h.Status.LastAttemptedImage)
	}
	op.waitSeen(t, ns, "h", h.ResourceVersion, 2) // the capped host looked again, and did not provision
	if n := fix.Count(ns, "h", fixture.OpProvision); n != 2 {
		t.Fatalf("provisioned %d times with a cap of 2", n)
	}
	if n := fix.Count(ns, "h", fixture.OpDeprovision); n != 2 {
		t.Fatalf("deprovisioned %d times, want one per failed attempt", n)
	}
	fix.FailNext(fixture.OpProvision, 0)
	update(t, h, func(h *metal3.BareMetalHost) { h.Spec.Image.URL = "http://images.example/fixed.qcow2" })
	h = waitState(t, ns, "h", metal3.StateProvisioned)
	if h.Status.ProvisioningFailCount != 0 || h.Status.ErrorType != "" {
		t.Fatalf("after a new image: %s failCount %d", describe(h), h.Status.ProvisioningFailCount)
	}
}

// TestRetryCapResetByAnyImageChange: a host at the retry cap provisions again when any field of
// spec.image changes, here the checksum of the same URL.
func TestRetryCapResetByAnyImageChange(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	fix.FailNext(fixture.OpProvision, 100)
	op := startOperator(t, ns, fix, func(c *Config) { c.MaxProvisioningRetries = 1 })
	createHost(t, newHost(ns, "h").Build())
	h := waitHost(t, ns, "h", "retry cap reached", func(h *metal3.BareMetalHost) bool {
		return h.Status.Provisioning.State == metal3.StateAvailable && h.Status.ProvisioningFailCount == 1 &&
			strings.Contains(h.Status.ErrorMessage, "--max-provisioning-retries=1")
	})
	op.waitSeen(t, ns, "h", h.ResourceVersion, 2) // capped: it looked again and did not provision
	if n := fix.Count(ns, "h", fixture.OpProvision); n != 1 {
		t.Fatalf("provisioned %d times with a cap of 1", n)
	}
	fix.FailNext(fixture.OpProvision, 0)
	const sha = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	update(t, h, func(h *metal3.BareMetalHost) {
		h.Spec.Image.Checksum, h.Spec.Image.ChecksumType = sha, metal3.SHA256 // the URL stays
	})
	h = waitState(t, ns, "h", metal3.StateProvisioned)
	if h.Status.ProvisioningFailCount != 0 || h.Status.ErrorType != "" || fix.Count(ns, "h", fixture.OpProvision) != 2 {
		t.Fatalf("after a new checksum: %s, failCount %d, provisioned %d times", describe(h), h.Status.ProvisioningFailCount,
			fix.Count(ns, "h", fixture.OpProvision))
	}
	if last := h.Status.LastAttemptedImage; last == nil || last.URL != testImage || last.Checksum != sha {
		t.Fatalf("last attempted image %+v, want the new checksum", last)
	}
}

// TestRetryCapResetByCustomDeployChange: a host with a custom deploy (no image) at the retry cap
// names spec.customDeploy, and provisions again once its method changes; a method changed while
// provisioning cancels that attempt, and the new method is what ends on the host and in status.
func TestRetryCapResetByCustomDeployChange(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	fix.FailNext(fixture.OpProvision, 100)
	startOperator(t, ns, fix, func(c *Config) { c.MaxProvisioningRetries = 1 })
	host := newHost(ns, "h").WithCustomDeploy("install-a").Build()
	host.Spec.Image = nil
	createHost(t, host)
	want := "spec.customDeploy: provisioning failed 1 times (limit --max-provisioning-retries=1); change or remove the custom deploy to try again"
	h := waitHost(t, ns, "h", "retry cap reached", func(h *metal3.BareMetalHost) bool {
		return h.Status.Provisioning.State == metal3.StateAvailable && h.Status.ErrorMessage == want
	})
	if last := h.Status.LastAttemptedCustomDeploy; last == nil || last.Method != "install-a" || h.Status.LastAttemptedImage != nil {
		t.Fatalf("last attempted custom deploy %+v, image %+v", last, h.Status.LastAttemptedImage)
	}

	// The next attempt hangs: a method changed meanwhile cancels it.
	fix.FailNext(fixture.OpProvision, 0)
	fix.SetLatency(fixture.OpProvision, time.Hour)
	update(t, h, func(h *metal3.BareMetalHost) { h.Spec.CustomDeploy.Method = "install-b" })
	h = waitState(t, ns, "h", metal3.StateProvisioning)
	if last := h.Status.LastAttemptedCustomDeploy; last == nil || last.Method != "install-b" || h.Status.ProvisioningFailCount != 0 {
		t.Fatalf("provisioning: last attempted %+v, failCount %d", last, h.Status.ProvisioningFailCount)
	}
	fix.SetLatency(fixture.OpProvision, 0)
	update(t, h, func(h *metal3.BareMetalHost) { h.Spec.CustomDeploy.Method = "install-c" })
	h = waitState(t, ns, "h", metal3.StateProvisioned)
	if cd := h.Status.Provisioning.CustomDeploy; cd == nil || cd.Method != "install-c" {
		t.Fatalf("provisioned with custom deploy %+v, want install-c", cd)
	}
	if n, ok := fix.Node(ns, "h"); !ok || n.Image != "custom-deploy:install-c" {
		t.Fatalf("the node runs %q, want custom-deploy:install-c", n.Image)
	}
}

// TestBadConfigDataIsAnInputError: network data or meta data that is not a YAML or JSON object
// keeps the host available with an error naming the field, before any provisioning attempt (so it
// does not count towards the retry cap); fixing the Secret wakes the host, which provisions.
func TestBadConfigDataIsAnInputError(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	// Bad input is looked at again only after an hour: what wakes the host is the Secret's change.
	startOperator(t, ns, fix, func(c *Config) { c.InputRetryDelay = time.Hour })
	create(t,
		builder.DataSecret(ns, "net-n", "networkData", "links:\n\t- id: eno1\n"), // a tab: not YAML
		builder.DataSecret(ns, "meta-m", "metaData", "- a list\n"),
		builder.DataSecret(ns, "preprov-p", "networkData", "links: [eno1\n"))
	createHost(t, newHost(ns, "n").WithNetworkData("net-n").Build())
	createHost(t, newHost(ns, "m").WithMetaData("meta-m").Build())
	createHost(t, newHost(ns, "p").WithPreprovisioningNetworkData("preprov-p").Build())
	for name, want := range map[string]string{
		"n": `spec.networkData: secret "net-n": not valid YAML or JSON: yaml: line 2: found character that cannot start any token`,
		"m": `spec.metaData: secret "meta-m": a list, not a YAML or JSON object (key: value pairs)`,
		"p": `spec.preprovisioningNetworkDataName: secret "preprov-p": not valid YAML or JSON: `,
	} {
		h := waitHost(t, ns, name, "an error naming the field", func(h *metal3.BareMetalHost) bool {
			return strings.HasPrefix(h.Status.ErrorMessage, want)
		})
		if h.Status.ErrorType != metal3.ProvisioningError || h.Status.Provisioning.State != metal3.StateAvailable ||
			h.Status.ProvisioningFailCount != 0 || fix.Count(ns, name, fixture.OpProvision) != 0 {
			t.Fatalf("host %s: %s, failCount %d, provisioned %d times", name, describe(h), h.Status.ProvisioningFailCount,
				fix.Count(ns, name, fixture.OpProvision))
		}
	}
	update(t, getSecret(t, ns, "net-n"), func(s *corev1.Secret) {
		s.Data["networkData"] = []byte("links:\n- id: eno1\n  type: phy\n")
	})
	h := waitState(t, ns, "n", metal3.StateProvisioned)
	if h.Status.ProvisioningFailCount != 0 || h.Status.ErrorType != "" || fix.Count(ns, "n", fixture.OpProvision) != 1 {
		t.Fatalf("after fixing the Secret: %s, failCount %d", describe(h), h.Status.ProvisioningFailCount)
	}
}

// TestBadBMCAddressRecovers: the message names the field; fixing the spec recovers.
func TestBadBMCAddressRecovers(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	op := startOperator(t, ns, fixture.New(fixture.Config{}))
	h := newHost(ns, "h").WithBMC("bogus://192.0.2.1", "bmc-h").Build()
	createHost(t, h)
	h = waitHost(t, ns, "h", "address error", func(h *metal3.BareMetalHost) bool {
		return strings.HasPrefix(h.Status.ErrorMessage, "spec.bmc.address: invalid BMC address")
	})
	if h.Status.ErrorType != metal3.RegistrationError || h.Status.ErrorCount != 1 {
		t.Fatalf("bad address: %s", describe(h))
	}
	waitEvent(t, ns, "h", "RegistrationError")
	op.waitSeen(t, ns, "h", h.ResourceVersion, 2) // retries of the same error change nothing
	if h := getHost(t, ns, "h"); h.Status.ErrorCount != 1 {
		t.Fatalf("the same bad input counted again: %s", describe(h))
	}
	update(t, h, func(h *metal3.BareMetalHost) { h.Spec.BMC.Address = testBMC })
	waitState(t, ns, "h", metal3.StateProvisioned)
}

// TestMissingSecretRecovers: a missing Secret, then one without a password, each named in the
// message; the host recovers once the Secret is right.
func TestMissingSecretRecovers(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	startOperator(t, ns, fixture.New(fixture.Config{}))
	create(t, newHost(ns, "h").Build())
	waitHost(t, ns, "h", "missing secret error", func(h *metal3.BareMetalHost) bool {
		return h.Status.ErrorMessage == `spec.bmc.credentialsName: secret "bmc-h" not found`
	})
	waitEvent(t, ns, "h", "RegistrationError")
	secret := builder.BMCSecret(ns, "bmc-h", "admin", "")
	create(t, secret)
	waitHost(t, ns, "h", "no password error", func(h *metal3.BareMetalHost) bool {
		return h.Status.ErrorMessage == `spec.bmc.credentialsName: secret "bmc-h" has no password`
	})
	update(t, secret, func(s *corev1.Secret) { s.Data["password"] = []byte("s3cret") })
	h := waitState(t, ns, "h", metal3.StateProvisioned)
	if strings.Contains(h.Status.ErrorMessage, "s3cret") {
		t.Fatal("credentials in status")
	}
}

// TestChangedCredentialsReregister: a new Secret version is sent to the provisioner and recorded
// in goodCredentials.
func TestChangedCredentialsReregister(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	startOperator(t, ns, fix)
	createHost(t, newHost(ns, "h").Build())
	waitState(t, ns, "h", metal3.StateProvisioned)
	before := fix.Count(ns, "h", fixture.OpRegister)
	secret := getSecret(t, ns, "bmc-h")
	update(t, secret, func(s *corev1.Secret) { s.Data["password"] = []byte("rotated") })
	h := waitHost(t, ns, "h", "new credentials registered", func(h *metal3.BareMetalHost) bool {
		return h.Status.GoodCredentials.Version == secret.ResourceVersion
	})
	if fix.Count(ns, "h", fixture.OpRegister) != before+1 || h.Status.TriedCredentials.Version != secret.ResourceVersion {
		t.Fatalf("register count %d (before %d), tried %+v", fix.Count(ns, "h", fixture.OpRegister), before, h.Status.TriedCredentials)
	}
	waitEvent(t, ns, "h", reasonCredentialsUpdated)
	if h.Status.Provisioning.State != metal3.StateProvisioned || fix.Count(ns, "h", fixture.OpProvision) != 1 {
		t.Fatalf("credentials change disturbed the host: %s", describe(h))
	}
}

// TestBrokenCredentialsOnProvisionedHost: a provisioned host whose Secret loses its password
// shows the error at once (metal3 validates the credentials at every reconcile), not only when
// something else registers it again; the fixed Secret registers it and it stays provisioned.
func TestBrokenCredentialsOnProvisionedHost(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	startOperator(t, ns, fix)
	createHost(t, newHost(ns, "h").Build())
	waitState(t, ns, "h", metal3.StateProvisioned)
	secret := getSecret(t, ns, "bmc-h")
	update(t, secret, func(s *corev1.Secret) { delete(s.Data, "password") })
	waitHost(t, ns, "h", "the missing password named", func(h *metal3.BareMetalHost) bool {
		return h.Status.ErrorType == metal3.ProvisionedRegistrationError &&
			h.Status.ErrorMessage == `spec.bmc.credentialsName: secret "bmc-h" has no password`
	})
	waitEvent(t, ns, "h", "ProvisionedRegistrationError")
	update(t, secret, func(s *corev1.Secret) { s.Data["password"] = []byte("fixed") })
	h := waitHost(t, ns, "h", "the fixed Secret registered", func(h *metal3.BareMetalHost) bool {
		return h.Status.ErrorType == "" && h.Status.GoodCredentials.Version == secret.ResourceVersion
	})
	if h.Status.Provisioning.State != metal3.StateProvisioned || h.Status.OperationalStatus != metal3.OperationalStatusOK ||
		fix.Count(ns, "h", fixture.OpProvision) != 1 {
		t.Fatalf("host after the fix: %s", describe(h))
	}
}

// TestCredentialsFixedWhileDeferred: the Secret fixed while the provisioner defers registration
// changes (Ironic waits for the agent of a deploy) clears the input error at once: the
// credentials are fine, only sending them waits.
func TestCredentialsFixedWhileDeferred(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	fix.SetLatency(fixture.OpProvision, time.Hour)
	startOperator(t, ns, fix)
	createHost(t, newHost(ns, "h").Build())
	waitState(t, ns, "h", metal3.StateProvisioning)
	fix.DeferRegistrationFor(ns, "h", true)
	secret := getSecret(t, ns, "bmc-h")
	update(t, secret, func(s *corev1.Secret) { delete(s.Data, "password") })
	waitHost(t, ns, "h", "the missing password named", func(h *metal3.BareMetalHost) bool {
		return h.Status.ErrorType == metal3.RegistrationError && strings.Contains(h.Status.ErrorMessage, "has no password")
	})
	update(t, secret, func(s *corev1.Secret) { s.Data["password"] = []byte("fixed") })
	waitHost(t, ns, "h", "the error cleared while provisioning", func(h *metal3.BareMetalHost) bool {
		return h.Status.ErrorType == "" && h.Status.OperationalStatus == metal3.OperationalStatusOK &&
			h.Status.Provisioning.State == metal3.StateProvisioning
	})
	fix.DeferRegistrationFor(ns, "h", false)
	fix.SetLatency(fixture.OpProvision, 0)
	h := waitHost(t, ns, "h", "provisioned with the fixed Secret", func(h *metal3.BareMetalHost) bool {
		return h.Status.Provisioning.State == metal3.StateProvisioned && h.Status.GoodCredentials.Version == secret.ResourceVersion
	})
	if h.Status.ErrorType != "" {
		t.Fatalf("host: %s", describe(h))
	}
}

// TestSwitchedCredentialsReleaseTheOldSecret: a host moved to another credentials Secret lets go
// of the old one (which can then be deleted) once the new one registered, unless another host
// still uses it.
func TestSwitchedCredentialsReleaseTheOldSecret(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	startOperator(t, ns, fixture.New(fixture.Config{}))
	createHost(t, newHost(ns, "a").Build())
	shared := newHost(ns, "b").Build()
	shared.Spec.BMC.CredentialsName = "bmc-a"
	create(t, shared)
	createHost(t, newHost(ns, "c").Build())
	for _, name := range []string{"a", "b", "c"} {
		waitState(t, ns, name, metal3.StateProvisioned)
	}
	create(t, builder.BMCSecret(ns, "new-a", "admin", "rotated"), builder.BMCSecret(ns, "new-c", "admin", "rotated"))
	for _, name := range []string{"a", "c"} {
		update(t, &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, func(h *metal3.BareMetalHost) {
			h.Spec.BMC.CredentialsName = "new-" + name
		})
		waitHost(t, ns, name, "the new Secret registered", func(h *metal3.BareMetalHost) bool {
			ref := h.Status.GoodCredentials.Reference
			return ref != nil && ref.Name == "new-"+name
		})
	}
	poll.Until(t, "bmc-c released", func() (bool, string) {
		s := getSecret(t, ns, "bmc-c")
		return len(s.Finalizers) == 0, fmt.Sprintf("finalizers %v", s.Finalizers)
	})
	if s := getSecret(t, ns, "new-c"); len(s.Finalizers) != 1 {
		t.Fatalf("the new Secret is not held: %v", s.Finalizers)
	}
	if s := getSecret(t, ns, "bmc-a"); len(s.Finalizers) != 1 {
		t.Fatalf("bmc-a released while host b uses it: %v", s.Finalizers)
	}
	if h := getHost(t, ns, "c"); h.Status.Provisioning.State != metal3.StateProvisioned {
		t.Fatalf("switching Secrets disturbed the host: %s", describe(h))
	}
}

// TestProvisionerUnavailable: the host waits without an error and says so; then proceeds.
func TestProvisionerUnavailable(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	fix.SetUnavailable(true)
	startOperator(t, ns, fix)
	createHost(t, newHost(ns, "h").Build())
	h := waitHost(t, ns, "h", "waiting for the provisioner", func(h *metal3.BareMetalHost) bool {
		c := condition(h, metal3.ProgressingCondition)
		return c != nil && c.Reason == reasonProvisionerUnavailable
	})
	if h.Status.ErrorCount != 0 || h.Status.OperationalStatus == metal3.OperationalStatusError ||
		h.Status.Provisioning.State != metal3.StateRegistering {
		t.Fatalf("unavailable provisioner made an error: %s", describe(h))
	}
	if c := condition(h, metal3.ProgressingCondition); c.Message != "Waiting for the provisioner to become available" || c.LastTransitionTime.IsZero() {
		t.Fatalf("Progressing: %+v", c)
	}
	fix.SetUnavailable(false)
	waitState(t, ns, "h", metal3.StateProvisioned)
}

// TestProvisionerSaysWhatItWaitsFor: when the provisioner knows why an operation does not move
// (Ironic stopped working on the node), the host's Progressing condition says that instead of the
// generic wait, without an error; and goes back once the operation moves.
func TestProvisionerSaysWhatItWaitsFor(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	fix.SetLatency(fixture.OpProvision, time.Hour)
	const stalled = "Ironic, which has left node n-1 in \"deploying\" since 2026-11-23T20:14:19Z with no conductor working on it"
	fix.SetWaiting(stalled)
	startOperator(t, ns, fix)
	createHost(t, newHost(ns, "h").Build())
	h := waitHost(t, ns, "h", "the provisioner's own wait message", func(h *metal3.BareMetalHost) bool {
		c := condition(h, metal3.ProgressingCondition)
		return c != nil && c.Message == "Waiting for "+stalled
	})
	if h.Status.ErrorCount != 0 || h.Status.ErrorMessage != "" || h.Status.Provisioning.State != metal3.StateProvisioning {
		t.Fatalf("a stalled provisioner made an error or moved the host: %s", describe(h))
	}
	fix.SetWaiting("")
	fix.SetLatency(fixture.OpProvision, 0)
	h = waitState(t, ns, "h", metal3.StateProvisioned)
	if c := condition(h, metal3.ProgressingCondition); c != nil && strings.Contains(c.Message, "no conductor") {
		t.Fatalf("Progressing still says the provisioner is stalled: %+v", c)
	}
}

// TestProvisionerLostHostIsAdopted: a provisioner that forgot a provisioned host (Ironic lost its
// database) gets it registered and adopted, never deprovisioned or provisioned again.
func TestProvisionerLostHostIsAdopted(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	startOperator(t, ns, fix)
	createHost(t, newHost(ns, "h").Build())
	h := waitState(t, ns, "h", metal3.StateProvisioned)
	oldID := h.Status.Provisioning.ID
	fix.Forget(ns, "h")
	h = waitHost(t, ns, "h", "registered again", func(h *metal3.BareMetalHost) bool {
		return h.Status.Provisioning.ID != oldID && h.Status.Provisioning.ID != ""
	})
	n, ok := fix.Node(ns, "h")
	if !ok || !n.Provisioned || h.Status.Provisioning.State != metal3.StateProvisioned {
		t.Fatalf("lost host: node %+v, %s", n, describe(h))
	}
	if fix.Count(ns, "h", fixture.OpProvision) != 1 || fix.Count(ns, "h", fixture.OpDeprovision) != 0 {
		t.Fatal("a lost host was provisioned or deprovisioned again")
	}
}

// TestProvisionerLostHostMidProvisioning: a provisioner that loses a host's node while it
// provisions (Ironic lost its database, or the Ironic provisioner deleted a node Ironic had left
// stalled in "deploying") gets the host registered again, says why in an event, and the host
// provisions on the new node.
func TestProvisionerLostHostMidProvisioning(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{PollInterval: 50 * time.Millisecond})
	fix.SetLatency(fixture.OpProvision, time.Hour)
	startOperator(t, ns, fix)
	createHost(t, newHost(ns, "h").Build())
	h := waitState(t, ns, "h", metal3.StateProvisioning)
	oldID := h.Status.Provisioning.ID
	fix.Forget(ns, "h")
	fix.SetLatency(fixture.OpProvision, 0)
	h = waitState(t, ns, "h", metal3.StateProvisioned)
	if h.Status.Provisioning.ID == oldID || h.Status.Provisioning.ID == "" || h.Status.ErrorType != "" {
		t.Fatalf("host after losing its node while provisioning: %s, node %q (was %q); want provisioned on a new node", describe(h), h.Status.Provisioning.ID, oldID)
	}
	poll.Until(t, "an event saying the host registers again", func() (bool, string) {
		got := eventsFor(t, ns, "h", true)
		for _, e := range got {
			if strings.HasPrefix(e, "Registering: Registering the host again: ") && strings.Contains(e, "not registered") {
				return true, ""
			}
		}
		return false, strings.Join(got, " | ")
	})
}

// TestOperatorRestartMidProvisioning: stop the operator while the host provisions, start a new
// one against the same provisioner: the host finishes, provisioned exactly once.
func TestOperatorRestartMidProvisioning(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{PollInterval: 50 * time.Millisecond})
	fix.SetLatency(fixture.OpProvision, 2*time.Second)
	first := startOperator(t, ns, fix)
	createHost(t, newHost(ns, "h").Build())
	waitState(t, ns, "h", metal3.StateProvisioning)
	first.stop()
	if n, _ := fix.Node(ns, "h"); n.Busy != fixture.OpProvision {
		t.Fatalf("node not provisioning when the operator stopped: %+v", n)
	}
	startOperator(t, ns, fix)
	h := waitState(t, ns, "h", metal3.StateProvisioned)
	if n := fix.Count(ns, "h", fixture.OpProvision); n != 1 {
		t.Fatalf("provisioned %d times across the restart", n)
	}
	if h.Status.OperationHistory.Provision.End.IsZero() || h.Status.ErrorCount != 0 {
		t.Fatalf("after restart: %s history %+v", describe(h), h.Status.OperationHistory.Provision)
	}
}

// TestDelayedEndsWhenNoLongerWaiting: a host delayed for capacity (an image to provision) whose
// image is removed no longer waits for anything: operationalStatus goes back to OK at once, not
// when capacity comes back.
func TestDelayedEndsWhenNoLongerWaiting(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{Capacity: 1, PollInterval: 50 * time.Millisecond})
	startOperator(t, ns, fix)
	createHost(t, noImage(ns))
	waitState(t, ns, "h", metal3.StateAvailable)
	fix.SetLatency(fixture.OpInspect, hold)
	busy := noImage(ns)
	busy.Name, busy.Spec.BMC.CredentialsName = "busy", "bmc-busy"
	createHost(t, busy)
	waitState(t, ns, "busy", metal3.StateInspecting)

	update(t, getHost(t, ns, "h"), func(h *metal3.BareMetalHost) { h.Spec.Image = &metal3.Image{URL: testImage} })
	waitHost(t, ns, "h", "delayed", func(h *metal3.BareMetalHost) bool {
		return h.Status.OperationalStatus == metal3.OperationalStatusDelayed
	})
	update(t, getHost(t, ns, "h"), func(h *metal3.BareMetalHost) { h.Spec.Image = nil })
	h := waitHost(t, ns, "h", "no longer delayed", func(h *metal3.BareMetalHost) bool {
		return h.Status.OperationalStatus != metal3.OperationalStatusDelayed
	})
	if h.Status.OperationalStatus != metal3.OperationalStatusOK || h.Status.Provisioning.State != metal3.StateAvailable {
		t.Fatalf("after the image was removed: %s", describe(h))
	}
}

// TestCapacityDelaysHosts: with room for one busy host, the second waits as delayed and goes on
// when the first is done.
func TestCapacityDelaysHosts(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{Capacity: 1, PollInterval: 50 * time.Millisecond})
	fix.SetLatency(fixture.OpInspect, hold)
	startOperator(t, ns, fix)
	a := noImage(ns)
	a.Name, a.Spec.BMC.CredentialsName = "a", "bmc-a"
	createHost(t, a)
	waitState(t, ns, "a", metal3.StateInspecting)
	b := noImage(ns)
	b.Name, b.Spec.BMC.CredentialsName = "b", "bmc-b"
	createHost(t, b)
	h := waitHost(t, ns, "b", "delayed", func(h *metal3.BareMetalHost) bool {
		return h.Status.OperationalStatus == metal3.OperationalStatusDelayed
	})
	if h.Status.Provisioning.State != metal3.StateRegistering {
		t.Fatalf("delayed host moved on: %s", describe(h))
	}
	fix.SetLatency(fixture.OpInspect, 0)
	h = waitState(t, ns, "b", metal3.StateAvailable)
	if h.Status.OperationalStatus != metal3.OperationalStatusOK {
		t.Fatalf("no longer delayed host: %s", describe(h))
	}
	if c := condition(h, metal3.ProgressingCondition); c == nil || c.Status != metav1.ConditionFalse {
		t.Fatalf("Progressing of an available host: %+v", c)
	}
}

// TestCapacityDoesNotHoldVirtualMedia: PROVISIONING_LIMIT counts and holds hosts that boot over
// the provisioning network only (as metal3): with the limit filled by one, a virtual media host
// inspects at once, never delayed.
func TestCapacityDoesNotHoldVirtualMedia(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{Capacity: 1, PollInterval: 50 * time.Millisecond})
	fix.SetLatency(fixture.OpInspect, hold)
	startOperator(t, ns, fix)
	a := noImage(ns)
	a.Name, a.Spec.BMC.CredentialsName = "a", "bmc-a"
	createHost(t, a)
	waitState(t, ns, "a", metal3.StateInspecting)
	v := noImage(ns)
	v.Name, v.Spec.BMC.Address, v.Spec.BMC.CredentialsName = "v", testVMediaBMC, "bmc-v"
	createHost(t, v)
	h := waitState(t, ns, "v", metal3.StateInspecting)
	if h.Status.OperationalStatus == metal3.OperationalStatusDelayed {
		t.Fatalf("virtual media host: %s", describe(h))
	}
	fix.SetLatency(fixture.OpInspect, 0)
	waitState(t, ns, "v", metal3.StateAvailable)
}

// backoffRecorder records the failure counts the operator asks the backoff for (its record tunes
// a Config; the delays stay the test's short ones).
type backoffRecorder struct {
	mu sync.Mutex
	ns []int
}

func (b *backoffRecorder) record(c *Config) {
	short := c.Backoff
	c.Backoff = func(n int) time.Duration {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.ns = append(b.ns, n)
		return short(n)
	}
}

func (b *backoffRecorder) asked() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.ns)
}
