package provisioning

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/provisioning/clusteroperator"
	"github.com/metalforge/metalforge/internal/controller/provisioning/render"
	"github.com/metalforge/metalforge/internal/test/poll"
)

// TestInvalidConfiguration: every field the operator checks is re-validated at reconcile (an
// object stored before a rule existed, or without the webhook, as here), reported in Degraded
// with the field's name and as an event, nothing is deployed, and fixing the field recovers.
// Enums and the sensor interval's minimum are also in the CRD schema, which refuses them before
// the operator sees them, so they are covered by the validation table tests only.
func TestInvalidConfiguration(t *testing.T) {
	op := setup(t, options{})
	createProvisioning(t, disabled, nil)
	waitDeployment(t, op.ns, render.Metal3Deployment)
	deployComplete(t, op.ns)
	stable := deployment(t, op.ns, render.Metal3Deployment).Generation

	for name, tc := range map[string]struct {
		spec   func(*metal3.ProvisioningSpec)
		fields []string
	}{
		"provisioningInterface": {func(s *metal3.ProvisioningSpec) {
			*s = managedSpec
			s.ProvisioningInterface = "eth1/2"
		}, []string{"spec.provisioningInterface"}},
		"provisioningMacAddresses": {func(s *metal3.ProvisioningSpec) { s.ProvisioningMacAddresses = []string{"00:5a:91"} }, []string{"spec.provisioningMacAddresses[0]"}},
		"provisioningIP": {func(s *metal3.ProvisioningSpec) {
			*s = managedSpec
			s.ProvisioningIP = "172.22.1.3"
		}, []string{"spec.provisioningIP"}},
		"provisioningNetworkCIDR": {func(s *metal3.ProvisioningSpec) {
			*s = managedSpec
			s.ProvisioningNetworkCIDR = "172.22.0.0/33"
		}, []string{"spec.provisioningNetworkCIDR"}},
		"provisioningDHCPRange": {func(s *metal3.ProvisioningSpec) {
			*s = managedSpec
			s.ProvisioningDHCPRange = "172.22.0.10"
		}, []string{"spec.provisioningDHCPRange"}},
		"provisioningNetworkGateway": {func(s *metal3.ProvisioningSpec) { s.ProvisioningNetworkGateway = "172.22.0.1" }, []string{"spec.provisioningNetworkGateway"}},
		"provisioningOSDownloadURL": {func(s *metal3.ProvisioningSpec) {
			s.ProvisioningOSDownloadURL = "http://example.com/rhcos.qcow2.gz"
		}, []string{"spec.provisioningOSDownloadURL"}},
		"additionalNTPServers": {func(s *metal3.ProvisioningSpec) { s.AdditionalNTPServers = []string{"not a host"} }, []string{"spec.additionalNTPServers[0]"}},
		"preProvisioningOSDownloadURLs": {func(s *metal3.ProvisioningSpec) {
			s.PreprovisioningOSDownloadURLs.IsoURL = "live.iso"
		}, []string{"spec.preProvisioningOSDownloadURLs.isoURL"}},
		"unsupportedConfigOverrides": {func(s *metal3.ProvisioningSpec) {
			s.UnsupportedConfigOverrides = &metal3.UnsupportedConfigOverrides{IronicAgentImage: "Not An Image"}
		}, []string{"spec.unsupportedConfigOverrides.ironicAgentImage"}},
		"externalIPs": {func(s *metal3.ProvisioningSpec) { s.ExternalIPs = []string{"10.0.0.1", "ten"} }, []string{"spec.externalIPs[1]"}},
		"two fields at once": {func(s *metal3.ProvisioningSpec) {
			*s = managedSpec
			s.ProvisioningDHCPRange, s.ExternalIPs = "", []string{"ten"}
		}, []string{"spec.provisioningDHCPRange", "spec.externalIPs[0]"}},
	} {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			updateSpec(t, func(p *metal3.Provisioning) {
				p.Spec = disabled
				tc.spec(&p.Spec)
			})
			c := waitCO(t, map[string]string{"Degraded": "True/InvalidConfiguration", "Available": "True/InvalidConfiguration", "Progressing": "True/InvalidConfiguration"})
			msg := clusteroperator.Condition(c, configv1.OperatorDegraded).Message
			for _, f := range tc.fields {
				if !strings.Contains(msg, f) {
					t.Errorf("Degraded message %q does not name %s", msg, f)
				}
			}
			waitEvent(t, start, ReasonInvalidConfiguration, tc.fields[0])
			if g := deployment(t, op.ns, render.Metal3Deployment).Generation; g != stable {
				t.Fatalf("the metal3 Deployment changed (generation %d → %d) for an invalid spec", stable, g)
			}
			if p := getProvisioning(t); p.Status.ObservedGeneration == p.Generation {
				t.Error("observedGeneration moved to an invalid spec")
			}
			updateSpec(t, func(p *metal3.Provisioning) { p.Spec = disabled })
			waitCO(t, map[string]string{"Degraded": "False/AsExpected", "Available": "True/DeployComplete"})
		})
	}
}

// TestInvalidSpecKeepsTheStack: while the spec is invalid, the stack the last valid one deployed
// is kept running: a Deployment deleted meanwhile is recreated as that spec has it, and the
// ClusterOperator keeps saying InvalidConfiguration until the spec is fixed.
func TestInvalidSpecKeepsTheStack(t *testing.T) {
	op := setup(t, options{})
	createProvisioning(t, disabled, nil)
	waitDeployment(t, op.ns, render.Metal3Deployment)
	deployComplete(t, op.ns)
	before := deployment(t, op.ns, render.Metal3Deployment)

	updateSpec(t, func(p *metal3.Provisioning) { p.Spec.ExternalIPs = []string{"ten"} })
	waitCO(t, map[string]string{"Degraded": "True/InvalidConfiguration"})
	if err := env.Client.Delete(context.Background(), before); err != nil {
		t.Fatal(err)
	}
	var again *appsv1.Deployment
	poll.Until(t, "the metal3 Deployment recreated", func() (bool, string) {
		again = deployment(t, op.ns, render.Metal3Deployment)
		return again != nil && again.UID != before.UID, "not yet"
	})
	if !equality.Semantic.DeepEqual(again.Spec.Template.Spec, before.Spec.Template.Spec) {
		t.Error("the recreated metal3 Deployment differs from the one the last valid spec deployed")
	}
	if c := co(t); conditions(c)["Degraded"] != "True/InvalidConfiguration" {
		t.Errorf("conditions %v while the spec is invalid", conditions(c))
	}
	if p := getProvisioning(t); p.Status.ObservedGeneration == p.Generation {
		t.Error("observedGeneration moved to the invalid spec")
	}
	markAvailable(t, op.ns, render.Metal3Deployment)
	updateSpec(t, func(p *metal3.Provisioning) { p.Spec.ExternalIPs = nil })
	waitCO(t, map[string]string{"Degraded": "False/AsExpected", "Available": "True/DeployComplete"})
}

// TestInvalidImagesFile: a missing image is an invalid configuration naming the key.
func TestInvalidImagesFile(t *testing.T) {
	op := setup(t, options{images: `{"baremetalOperator": "registry.example.com/bmo:1"}`})
	createProvisioning(t, disabled, nil)
	c := waitCO(t, map[string]string{"Degraded": "True/InvalidConfiguration"})
	if m := clusteroperator.Condition(c, configv1.OperatorDegraded).Message; !strings.Contains(m, "baremetalIronic") || !strings.Contains(m, "machineOSImages") {
		t.Errorf("Degraded message %q: want the missing keys", m)
	}
	if err := os.WriteFile(op.images, []byte(testImages), 0o600); err != nil {
		t.Fatal(err)
	}
	// A mounted ConfigMap changes without an API event: the operator watches the file.
	waitDeployment(t, op.ns, render.Metal3Deployment)
}
