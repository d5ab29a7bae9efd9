package ironicenv

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/metalforge/metalforge/internal/bmcsim"
	"github.com/metalforge/metalforge/internal/bmcsim/agent"
	"github.com/metalforge/metalforge/internal/bmcsim/config"
	"github.com/metalforge/metalforge/internal/bmcsim/control"
	"github.com/metalforge/metalforge/internal/bmcsim/fault"
)

// FastAgent is an agent configuration with short timings (in-band steps of milliseconds, 500 ms
// heartbeats, a near-instant write speed): Ironic, not the simulated hardware, sets the pace.
func FastAgent(ironicURL string) agent.Config {
	return agent.Config{
		// Only for images without ipa-api-url: each instance's deploy ISO carries its own.
		APIURL:            ironicURL,
		HeartbeatInterval: 500 * time.Millisecond,
		BootDelay:         20 * time.Millisecond,
		LookupInterval:    200 * time.Millisecond,
		EraseDuration:     20 * time.Millisecond,
		StepDuration:      20 * time.Millisecond,
		WriteSpeedMBps:    10000,
	}
}

// FastConfig is a bmcsim configuration for n servers that boot in 100 ms and write at 10 GB/s.
func FastConfig(n int) config.Config {
	cfg := config.Default()
	cfg.Hosts = n
	cfg.BootTime = config.Duration{Duration: 100 * time.Millisecond}
	cfg.WriteSpeedMBps = 10000
	return cfg
}

// SimOptions configure StartSim.
type SimOptions struct {
	// Config is the simulation (FastConfig when Hosts is 0).
	Config config.Config
	// Agent configures the simulated agents (FastAgent(""), when zero).
	Agent agent.Config
	// NoControl: no control endpoint (by default it listens on a free loopback port).
	NoControl bool
	// Logger receives bmcsim's log (discarded when nil).
	Logger *slog.Logger
}

// Sim is bmcsim running in this process with its agents.
type Sim struct {
	*bmcsim.Sim
	Runner  *agent.Runner
	Control Control
}

// StartSim starts bmcsim in process with the agent runner.
func StartSim(o SimOptions) (*Sim, error) {
	if o.Config.Hosts == 0 {
		o.Config = FastConfig(1)
	}
	if o.Agent == (agent.Config{}) {
		o.Agent = FastAgent("")
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if o.Agent.Logger == nil {
		o.Agent.Logger = log.With("component", "agent")
	}
	runner, err := agent.NewRunner(o.Agent)
	if err != nil {
		return nil, fmt.Errorf("starting the simulated agents: %w", err)
	}
	opts := bmcsim.Options{Config: o.Config, Runner: runner, Logger: log.With("component", "bmcsim")}
	if !o.NoControl {
		opts.ControlListen = "127.0.0.1:0"
	}
	sim, err := bmcsim.Start(opts)
	if err != nil {
		runner.Close()
		return nil, fmt.Errorf("starting bmcsim: %w", err)
	}
	return &Sim{Sim: sim, Runner: runner, Control: Control{URL: sim.ControlURL()}}, nil
}

// Close stops bmcsim and its agents.
func (s *Sim) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := s.Sim.Close(ctx)
	if rerr := s.Runner.Close(); err == nil {
		err = rerr
	}
	return err
}

// Control is a client of bmcsim's control API (docs/bmcsim.md): fault injection and server state.
type Control struct {
	// URL is the control endpoint, e.g. http://127.0.0.1:8001.
	URL string
}

// SetFaults replaces a server's own faults.
func (c Control) SetFaults(server string, set fault.Set) error {
	return c.do(http.MethodPut, "/v1/servers/"+url.PathEscape(server)+"/faults", set, nil)
}

// ClearFaults clears a server's own faults.
func (c Control) ClearFaults(server string) error {
	return c.do(http.MethodDelete, "/v1/servers/"+url.PathEscape(server)+"/faults", nil, nil)
}

// SetGlobalFaults replaces the faults every server has.
func (c Control) SetGlobalFaults(set fault.Set) error {
	return c.do(http.MethodPut, "/v1/faults", set, nil)
}

// ClearAllFaults clears every fault, global and per server.
func (c Control) ClearAllFaults() error { return c.do(http.MethodDelete, "/v1/faults", nil, nil) }

// FactoryReset returns a server to the state bmcsim created it in (off, BIOS defaults, factory
// firmware, blank disk), keeping its life counters.
func (c Control) FactoryReset(server string) error {
	return c.do(http.MethodPost, "/v1/servers/"+url.PathEscape(server)+"/factory-reset", nil, nil)
}

// Server reads one server's whole state.
func (c Control) Server(name string) (control.Detail, error) {
	var d control.Detail
	err := c.do(http.MethodGet, "/v1/servers/"+url.PathEscape(name), nil, &d)
	return d, err
}

// Servers lists every server.
func (c Control) Servers() ([]control.Summary, error) {
	var s []control.Summary
	err := c.do(http.MethodGet, "/v1/servers", nil, &s)
	return s, err
}

func (c Control) do(method, path string, body, out any) error {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		r = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, c.URL+path, r)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("bmcsim control %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return fmt.Errorf("bmcsim control %s %s: HTTP %d: %s", method, path, resp.StatusCode, bytes.TrimSpace(b))
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("bmcsim control %s %s: %w", method, path, err)
		}
	}
	return nil
}
