package imagebuild

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/metalforge/metalforge/internal/statustext"
)

// maxOverride bounds an Ignition override (an assisted agent configuration is tens of kilobytes;
// it must fit the embed area compressed anyway).
const maxOverride = 4 << 20

// overrideTimeout bounds one fetch of an override.
const overrideTimeout = 30 * time.Second

// OverrideClient is the client that fetches Ignition overrides: it trusts the system's roots and,
// when caBundle is not empty, the PEM certificates in it too (the assisted service serves its
// overrides over HTTPS with the cluster's CA). Proxies come from the environment, as for Go's
// default client. A bundle without any certificate is an error: it can only be a mistake, which
// would otherwise show only as every https override failing its certificate check.
func OverrideClient(caBundle []byte) (*http.Client, error) {
	if len(caBundle) == 0 {
		return &http.Client{Timeout: overrideTimeout}, nil
	}
	roots, err := x509.SystemCertPool()
	if err != nil {
		return nil, fmt.Errorf("reading the system's CA certificates: %w", err)
	}
	if !roots.AppendCertsFromPEM(caBundle) {
		return nil, errors.New("the CA bundle holds no PEM certificate")
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	return &http.Client{Timeout: overrideTimeout, Transport: transport}, nil
}

// OverrideError is an override that could not be fetched now (network, a server error, not
// there yet): the build is retried.
type OverrideError struct{ Msg string }

func (e *OverrideError) Error() string { return e.Msg }

// fetchOverride downloads the override config. Messages carry the URI without its query, which
// may hold a token.
func (b *Builder) fetchOverride(ctx context.Context, uri string) ([]byte, error) {
	u, err := url.Parse(uri)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, invalid("Ignition override URI %q is not an http or https URL", redact(uri))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, uri, nil)
	if err != nil {
		return nil, invalid("Ignition override URI %s cannot be requested", redact(uri))
	}
	resp, err := b.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, overrideFailed("fetching", uri, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusOK:
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
		return nil, &OverrideError{Msg: fmt.Sprintf("fetching the Ignition override from %s: HTTP %d", redact(uri), resp.StatusCode)}
	default:
		return nil, invalid("fetching the Ignition override from %s: HTTP %d", redact(uri), resp.StatusCode)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxOverride+1))
	if err != nil {
		return nil, overrideFailed("reading", uri, err)
	}
	if len(data) > maxOverride {
		return nil, invalid("the Ignition override from %s is larger than %d bytes", redact(uri), maxOverride)
	}
	return data, nil
}

// overrideFailed is a fetch that may work later, with why it failed (a certificate the client does
// not trust, a refused connection, a timeout), which the user needs to fix it. net/http's error
// quotes the whole request URL, query included, so only the error it wraps is kept, beside the
// redacted URL; statustext removes what credentials the cause may still quote (a proxy's URL).
func overrideFailed(doing, uri string, err error) *OverrideError {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return &OverrideError{Msg: statustext.Clean(fmt.Sprintf("%s the Ignition override from %s failed: %v", doing, redact(uri), err), 0)}
}

// redact drops the query, fragment and user information of a URI for messages.
func redact(uri string) string {
	u, err := url.Parse(uri)
	if err != nil {
		return "(unparsable URI)"
	}
	u.User, u.Fragment = nil, ""
	if u.RawQuery != "" {
		u.RawQuery = "…"
	}
	return u.String()
}
