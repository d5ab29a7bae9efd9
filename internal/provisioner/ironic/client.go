package ironic

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/httpbasic"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/noauth"
	"github.com/gophercloud/gophercloud/v2/openstack/utils"

	"github.com/metalforge/metalforge/internal/provisioner"
	"github.com/metalforge/metalforge/internal/statustext"
)

// Microversions. 1.89 (Ironic 24.0, 2024) is the floor, as in metal3 since v0.12: virtual media
// attach/detach, servicing (1.87) and the firmware interface (1.86) all come with it. Above it
// the provisioner picks the highest of the versions it has a use for.
const (
	// minorServicing is servicing (the service verb, 1.87). The floor includes it, so every Ironic
	// the provisioner talks to can service; Features.Servicing keeps the check in one place should
	// the floor ever go below it.
	minorServicing = 87
	minMinor       = 89
	// minorGetVirtualMedia is GET /v1/nodes/{id}/vmedia: DataImage follows an attach with it.
	minorGetVirtualMedia = 93
	minorDisablePowerOff = 95
	minorHealth          = 109
	minorDeployWaitAbort = 110
)

// idleConnTimeout closes idle connections to Ironic before its API server's keep-alive timeout
// (cheroot: 10 s) does; a request sent on a connection the server is closing fails.
const idleConnTimeout = 5 * time.Second

// usefulMinors is checked from the top; the first the server supports is used for every request.
var usefulMinors = []int{minorDeployWaitAbort, minorHealth, minorDisablePowerOff, minorGetVirtualMedia, minMinor}

// ErrIronicTooOld is returned (wrapped, with the versions) by every call when Ironic's API is older
// than 1.89.
var ErrIronicTooOld = errors.New("the Ironic API is too old")

// Features is what the negotiated microversion allows.
type Features struct {
	// Microversion is sent with every request, e.g. "1.110".
	Microversion string
	// MaxVersion is the newest version the server offers, e.g. "1.115".
	MaxVersion string
	// DisablePowerOff: nodes can refuse power off (1.95).
	DisablePowerOff bool
	// Health: nodes report health (1.109).
	Health bool
	// DeployWaitAbort: a deployment waiting for the agent can be aborted (1.110).
	DeployWaitAbort bool
	// Servicing: active nodes can be serviced (live updates, 1.87).
	Servicing bool
	// VirtualMedia: a node's virtual media can be read (GET vmedia, 1.93), which DataImage needs.
	VirtualMedia bool
}

// chooseFeatures picks the microversion from the server's supported range.
func chooseFeatures(minMajor, minMinorV, maxMajor, maxMinor int) (Features, error) {
	max := fmt.Sprintf("%d.%d", maxMajor, maxMinor)
	if maxMajor != 1 || maxMinor < minMinor {
		return Features{MaxVersion: max}, fmt.Errorf(
			"%w: it supports microversions up to %s, Metalforge needs 1.%d or newer (Ironic 24.0, 2024.1 Caracal or later)",
			ErrIronicTooOld, max, minMinor)
	}
	for _, m := range usefulMinors {
		if m <= maxMinor && (minMajor < 1 || (minMajor == 1 && m >= minMinorV)) {
			return Features{
				Microversion:    fmt.Sprintf("1.%d", m),
				MaxVersion:      max,
				DisablePowerOff: m >= minorDisablePowerOff,
				Health:          m >= minorHealth,
				DeployWaitAbort: m >= minorDeployWaitAbort,
				Servicing:       m >= minorServicing,
				VirtualMedia:    m >= minorGetVirtualMedia,
			}, nil
		}
	}
	return Features{MaxVersion: max}, fmt.Errorf("%w: it supports only microversions %d.%d to %s", ErrIronicTooOld, minMajor, minMinorV, max)
}

// newServiceClient builds the gophercloud client: noauth or HTTP basic, TLS from the config, a
// timeout per request, and a transport that counts requests.
func newServiceClient(cfg Config, counter *callCounter) (*gophercloud.ServiceClient, error) {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	// A few connections, kept busy: Ironic's embedded API server works on ten requests at once and
	// queues new connections in a listen backlog of five, so a burst of new connections (fifty hosts
	// reconciled at once) loses SYNs and waits 1–7 s in TCP retransmits before it even queues.
	// Requests beyond MaxConnections wait here instead, on connections that stay open. Idle ones
	// are closed before the server's 10 s keep-alive timeout would close them under a request.
	transport.MaxConnsPerHost = cfg.MaxConnections
	transport.MaxIdleConnsPerHost = cfg.MaxConnections
	transport.IdleConnTimeout = idleConnTimeout
	if cfg.CACertFile != "" || cfg.Insecure {
		tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: cfg.Insecure} //nolint:gosec // IRONIC_INSECURE asks for it
		if cfg.CACertFile != "" {
			pem, err := os.ReadFile(cfg.CACertFile)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", EnvCACertFile, err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("%s=%q: no PEM certificate found", EnvCACertFile, cfg.CACertFile)
			}
			tlsCfg.RootCAs = pool
		}
		transport.TLSClientConfig = tlsCfg
	}

	var sc *gophercloud.ServiceClient
	var err error
	if cfg.Username != "" {
		sc, err = httpbasic.NewBareMetalHTTPBasic(httpbasic.EndpointOpts{
			IronicEndpoint: cfg.Endpoint, IronicUser: cfg.Username, IronicUserPassword: cfg.Password,
		})
	} else {
		sc, err = noauth.NewBareMetalNoAuth(noauth.EndpointOpts{IronicEndpoint: cfg.Endpoint})
	}
	if err != nil {
		return nil, fmt.Errorf("creating the Ironic client for %s: %w", cfg.Endpoint, err)
	}
	sc.HTTPClient = http.Client{Transport: counter.wrap(transport), Timeout: cfg.ClientTimeout}
	sc.UserAgent.Prepend("metalforge-baremetal-operator")
	return sc, nil
}

// versionDocument is Ironic's answer to GET /v1/.
type versionDocument struct {
	Version struct {
		MinVersion string `json:"min_version"`
		Version    string `json:"version"`
	} `json:"version"`
}

// discover reads the supported microversions once. Errors reaching Ironic wrap ErrUnavailable.
func discover(ctx context.Context, sc *gophercloud.ServiceClient) (Features, error) {
	var doc versionDocument
	_, err := sc.Request(ctx, http.MethodGet, sc.Endpoint, &gophercloud.RequestOpts{
		JSONResponse: &doc, OkCodes: []int{200},
	})
	if err != nil {
		return Features{}, classifyError(err, "reading Ironic's API versions")
	}
	if doc.Version.Version == "" || doc.Version.MinVersion == "" {
		return Features{}, fmt.Errorf("reading Ironic's API versions at %s: no microversion range in the answer", sc.Endpoint)
	}
	minMaj, minMin, err := utils.ParseMicroversion(doc.Version.MinVersion)
	if err != nil {
		return Features{}, fmt.Errorf("parsing Ironic's minimum microversion %q: %w", doc.Version.MinVersion, err)
	}
	maxMaj, maxMin, err := utils.ParseMicroversion(doc.Version.Version)
	if err != nil {
		return Features{}, fmt.Errorf("parsing Ironic's maximum microversion %q: %w", doc.Version.Version, err)
	}
	return chooseFeatures(minMaj, minMin, maxMaj, maxMin)
}

// session is the negotiated client and what its microversion allows.
type session struct {
	sc       *gophercloud.ServiceClient
	features Features
}

// session returns the client with the negotiated microversion, negotiating on first use. The
// result is kept for the life of the provisioner: versions are not re-discovered per call (metal3
// #3290). A failed negotiation is retried by the next call.
func (p *Provisioner) session(ctx context.Context) (*session, error) {
	if s := p.sess.Load(); s != nil {
		return s, nil
	}
	p.negotiate.Lock()
	defer p.negotiate.Unlock()
	if s := p.sess.Load(); s != nil {
		return s, nil
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.ClientTimeout)
	defer cancel()
	f, err := discover(withOp(ctx, "discover"), p.base)
	if err != nil {
		if errors.Is(err, ErrIronicTooOld) {
			// Not a host problem, and waiting helps once Ironic is upgraded: hosts wait.
			err = fmt.Errorf("%w: Ironic at %s: %w", provisioner.ErrUnavailable, p.cfg.Endpoint, err)
		}
		return nil, err
	}
	sc := *p.base
	sc.Microversion = f.Microversion
	s := &session{sc: &sc, features: f}
	p.sess.Store(s)
	p.logger(ctx).Info("Negotiated the Ironic API microversion", "endpoint", statustext.Redact(p.cfg.Endpoint),
		"microversion", f.Microversion, "max", f.MaxVersion)
	return s, nil
}

// Negotiate contacts Ironic and fixes the microversion now instead of on first use; main may call
// it to fail fast or to log the result.
func (p *Provisioner) Negotiate(ctx context.Context) (Features, error) {
	s, err := p.session(ctx)
	if err != nil {
		return Features{}, err
	}
	return s.features, nil
}
