package provisioning

import (
	"slices"
	"strings"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/provisioning/clusteroperator"
	"github.com/metalforge/metalforge/internal/controller/provisioning/render"
	"github.com/metalforge/metalforge/internal/controller/provisioning/secrets"
)

// iccWorld is a cluster whose images file names the image-customization-controller.
func iccWorld(spec metal3.ProvisioningSpec, hostIPs ...string) *observed {
	o := world(&spec, configv1.BareMetalPlatformType)
	o.images, _ = render.ParseImages("test", []byte(testImagesICC))
	o.ironicHostIPs = hostIPs
	return o
}

// settle applies plans and marks the Deployments available until nothing is left to write.
func settle(t *testing.T, o *observed) {
	t.Helper()
	for range 4 {
		o.apply(mustDecide(t, o))
		var names []string
		for name, d := range o.deployments {
			if d != nil {
				names = append(names, name)
			}
		}
		o.available(names...)
	}
}

// TestDecideICC: named situations of a stack with the image-customization-controller.
func TestDecideICC(t *testing.T) {
	for name, tc := range map[string]struct {
		world func(t *testing.T) *observed
		state string
		// progress is part of the Progressing message ("" not checked).
		progress string
		writes   []string
		deletes  []string
	}{
		"a new stack: the controller's objects after the baremetal-operator's": {
			world: func(*testing.T) *observed { return iccWorld(disabled, "192.168.111.10") },
			state: clusteroperator.ReasonSyncing,
			writes: []string{"Secret/" + secrets.CBOWebhookCert, "Secret/" + secrets.IronicCredentials, "Secret/" + secrets.IronicTLS,
				"Secret/" + secrets.BMOWebhookCert, "Secret/" + AppliedSpecSecret, "*v1.ValidatingWebhookConfiguration/" + render.CBOWebhookConfig, "*v1.Deployment/metal3",
				"*v1.Service/metal3-state", "*v1.Deployment/metal3-baremetal-operator", "*v1.Service/baremetal-operator-webhook-service",
				"*v1.Service/" + render.ICCService, "*v1.Secret/" + render.ICCConfigSecret, "*v1.Deployment/" + render.ICCDeployment},
		},
		"complete once the controller runs too": {
			world: func(t *testing.T) *observed {
				t.Helper()
				o := iccWorld(disabled, "192.168.111.10")
				settle(t, o)
				return o
			},
			state: clusteroperator.ReasonDeployComplete,
		},
		"the controller not available yet: syncing": {
			world: func(t *testing.T) *observed {
				t.Helper()
				o := iccWorld(disabled, "192.168.111.10")
				settle(t, o)
				o.deployments[render.ICCDeployment].Status.AvailableReplicas = 0
				o.deployments[render.ICCDeployment].Status.UnavailableReplicas = 1
				return o
			},
			state: clusteroperator.ReasonSyncing, progress: "Waiting for " + render.ICCDeployment + " to roll out",
		},
		"the metal3 pod has no address yet: the controller exists, scaled to zero, and the stack waits": {
			world: func(t *testing.T) *observed {
				t.Helper()
				o := iccWorld(disabled)
				settle(t, o)
				return o
			},
			state: clusteroperator.ReasonSyncing, progress: "Waiting for the metal3 pod's address",
		},
		"the metal3 pod gets an address: the controller is scaled up with Ironic's URL": {
			world: func(t *testing.T) *observed {
				t.Helper()
				o := iccWorld(disabled)
				settle(t, o)
				o.ironicHostIPs = []string{"192.168.111.10"}
				return o
			},
			state:  clusteroperator.ReasonSyncing,
			writes: []string{"*v1.Secret/" + render.ICCConfigSecret, "*v1.Deployment/" + render.ICCDeployment},
		},
		"the metal3 pod replaced (Recreate), no address meanwhile: the controller keeps Ironic's last one": {
			world: func(t *testing.T) *observed {
				t.Helper()
				o := iccWorld(disabled, "192.168.111.10")
				settle(t, o)
				metal3Replaced(o)
				return o
			},
			state: clusteroperator.ReasonSyncing, progress: "Waiting for metal3 to roll out",
		},
		"the new metal3 pod on another node: the controller follows it": {
			world: func(t *testing.T) *observed {
				t.Helper()
				o := iccWorld(disabled, "192.168.111.10")
				settle(t, o)
				metal3Replaced(o)
				o.ironicHostIPs = []string{"192.168.111.11"}
				return o
			},
			state:  clusteroperator.ReasonSyncing,
			writes: []string{"*v1.Secret/" + render.ICCConfigSecret, "*v1.Deployment/" + render.ICCDeployment},
		},
		"an NTP server added: only the controller changes": {
			world: func(t *testing.T) *observed {
				t.Helper()
				o := iccWorld(disabled, "192.168.111.10")
				settle(t, o)
				o.prov.Spec.AdditionalNTPServers = []string{"0.pool.ntp.org"}
				return o
			},
			state:  clusteroperator.ReasonSyncing,
			writes: []string{"Secret/" + AppliedSpecSecret, "*v1.Deployment/" + render.ICCDeployment},
		},
		"the images file drops the controller: its objects go, the baremetal-operator builds no images": {
			world: func(t *testing.T) *observed {
				t.Helper()
				o := iccWorld(disabled, "192.168.111.10")
				settle(t, o)
				o.images, _ = render.ParseImages("test", []byte(testImages))
				return o
			},
			state:   clusteroperator.ReasonSyncing,
			writes:  []string{"*v1.Deployment/metal3-baremetal-operator"},
			deletes: []string{render.ICCDeployment, render.ICCService, render.ICCConfigSecret},
		},
		"no agent image: invalid configuration": {
			world: func(*testing.T) *observed {
				o := iccWorld(disabled, "192.168.111.10")
				o.images.IronicAgent = ""
				return o
			},
			state:    clusteroperator.ReasonInvalidConfiguration,
			progress: "",
			writes:   []string{"Secret/" + secrets.CBOWebhookCert, "*v1.ValidatingWebhookConfiguration/" + render.CBOWebhookConfig},
		},
		"a new stack with the cluster's pull secret: the copy is written before the controller that mounts it": {
			world: func(*testing.T) *observed { return withPullSecret(iccWorld(disabled, "192.168.111.10"), testAuth) },
			state: clusteroperator.ReasonSyncing,
			writes: []string{"Secret/" + secrets.CBOWebhookCert, "Secret/" + secrets.IronicCredentials, "Secret/" + secrets.IronicTLS,
				"Secret/" + secrets.BMOWebhookCert, "Secret/" + secrets.PullSecret, "Secret/" + AppliedSpecSecret, "*v1.ValidatingWebhookConfiguration/" + render.CBOWebhookConfig,
				"*v1.Deployment/metal3", "*v1.Service/metal3-state", "*v1.Deployment/metal3-baremetal-operator", "*v1.Service/baremetal-operator-webhook-service",
				"*v1.Service/" + render.ICCService, "*v1.Secret/" + render.ICCConfigSecret, "*v1.Deployment/" + render.ICCDeployment},
		},
		"the cluster's pull secret unchanged: nothing is written": {
			world: func(t *testing.T) *observed {
				t.Helper()
				o := withPullSecret(iccWorld(disabled, "192.168.111.10"), testAuth)
				settle(t, o)
				if o.secrets[secrets.PullSecret] == nil {
					t.Fatal("the stack settled without the copy of the pull secret")
				}
				return o
			},
			state: clusteroperator.ReasonDeployComplete,
		},
		"a pull secret for a running stack: copied, and the controller restarted to read it": {
			world: func(t *testing.T) *observed {
				t.Helper()
				o := iccWorld(disabled, "192.168.111.10")
				settle(t, o)
				return withPullSecret(o, testAuth)
			},
			state:  clusteroperator.ReasonSyncing,
			writes: []string{"Secret/" + secrets.PullSecret, "*v1.Deployment/" + render.ICCDeployment},
		},
		"the cluster's pull secret rotated: the copy and the controller follow": {
			world: func(t *testing.T) *observed {
				t.Helper()
				o := withPullSecret(iccWorld(disabled, "192.168.111.10"), testAuth)
				settle(t, o)
				return withPullSecret(o, testAuthRotated)
			},
			state:  clusteroperator.ReasonSyncing,
			writes: []string{"Secret/" + secrets.PullSecret, "*v1.Deployment/" + render.ICCDeployment},
		},
		"the cluster's pull secret removed: the copy goes, the controller runs without": {
			world: func(t *testing.T) *observed {
				t.Helper()
				o := withPullSecret(iccWorld(disabled, "192.168.111.10"), testAuth)
				settle(t, o)
				o.clusterPullSecret = nil
				return o
			},
			state:   clusteroperator.ReasonSyncing,
			writes:  []string{"*v1.Deployment/" + render.ICCDeployment},
			deletes: []string{secrets.PullSecret},
		},
		"the images file drops the controller: the copy of the pull secret goes too": {
			world: func(t *testing.T) *observed {
				t.Helper()
				o := withPullSecret(iccWorld(disabled, "192.168.111.10"), testAuth)
				settle(t, o)
				o.images, _ = render.ParseImages("test", []byte(testImages))
				return o
			},
			state:   clusteroperator.ReasonSyncing,
			writes:  []string{"*v1.Deployment/metal3-baremetal-operator"},
			deletes: []string{secrets.PullSecret, render.ICCDeployment, render.ICCService, render.ICCConfigSecret},
		},
		"deleting: the copy of the pull secret with the rest": {
			world: func(t *testing.T) *observed {
				t.Helper()
				o := withPullSecret(iccWorld(disabled, "192.168.111.10"), testAuth)
				settle(t, o)
				now := metav1.Now()
				o.prov.DeletionTimestamp = &now
				return o
			},
			state: clusteroperator.ReasonResourceNotFound,
			deletes: []string{render.BMOWebhookConfig, render.BMODeployment, render.ICCDeployment, render.Metal3Deployment,
				render.BMOWebhookService, render.ICCService, render.StateService,
				secrets.IronicCredentials, secrets.IronicTLS, secrets.BMOWebhookCert, render.ICCConfigSecret, secrets.PullSecret, AppliedSpecSecret},
		},
		"deleting: the controller's objects with the rest": {
			world: func(t *testing.T) *observed {
				t.Helper()
				o := iccWorld(disabled, "192.168.111.10")
				settle(t, o)
				now := metav1.Now()
				o.prov.DeletionTimestamp = &now
				return o
			},
			state: clusteroperator.ReasonResourceNotFound,
			deletes: []string{render.BMOWebhookConfig, render.BMODeployment, render.ICCDeployment, render.Metal3Deployment,
				render.BMOWebhookService, render.ICCService, render.StateService,
				secrets.IronicCredentials, secrets.IronicTLS, secrets.BMOWebhookCert, render.ICCConfigSecret, AppliedSpecSecret},
		},
	} {
		t.Run(name, func(t *testing.T) {
			o := tc.world(t)
			p := mustDecide(t, o)
			if p.state.Reason != tc.state {
				t.Errorf("state %q (%s), want %q", p.state.Reason, p.state.Message, tc.state)
			}
			if tc.progress != "" && !strings.Contains(p.state.Progress, tc.progress) {
				t.Errorf("progress %q, want it to contain %q", p.state.Progress, tc.progress)
			}
			if got := written(p); !slices.Equal(got, tc.writes) {
				t.Errorf("writes\n%q\nwant\n%q", got, tc.writes)
			}
			var deletes []string
			for _, d := range p.deletes {
				deletes = append(deletes, d.GetName())
			}
			if !slices.Equal(deletes, tc.deletes) {
				t.Errorf("deletes %q, want %q", deletes, tc.deletes)
			}
		})
	}
}

// Cluster pull secrets (auth files) for the tests.
const (
	testAuth        = `{"auths":{"registry.example.com:5000":{"auth":"dXNlcjpzM2NyZXQtdG9rZW4="}}}`
	testAuthRotated = `{"auths":{"registry.example.com:5000":{"auth":"dXNlcjpyb3RhdGVkLXRva2Vu"}}}`
)

// withPullSecret gives the cluster a pull secret with the auth file.
func withPullSecret(o *observed, auth string) *observed {
	o.clusterPullSecret = map[string][]byte{secrets.KeyDockerConfigJSON: []byte(auth)}
	return o
}

// metal3Replaced is a metal3 Deployment between its pods: the old one gone with its endpoint, the
// new one not running yet.
func metal3Replaced(o *observed) {
	o.ironicHostIPs = nil
	d := o.deployments[render.Metal3Deployment]
	d.Status.AvailableReplicas, d.Status.UnavailableReplicas = 0, 1
}
