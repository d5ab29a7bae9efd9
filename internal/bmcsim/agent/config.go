package agent

import (
	"fmt"
	"log/slog"
	"net/url"
	"time"
)

// Config tunes the simulated agents of one bmcsim process. Zero values take the defaults below,
// which are fast: the simulator exists for tests and benchmarks.
type Config struct {
	// APIURL is Ironic's API (e.g. http://127.0.0.1:6385), used when the boot image carries no
	// ipa-api-url and for network boot.
	APIURL string
	// WriteSpeedMBps is the simulated image write speed (default 1000 MB/s).
	WriteSpeedMBps float64
	// HeartbeatInterval is the time between heartbeats (default 2s), ± 20 % so that agents booted
	// together do not heartbeat in step. Real IPA heartbeats every 0.3–0.6 × heartbeat_timeout.
	HeartbeatInterval time.Duration
	// MinHeartbeatInterval is, as IPA's min_heartbeat_interval, the least time between two
	// heartbeats when an async command ends (the agent then heartbeats early) and the retry delay
	// after a failed heartbeat (one to two times it). Default: 5 s as in IPA, but at most a quarter
	// of HeartbeatInterval, so that tests with short heartbeats stay quick.
	MinHeartbeatInterval time.Duration
	// Listen is where the agent API of all agents listens (default 127.0.0.1:0); each agent has its
	// own path prefix, which is part of the callback_url it sends to Ironic.
	Listen string
	// BootDelay is the time from power-on to the agent's first lookup (default 100ms).
	BootDelay time.Duration
	// LookupInterval is the wait after the first failed lookup (default 1s). Like
	// ironic-python-agent, the agent backs off: each further failure waits 1.5 times longer, with
	// jitter, up to LookupMaxInterval (default 30s). Without it a rack of agents that Ironic cannot
	// answer yet (overloaded, or the node not waiting for an agent) keeps Ironic busier still.
	LookupInterval    time.Duration
	LookupMaxInterval time.Duration
	// EraseDuration is how long erase_devices takes per disk (default 200ms).
	EraseDuration time.Duration
	// StepDuration is how long other simulated in-band steps take (burn-in, custom deploy steps,
	// bootloader installation; default 100ms).
	StepDuration time.Duration
	// VerifyLimit: images up to this many bytes are downloaded and their checksum verified, as the
	// real agent does; larger ones are only sized with HEAD (default 64 MiB; negative: never).
	VerifyLimit int64
	// AgentVersion is reported in heartbeats (default 11.1.0).
	AgentVersion string
	// HTTPTimeout bounds each call to Ironic and each image request (default 2m). Generous on
	// purpose: Ironic hands out the agent token in one lookup answer only and masks it after, so an
	// agent that gives up on a slow answer (an overloaded Ironic whose sqlite writers wait up to
	// [database] sqlite_max_wait_for_retry, 60 s in hack/ironic-up.sh) never gets its token and the
	// node waits for its inspection or deploy timeout.
	HTTPTimeout time.Duration
	// AutoTLS serves the agent API over HTTPS with a self-signed certificate, sent to Ironic in
	// every heartbeat (agent_verify_ca), as ironic-python-agent does by default (enable_auto_tls).
	// Ironic refuses plain-HTTP callback URLs unless [agent] require_tls is false, which
	// hack/ironic-up.sh sets; the cluster-baremetal-operator's Ironic keeps Ironic's default.
	AutoTLS bool
	// Logger receives the agents' events (default: discard).
	Logger *slog.Logger
}

func (c *Config) setDefaults() error {
	if c.APIURL != "" {
		if _, err := url.Parse(c.APIURL); err != nil {
			return fmt.Errorf("agent config APIURL: %w", err)
		}
	}
	if c.WriteSpeedMBps <= 0 {
		c.WriteSpeedMBps = 1000
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = 2 * time.Second
	}
	if c.MinHeartbeatInterval <= 0 {
		c.MinHeartbeatInterval = min(5*time.Second, c.HeartbeatInterval/4)
	}
	if c.Listen == "" {
		c.Listen = "127.0.0.1:0"
	}
	if c.BootDelay <= 0 {
		c.BootDelay = 100 * time.Millisecond
	}
	if c.LookupInterval <= 0 {
		c.LookupInterval = time.Second
	}
	if c.LookupMaxInterval <= 0 {
		c.LookupMaxInterval = 30 * time.Second
	}
	c.LookupMaxInterval = max(c.LookupMaxInterval, c.LookupInterval)
	if c.EraseDuration <= 0 {
		c.EraseDuration = 200 * time.Millisecond
	}
	if c.StepDuration <= 0 {
		c.StepDuration = 100 * time.Millisecond
	}
	if c.VerifyLimit == 0 {
		c.VerifyLimit = 64 << 20
	}
	if c.AgentVersion == "" {
		c.AgentVersion = "11.1.0"
	}
	if c.HTTPTimeout <= 0 {
		c.HTTPTimeout = 2 * time.Minute
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}
