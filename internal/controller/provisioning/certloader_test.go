package provisioning

import (
	"context"
	"errors"
	"net/http"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
)

// TestCertLoaderPlatform: a replica waits for the webhook certificate where the platform gets a
// stack (the leader makes it), and is ready without one where the platform gets none: no
// certificate is ever made there, and the operator's pod would never be Ready.
func TestCertLoaderPlatform(t *testing.T) {
	for name, tc := range map[string]struct {
		platform configv1.PlatformType
		ready    bool
	}{
		"bare metal: waits for the certificate": {platform: configv1.BareMetalPlatformType},
		"Nutanix: nothing to serve, ready":      {platform: configv1.NutanixPlatformType, ready: true},
		"External: nothing to serve, ready":     {platform: configv1.ExternalPlatformType, ready: true},
	} {
		t.Run(name, func(t *testing.T) {
			op := setup(t, options{platform: tc.platform, noStart: true})
			store := NewCertStore()
			(&CertLoader{Reader: env.Client, Namespace: op.ns, Store: store}).load(context.Background())
			ready := false
			select {
			case <-store.Ready():
				ready = true
			default:
			}
			if ready != tc.ready {
				t.Errorf("ready %v, want %v", ready, tc.ready)
			}
			if _, err := store.GetCertificate(nil); err == nil {
				t.Error("a certificate is served though none was set")
			}
			// The readiness check main installs: the webhook server's own check (a TLS
			// handshake) can only fail without a certificate, so it must not be asked then.
			handshake := func(*http.Request) error { return errors.New("tls: no certificate") }
			if err := store.Readiness(handshake)(nil); (err == nil) != tc.ready {
				t.Errorf("readiness check: %v, want ready %v", err, tc.ready)
			}
		})
	}
}
