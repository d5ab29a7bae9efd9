package imagebuild

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// maxOverride bounds an Ignition override (an assisted agent configuration is tens of kilobytes;
// it must fit the embed area compressed anyway).
const maxOverride = 4 << 20

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
		return nil, &OverrideError{Msg: fmt.Sprintf("fetching the Ignition override from %s failed", redact(uri))}
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
		return nil, &OverrideError{Msg: fmt.Sprintf("reading the Ignition override from %s failed", redact(uri))}
	}
	if len(data) > maxOverride {
		return nil, invalid("the Ignition override from %s is larger than %d bytes", redact(uri), maxOverride)
	}
	return data, nil
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
