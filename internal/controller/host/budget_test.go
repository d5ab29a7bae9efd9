package host

import (
	"testing"

	"k8s.io/client-go/rest"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/provisioner/fixture"
	"github.com/metalforge/metalforge/internal/test/apicount"
)

// TestWriteBudget: a new host with an image reaches provisioned with four API writes (host
// finalizer, Secret label+finalizer, HardwareData, one status write) and one Event.
func TestWriteBudget(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	counter := &apicount.Writes{}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(counter.Wrap)
	op := startOperatorWith(t, cfg, ns, fixture.New(fixture.Config{}))
	const hosts = 3
	names := []string{"a", "b", "c"}
	for _, name := range names {
		h := newHost(ns, name).Build()
		h.Spec.BMC.CredentialsName = "bmc-" + name
		createHost(t, h)
	}
	for _, name := range names {
		h := waitState(t, ns, name, metal3.StateProvisioned)
		op.waitSeen(t, ns, name, h.ResourceVersion, 2) // trailing reconciles must not write either
	}
	counts := counter.All()
	writes := 0
	for k, n := range counts {
		if k != "events create" && k != "events patch" {
			writes += n
		}
	}
	if writes != 4*hosts || counts["events create"] != hosts {
		t.Fatalf("writes for %d hosts: %v (want 4 per host and 1 event each)", hosts, counts)
	}
}

// TestWriteBudgetWithImages: with --build-preprov-image and the built-in image controller, a new
// host with an image reaches provisioned with seven writes of the host controller (host
// finalizer, Secret label+finalizer, image create, status while waiting for the image,
// HardwareData, status at provisioned, image delete), one of the image controller (the image's
// status) and two Events (registering, then the way to provisioned).
func TestWriteBudgetWithImages(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	counter := &apicount.Writes{}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(counter.Wrap)
	op := startManager(t, cfg, ns, fixture.New(fixture.Config{PreprovisioningImages: true}), builtInImageController, withImages)
	names := []string{"a", "b", "c"}
	for _, name := range names {
		createHost(t, newHost(ns, name).WithBMC(testVMediaBMC, "bmc-"+name).Build())
	}
	for _, name := range names {
		h := waitState(t, ns, name, metal3.StateProvisioned)
		waitImageGone(t, ns, name)
		op.waitSeen(t, ns, name, h.ResourceVersion, 2) // trailing reconciles must not write either
	}
	counts := counter.All()
	n := len(names)
	want := map[string]int{
		"baremetalhosts patch": n, "secrets patch": n, "preprovisioningimages create": n,
		// Status updates are whole: the first one, and the one with new hardware.
		"baremetalhosts/status update": 2 * n, "hardwaredata create": n, "preprovisioningimages delete": n,
		"preprovisioningimages/status patch": n, "events create": 2 * n,
	}
	for k, v := range counts {
		if k != "events patch" && want[k] != v {
			t.Fatalf("writes for %d hosts: %v, want %v", n, counts, want)
		}
	}
	for k, v := range want {
		if counts[k] != v {
			t.Fatalf("writes for %d hosts: %v, want %v", n, counts, want)
		}
	}
}
