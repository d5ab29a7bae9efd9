package preprovisioningimage

import (
	"context"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/test/poll"
)

var (
	iso, initrd = metal3.ImageFormatISO, metal3.ImageFormatInitRD
	envImages   = ImagesFromEnv([]string{
		"DEPLOY_ISO_URL=http://images.example/agent.iso",
		"DEPLOY_RAMDISK_URL=http://images.example/agent.initrd", "DEPLOY_KERNEL_URL=http://images.example/agent.kernel",
		"DEPLOY_ISO_URL_AARCH64=http://images.example/agent-aarch64.iso",
	})
)

// TestHandsOutTheConfiguredImages: the image gets the configured URL of its first accepted format
// for its architecture, the network data Secret's version (the Secret, not labelled yet, is
// labelled so that its changes reach the image), and Ready with metal3's reason; a spec change is
// a new build, and so is a new version of the Secret.
func TestHandsOutTheConfiguredImages(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	startController(t, ns, envImages)
	create(t, secret(ns, "net"), newImage(ns, "h", "x86_64", "net", iso, initrd))

	p := waitStatus(t, ns, "h", "Ready", ready)
	s := get(t, ns, "net", &corev1.Secret{})
	if p.Status.ImageURL != "http://images.example/agent.iso" || p.Status.Format != iso || p.Status.KernelURL != "" ||
		p.Status.Architecture != "x86_64" || p.Status.NetworkData != (metal3.SecretStatus{Name: "net", Version: s.ResourceVersion}) {
		t.Fatalf("status %+v (Secret at %s)", p.Status, s.ResourceVersion)
	}
	if s.Labels[metal3.EnvironmentLabel] != metal3.EnvironmentLabelValue {
		t.Fatalf("network data Secret not labelled: %v", s.Labels)
	}
	r, e := condition(p, metal3.ConditionImageReady), condition(p, metal3.ConditionImageError)
	if r.Reason != metal3.ImageSuccessReason || r.Message != "Generated image" || e.Status != metav1.ConditionFalse || e.Reason != metal3.ImageSuccessReason {
		t.Fatalf("conditions Ready %+v Error %+v", r, e)
	}
	if len(p.Finalizers) != 0 {
		t.Fatalf("finalizers %v: this controller keeps nothing to clean up", p.Finalizers)
	}

	update(t, p, func(p *metal3.PreprovisioningImage) { p.Spec.AcceptFormats = []metal3.ImageFormat{initrd} })
	p = waitStatus(t, ns, "h", "the initrd", func(p *metal3.PreprovisioningImage) bool { return ready(p) && p.Status.Format == initrd })
	if p.Status.ImageURL != "http://images.example/agent.initrd" || p.Status.KernelURL != "http://images.example/agent.kernel" {
		t.Fatalf("initrd status %+v", p.Status)
	}
	update(t, p, func(p *metal3.PreprovisioningImage) {
		p.Spec.Architecture, p.Spec.AcceptFormats = "aarch64", []metal3.ImageFormat{iso}
	})
	p = waitStatus(t, ns, "h", "the aarch64 ISO", func(p *metal3.PreprovisioningImage) bool { return ready(p) && p.Status.Architecture == "aarch64" })
	if p.Status.ImageURL != "http://images.example/agent-aarch64.iso" {
		t.Fatalf("aarch64 status %+v", p.Status)
	}

	update(t, s, func(s *corev1.Secret) { s.Data["nmstate"] = []byte("interfaces: [{name: eth1}]\n") })
	waitStatus(t, ns, "h", "the Secret's new version", func(p *metal3.PreprovisioningImage) bool {
		return p.Status.NetworkData.Version == get(t, ns, "net", &corev1.Secret{}).ResourceVersion
	})
}

// TestConfigurationErrorNamesTheField: a format or architecture nothing is configured for is an
// Error (ConfigurationError) naming the field, with a Warning Event, and fixing the spec
// recovers.
func TestConfigurationErrorNamesTheField(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	startController(t, ns, ImagesFromEnv([]string{"DEPLOY_ISO_URL_X86_64=http://images.example/x86.iso"}))
	create(t, newImage(ns, "f", "x86_64", "", initrd))
	p := waitStatus(t, ns, "f", "ConfigurationError", failedWith(metal3.ImageConfigurationErrorReason))
	want := `spec.acceptFormats: initrd not configured for architecture "x86_64" (configured: iso)`
	if c := condition(p, metal3.ConditionImageError); c.Message != want || p.Status.ImageURL != "" {
		t.Fatalf("Error %+v, url %q", c, p.Status.ImageURL)
	}
	waitEvent(t, ns, "f", "ConfigurationError: "+want)

	update(t, p, func(p *metal3.PreprovisioningImage) {
		p.Spec.AcceptFormats = []metal3.ImageFormat{iso}
		p.Spec.Architecture = "ppc64le"
	})
	p = waitStatus(t, ns, "f", "architecture error", func(p *metal3.PreprovisioningImage) bool {
		return failedWith(metal3.ImageConfigurationErrorReason)(p) && condition(p, metal3.ConditionImageError).Message != want
	})
	if c := condition(p, metal3.ConditionImageError); c.Message[:len("spec.architecture: ")] != "spec.architecture: " {
		t.Fatalf("Error %+v", c)
	}

	update(t, p, func(p *metal3.PreprovisioningImage) { p.Spec.Architecture = "x86_64" })
	p = waitStatus(t, ns, "f", "Ready", ready)
	if c := condition(p, metal3.ConditionImageError); c.Status != metav1.ConditionFalse || p.Status.ImageURL != "http://images.example/x86.iso" {
		t.Fatalf("recovered: Error %+v status %+v", c, p.Status)
	}
}

// TestMissingNetworkData: a missing Secret is MissingNetworkData, looked at again after a delay
// (a new Secret is not in the operator's cache, so nothing else wakes the image), and the image is
// built once the Secret exists.
func TestMissingNetworkData(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	startController(t, ns, envImages)
	create(t, newImage(ns, "m", "x86_64", "later", iso))
	p := waitStatus(t, ns, "m", "MissingNetworkData", failedWith(metal3.ImageMissingNetworkDataReason))
	if c := condition(p, metal3.ConditionImageError); c.Message != `spec.networkDataName: secret "later" not found` {
		t.Fatalf("Error %+v", c)
	}
	waitEvent(t, ns, "m", "MissingNetworkData")
	create(t, secret(ns, "later"))
	p = waitStatus(t, ns, "m", "Ready", ready)
	if p.Status.NetworkData.Name != "later" || p.Status.NetworkData.Version != get(t, ns, "later", &corev1.Secret{}).ResourceVersion {
		t.Fatalf("status %+v", p.Status)
	}
}

// TestReleasesTheImageCustomizationFinalizer: an image the image-customization controller built
// (its finalizer on it) and deleted after that controller is gone is let go by this one once no
// other finalizer holds it, as metal3's image controller does whatever its provider; it stayed
// Terminating for ever, and its host waited for it.
func TestReleasesTheImageCustomizationFinalizer(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	const other = "example.com/still-needed"
	p := newImage(ns, "h", "x86_64", "", iso)
	p.Finalizers = []string{metal3.PreprovisioningImageFinalizer, other}
	create(t, p)
	startController(t, ns, envImages)
	waitStatus(t, ns, "h", "Ready", ready)
	p = get(t, ns, "h", &metal3.PreprovisioningImage{})
	if err := env.Client.Delete(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	// Held by another finalizer: metal3's stays.
	p = waitStatus(t, ns, "h", "deleting", func(p *metal3.PreprovisioningImage) bool { return !p.DeletionTimestamp.IsZero() })
	if !slices.Contains(p.Finalizers, metal3.PreprovisioningImageFinalizer) {
		t.Fatalf("finalizers %v while another holds the image: want metal3's kept until it is the last", p.Finalizers)
	}
	update(t, p, func(p *metal3.PreprovisioningImage) { p.Finalizers = []string{metal3.PreprovisioningImageFinalizer} })
	poll.Until(t, "the image gone", func() (bool, string) {
		err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "h"}, &metal3.PreprovisioningImage{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}
