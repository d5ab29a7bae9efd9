package host

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner/fixture"
	"github.com/metalforge/metalforge/internal/test/builder"
)

// TestOCIAuthSecret: a host whose oci:// image names a registry Secret that is missing, or has no
// credentials for the image's registry, stays available with an error naming
// spec.image.ociAuthSecretName (no credential in it); once the Secret is right it provisions, and
// the Secret is held as the host's other Secrets are.
func TestOCIAuthSecret(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	startOperator(t, ns, fixture.New(fixture.Config{}))
	h := newHost(ns, "h").Build()
	h.Spec.Image = &metal3.Image{URL: "oci://registry.example/os/rhel:9", OCIAuthSecretName: ptr.To("pull")}
	createHost(t, h)
	waitHost(t, ns, "h", "the missing Secret named", func(h *metal3.BareMetalHost) bool {
		return h.Status.Provisioning.State == metal3.StateAvailable &&
			h.Status.ErrorMessage == `spec.image.ociAuthSecretName: secret "pull" not found`
	})

	wrong := builder.DataSecret(ns, "pull", corev1.DockerConfigJsonKey, `{"auths":{"quay.io":{"username":"robot","password":"hunter2"}}}`)
	wrong.Type = corev1.SecretTypeDockerConfigJson
	create(t, wrong)
	waitHost(t, ns, "h", "the registry named", func(h *metal3.BareMetalHost) bool {
		return strings.HasPrefix(h.Status.ErrorMessage, `spec.image.ociAuthSecretName: secret "pull" has no credentials for registry registry.example`) &&
			!strings.Contains(h.Status.ErrorMessage, "hunter2")
	})
	update(t, getSecret(t, ns, "pull"), func(s *corev1.Secret) {
		s.Data[corev1.DockerConfigJsonKey] = []byte(`{"auths":{"registry.example":{"username":"robot","password":"hunter2"}}}`)
	})
	waitState(t, ns, "h", metal3.StateProvisioned)
	waitHeld(t, ns, "pull")
}
