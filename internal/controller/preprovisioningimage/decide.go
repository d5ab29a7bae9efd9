package preprovisioningimage

import (
	"fmt"
	"slices"
	"strings"
	"time"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/imagebuilder"
	"github.com/metalforge/metalforge/internal/provisioner"
)

// networkData is what the controller read of the image's network data Secret.
type networkData struct {
	// version is the Secret's resourceVersion, "" when there is no Secret to read.
	version string
	// missing: spec.networkDataName names a Secret that does not exist.
	missing bool
}

// decision is the image's status after this reconcile and when to look again (0: only on change).
type decision struct {
	status       metal3.PreprovisioningImageStatus
	requeueAfter time.Duration
}

// retryDelays bound the wait for a missing network data Secret: the time since the error plus
// minimum, at most maximum (metal3: 10 s to 10 min). A new Secret is not labelled for the
// operator's cache yet, so nothing wakes the image when it appears.
type retryDelays struct{ minimum, maximum time.Duration }

// decide is the whole controller, as metal3's default image provider behaves: pick the first
// accepted format configured for the architecture, check the network data Secret exists (its
// content is not used: these images are the same for every host), and hand out the fixed URLs.
// Every failure names the field of the spec that cannot be satisfied.
func decide(ppi *metal3.PreprovisioningImage, images Images, net networkData, now time.Time, retry retryDelays) decision {
	st := *ppi.Status.DeepCopy()
	spec := ppi.Spec
	configured := images.Formats(spec.Architecture)
	if len(configured) == 0 {
		return failed(ppi, st, metal3.ImageConfigurationErrorReason, fmt.Sprintf(
			"spec.architecture: no agent image is configured for architecture %q (set %s, or %s and %s, or their %s variants)",
			spec.Architecture, archVar(EnvISOURL, spec.Architecture), archVar(EnvRamdiskURL, spec.Architecture),
			archVar(EnvKernelURL, spec.Architecture), "_BY_ARCH"), now)
	}
	i := slices.IndexFunc(spec.AcceptFormats, func(f metal3.ImageFormat) bool { return slices.Contains(configured, f) })
	// For another architecture than the operator's, a format set for it alone wins over one only
	// the plain variable serves, most likely built for the operator's own: with DEPLOY_ISO_URL
	// (the x86_64 ISO) and DEPLOY_RAMDISK_URL_AARCH64, an aarch64 host accepting an ISO first was
	// handed the x86_64 ISO, shown Ready, and failed to boot it. Hosts of the operator's own
	// architecture keep their order.
	if spec.Architecture != "" && spec.Architecture != provisioner.ControllerArchitecture {
		if j := slices.IndexFunc(spec.AcceptFormats, func(f metal3.ImageFormat) bool {
			return slices.Contains(configured, f) && images.ForArch(f, spec.Architecture)
		}); j >= 0 {
			i = j
		}
	}
	if i < 0 {
		msg := "spec.acceptFormats: empty, so no format can be built"
		if len(spec.AcceptFormats) > 0 {
			msg = fmt.Sprintf("spec.acceptFormats: %s not configured for architecture %q (configured: %s)",
				formats(spec.AcceptFormats), spec.Architecture, formats(configured))
		}
		return failed(ppi, st, metal3.ImageConfigurationErrorReason, msg, now)
	}
	format := spec.AcceptFormats[i]
	if spec.NetworkDataName != "" && net.missing {
		d := failed(ppi, st, metal3.ImageMissingNetworkDataReason,
			fmt.Sprintf("spec.networkDataName: secret %q not found", spec.NetworkDataName), now)
		d.requeueAfter = imagebuilder.RetryDelay(d.status, metal3.ConditionImageError, retry.minimum, retry.maximum, now)
		return d
	}
	img, _ := images.Image(format, spec.Architecture)
	st.ImageURL, st.KernelURL, st.ExtraKernelParams = img.URL, img.KernelURL, ""
	st.Format, st.Architecture = format, spec.Architecture
	st.NetworkData = metal3.SecretStatus{}
	if spec.NetworkDataName != "" {
		st.NetworkData = metal3.SecretStatus{Name: spec.NetworkDataName, Version: net.version}
	}
	imagebuilder.SetBuilt(&st, ppi.Generation, now)
	return decision{status: st}
}

// failed is metal3's setError: no URL, Ready False and Error True with the reason.
func failed(ppi *metal3.PreprovisioningImage, st metal3.PreprovisioningImageStatus, reason, msg string, now time.Time) decision {
	imagebuilder.SetFailed(&st, ppi.Generation, reason, msg, now)
	return decision{status: st}
}

// archVar is the per-architecture variable, or the plain one without an architecture.
func archVar(variable, arch string) string {
	if arch == "" {
		return variable
	}
	return variable + "_" + strings.ToUpper(arch)
}

func formats(list []metal3.ImageFormat) string {
	names := make([]string, len(list))
	for i, f := range list {
		names[i] = string(f)
	}
	return strings.Join(names, " or ")
}
