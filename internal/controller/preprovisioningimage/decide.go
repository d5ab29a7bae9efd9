package preprovisioningimage

import (
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/conditions"
)

// messageGenerated is the Ready message of a built image (metal3's).
const messageGenerated = "Generated image"

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
		since := now.Sub(conditions.Get(d.status.Conditions, string(metal3.ConditionImageError)).LastTransitionTime.Time)
		d.requeueAfter = min(since+retry.minimum, retry.maximum)
		return d
	}
	img, _ := images.Image(format, spec.Architecture)
	st.ImageURL, st.KernelURL, st.ExtraKernelParams = img.URL, img.KernelURL, ""
	st.Format, st.Architecture = format, spec.Architecture
	st.NetworkData = metal3.SecretStatus{}
	if spec.NetworkDataName != "" {
		st.NetworkData = metal3.SecretStatus{Name: spec.NetworkDataName, Version: net.version}
	}
	setConditions(ppi, &st, metav1.ConditionTrue, metal3.ImageSuccessReason, messageGenerated, metav1.ConditionFalse, "", now)
	return decision{status: st}
}

// failed is metal3's setError: no URL, Ready False and Error True with the reason.
func failed(ppi *metal3.PreprovisioningImage, st metal3.PreprovisioningImageStatus, reason, msg string, now time.Time) decision {
	st.ImageURL, st.KernelURL, st.ExtraKernelParams = "", "", ""
	setConditions(ppi, &st, metav1.ConditionFalse, reason, "", metav1.ConditionTrue, msg, now)
	return decision{status: st}
}

// setConditions sets Ready and Error for the image's generation. Success gives Error the reason
// ImageSuccess too, a failure gives Ready the failure's reason (as metal3 does).
func setConditions(ppi *metal3.PreprovisioningImage, st *metal3.PreprovisioningImageStatus,
	ready metav1.ConditionStatus, reason, readyMsg string, errStatus metav1.ConditionStatus, errMsg string, now time.Time) {
	conditions.Set(&st.Conditions, metav1.Condition{Type: string(metal3.ConditionImageReady), Status: ready, Reason: reason, Message: readyMsg}, ppi.Generation, now)
	conditions.Set(&st.Conditions, metav1.Condition{Type: string(metal3.ConditionImageError), Status: errStatus, Reason: reason, Message: errMsg}, ppi.Generation, now)
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
