package dataimage

import (
	"errors"
	"net/url"
	"strings"

	"github.com/metalforge/metalforge/internal/statustext"
)

// Event reasons of a DataImage.
const (
	// ReasonAttaching: the image was asked of the provisioner as the host's virtual CD.
	ReasonAttaching = "AttachingDataImage"
	// ReasonDetaching: the host's virtual CD is being emptied.
	ReasonDetaching = "DetachingDataImage"
	// ReasonFailed: an attach or detach failed; it is retried after a backoff.
	ReasonFailed = "DataImageError"
	// ReasonInvalid: spec.url cannot be attached.
	ReasonInvalid = "InvalidDataImage"
	// ReasonNoHost: no BareMetalHost has the DataImage's name.
	ReasonNoHost = "NoBareMetalHost"
)

// ValidateURL checks spec.url: an absolute http or https URL, the schemes a BMC fetches virtual
// media over and Ironic downloads to serve it (Ironic's API also passes nfs, cifs and smb through
// to the BMC, but only from its own download, which is http(s)). The message names the field and
// never quotes the URL, which may carry a password.
func ValidateURL(raw string) error {
	if strings.TrimSpace(raw) == "" {
		return errors.New("spec.url: required: the http(s) URL of an ISO image")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("spec.url: not a valid URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return errors.New("spec.url: the scheme must be http or https")
	}
	if u.Host == "" {
		return errors.New("spec.url: the URL has no host")
	}
	return nil
}

// Message is provider or user text made fit for status.error.message: credentials redacted, one
// line, bounded.
func Message(s string) string { return statustext.Clean(s, statustext.ConditionMessageLimit) }
