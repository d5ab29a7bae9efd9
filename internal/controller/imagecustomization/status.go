package imagecustomization

import (
	"regexp"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/conditions"
	"github.com/metalforge/metalforge/internal/controller/imagebuilder"
	"github.com/metalforge/metalforge/internal/imagecustomization/imagestore"
	"github.com/metalforge/metalforge/internal/statustext"
)

var (
	readyType = string(metal3.ConditionImageReady)
	errorType = string(metal3.ConditionImageError)
)

// Messages of the Ready condition (metal3's where it has one).
const (
	msgConfigChanged = "Config changed"
	msgCacheLost     = "The image cache was lost; rebuilding"
	// msgOverrideWait begins the message of an image whose Ignition override cannot be fetched now.
	msgOverrideWait = "Waiting for the Ignition override: "
	// msgBuildFailed begins the message of an image whose build fails with an error of the
	// controller's own (nmcli failing to run, say), retried with backoff.
	msgBuildFailed = "Building the image failed; retrying: "
)

// maxMessage bounds condition messages (they carry nmcli's and Ignition's words), to an Event
// note's limit as they become notes.
const maxMessage = statustext.EventNoteLimit

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

// setOverrideUnready clears Ready while the Ignition override cannot be fetched. Its retry delay
// grows from Ready's transition time, which metal3's conditions do not move from one wait to the
// next (every wait is False with reason ImageSuccess): an image that had waited an hour for the
// override annotation would retry an override not served yet only after MaxRetryDelay. So the
// time moves to now when the failures begin, as a new reason would move it.
func setOverrideUnready(ppi *metal3.PreprovisioningImage, cause string, now time.Time) {
	began := !waitingForOverride(ppi)
	setUnready(ppi, msgOverrideWait+cause, now)
	if began {
		conditions.Get(ppi.Status.Conditions, readyType).LastTransitionTime = metav1.NewTime(now.Truncate(time.Second))
	}
}

// setBuildFailed clears Ready with the error of a build that is retried. A retry whose error
// differs from the message's only in its words with digits (a temporary file's random name, a
// process ID, a port, a time) keeps the message: retries of one failure write the status once,
// while a failure that changed cause is shown.
func setBuildFailed(ppi *metal3.PreprovisioningImage, err error, now time.Time) {
	msg := sanitize(msgBuildFailed + err.Error())
	c := conditions.Get(ppi.Status.Conditions, readyType)
	if c != nil && c.Status == metav1.ConditionFalse && c.Reason == metal3.ImageSuccessReason && strings.HasPrefix(c.Message, msgBuildFailed) &&
		volatile.ReplaceAllString(c.Message, "#") == volatile.ReplaceAllString(msg, "#") {
		msg = c.Message
	}
	setUnready(ppi, msg, now)
}

// volatile is a word with a digit in it: what changes from one retry of the same failure to the
// next.
var volatile = regexp.MustCompile(`[[:alnum:]]*[0-9][[:alnum:]]*`)

// waitingForOverride reports whether Ready already says that the override cannot be fetched.
func waitingForOverride(ppi *metal3.PreprovisioningImage) bool {
	c := conditions.Get(ppi.Status.Conditions, readyType)
	return c != nil && c.Status == metav1.ConditionFalse && c.Reason == metal3.ImageSuccessReason && strings.HasPrefix(c.Message, msgOverrideWait)
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

// sanitize keeps a message fit for status and an Event note: statustext's cleaning (credentials in
// URLs such as an Ignition override's, one line, bounded).
func sanitize(msg string) string { return statustext.Clean(msg, maxMessage) }

// checksumAnnotation is the sha256sum line of the image at url, or "" while unknown.
func checksumAnnotation(rec *imagestore.Record) string {
	if rec == nil || rec.SHA256 == "" {
		return ""
	}
	return rec.SHA256 + "  " + rec.Image
}

func isReady(ppi *metal3.PreprovisioningImage) bool { return imagebuilder.IsReady(ppi.Status) }
