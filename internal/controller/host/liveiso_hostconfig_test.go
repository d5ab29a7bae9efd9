package host

import (
	"testing"

	"k8s.io/utils/ptr"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner/fixture"
)

// TestLiveISOIgnoresHostConfigSecrets: a live ISO gets no config drive, so a user data Secret
// that is missing does not keep it from provisioning (metal3 reads none for it).
func TestLiveISOIgnoresHostConfigSecrets(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	startOperator(t, ns, fixture.New(fixture.Config{}))
	h := newHost(ns, "live").WithUserData("missing").Build()
	h.Spec.Image = &metal3.Image{URL: "http://images.example/live.iso", DiskFormat: ptr.To(metal3.DiskFormatLiveISO)}
	createHost(t, h)
	waitState(t, ns, "live", metal3.StateProvisioned)
}
