package imagebuilder

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/conditions"
)

// MessageGenerated is the Ready message of a built image (metal3's).
const MessageGenerated = "Generated image"

var (
	ready    = string(metal3.ConditionImageReady)
	errorTyp = string(metal3.ConditionImageError)
)

// SetBuilt marks the image built: Ready True and Error False, both with reason ImageSuccess. The
// caller sets the URLs, format, architecture and network data.
func SetBuilt(st *metal3.PreprovisioningImageStatus, generation int64, now time.Time) {
	conditions.Set(&st.Conditions, conditions.True(ready, metal3.ImageSuccessReason, MessageGenerated), generation, now)
	conditions.Set(&st.Conditions, conditions.False(errorTyp, metal3.ImageSuccessReason, ""), generation, now)
}

// SetFailed is metal3's setError: no URLs, Ready False with the reason, Error True with the reason
// and message. msg must already be fit for status (no credentials, no volatile text).
func SetFailed(st *metal3.PreprovisioningImageStatus, generation int64, reason, msg string, now time.Time) {
	st.ImageURL, st.KernelURL, st.ExtraKernelParams = "", "", ""
	conditions.Set(&st.Conditions, conditions.False(ready, reason, ""), generation, now)
	conditions.Set(&st.Conditions, conditions.True(errorTyp, reason, msg), generation, now)
}

// SetNotReady is metal3's setUnready: Ready False with reason ImageSuccess and what the image
// waits for. Nothing failed, so Error is False too: an earlier failure left True (a missing
// Secret, since created) would otherwise read as the image's current error, with the current
// generation, and the host would report it. The URLs stay: the image they name is still served
// until its replacement is.
func SetNotReady(st *metal3.PreprovisioningImageStatus, generation int64, msg string, now time.Time) {
	conditions.Set(&st.Conditions, conditions.False(ready, metal3.ImageSuccessReason, msg), generation, now)
	conditions.Set(&st.Conditions, conditions.False(errorTyp, metal3.ImageSuccessReason, ""), generation, now)
}

// RetryDelay is metal3's growing retry (for a missing network data Secret, say): minimum after the
// condition of type t last changed, then about as long as it has lasted, at most maximum.
func RetryDelay(st metal3.PreprovisioningImageStatus, t metal3.ImageStatusConditionType, minimum, maximum time.Duration, now time.Time) time.Duration {
	c := conditions.Get(st.Conditions, string(t))
	if c == nil {
		return minimum
	}
	return min(maximum, now.Sub(c.LastTransitionTime.Time)+minimum)
}

// IsReady reports whether Ready is True (for any generation).
func IsReady(st metal3.PreprovisioningImageStatus) bool {
	c := conditions.Get(st.Conditions, ready)
	return c != nil && c.Status == metav1.ConditionTrue
}
