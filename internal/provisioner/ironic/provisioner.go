package ironic

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/metalforge/metalforge/internal/provisioner"
	"github.com/metalforge/metalforge/internal/provisioner/ironic/nodewatch"
)

// Provisioner drives Ironic. It is safe for concurrent use by many reconciles; it keeps no state
// about hosts that Ironic does not also keep, except small caches that only save requests and the
// per-node memory in nodeMemory.
type Provisioner struct {
	cfg Config
	// log is for what runs outside a host's reconcile (the watcher's rounds) and for calls whose
	// context carries no logger; see logger.
	log   logr.Logger
	base  *gophercloud.ServiceClient // without microversion, for discovery
	calls *callCounter

	negotiate sync.Mutex
	sess      atomic.Pointer[session]

	// watch is the node watcher and node cache (package nodewatch).
	watch    nodeWatch
	capacity capacityCache
	memory   nodeMemory

	// now is the clock (time.Now); jitter returns a number in [0, 1). Both are seams for tests,
	// set before the provisioner is used.
	now    func() time.Time
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
	p := &Provisioner{cfg: cfg, log: log, base: base, calls: calls, now: time.Now, jitter: rand.Float64}
	p.watch = nodewatch.New(nodewatch.Config{
		List:       p.listAll,
		OnList:     func(list []nodes.Node, at time.Time) { p.capacity.set(busyCount(list), at) },
		HostOf:     hostOfNode,
		ShortDelay: cfg.ShortDelay,
		LongDelay:  cfg.LongDelay,
		// Without the watcher a cached read must never answer a poll: keep it well under the
		// shortest requeue (with it, see nodewatch's readMaxAge).
		ReadTTL: min(cfg.NodeCacheTTL, cfg.ShortDelay/2),
		Now:     func() time.Time { return p.now() },
		Log:     log,
	})
	p.capacity.ttl = cfg.CapacityCacheTTL
	p.capacity.now = func() time.Time { return p.now() }
	return p, nil
}

// logger is the logger of the call's context, named "ironic": the host controller puts its
// logger there with the host's keys (controller-runtime's namespace, name and reconcileID, and the
// provisioning state), so every provisioner line says which host it is about. Calls whose context
// has no logger (tests, benchmarks, main) log through p.log. Keys of the provisioner's own stay
// clear of the controller's (name, namespace, state: the node's are nodeName, provisionState).
func (p *Provisioner) logger(ctx context.Context) logr.Logger {
	if l, err := logr.FromContext(ctx); err == nil {
		return l.WithName("ironic")
	}
	return p.log
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
