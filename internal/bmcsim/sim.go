// Package bmcsim runs a simulated data center: many Redfish BMCs on one loopback listener (see the
// redfish package for how servers share it), each server's in-band agent through a Runner, fault
// injection through a control endpoint, and optional persistence of every server's state.
//
// Sub-packages: config (the simulation's description), server (the server model), redfish (the
// Redfish API), control (the control endpoint), fault (fault injection), agent (the simulated
// ironic-python-agent).
package bmcsim

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/metalforge/metalforge/internal/bmcsim/config"
	"github.com/metalforge/metalforge/internal/bmcsim/control"
	"github.com/metalforge/metalforge/internal/bmcsim/redfish"
	"github.com/metalforge/metalforge/internal/bmcsim/server"
)

// Options configure a simulation.
type Options struct {
	Config config.Config
	// Listen is the Redfish listen address (default 127.0.0.1:0, a free port).
	Listen string
	// TLS serves HTTPS with a generated self-signed certificate.
	TLS bool
	// StateFile, when set, is loaded at start and saved on every change and at Close.
	StateFile string
	// ControlListen, when set, serves the control endpoint there.
	ControlListen string
	// Runner starts the agents; nil runs servers without agents.
	Runner server.Runner
	Logger *slog.Logger
	// HTTPClient fetches images for the BMCs (tests inject one); see server.Options.
	HTTPClient *http.Client
}

// Sim is a running simulation.
type Sim struct {
	Fleet   *server.Fleet
	Redfish *redfish.Service

	opts        Options
	log         *slog.Logger
	ln          net.Listener
	controlLn   net.Listener
	httpSrv     *http.Server
	controlSrv  *http.Server
	certPEM     []byte
	stopPersist context.CancelFunc
	persistDone chan error
}

// Start builds the fleet, restores saved state and starts serving.
func Start(opts Options) (*Sim, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.Listen == "" {
		opts.Listen = "127.0.0.1:0"
	}
	fleet, err := server.New(opts.Config, server.Options{Runner: opts.Runner, Logger: log, HTTPClient: opts.HTTPClient})
	if err != nil {
		return nil, err
	}
	if opts.StateFile != "" {
		n, err := fleet.Load(opts.StateFile)
		if err != nil {
			return nil, err
		}
		if n > 0 {
			log.Info("Restored saved server state", "servers", n, "path", opts.StateFile)
		}
	}
	sim := &Sim{Fleet: fleet, opts: opts, log: log}
	sim.Redfish = redfish.New(fleet, redfish.Options{Latency: opts.Config.RedfishLatency.Duration, Logger: log})

	ln, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		return nil, fmt.Errorf("listening for Redfish on %s: %w", opts.Listen, err)
	}
	if opts.TLS {
		cert, pemBytes, err := selfSigned(ln.Addr().(*net.TCPAddr).IP)
		if err != nil {
			ln.Close()
			return nil, err
		}
		sim.certPEM = pemBytes
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}})
	}
	sim.ln = ln
	sim.httpSrv = &http.Server{
		Handler:           sim.Redfish,
		ReadHeaderTimeout: 30 * time.Second,
		// Idle connections stay open a long time: sushy keeps one per BMC and a server closing it
		// just as the client reuses it shows up as RemoteDisconnected in Ironic.
		IdleTimeout: time.Hour,
		ErrorLog:    slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	go func() {
		if err := sim.httpSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("Redfish server stopped", "error", err)
		}
	}()

	if opts.ControlListen != "" {
		cln, err := net.Listen("tcp", opts.ControlListen)
		if err != nil {
			sim.httpSrv.Close()
			return nil, fmt.Errorf("listening for the control endpoint on %s: %w", opts.ControlListen, err)
		}
		sim.controlLn = cln
		sim.controlSrv = &http.Server{Handler: control.New(fleet), ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := sim.controlSrv.Serve(cln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("Control server stopped", "error", err)
			}
		}()
	}

	if opts.StateFile != "" {
		ctx, cancel := context.WithCancel(context.Background())
		sim.stopPersist = cancel
		sim.persistDone = make(chan error, 1)
		go func() { sim.persistDone <- fleet.Persist(ctx, opts.StateFile, 200*time.Millisecond) }()
	}
	fleet.Resume()
	return sim, nil
}

// Close stops serving, stops the agents and saves the state a last time.
func (s *Sim) Close(ctx context.Context) error {
	var errs []error
	if err := s.httpSrv.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("stopping the Redfish server: %w", err))
		s.httpSrv.Close()
	}
	if s.controlSrv != nil {
		if err := s.controlSrv.Shutdown(ctx); err != nil {
			s.controlSrv.Close()
		}
	}
	s.Fleet.Close()
	if s.stopPersist != nil {
		s.stopPersist()
		if err := <-s.persistDone; err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// BaseURL is the Redfish endpoint: http(s)://host:port.
func (s *Sim) BaseURL() string {
	scheme := "http"
	if s.opts.TLS {
		scheme = "https"
	}
	return scheme + "://" + s.hostPort()
}

// ControlURL is the control endpoint's base URL ("" without one).
func (s *Sim) ControlURL() string {
	if s.controlLn == nil {
		return ""
	}
	return "http://" + s.controlLn.Addr().String()
}

// CertPEM is the generated certificate when serving TLS.
func (s *Sim) CertPEM() []byte { return s.certPEM }

// hostPort is the listener's address, with an unspecified IP (0.0.0.0, ::) shown as loopback.
func (s *Sim) hostPort() string {
	a := s.ln.Addr().(*net.TCPAddr)
	ip := a.IP
	if ip.IsUnspecified() {
		ip = net.IPv4(127, 0, 0, 1)
	}
	return net.JoinHostPort(ip.String(), strconv.Itoa(a.Port))
}
