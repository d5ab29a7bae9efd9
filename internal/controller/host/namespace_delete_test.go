package host

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner/fixture"
)

// TestNamespaceDeletionWithoutAgentImage: with --build-preprov-image, a provisioned host (its agent
// image deleted) in a namespace being deleted cannot get a new image for cleaning (the API server
// refuses creates there): it goes on without cleaning, is powered off and leaves, rather than
// hold the namespace for ever. (The test's API server has no namespace controller: a deleted
// namespace stays Terminating, and the test deletes the host itself, as that controller would.)
func TestNamespaceDeletionWithoutAgentImage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Not env.Namespace: its cleanup would fail to delete a namespace already terminating.
	ns := fmt.Sprintf("terminating-%d", time.Now().UnixNano()%1_000_000_000)
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	create(t, nsObj)
	fix := fixture.New(fixture.Config{PreprovisioningImages: true})
	startImageOperator(t, ns, fix, true)
	createHost(t, newHost(ns, "h").WithBMC(testVMediaBMC, "bmc-h").Build())
	waitState(t, ns, "h", metal3.StateProvisioned)
	waitImageGone(t, ns, "h")

	if err := env.Client.Delete(ctx, nsObj); err != nil {
		t.Fatalf("deleting namespace %s: %v", ns, err)
	}
	deleteHost(t, ns, "h")
	waitGone(t, ns, "h")
	if got := fix.Count(ns, "h", fixture.OpDeprovision); got != 0 {
		t.Errorf("cleaned %d times without an agent image", got)
	}
	if got := fix.Count(ns, "h", fixture.OpPowerOff); got != 1 {
		t.Errorf("powered off %d times before leaving the provisioner, want 1", got)
	}
}
