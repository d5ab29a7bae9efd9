package provisioning

import (
	"slices"
	"strings"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/metalforge/metalforge/internal/controller/provisioning/render"
	"github.com/metalforge/metalforge/internal/controller/provisioning/secrets"
)

// TestDecideCredentialsChange: Ironic and the baremetal-operator read the credentials only at
// start, so new credentials (generated after the Secret was deleted, a repaired htpasswd, a
// password changed by hand) change both pod templates, and both restart with them; the templates
// carry a digest, never the credentials.
func TestDecideCredentialsChange(t *testing.T) {
	for name, tc := range map[string]struct {
		change func(s *corev1.Secret, o *observed)
		// restart: both Deployments are written (else neither is).
		restart bool
	}{
		"unchanged": {change: func(*corev1.Secret, *observed) {}},
		"the Secret deleted: new credentials": {
			change: func(_ *corev1.Secret, o *observed) { delete(o.secrets, secrets.IronicCredentials) }, restart: true,
		},
		"the htpasswd lost: rewritten from the password": {
			change: func(s *corev1.Secret, _ *observed) { delete(s.Data, secrets.KeyHtpasswd) }, restart: true,
		},
		"the password changed by hand": {
			change: func(s *corev1.Secret, _ *observed) { s.Data[secrets.KeyPassword] = []byte("Changed0ByHand42") }, restart: true,
		},
	} {
		t.Run(name, func(t *testing.T) {
			o := world(&disabled, configv1.BareMetalPlatformType)
			for range 3 {
				o.apply(mustDecide(t, o))
				o.available(render.Metal3Deployment, render.BMODeployment)
			}
			before := fingerprints(o)
			tc.change(o.secrets[secrets.IronicCredentials], o)
			p := mustDecide(t, o)
			got := written(p)
			for _, d := range []string{render.Metal3Deployment, render.BMODeployment} {
				if slices.Contains(got, "*v1.Deployment/"+d) != tc.restart {
					t.Errorf("writes %q: %s written %v, want %v", got, d, !tc.restart, tc.restart)
				}
			}
			o.apply(p)
			after := fingerprints(o)
			if after[0] != after[1] || after[0] == "" {
				t.Errorf("credentials digests %q: want one, the same in both pod templates", after)
			}
			if (after[0] != before[0]) != tc.restart {
				t.Errorf("credentials digest %q before, %q after", before[0], after[0])
			}
			for k, v := range o.secrets[secrets.IronicCredentials].Data {
				for _, d := range o.deployments {
					for _, a := range d.Spec.Template.Annotations {
						if strings.Contains(a, string(v)) {
							t.Errorf("the %s of the credentials is in the pod template of %s", k, d.Name)
						}
					}
				}
			}
		})
	}
}

// fingerprints are the credentials digests of the metal3 and baremetal-operator pod templates.
func fingerprints(o *observed) [2]string {
	get := func(d *appsv1.Deployment) string {
		return d.Spec.Template.Annotations[render.CredentialsFingerprintAnnotation]
	}
	return [2]string{get(o.deployments[render.Metal3Deployment]), get(o.deployments[render.BMODeployment])}
}
