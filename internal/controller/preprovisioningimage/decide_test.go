package preprovisioningimage

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/conditions"
	"github.com/metalforge/metalforge/internal/provisioner"
)

var (
	testEnv = ImagesFromEnv([]string{
		"DEPLOY_ISO_URL=http://i/x.iso", "DEPLOY_RAMDISK_URL=http://i/x.initrd", "DEPLOY_KERNEL_URL=http://i/x.kernel",
		"DEPLOY_ISO_URL_AARCH64=http://i/a.iso",
		"DEPLOY_RAMDISK_URL_S390X=http://i/z.initrd", // no kernel for s390x... but the plain one serves
	})
	t0    = time.Date(2026, 7, 1, 10, 0, 0, 0, time.UTC)
	retry = retryDelays{10 * time.Second, 10 * time.Minute}
)

func image(arch, net string, formats ...metal3.ImageFormat) *metal3.PreprovisioningImage {
	return &metal3.PreprovisioningImage{
		ObjectMeta: metav1.ObjectMeta{Name: "h", Namespace: "ns", Generation: 3},
		Spec:       metal3.PreprovisioningImageSpec{Architecture: arch, NetworkDataName: net, AcceptFormats: formats},
	}
}

func TestDecide(t *testing.T) {
	iso, initrd := metal3.ImageFormatISO, metal3.ImageFormatInitRD
	tests := map[string]struct {
		ppi     *metal3.PreprovisioningImage
		net     networkData
		url     string
		kernel  string
		format  metal3.ImageFormat
		reason  string // of the Error condition when it fails
		message string // substring of the Error message
	}{
		"ISO first":                      {ppi: image("x86_64", "", iso, initrd), url: "http://i/x.iso", format: iso},
		"initrd with its kernel":         {ppi: image("x86_64", "", initrd, iso), url: "http://i/x.initrd", kernel: "http://i/x.kernel", format: initrd},
		"aarch64 ISO":                    {ppi: image("aarch64", "", iso), url: "http://i/a.iso", format: iso},
		"s390x initrd, the plain kernel": {ppi: image("s390x", "", initrd), url: "http://i/z.initrd", kernel: "http://i/x.kernel", format: initrd},
		"network data version recorded":  {ppi: image("x86_64", "net", iso), net: networkData{version: "42"}, url: "http://i/x.iso", format: iso},
		"no accepted format configured": {
			ppi:    image("x86_64", "", "floppy"),
			reason: metal3.ImageConfigurationErrorReason, message: `spec.acceptFormats: floppy not configured for architecture "x86_64" (configured: iso or initrd)`,
		},
		"no accepted format at all": {
			ppi:    image("x86_64", ""),
			reason: metal3.ImageConfigurationErrorReason, message: "spec.acceptFormats: empty",
		},
		"missing network data": {
			ppi: image("x86_64", "net", iso), net: networkData{missing: true},
			reason: metal3.ImageMissingNetworkDataReason, message: `spec.networkDataName: secret "net" not found`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d := decide(tc.ppi, testEnv, tc.net, t0, retry)
			st := d.status
			ready := conditions.Get(st.Conditions, string(metal3.ConditionImageReady))
			failed := conditions.Get(st.Conditions, string(metal3.ConditionImageError))
			if ready == nil || failed == nil || ready.ObservedGeneration != 3 || failed.ObservedGeneration != 3 {
				t.Fatalf("conditions %+v", st.Conditions)
			}
			if tc.reason != "" {
				if ready.Status != metav1.ConditionFalse || ready.Reason != tc.reason || failed.Status != metav1.ConditionTrue ||
					failed.Reason != tc.reason || !strings.Contains(failed.Message, tc.message) || st.ImageURL != "" {
					t.Fatalf("failure: url %q Ready %+v Error %+v", st.ImageURL, ready, failed)
				}
				return
			}
			if st.ImageURL != tc.url || st.KernelURL != tc.kernel || st.Format != tc.format || st.Architecture != tc.ppi.Spec.Architecture ||
				st.NetworkData.Name != tc.ppi.Spec.NetworkDataName || st.NetworkData.Version != tc.net.version {
				t.Fatalf("status %+v", st)
			}
			if ready.Status != metav1.ConditionTrue || ready.Reason != metal3.ImageSuccessReason || ready.Message != "Generated image" ||
				failed.Status != metav1.ConditionFalse || failed.Reason != metal3.ImageSuccessReason || d.requeueAfter != 0 {
				t.Fatalf("Ready %+v Error %+v requeue %s", ready, failed, d.requeueAfter)
			}
		})
	}
}

// TestUnsupportedArchitecture: no image for the architecture names spec.architecture and the
// variables that would configure one.
func TestUnsupportedArchitecture(t *testing.T) {
	im := ImagesFromEnv([]string{"DEPLOY_ISO_URL_X86_64=http://i/x.iso"})
	d := decide(image("aarch64", "", metal3.ImageFormatISO), im, networkData{}, t0, retry)
	c := conditions.Get(d.status.Conditions, string(metal3.ConditionImageError))
	if c.Reason != metal3.ImageConfigurationErrorReason ||
		c.Message != `spec.architecture: no agent image is configured for architecture "aarch64" (set DEPLOY_ISO_URL_AARCH64, or DEPLOY_RAMDISK_URL_AARCH64 and DEPLOY_KERNEL_URL_AARCH64, or their _BY_ARCH variants)` {
		t.Fatalf("Error %+v", c)
	}
}

// TestFormatSetForTheArchitectureWins: for another architecture than the operator's, a format
// whose image is set for that architecture alone is taken over an earlier accepted one only the
// plain variable (most likely the operator's own architecture's image) serves; hosts of the
// operator's architecture, or with none set for theirs, keep their order.
func TestFormatSetForTheArchitectureWins(t *testing.T) {
	own := provisioner.ControllerArchitecture
	other := "aarch64"
	if own == other {
		other = "x86_64"
	}
	up := strings.ToUpper
	im := ImagesFromEnv([]string{"DEPLOY_ISO_URL=http://i/plain.iso", "DEPLOY_KERNEL_URL=http://i/plain.kernel",
		"DEPLOY_RAMDISK_URL_" + up(other) + "=http://i/other.initrd", "DEPLOY_KERNEL_URL_" + up(other) + "=http://i/other.kernel",
		"DEPLOY_RAMDISK_URL_" + up(own) + "=http://i/own.initrd"})
	both := []metal3.ImageFormat{metal3.ImageFormatISO, metal3.ImageFormatInitRD}
	for name, tc := range map[string]struct {
		arch        string
		url, format string
		accepts     []metal3.ImageFormat
	}{
		"another architecture: its initrd, not the plain ISO": {arch: other, accepts: both, url: "http://i/other.initrd", format: "initrd"},
		"another architecture accepting ISOs only: the plain one": {arch: other, accepts: []metal3.ImageFormat{metal3.ImageFormatISO},
			url: "http://i/plain.iso", format: "iso"},
		"the operator's architecture: the host's order": {arch: own, accepts: both, url: "http://i/plain.iso", format: "iso"},
	} {
		d := decide(image(tc.arch, "", tc.accepts...), im, networkData{}, t0, retry)
		if d.status.ImageURL != tc.url || string(d.status.Format) != tc.format {
			t.Errorf("%s: %s %s, want %s %s", name, d.status.Format, d.status.ImageURL, tc.format, tc.url)
		}
	}
}

// TestMissingNetworkDataRetry: the wait grows with the time since the error, up to the maximum.
func TestMissingNetworkDataRetry(t *testing.T) {
	ppi := image("x86_64", "net", metal3.ImageFormatISO)
	d := decide(ppi, testEnv, networkData{missing: true}, t0, retry)
	if d.requeueAfter != 10*time.Second {
		t.Fatalf("first retry after %s", d.requeueAfter)
	}
	ppi.Status = d.status
	if d = decide(ppi, testEnv, networkData{missing: true}, t0.Add(time.Minute), retry); d.requeueAfter != 70*time.Second {
		t.Fatalf("a minute later: retry after %s", d.requeueAfter)
	}
	if d = decide(ppi, testEnv, networkData{missing: true}, t0.Add(time.Hour), retry); d.requeueAfter != 10*time.Minute {
		t.Fatalf("an hour later: retry after %s", d.requeueAfter)
	}
	ppi.Status = d.status
	d = decide(ppi, testEnv, networkData{version: "7"}, t0.Add(2*time.Hour), retry)
	if !conditions.IsCurrent(d.status.Conditions, string(metal3.ConditionImageReady), 3) || d.status.ImageURL != "http://i/x.iso" || d.requeueAfter != 0 {
		t.Fatalf("after the Secret appeared: %+v", d.status)
	}
}
