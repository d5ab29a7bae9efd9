package imagecustomization

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/events"
	"github.com/metalforge/metalforge/internal/imagecustomization/imagebuild"
	"github.com/metalforge/metalforge/internal/imagecustomization/imagestore"
)

// Event reasons.
const (
	EventImageBuilt         = "ImageBuilt"
	EventImageCacheLost     = "ImageCacheLost"
	EventBuildInvalid       = metal3.ImageBuildInvalidReason
	EventMissingNetworkData = metal3.ImageMissingNetworkDataReason
	EventConfigurationError = metal3.ImageConfigurationErrorReason
)

// quickRequeue is the pause between clearing Ready and publishing the new image.
const quickRequeue = 10 * time.Millisecond

// scope is one reconcile of one PreprovisioningImage: what was loaded, and the effects decided.
type scope struct {
	ctx     context.Context
	cfg     *Config
	b       *imagebuild.Builder
	ppi     *metal3.PreprovisioningImage
	now     time.Time
	secret  *corev1.Secret // the network data Secret; nil when none is named or it is missing
	missing bool           // spec.networkDataName names a Secret that does not exist

	// Effects, applied by the driver in this order.
	commit  *imagestore.Record // store (and serve) before the status names it
	served  *imagestore.Record // the image the status names after this reconcile, for the checksum
	events  events.List
	discard bool // stop serving the stored image, once the status no longer names it
}

// outcome is when to look again, or an error to retry with controller-runtime's backoff.
type outcome struct {
	after time.Duration
	err   error
}

// run decides. It edits the PreprovisioningImage's status in memory and collects effects.
func (s *scope) run() outcome {
	ppi := s.ppi
	formats := s.b.Formats(ppi.Spec.Architecture)
	if formats == nil {
		return s.fail(metal3.ImageConfigurationErrorReason, fmt.Sprintf("spec.architecture: architecture not supported: no base image for %q", archName(ppi.Spec.Architecture, s.b.HostArch())))
	}
	format := pickFormat(ppi.Spec.AcceptFormats, formats)
	if format == "" {
		return s.fail(metal3.ImageConfigurationErrorReason, fmt.Sprintf("spec.acceptFormats: no acceptable image format supported (accepted: %s; this server builds: %s)", joinFormats(ppi.Spec.AcceptFormats), joinFormats(formats)))
	}
	if msg, after := waitFor(ppi, s.cfg.GracePeriod, s.now); msg != "" {
		setUnready(ppi, msg, s.now)
		return outcome{after: after}
	}
	nd := metal3.SecretStatus{}
	if ppi.Spec.NetworkDataName != "" {
		if s.missing {
			// The delay grows with the time the error has lasted: measured once it is set.
			out := s.fail(metal3.ImageMissingNetworkDataReason, fmt.Sprintf("spec.networkDataName: secret %q not found", ppi.Spec.NetworkDataName))
			out.after = retryDelay(ppi, errorType, s.cfg.MinRetryDelay, s.cfg.MaxRetryDelay, s.now)
			return out
		}
		nd = metal3.SecretStatus{Name: ppi.Spec.NetworkDataName, Version: s.secret.ResourceVersion}
	}
	req := imagebuild.Request{
		UID: string(ppi.UID), Namespace: ppi.Namespace, Name: ppi.Name, Format: format, Arch: ppi.Spec.Architecture,
		NetworkDataName: ppi.Spec.NetworkDataName, OverrideURI: ppi.Annotations[metal3.IgnitionOverrideURIAnnotation],
	}
	if s.secret != nil {
		req.NetworkData = s.secret.Data
	}
	rec, built, err := s.b.Prepare(s.ctx, req)
	var invalid *imagebuild.InvalidError
	var override *imagebuild.OverrideError
	switch {
	case errors.As(err, &invalid):
		out := s.fail(metal3.ImageBuildInvalidReason, invalid.Msg)
		if req.OverrideURI != "" {
			// The override's content may be fixed without the annotation changing.
			out.after = retryDelay(ppi, errorType, s.cfg.MinRetryDelay, s.cfg.MaxRetryDelay, s.now)
		}
		return out
	case errors.As(err, &override):
		setOverrideUnready(ppi, override.Msg, s.now)
		return outcome{after: retryDelay(ppi, readyType, s.cfg.MinRetryDelay, s.cfg.MaxRetryDelay, s.now)}
	case errors.Is(err, imagebuild.ErrUnsupported):
		return s.fail(metal3.ImageConfigurationErrorReason, err.Error())
	case err != nil:
		// An error of the controller's own, not of the input: retried with backoff, Error stays
		// False. A Ready image whose image is still served stays Ready; one whose cache was lost
		// must not, naming a URL that answers 404. An image that is not Ready says that its build
		// fails: its message would otherwise say what it last waited for (the grace period, for
		// as long as every build fails).
		if isReady(ppi) {
			if s.cacheLost() {
				setUnready(ppi, msgCacheLost, s.now)
			}
		} else {
			setBuildFailed(ppi, err, s.now)
		}
		return outcome{err: fmt.Errorf("building image %s/%s: %w", ppi.Namespace, ppi.Name, err)}
	}
	url := s.b.URL(rec)
	if url != ppi.Status.ImageURL && isReady(ppi) {
		// Clear Ready before the image the status names goes away (metal3's order).
		msg := msgConfigChanged
		if s.cacheLost() {
			msg = msgCacheLost
		}
		setUnready(ppi, msg, s.now)
		return outcome{after: quickRequeue}
	}
	if built {
		s.commit = rec
	}
	s.served = rec
	wasURL := ppi.Status.ImageURL
	setImage(ppi, url, rec, format, nd, s.now)
	if url != wasURL {
		s.events.Normal(EventImageBuilt, "Build", fmt.Sprintf("Built the %s image for architecture %s", format, rec.Arch))
	}
	return outcome{}
}

// cacheLost: the image the status names was this server's and is no longer in its cache (lost
// with its disk, or its base replaced while the controller was down), with a Warning.
func (s *scope) cacheLost() bool {
	url := s.ppi.Status.ImageURL
	if !s.b.Owns(url) || s.b.Current(string(s.ppi.UID)) != nil {
		return false
	}
	s.events.Warning(EventImageCacheLost, "Rebuild", "The image at "+url+" is no longer in the image cache; building it again")
	return true
}

// fail records an error condition, with a Warning event when the error is new or changed, and
// discards the stored image: clearing the URL alone would leave the old image served to whoever
// still has its URL, with the configuration that is now missing or invalid (the addresses of a
// deleted network data Secret, say). Fixed inputs build it again, under the same URL when they
// are the same as before.
func (s *scope) fail(reason, msg string) outcome {
	prev := s.ppi.Status.Conditions
	before := ""
	for _, c := range prev {
		if c.Type == errorType && c.Status == "True" {
			before = c.Reason + c.Message
		}
	}
	setError(s.ppi, reason, msg, s.now)
	s.discard = true
	if before != reason+sanitize(msg) {
		s.events.Warning(reason, "Build", sanitize(msg))
	}
	return outcome{}
}

// waitFor says what the image waits for before it may be built, and for how long at most: the
// grace period after creation, then, for an InfraEnv host, the override annotation.
func waitFor(ppi *metal3.PreprovisioningImage, grace time.Duration, now time.Time) (string, time.Duration) {
	if until := ppi.CreationTimestamp.Add(grace); now.Before(until) {
		return fmt.Sprintf("Waiting %s after creation before building the image (until %s)", grace, until.UTC().Format(time.RFC3339)), until.Sub(now)
	}
	if infraEnv, ok := ppi.Labels[metal3.InfraEnvLabel]; ok && ppi.Annotations[metal3.IgnitionOverrideURIAnnotation] == "" {
		return fmt.Sprintf("Waiting for the %s annotation (InfraEnv %s)", metal3.IgnitionOverrideURIAnnotation, infraEnv), 0
	}
	return "", 0
}

// pickFormat is the first accepted format the server builds.
func pickFormat(accept, builds []metal3.ImageFormat) metal3.ImageFormat {
	for _, f := range accept {
		if slices.Contains(builds, f) {
			return f
		}
	}
	return ""
}

func joinFormats(fs []metal3.ImageFormat) string {
	if len(fs) == 0 {
		return "none"
	}
	s := make([]string, len(fs))
	for i, f := range fs {
		s[i] = string(f)
	}
	return strings.Join(s, ", ")
}

func archName(arch, host string) string {
	if arch == "" {
		return host
	}
	return arch
}
