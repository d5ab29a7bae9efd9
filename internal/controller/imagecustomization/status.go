package imagecustomization

import (
	"strings"
	"time"
	"unicode/utf8"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/imagebuilder"
	"github.com/metalforge/metalforge/internal/imagecustomization/imagestore"
)

var (
	readyType = string(metal3.ConditionImageReady)
	errorType = string(metal3.ConditionImageError)
)

// Messages of the Ready condition (metal3's where it has one).
const (
	msgConfigChanged = "Config changed"
	msgCacheLost     = "The image cache was lost; rebuilding"
)

// maxMessage bounds condition messages (they carry nmcli's and Ignition's words).
const maxMessage = 1024

// setImage publishes an image: URL, format, architecture, network data, Ready.
func setImage(ppi *metal3.PreprovisioningImage, url string, rec *imagestore.Record, format metal3.ImageFormat, nd metal3.SecretStatus, now time.Time) {
	st := &ppi.Status
	st.ImageURL, st.KernelURL, st.ExtraKernelParams = url, rec.KernelURL, rec.ExtraKernelParams
	st.Format, st.Architecture, st.NetworkData = format, ppi.Spec.Architecture, nd
	imagebuilder.SetBuilt(st, ppi.Generation, now)
}

// setUnready clears Ready with what the image waits for; the URL stays (the image it names is still
// served until the new one is).
func setUnready(ppi *metal3.PreprovisioningImage, message string, now time.Time) {
	imagebuilder.SetNotReady(&ppi.Status, ppi.Generation, sanitize(message), now)
}

// setError records a failure: no URL, Ready False and Error True with the reason.
func setError(ppi *metal3.PreprovisioningImage, reason, message string, now time.Time) {
	imagebuilder.SetFailed(&ppi.Status, ppi.Generation, reason, sanitize(message), now)
}

// retryDelay grows with the time since the current condition of type t began (metal3's retry
// for a missing Secret).
func retryDelay(ppi *metal3.PreprovisioningImage, t string, minDelay, maxDelay time.Duration, now time.Time) time.Duration {
	return imagebuilder.RetryDelay(ppi.Status, metal3.ImageStatusConditionType(t), minDelay, maxDelay, now)
}

// sanitize keeps a message fit for status: one line, bounded.
func sanitize(msg string) string {
	msg = strings.Join(strings.Fields(msg), " ")
	if len(msg) > maxMessage {
		cut := maxMessage
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "…"
	}
	return msg
}

// checksumAnnotation is the sha256sum line of the image at url, or "" while unknown.
func checksumAnnotation(rec *imagestore.Record) string {
	if rec == nil || rec.SHA256 == "" {
		return ""
	}
	return rec.SHA256 + "  " + rec.Image
}

func isReady(ppi *metal3.PreprovisioningImage) bool { return imagebuilder.IsReady(ppi.Status) }
