package host

import (
	"fmt"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner/fixture"
	"github.com/metalforge/metalforge/internal/test/poll"
)

// TestLifecycle: create → provisioned, image removed → available, deleted → gone and released.
func TestLifecycle(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	startOperator(t, ns, fix)
	createHost(t, newHost(ns, "h").Build())

	h := waitState(t, ns, "h", metal3.StateProvisioned)
	if h.Status.OperationalStatus != metal3.OperationalStatusOK || !h.Status.PoweredOn {
		t.Fatalf("provisioned host: %s", describe(h))
	}
	if h.Status.Provisioning.Image.URL != testImage || h.Status.Provisioning.ID == "" || h.Status.HardwareDetails == nil {
		t.Fatalf("status misses image, node ID or hardware: %+v", h.Status.Provisioning)
	}
	for _, c := range []string{metal3.ReadyCondition, metal3.ProvisionedCondition, metal3.ManageableCondition} {
		if cond := condition(h, c); cond == nil || cond.Status != metav1.ConditionTrue || cond.ObservedGeneration != h.Generation {
			t.Fatalf("condition %s: %+v", c, cond)
		}
	}
	if c := condition(h, metal3.HealthyCondition); c == nil || c.Status != metav1.ConditionUnknown {
		t.Fatalf("Healthy condition: %+v", c)
	}
	oh := h.Status.OperationHistory
	for name, om := range map[string]metal3.OperationMetric{"register": oh.Register, "inspect": oh.Inspect, "provision": oh.Provision} {
		if om.Start.IsZero() || om.End.IsZero() {
			t.Fatalf("operationHistory.%s not recorded: %+v", name, om)
		}
	}
	if !controllerutil.ContainsFinalizer(h, metal3.BareMetalHostFinalizer) {
		t.Fatalf("host finalizer missing: %v", h.Finalizers)
	}
	if h.Status.GoodCredentials.Reference == nil || h.Status.GoodCredentials.Version == "" ||
		h.Status.TriedCredentials.Version != h.Status.GoodCredentials.Version {
		t.Fatalf("credentials status: good %+v tried %+v", h.Status.GoodCredentials, h.Status.TriedCredentials)
	}
	secret := getSecret(t, ns, "bmc-h")
	if secret.Labels[metal3.EnvironmentLabel] != metal3.EnvironmentLabelValue || !controllerutil.ContainsFinalizer(secret, metal3.SecretsFinalizer) {
		t.Fatalf("secret not labelled and finalized: %v %v", secret.Labels, secret.Finalizers)
	}
	hd, err := getHardwareData(ns, "h")
	if err != nil {
		t.Fatalf("hardware data: %v", err)
	}
	if !controllerutil.ContainsFinalizer(hd, metal3.HardwareDataFinalizer) || len(hd.OwnerReferences) != 1 ||
		hd.OwnerReferences[0].UID != h.UID || hd.Spec.HardwareDetails == nil || hd.Spec.HardwareDetails.CPU.Arch != "x86_64" {
		t.Fatalf("hardware data: finalizers %v owners %+v", hd.Finalizers, hd.OwnerReferences)
	}
	for _, state := range []metal3.ProvisioningState{metal3.StateRegistering, metal3.StateInspecting, metal3.StatePreparing,
		metal3.StateAvailable, metal3.StateProvisioning, metal3.StateProvisioned} {
		waitTransition(t, ns, "h", state)
	}
	waitEvent(t, ns, "h", reasonProvisioningComplete)
	if n := fix.Count(ns, "h", fixture.OpProvision); n != 1 {
		t.Fatalf("provisioned %d times", n)
	}

	registrations := fix.RegisterCalls(ns, "h")

	// Image removed → deprovisioning → available.
	update(t, h, func(h *metal3.BareMetalHost) { h.Spec.Image = nil })
	h = waitState(t, ns, "h", metal3.StateAvailable)
	if h.Status.Provisioning.Image.URL != "" || fix.Count(ns, "h", fixture.OpDeprovision) != 1 {
		t.Fatalf("after deprovisioning: image %q, deprovisioned %d times", h.Status.Provisioning.Image.URL, fix.Count(ns, "h", fixture.OpDeprovision))
	}
	// A spec change that Register does not send (the image) registers nothing again; one that it
	// sends (BMC details) does.
	if n := fix.RegisterCalls(ns, "h"); n != registrations {
		t.Fatalf("removing the image registered the host again (%d registrations, %d before)", n, registrations)
	}
	update(t, h, func(h *metal3.BareMetalHost) { h.Spec.BMC.DisableCertificateVerification = true })
	poll.Until(t, "registration with the new BMC setting", func() (bool, string) {
		n := fix.RegisterCalls(ns, "h")
		return n == registrations+1, fmt.Sprintf("%d registrations, want %d", n, registrations+1)
	})
	h = getHost(t, ns, "h")
	if c := condition(h, metal3.AvailableForProvisioningCondition); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("AvailableForProvisioning: %+v", c)
	}

	// Deleted → powering off before delete → deleting → gone; HardwareData and Secret released.
	deleteHost(t, ns, "h")
	waitGone(t, ns, "h")
	if _, ok := fix.Node(ns, "h"); ok {
		t.Fatal("node still in the provisioner")
	}
	if _, err := getHardwareData(ns, "h"); err == nil {
		t.Fatal("hardware data not deleted")
	}
	if s := getSecret(t, ns, "bmc-h"); slices.Contains(s.Finalizers, metal3.SecretsFinalizer) {
		t.Fatalf("secret finalizer not released: %v", s.Finalizers)
	}
}
