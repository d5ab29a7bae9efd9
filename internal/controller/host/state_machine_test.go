package host

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner"
	"github.com/metalforge/metalforge/internal/provisioner/fixture"
)

// unitScope builds a scope for one host without an API server: inputs as the driver would have
// read them (good credentials), fixture provisioner.
func unitScope(t *testing.T, host *metal3.BareMetalHost, fix *fixture.Fixture) *hostScope {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Backoff = func(int) time.Duration { return time.Millisecond }
	s := &hostScope{ctx: context.Background(), cfg: &cfg, prov: fix, host: host, now: metav1.Now()}
	if host.HasBMCDetails() {
		s.in.creds = provisioner.Credentials{Username: "admin", Password: "secret"}
		s.in.credsRef = &corev1.SecretReference{Name: host.Spec.BMC.CredentialsName, Namespace: host.Namespace}
		s.in.credsVersion = "1"
	}
	return s
}

func unitHost(state metal3.ProvisioningState) *metal3.BareMetalHost {
	return &metal3.BareMetalHost{
		ObjectMeta: metav1.ObjectMeta{Name: "host-0", Namespace: "ns", Generation: 1, Annotations: map[string]string{}},
		Spec: metal3.BareMetalHostSpec{
			BMC:            metal3.BMCDetails{Address: "redfish://192.0.2.10/redfish/v1/Systems/1", CredentialsName: "bmc"},
			BootMACAddress: "52:54:00:00:00:01",
			Online:         true,
		},
		Status: metal3.BareMetalHostStatus{Provisioning: metal3.ProvisionStatus{State: state}, OperationalStatus: metal3.OperationalStatusOK},
	}
}

// registerIn enrolls the host in the fixture as an earlier reconcile would have, and records it
// in status.
func registerIn(t *testing.T, s *hostScope, fix *fixture.Fixture) {
	t.Helper()
	res, id, err := fix.Register(s.ctx, s.provHost(), provisioner.RegisterOptions{})
	if err != nil || res.Busy || res.Failed() {
		t.Fatalf("registering in fixture: %v %+v", err, res)
	}
	s.host.Status.Provisioning.ID = id
	s.host.Status.GoodCredentials = metal3.CredentialsStatus{Reference: s.in.credsRef, Version: s.in.credsVersion}
	s.host.Status.Conditions = []metav1.Condition{{Type: metal3.ReadyCondition, ObservedGeneration: s.host.Generation}}
}

func provisionIn(t *testing.T, s *hostScope, fix *fixture.Fixture) {
	t.Helper()
	registerIn(t, s, fix)
	img := &metal3.Image{URL: "http://images/a.qcow2", Checksum: "abc", ChecksumType: metal3.MD5}
	s.host.Spec.Image = img
	s.host.Status.Provisioning.Image = *img
	if res, err := fix.Provision(s.ctx, s.provHost(), provisioner.ProvisionData{Image: img}, false); err != nil || res.Busy {
		t.Fatalf("provisioning in fixture: %v %+v", err, res)
	}
}

func deleted(h *metal3.BareMetalHost) {
	now := metav1.Now()
	h.DeletionTimestamp = &now
	h.Finalizers = []string{metal3.BareMetalHostFinalizer}
}

func detachedAnnotation(h *metal3.BareMetalHost) { h.Annotations[metal3.DetachedAnnotation] = "" }

// setups prepare, for every declared transition, a host in From that must move to To.
var setups = map[Transition]func(t *testing.T, s *hostScope, fix *fixture.Fixture){
	{metal3.StateNone, metal3.StateRegistering, "BMC address or credentials set"}: func(*testing.T, *hostScope, *fixture.Fixture) {},
	{metal3.StateNone, metal3.StateUnmanaged, "no BMC details (operationalStatus discovered)"}: func(_ *testing.T, s *hostScope, _ *fixture.Fixture) {
		s.host.Spec.BMC = metal3.BMCDetails{}
	},
	{metal3.StateUnmanaged, metal3.StateRegistering, "BMC details added"}: func(*testing.T, *hostScope, *fixture.Fixture) {},
	{metal3.StateRegistering, metal3.StateExternallyProvisioned, "registered, spec.externallyProvisioned"}: func(_ *testing.T, s *hostScope, _ *fixture.Fixture) {
		s.host.Spec.ExternallyProvisioned = true
	},
	{metal3.StateRegistering, metal3.StatePreparing, "registered, inspection disabled"}: func(_ *testing.T, s *hostScope, _ *fixture.Fixture) {
		s.host.Spec.InspectionMode = metal3.InspectionModeDisabled
	},
	{metal3.StateRegistering, metal3.StateInspecting, "registered"}:                          func(*testing.T, *hostScope, *fixture.Fixture) {},
	{metal3.StateInspecting, metal3.StatePreparing, "inspection done, HardwareData written"}: registerIn,
	{metal3.StateMatchProfile, metal3.StatePreparing, "legacy state, moves on at once"}:      registerIn,
	{metal3.StatePreparing, metal3.StateAvailable, "RAID, root device hints and firmware changes applied"}: func(t *testing.T, s *hostScope, fix *fixture.Fixture) {
		t.Helper()
		registerIn(t, s, fix)
		s.host.Spec.RootDeviceHints = &metal3.RootDeviceHints{DeviceName: "/dev/sda"}
	},
	{metal3.StateReady, metal3.StateAvailable, "legacy name of available"}: registerIn,
	{metal3.StateAvailable, metal3.StateExternallyProvisioned, "spec.externallyProvisioned set"}: func(t *testing.T, s *hostScope, fix *fixture.Fixture) {
		t.Helper()
		registerIn(t, s, fix)
		s.host.Spec.ExternallyProvisioned = true
	},
	{metal3.StateAvailable, metal3.StateInspecting, "inspect.metal3.io annotation (re-inspection)"}: func(t *testing.T, s *hostScope, fix *fixture.Fixture) {
		t.Helper()
		registerIn(t, s, fix)
		s.host.Annotations[metal3.InspectAnnotationPrefix] = ""
	},
	{metal3.StateAvailable, metal3.StatePreparing, "spec.raid or spec.rootDeviceHints differ from status, or a firmware change made since the host's last preparation"}: func(t *testing.T, s *hostScope, fix *fixture.Fixture) {
		t.Helper()
		registerIn(t, s, fix)
		s.host.Spec.RootDeviceHints = &metal3.RootDeviceHints{DeviceName: "/dev/sdb"}
	},
	{metal3.StateAvailable, metal3.StateProvisioning, "online, image or custom deploy not yet provisioned, retry cap not reached"}: func(t *testing.T, s *hostScope, fix *fixture.Fixture) {
		t.Helper()
		registerIn(t, s, fix)
		s.host.Spec.Image = &metal3.Image{URL: "http://images/a.qcow2", Checksum: "abc", ChecksumType: metal3.MD5}
	},
	{metal3.StateProvisioning, metal3.StateProvisioned, "image written"}: func(t *testing.T, s *hostScope, fix *fixture.Fixture) {
		t.Helper()
		registerIn(t, s, fix)
		s.host.Spec.Image = &metal3.Image{URL: "http://images/a.qcow2"}
		s.host.Status.LastAttemptedImage = s.host.Spec.Image.DeepCopy()
	},
	{metal3.StateProvisioning, metal3.StateDeprovisioning, "provisioning failed (provisioningFailCount+1), or image or custom deploy removed or changed"}: func(t *testing.T, s *hostScope, fix *fixture.Fixture) {
		t.Helper()
		registerIn(t, s, fix)
		s.host.Spec.Image = &metal3.Image{URL: "http://images/a.qcow2"}
		s.host.Status.ErrorType, s.host.Status.OperationalStatus = metal3.ProvisioningError, metal3.OperationalStatusError
	},
	{metal3.StateProvisioned, metal3.StateDeprovisioning, "image or custom deploy changed or removed"}: func(t *testing.T, s *hostScope, fix *fixture.Fixture) {
		t.Helper()
		provisionIn(t, s, fix)
		s.host.Spec.Image = nil
	},
	{metal3.StateExternallyProvisioned, metal3.StateProvisioned, "spec.externallyProvisioned cleared"}: registerIn,
	{metal3.StateDeprovisioning, metal3.StateAvailable, "image removed (cleaning done)"}:               provisionIn,
	{metal3.StateDeprovisioning, metal3.StatePoweringOffBeforeDelete, "deprovisioned while deleting, or failed more than 3 times while deleting"}: func(t *testing.T, s *hostScope, fix *fixture.Fixture) {
		t.Helper()
		provisionIn(t, s, fix)
		deleted(s.host)
	},
	{metal3.StatePoweringOffBeforeDelete, metal3.StateDeleting, "powered off, power off disabled, failed more than 3 times, or never registered"}: func(t *testing.T, s *hostScope, fix *fixture.Fixture) {
		t.Helper()
		provisionIn(t, s, fix) // powered on
		deleted(s.host)
	},
	{metal3.StateDeprovisioning, metal3.StateDeleting, "host deleted, registration failed more than 3 times or never registered"}: func(_ *testing.T, s *hostScope, _ *fixture.Fixture) {
		deleted(s.host)
		s.in.bmcErr = errSecretNotFound
	},
}

func init() {
	for _, tr := range Transitions {
		switch tr.Trigger {
		case triggerDeleted:
			setups[tr] = func(t *testing.T, s *hostScope, fix *fixture.Fixture) {
				t.Helper()
				registerIn(t, s, fix)
				deleted(s.host)
			}
		case triggerDeletedDetached:
			setups[tr] = func(t *testing.T, s *hostScope, fix *fixture.Fixture) {
				t.Helper()
				registerIn(t, s, fix)
				deleted(s.host)
				detachedAnnotation(s.host)
				// Detached (by force, in a busy state): an annotation that has not taken
				// effect is no detach (TestDeleteWithPendingDetach).
				s.host.Status.OperationalStatus = metal3.OperationalStatusDetached
			}
		}
	}
}

// TestTransitions drives every declared transition through the guards and handlers.
func TestTransitions(t *testing.T) {
	for _, tr := range Transitions {
		t.Run(string(tr.From)+"->"+string(tr.To)+": "+tr.Trigger, func(t *testing.T) {
			setup, ok := setups[tr]
			if !ok {
				t.Fatalf("no test for transition %+v", tr)
			}
			fix := fixture.New(fixture.Config{})
			s := unitScope(t, unitHost(tr.From), fix)
			setup(t, s, fix)
			out := stepOnce(s)
			if out.kind != kindAdvance || out.next != tr.To {
				t.Fatalf("from %q: got outcome %+v, want a move to %q", tr.From, out, tr.To)
			}
			if blocked, stop := s.moveTo(out.next, out.keepError); stop {
				t.Fatalf("transition refused: %+v", blocked)
			}
		})
	}
}

// stepOnce runs guards and handler of the current state until they ask for something else than a
// repeat.
func stepOnce(s *hostScope) outcome {
	for range maxSteps {
		out, handled := s.guards()
		if !handled {
			out = states[s.state()].handler(s)
		}
		if out.kind != kindRepeat {
			return out
		}
	}
	return outcome{}
}

func TestUndeclaredTransitionIsRefused(t *testing.T) {
	s := unitScope(t, unitHost(metal3.StateAvailable), fixture.New(fixture.Config{}))
	out, stop := s.moveTo(metal3.StateProvisioned, false)
	if !stop || out.err == nil {
		t.Fatalf("available -> provisioned was accepted: %+v", out)
	}
}

func TestRunTakesANewHostToProvisionedInOneReconcile(t *testing.T) {
	fix := fixture.New(fixture.Config{})
	h := unitHost(metal3.StateNone)
	h.Spec.Image = &metal3.Image{URL: "http://images/a.qcow2", Checksum: "abc", ChecksumType: metal3.MD5}
	s := unitScope(t, h, fix)
	out := s.run()
	if got := s.state(); got != metal3.StateProvisioned {
		t.Fatalf("state %q after one run (outcome %+v), want provisioned", got, out)
	}
	if n := fix.Count("ns", "host-0", fixture.OpProvision); n != 1 {
		t.Fatalf("provisioned %d times, want 1", n)
	}
	if s.fx.hardwareData == nil || len(s.fx.transitions) != 6 {
		t.Fatalf("hardware data %v, transitions %v", s.fx.hardwareData != nil, s.fx.transitions)
	}
}

// TestHeldRebootAnnotationSurvivesADeployment: a deployment removes the one-shot reboot
// annotation, never a held reboot.metal3.io/<owner> one, which its owner removes (metal3 PR
// #3342): a remediation's hold removed there let the new deployment power on.
func TestHeldRebootAnnotationSurvivesADeployment(t *testing.T) {
	fix := fixture.New(fixture.Config{})
	h := unitHost(metal3.StateNone)
	h.Spec.Image = &metal3.Image{URL: "http://images/a.qcow2", Checksum: "abc", ChecksumType: metal3.MD5}
	h.Annotations[metal3.RebootAnnotationPrefix] = ""
	h.Annotations[metal3.RebootAnnotationPrefix+"/remediation"] = ""
	s := unitScope(t, h, fix)
	s.run()
	if got := s.state(); got != metal3.StateProvisioned {
		t.Fatalf("state %q, want provisioned", got)
	}
	if !s.fx.removeAnnotations[metal3.RebootAnnotationPrefix] || s.fx.removeAnnotations[metal3.RebootAnnotationPrefix+"/remediation"] {
		t.Fatalf("annotations removed %v: want the one-shot one only", s.fx.removeAnnotations)
	}
}

// TestInspectionDisabledWhileInspecting: a user who gives up on a failing inspection
// (spec.inspectionMode: disabled) gets the host to preparing, as metal3 does (InspectionSkipped),
// the inspection under way stopped and its error gone; before, it retried the inspection for ever.
func TestInspectionDisabledWhileInspecting(t *testing.T) {
	fix := fixture.New(fixture.Config{})
	s := unitScope(t, unitHost(metal3.StateInspecting), fix)
	registerIn(t, s, fix)
	fix.FailNext(fixture.OpInspect, 100)
	s.run()
	if s.state() != metal3.StateInspecting || s.host.Status.ErrorType != metal3.InspectionError {
		t.Fatalf("state %q, error %q: want the inspection failing", s.state(), s.host.Status.ErrorType)
	}
	s = unitScope(t, s.host, fix)
	s.host.Spec.InspectionMode = metal3.InspectionModeDisabled
	s.host.Spec.Image = nil
	s.run()
	if s.state() != metal3.StateAvailable || s.host.Status.ErrorType != "" {
		t.Fatalf("state %q, error %q: want on to available through preparing, no error", s.state(), s.host.Status.ErrorType)
	}
	found := false
	for _, e := range s.fx.events {
		found = found || e.Reason == reasonInspectionSkipped
	}
	if !found {
		t.Fatalf("events %v: want %s", s.fx.events, reasonInspectionSkipped)
	}
}

func TestBackoffRanges(t *testing.T) {
	b := ExponentialBackoff(time.Minute)
	for n, want := range map[int][2]time.Duration{1: {time.Minute, 2 * time.Minute}, 2: {2 * time.Minute, 4 * time.Minute},
		9: {256 * time.Minute, 512 * time.Minute}, 30: {256 * time.Minute, 512 * time.Minute}} {
		for range 50 {
			if d := b(n); d < want[0] || d > want[1] {
				t.Fatalf("backoff(%d) = %s, want within %v", n, d, want)
			}
		}
	}
}

// TestDeprovisioningEndIsWrittenBeforeADeploy reproduces the fault campaign's finding 3
// (docs/fault-campaign.md): a reconcile that ended deprovisioning went on through available into
// provisioning and started the new deployment before the status was written; the operator was
// killed in between, the next one found the host still deprovisioning and undeployed the new
// deployment, and the server's disk was written once more. The reconcile must end when
// deprovisioning does, with no deployment asked for.
func TestDeprovisioningEndIsWrittenBeforeADeploy(t *testing.T) {
	fix := fixture.New(fixture.Config{})
	s := unitScope(t, unitHost(metal3.StateDeprovisioning), fix)
	provisionIn(t, s, fix)
	s.host.Spec.Image = &metal3.Image{URL: "http://images/b.qcow2", Checksum: "def", ChecksumType: metal3.MD5}
	deploys := fix.Count("ns", "host-0", fixture.OpProvision)

	out := s.run()
	if got := s.state(); got != metal3.StateAvailable {
		t.Fatalf("state after the reconcile: %q, want available (outcome %+v)", got, out)
	}
	if out.kind != kindWait || out.after > time.Second {
		t.Errorf("outcome %+v, want to look again at once (after the status write)", out)
	}
	if got := fix.Count("ns", "host-0", fixture.OpProvision); got != deploys {
		t.Errorf("the reconcile that ended deprovisioning asked for %d deployments, want none before its status is written", got-deploys)
	}
	// The next reconcile deploys the new image.
	s.run()
	if got := fix.Count("ns", "host-0", fixture.OpProvision); got <= deploys {
		t.Errorf("the next reconcile did not deploy (state %q)", s.state())
	}
}
