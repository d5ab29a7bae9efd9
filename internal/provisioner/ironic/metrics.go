package ironic

import (
	"context"
	"net/http"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// requestsTotal counts every request to Ironic by provisioner operation, so that benchmarks can
// report Ironic calls per host from the operator's own /metrics.
var requestsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "metalforge_ironic_requests_total",
	Help: "Requests the Ironic provisioner sent to Ironic, by provisioner operation, HTTP method and status class.",
}, []string{"operation", "method", "code"})

// lostAgentAborts counts the waits aborted because the agent took its token and went silent, or
// runs with a token Ironic wiped (lostagent.go), by the node's provision state: how often agents
// get lost, which Ironic itself only shows as callback timeouts half an hour later.
var lostAgentAborts = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "metalforge_ironic_lost_agent_aborts_total",
	Help: "Clean, deploy and service waits the Ironic provisioner aborted because the agent took its token and stopped heartbeating, or runs with a token Ironic wiped, by provision state.",
}, []string{"state"})

// orphanedAgentPowerOffs counts the servers powered off before a cleaning because they still ran
// an agent whose token Ironic had wiped (lostagent.go, orphanedAgent).
var orphanedAgentPowerOffs = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "metalforge_ironic_orphaned_agent_power_offs_total",
	Help: "Servers the Ironic provisioner powered off before a cleaning because they still ran an agent whose token Ironic had wiped after a failure.",
})

// stalledNodeDeletions counts the nodes deleted because Ironic left them in a working state with no
// conductor (stall.go), by that state.
var stalledNodeDeletions = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "metalforge_ironic_stalled_node_deletions_total",
	Help: "Nodes the Ironic provisioner deleted (and registered again) because Ironic left them in a working state with no conductor, by provision state.",
}, []string{"state"})

func init() {
	metrics.Registry.MustRegister(requestsTotal, lostAgentAborts, orphanedAgentPowerOffs, stalledNodeDeletions)
}

type opKey struct{}

// withOp labels the requests made with ctx by the provisioner operation that makes them.
func withOp(ctx context.Context, op string) context.Context {
	return context.WithValue(ctx, opKey{}, op)
}

func opOf(ctx context.Context) string {
	if op, ok := ctx.Value(opKey{}).(string); ok {
		return op
	}
	return "other"
}

// callCounter counts requests per operation for this provisioner (tests and benchmarks read it
// through Calls) and in the process-wide metric.
type callCounter struct {
	mu     sync.Mutex
	counts map[string]int64
}

func (c *callCounter) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := next.RoundTrip(req)
		code := "error"
		if resp != nil {
			code = strconv.Itoa(resp.StatusCode/100) + "xx"
		}
		op := opOf(req.Context())
		requestsTotal.WithLabelValues(op, req.Method, code).Inc()
		c.mu.Lock()
		if c.counts == nil {
			c.counts = map[string]int64{}
		}
		c.counts[op]++
		c.mu.Unlock()
		return resp, err
	})
}

func (c *callCounter) snapshot() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int64, len(c.counts))
	for k, v := range c.counts {
		out[k] = v
	}
	return out
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
