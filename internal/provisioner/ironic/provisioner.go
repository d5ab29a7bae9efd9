package ironic

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/gophercloud/gophercloud/v2"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metalforge/metalforge/internal/provisioner"
)

// Provisioner drives Ironic. It is safe for concurrent use by many reconciles; it keeps no state
// about hosts that Ironic does not also keep, except small caches that only save requests.
type Provisioner struct {
	cfg   Config
	log   logr.Logger
	base  *gophercloud.ServiceClient // without microversion, for discovery
	calls *callCounter

	negotiate sync.Mutex
	sess      atomic.Pointer[session]

	nodes    nodeCache
	watch    watchState
	capacity capacityCache
	// appliedCreds remembers, per node, a fingerprint of the credentials last written to its
	// driver_info, so a registration that keeps failing with the same credentials is reported
	// instead of retried in a loop (Ironic masks passwords, so they cannot be compared there).
	appliedCreds sync.Map
	// powerRequests remembers the last power change asked per node, to tell "still to do" from
	// "Ironic tried and failed" when the node shows neither the state nor a pending target.
	powerRequests sync.Map
	// restartedManage marks nodes whose failed verification was restarted (RestartOnFailure), so
	// that its failing again is reported rather than restarted on every poll.
	restartedManage sync.Map
	// portsChecked remembers, per node, the boot MAC whose port this provisioner created or found
	// on it, so that registrations after the first do not look the port up again.
	portsChecked sync.Map
	// failedStarts remembers fingerprints written to a node whose operation was then not accepted
	// (see finished).
	failedStarts sync.Map

	// jitter returns a number in [0, 1); a seam for tests.
	jitter func() float64
}

var _ provisioner.Provisioner = (*Provisioner)(nil)

// New returns a provisioner for the Ironic in cfg. It does not contact Ironic: the microversion is
// negotiated on first use (or by Negotiate), so the operator starts while Ironic is still coming up.
func New(cfg Config, log logr.Logger) (*Provisioner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("ironic provisioner configuration: %w", err)
	}
	calls := &callCounter{}
	base, err := newServiceClient(cfg, calls)
	if err != nil {
		return nil, err
	}
	p := &Provisioner{cfg: cfg, log: log, base: base, calls: calls, jitter: rand.Float64}
	// Without the watcher a cached read must never answer a poll: keep it well under the shortest
	// requeue (with it, see readMaxAge).
	p.nodes.ttl = min(cfg.NodeCacheTTL, cfg.ShortDelay/2)
	p.watch.changes = make(chan types.NamespacedName, changesBuffer)
	p.capacity.ttl = cfg.CapacityCacheTTL
	return p, nil
}

// Calls returns how many requests each operation sent to Ironic so far (for tests and benchmarks;
// the same counts are in the metalforge_ironic_requests_total metric).
func (p *Provisioner) Calls() map[string]int64 { return p.calls.snapshot() }

// Config returns the configuration in use.
func (p *Provisioner) Config() Config { return p.cfg }

// Result helpers: every requeue gets up to cfg.Jitter more, so hosts started together spread out.

func (p *Provisioner) after(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return d + time.Duration(float64(d)*p.cfg.Jitter*p.jitter())
}

// short is a requeue for quick operations (manage, provide, power, busy).
func (p *Provisioner) short() provisioner.Result {
	return provisioner.Working(p.after(p.cfg.ShortDelay))
}

// long is a requeue for long operations (inspect, clean, deploy, service).
func (p *Provisioner) long() provisioner.Result { return provisioner.Working(p.after(p.cfg.LongDelay)) }
