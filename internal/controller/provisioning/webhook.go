package provisioning

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/provisioning/platform"
	"github.com/metalforge/metalforge/internal/controller/provisioning/secrets"
	"github.com/metalforge/metalforge/internal/webhooks"
)

// CertStore holds the operator's webhook serving certificate. The reconciler sets it whenever the
// certificate Secret is created or renewed; the webhook server reads it for each handshake, so a
// renewal needs no restart (OpenShift's operator exits to pick up a new certificate).
type CertStore struct {
	mu   sync.RWMutex
	cert *tls.Certificate
	// ready is closed once a certificate is set, or once the store is told nothing is served.
	ready chan struct{}
	once  sync.Once
}

// NewCertStore returns an empty store.
func NewCertStore() *CertStore { return &CertStore{ready: make(chan struct{})} }

// Set loads a TLS Secret's data.
func (s *CertStore) Set(data map[string][]byte) error {
	cert, err := tls.X509KeyPair(data[secrets.KeyCert], data[secrets.KeyKey])
	if err != nil {
		return fmt.Errorf("loading the webhook certificate: %w", err)
	}
	s.mu.Lock()
	s.cert = &cert
	s.mu.Unlock()
	s.once.Do(func() { close(s.ready) })
	return nil
}

// GetCertificate is tls.Config.GetCertificate.
func (s *CertStore) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.cert == nil {
		return nil, errors.New("the webhook certificate is not issued yet")
	}
	return s.cert, nil
}

// Ready is closed once a certificate is loaded, or once ServeNothing says none is needed: the
// operator's readiness waits on it.
func (s *CertStore) Ready() <-chan struct{} { return s.ready }

// ServeNothing says this replica gets no webhook requests: the platform gets no stack, so the
// operator makes neither the webhook's certificate nor its configuration (OpenShift's operator
// registers its webhook only where the platform is enabled too). The replica is then ready
// without a certificate; one set later is served.
func (s *CertStore) ServeNothing() { s.once.Do(func() { close(s.ready) }) }

// Readiness is the operator's readiness check when it serves the webhook: not ready until the
// store is; then, with a certificate, ready once the webhook server answers (started, its TLS
// handshake, which needs the certificate); without one (ServeNothing), ready at once: that
// handshake can only fail, and the pod would never be Ready.
func (s *CertStore) Readiness(started func(*http.Request) error) func(*http.Request) error {
	return func(req *http.Request) error {
		select {
		case <-s.ready:
		default:
			return errors.New("the webhook certificate is not loaded yet")
		}
		s.mu.RLock()
		serving := s.cert != nil
		s.mu.RUnlock()
		if !serving {
			return nil
		}
		return started(req)
	}
}

// TLSOption makes a webhook server serve from the store.
func (s *CertStore) TLSOption(c *tls.Config) { c.GetCertificate = s.GetCertificate }

// SetupWebhook registers the Provisioning validating webhook with the platform's rules: the
// network modes come from the Infrastructure object, read directly (the webhook may be called
// before the cache has started).
func SetupWebhook(mgr ctrl.Manager) error {
	reader := mgr.GetAPIReader()
	v := &webhooks.ProvisioningValidator{Platform: func(ctx context.Context) (string, []metal3.ProvisioningNetwork, error) {
		return PlatformModes(ctx, reader)
	}}
	if err := ctrl.NewWebhookManagedBy(mgr, &metal3.Provisioning{}).WithValidator(v).Complete(); err != nil {
		return fmt.Errorf("registering the Provisioning webhook: %w", err)
	}
	return nil
}

// PlatformModes reads the cluster's platform and the network modes it allows.
func PlatformModes(ctx context.Context, c client.Reader) (string, []metal3.ProvisioningNetwork, error) {
	infra := &configv1.Infrastructure{}
	if err := c.Get(ctx, types.NamespacedName{Name: platform.InfrastructureName}, infra); err != nil {
		return "", nil, fmt.Errorf("reading infrastructures.config.openshift.io/%s: %w", platform.InfrastructureName, err)
	}
	f := platform.Of(infra)
	return string(f.Platform), f.Modes, nil
}

// CertLoader loads the webhook certificate from its Secret into the store on every replica (only
// the leader reconciles, but every replica serves the webhook): at once, then every Interval.
type CertLoader struct {
	Reader    client.Reader
	Namespace string
	Store     *CertStore
	Interval  time.Duration
}

// NeedLeaderElection is false: every replica serves.
func (l *CertLoader) NeedLeaderElection() bool { return false }

// Start loads until ctx ends.
func (l *CertLoader) Start(ctx context.Context) error {
	for {
		l.load(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(l.Interval):
		}
	}
}

// load reads the certificate Secret into the store. Without one, on a platform that gets no
// stack, the store is told nothing is served: no certificate will ever come, and a replica that
// waited for one would never be ready.
func (l *CertLoader) load(ctx context.Context) {
	log := ctrl.LoggerFrom(ctx).WithName("webhook-cert")
	s := &corev1.Secret{}
	err := l.Reader.Get(ctx, types.NamespacedName{Namespace: l.Namespace, Name: secrets.CBOWebhookCert}, s)
	switch {
	case apierrors.IsNotFound(err):
		// The leader creates it at its first reconcile, where the platform gets a stack.
		l.serveNothingWithoutStack(ctx)
	case err != nil:
		log.Error(err, "Reading the webhook certificate")
	default:
		if err := l.Store.Set(s.Data); err != nil {
			log.Error(err, "Loading the webhook certificate")
		}
	}
}

// serveNothingWithoutStack tells the store that nothing is served when the platform gets no
// stack. The platform is read only while the store is not ready.
func (l *CertLoader) serveNothingWithoutStack(ctx context.Context) {
	select {
	case <-l.Store.Ready():
		return
	default:
	}
	infra := &configv1.Infrastructure{}
	if err := l.Reader.Get(ctx, types.NamespacedName{Name: platform.InfrastructureName}, infra); err != nil {
		ctrl.LoggerFrom(ctx).WithName("webhook-cert").Error(err, "Reading the platform")
		return
	}
	if !platform.Of(infra).Enabled() {
		l.Store.ServeNothing()
	}
}
