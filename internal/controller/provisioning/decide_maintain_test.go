package provisioning

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/metalforge/metalforge/internal/controller/provisioning/clusteroperator"
	"github.com/metalforge/metalforge/internal/controller/provisioning/render"
	"github.com/metalforge/metalforge/internal/controller/provisioning/secrets"
)

// TestDecideMaintainsTheLastValidStack: while the Provisioning spec is invalid, nothing of it is
// deployed, but the running stack is kept as the last valid spec has it (certificates renewed,
// deleted objects recreated, the image-customization-controller following Ironic's address),
// with the state staying InvalidConfiguration and observedGeneration where it was.
func TestDecideMaintainsTheLastValidStack(t *testing.T) {
	for name, tc := range map[string]struct {
		// change is what happens to the running stack once its spec turned invalid.
		change func(o *observed)
		writes []string
		events []string
	}{
		"nothing due: nothing written": {
			change: func(*observed) {},
		},
		// The CA stays, so the webhook configurations and the baremetal-operator do not change.
		"eleven months on: the certificates renewed, Ironic restarted with its own": {
			change: func(o *observed) { o.now = o.now.Add(secrets.ServingValidity - secrets.RenewBefore + 24*time.Hour) },
			writes: []string{"Secret/" + secrets.CBOWebhookCert, "Secret/" + secrets.IronicTLS, "Secret/" + secrets.BMOWebhookCert,
				"*v1.Deployment/" + render.Metal3Deployment},
			events: []string{ReasonCertificateIssued, ReasonCertificateIssued, ReasonCertificateIssued, ReasonUpdated},
		},
		"a deleted Deployment: recreated": {
			change: func(o *observed) { delete(o.deployments, render.Metal3Deployment) },
			writes: []string{"*v1.Deployment/" + render.Metal3Deployment},
			events: []string{ReasonCreated},
		},
		"the metal3 pod moved: the controller follows it": {
			change: func(o *observed) { o.ironicHostIPs = []string{"192.168.111.11"} },
			writes: []string{"*v1.Secret/" + render.ICCConfigSecret, "*v1.Deployment/" + render.ICCDeployment},
			events: []string{ReasonUpdated, ReasonUpdated},
		},
		"no spec recorded (a stack from before the record): nothing": {
			change: func(o *observed) {
				delete(o.secrets, AppliedSpecSecret)
				delete(o.deployments, render.Metal3Deployment)
			},
		},
		"the recorded spec is not valid any more: nothing": {
			change: func(o *observed) {
				o.secrets[AppliedSpecSecret].Data[keyAppliedSpec] = []byte(`{"provisioningNetwork":"Managed"}`)
				delete(o.deployments, render.Metal3Deployment)
			},
		},
		"the record is unreadable: nothing": {
			change: func(o *observed) {
				o.secrets[AppliedSpecSecret].Data[keyAppliedSpec] = []byte(`{`)
				delete(o.deployments, render.Metal3Deployment)
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			o := iccWorld(disabled, "192.168.111.10")
			settle(t, o)
			if p := mustDecide(t, o); len(written(p)) > 0 || p.state.Reason != clusteroperator.ReasonDeployComplete {
				t.Fatalf("not settled: %s, writes %v", p.state.Reason, written(p))
			}
			if o.secrets[AppliedSpecSecret] == nil {
				t.Fatal("the applied spec was not recorded")
			}
			o.prov.Generation++
			o.prov.Spec.ExternalIPs = []string{"ten"}
			o.prov.Spec.AdditionalNTPServers = []string{"0.pool.ntp.org"} // would change the controller if deployed
			o.apply(mustDecide(t, o))
			tc.change(o)

			p := mustDecide(t, o)
			if p.state.Reason != clusteroperator.ReasonInvalidConfiguration {
				t.Errorf("state %s, want %s", p.state.Reason, clusteroperator.ReasonInvalidConfiguration)
			}
			if p.observedGeneration != nil {
				t.Error("observedGeneration moved to the invalid spec")
			}
			if got := written(p); !slices.Equal(got, tc.writes) {
				t.Errorf("writes\n%q\nwant\n%q", got, tc.writes)
			}
			if got := reasons(p); !slices.Equal(got, tc.events) {
				t.Errorf("events %v, want %v", got, tc.events)
			}
			for _, w := range p.writes {
				if s, ok := w.obj.(*corev1.Secret); ok && s.Name == render.ICCConfigSecret {
					if ntp := render.ConfigAddresses(s.Data); !slices.Equal(ntp, []string{"192.168.111.11"}) {
						t.Errorf("controller config addresses %v", ntp)
					}
				}
			}
			for _, s := range p.secretWrites {
				if s.Name == AppliedSpecSecret {
					t.Error("the invalid spec was recorded")
				}
			}
		})
	}
}
