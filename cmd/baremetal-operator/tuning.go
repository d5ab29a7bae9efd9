package main

import (
	"flag"
	"time"

	"github.com/metalforge/metalforge/internal/controller/host"
	"github.com/metalforge/metalforge/internal/provisioner/ironic"
)

// tuningOptions shorten the operator's waits for simulated hardware (end-to-end tests, benchmarks,
// the demo), where Ironic finishes in seconds what takes minutes on real servers. The defaults are
// metal3's production values.
type tuningOptions struct {
	errorBackoff     time.Duration
	powerPoll        time.Duration
	unavailableDelay time.Duration
	ironicShort      time.Duration
	ironicLong       time.Duration
	ironicConns      int
	agentLostAfter   time.Duration
	stalledNodeAfter time.Duration
}

func (t *tuningOptions) bindFlags(fs *flag.FlagSet) {
	def, idef := host.DefaultConfig(), ironic.DefaultConfig()
	fs.DurationVar(&t.errorBackoff, "error-backoff-base", time.Minute, "Retry delay after the first error of a host; it doubles per consecutive error (minus up to half, at random).")
	fs.DurationVar(&t.powerPoll, "power-poll-interval", def.PowerPoll, "How often a host in a steady state checks its power (a quarter of it while a power change runs).")
	fs.DurationVar(&t.unavailableDelay, "provisioner-unavailable-delay", def.UnavailableDelay, "How often a host looks again while the provisioner is unavailable.")
	fs.DurationVar(&t.ironicShort, "ironic-short-poll", idef.ShortDelay, "Ironic provisioner: poll interval of quick operations (manage, provide, power, busy nodes).")
	fs.DurationVar(&t.ironicLong, "ironic-long-poll", idef.LongDelay, "Ironic provisioner: poll interval of long operations (inspect, clean, deploy, service).")
	fs.DurationVar(&t.agentLostAfter, "ironic-agent-lost-after", idef.AgentLostAfter, "Ironic provisioner: abort and retry a clean, deploy or service wait whose agent took its token and has not heartbeat for this long (0: leave it to Ironic's callback timeout).")
	fs.DurationVar(&t.stalledNodeAfter, "ironic-stalled-node-after", idef.StalledNodeAfter, "Ironic provisioner: delete a node Ironic has left in a working state (deploying, cleaning, ...) with no conductor holding it for this long, and register the host again (0: only say so on the host).")
	fs.IntVar(&t.ironicConns, "ironic-max-connections", idef.MaxConnections, "Ironic provisioner: connections to Ironic, so requests in flight, at most (Ironic's single-process API server works on ten at once).")
}

func (t *tuningOptions) applyHost(c *host.Config) {
	c.Backoff = host.ExponentialBackoff(t.errorBackoff)
	c.PowerPoll = t.powerPoll
	c.UnavailableDelay = t.unavailableDelay
}

func (t *tuningOptions) applyIronic(c *ironic.Config) {
	c.ShortDelay, c.LongDelay = t.ironicShort, t.ironicLong
	c.MaxConnections = t.ironicConns
	c.AgentLostAfter = t.agentLostAfter
	c.StalledNodeAfter = t.stalledNodeAfter
}
