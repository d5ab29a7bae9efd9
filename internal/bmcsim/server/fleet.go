package server

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/metalforge/metalforge/internal/bmcsim/config"
	"github.com/metalforge/metalforge/internal/bmcsim/fault"
)

// Options wires a fleet to the rest of bmcsim.
type Options struct {
	// Runner starts and stops agents; nil means servers boot into nothing.
	Runner Runner
	Logger *slog.Logger
	// HTTPClient fetches virtual media and firmware images. The default skips certificate
	// verification, as BMCs fetching from Ironic's self-signed image server commonly must.
	HTTPClient *http.Client
	// Now is the clock for task times; time.Now by default.
	Now func() time.Time
}

// Fleet is every server of one bmcsim process.
type Fleet struct {
	cfg     config.Config
	Servers []*Server
	byName  map[string]*Server
	byID    map[string]*Server
	Faults  *fault.Injector

	runner       Runner
	log          *slog.Logger
	fetch        *http.Client
	now          func() time.Time
	biosDefaults map[string]any

	workers tracker
	closed  atomic.Bool
	dirty   chan struct{}
}

// New creates cfg.Hosts servers, all powered off.
func New(cfg config.Config, opts Options) (*Fleet, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid bmcsim configuration: %w", err)
	}
	f := &Fleet{
		cfg:    cfg,
		byName: make(map[string]*Server, cfg.Hosts),
		byID:   make(map[string]*Server, cfg.Hosts),
		Faults: fault.NewInjector(cfg.Faults),
		runner: opts.Runner,
		log:    opts.Logger,
		fetch:  opts.HTTPClient,
		now:    opts.Now,
		dirty:  make(chan struct{}, 1),
	}
	if f.log == nil {
		f.log = slog.New(slog.DiscardHandler)
	}
	if f.now == nil {
		f.now = time.Now
	}
	if f.fetch == nil {
		f.fetch = &http.Client{
			Timeout: 10 * time.Minute,
			Transport: &http.Transport{
				Proxy:               http.ProxyFromEnvironment,
				DialContext:         (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
				TLSClientConfig:     &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // see Options.HTTPClient
				MaxIdleConnsPerHost: 4,
				IdleConnTimeout:     30 * time.Second,
			},
		}
	}
	f.biosDefaults = biosDefaults(&f.cfg.Profile)
	f.Servers = make([]*Server, cfg.Hosts)
	for i := range cfg.Hosts {
		s := newServer(f, i, cfg.NamePrefix+strconv.Itoa(i))
		f.Servers[i] = s
		f.byName[s.Name] = s
		f.byID[s.id] = s
	}
	for name, set := range cfg.ServerFaults {
		if f.byName[name] == nil {
			return nil, fmt.Errorf("serverFaults: no server is named %q", name)
		}
		if err := f.Faults.SetServer(name, set); err != nil {
			return nil, fmt.Errorf("serverFaults[%s]: %w", name, err)
		}
	}
	return f, nil
}

// Config returns the configuration the fleet was built from.
func (f *Fleet) Config() *config.Config { return &f.cfg }

// ByName finds a server by name (which is also its BMC user name).
func (f *Fleet) ByName(name string) *Server { return f.byName[name] }

// ByID finds a server by Redfish system id.
func (f *Fleet) ByID(id string) *Server { return f.byID[id] }

// Lookup finds a server by name or system id.
func (f *Fleet) Lookup(key string) *Server {
	if s := f.byName[key]; s != nil {
		return s
	}
	return f.byID[key]
}

// Changed signals (coalesced) that some server's persistent state changed.
func (f *Fleet) Changed() <-chan struct{} { return f.dirty }

func (f *Fleet) markDirty() {
	select {
	case f.dirty <- struct{}{}:
	default:
	}
}

func (f *Fleet) isClosed() bool { return f.closed.Load() }

// Close stops every running agent and waits for background work (agent starts, image downloads).
// Server state is kept: a fleet loaded from saved state resumes the agents.
func (f *Fleet) Close() {
	f.closed.Store(true)
	for _, s := range f.Servers {
		s.enqueue(runOp{stop: true, gen: math.MaxUint64}) // whatever boot started the agent
	}
	f.workers.Wait()
}

// Quiesce waits until no agent start or stop and no download is in flight. Tests use it.
func (f *Fleet) Quiesce() { f.workers.Wait() }

// tracker counts background goroutines. Unlike sync.WaitGroup it allows new work to start while
// someone waits (an agent may power its server off while bmcsim shuts down).
type tracker struct {
	mu   sync.Mutex
	cond *sync.Cond
	n    int
}

func (t *tracker) Add(d int) {
	t.mu.Lock()
	t.n += d
	if t.n == 0 && t.cond != nil {
		t.cond.Broadcast()
	}
	t.mu.Unlock()
}

func (t *tracker) Done() { t.Add(-1) }

func (t *tracker) Go(fn func()) {
	t.Add(1)
	go func() {
		defer t.Done()
		fn()
	}()
}

func (t *tracker) Wait() {
	t.mu.Lock()
	if t.cond == nil {
		t.cond = sync.NewCond(&t.mu)
	}
	for t.n > 0 {
		t.cond.Wait()
	}
	t.mu.Unlock()
}
