package imagebuild

import (
	"context"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// tlsOverride serves an override over HTTPS with httptest's own certificate, which no system
// trusts.
func tlsOverride(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"/etc/assisted/discovery","contents":{"source":"data:,tls"}}]}}`))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// An https override whose certificate the client does not trust is retried, and its message says
// why (a certificate problem), not only where; the query stays out of it.
func TestOverrideFetchFailureSaysWhy(t *testing.T) {
	e := newEnv(t, nil)
	srv := tlsOverride(t)
	req := request("tls")
	req.OverrideURI = srv.URL + "/discovery.ign?api_key=s3cret"
	_, _, err := e.b.Prepare(context.Background(), req)
	var oe *OverrideError
	if !errors.As(err, &oe) {
		t.Fatalf("error %v (%T), want a retried *OverrideError", err, err)
	}
	want := "fetching the Ignition override from " + srv.URL + "/discovery.ign?… failed: "
	if !strings.HasPrefix(oe.Msg, want) || !strings.Contains(oe.Msg, "x509: certificate signed by unknown authority") {
		t.Errorf("message %q: want %q and the certificate error", oe.Msg, want)
	}
	if strings.Contains(oe.Msg, "s3cret") || strings.Contains(oe.Msg, "api_key") {
		t.Errorf("message %q quotes the query", oe.Msg)
	}
}

// The same server, its CA given as a CA bundle: the override is fetched and merged.
func TestOverrideClientTrustsCABundle(t *testing.T) {
	srv := tlsOverride(t)
	bundle := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	client, err := OverrideClient(bundle)
	must(t, err)
	e := newEnv(t, func(c *Config) { c.HTTPClient = client })
	req := request("tls")
	req.OverrideURI = srv.URL + "/discovery.ign"
	rec := e.build(req)
	if _, config := unpackArea(t, rec.Patch); !strings.Contains(string(config), `"path":"/etc/assisted/discovery"`) {
		t.Errorf("the merged config lacks the override's file: %.300s", config)
	}
	if _, err := OverrideClient([]byte("not PEM")); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("a bundle without a certificate: %v", err)
	}
}
