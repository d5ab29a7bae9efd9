package host

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner/fixture"
	"github.com/metalforge/metalforge/internal/test/poll"
)

// TestProvisionedHostNamingAMissingNetworkDataSecretWritesNothing: a provisioned host reads its
// preprovisioning network data (it is registered again with it if the provisioner loses its
// node), but does not use it now: a Secret it names that does not exist costs no write (a
// failing patch to label it) at every reconcile.
func TestProvisionedHostNamingAMissingNetworkDataSecretWritesNothing(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fix := fixture.New(fixture.Config{})
	op, counter := startCounted(t, ns, fix)
	createHost(t, withImage(ns))
	waitState(t, ns, "h", metal3.StateProvisioned)
	rv := update(t, &metal3.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h"}}, func(h *metal3.BareMetalHost) {
		h.Spec.PreprovisioningNetworkDataName = "missing"
	})
	op.waitSeen(t, ns, "h", rv, 2)
	before := counter.Count("secrets patch")
	op.waitSeen(t, ns, "h", rv, 7)
	if got := counter.Count("secrets patch") - before; got != 0 {
		t.Fatalf("%d Secret patches in 5 reconciles of a provisioned host naming a missing network data Secret", got)
	}
	if h := getHost(t, ns, "h"); h.Status.OperationalStatus != metal3.OperationalStatusOK || h.Status.ErrorType != "" {
		t.Fatalf("a missing network data Secret is no error of a provisioned host: %s", describe(h))
	}

	// Once it exists, it is taken as before: labelled for the cache, finalized.
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "missing"}, Data: map[string][]byte{"networkData": []byte("{}")}})
	poll.Until(t, "the network data Secret labelled and finalized", func() (bool, string) {
		s := getSecret(t, ns, "missing")
		return managed(s), fmt.Sprint(s.Labels, s.Finalizers)
	})
}
