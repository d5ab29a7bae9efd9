package host

import (
	"context"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

// Metric names follow metal3's where metal3 has one, so dashboards carry over.
var (
	metricReconciles = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "metal3_reconcile_total", Help: "Reconciles of BareMetalHosts.",
	})
	metricReconcileErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "metal3_reconcile_error_total", Help: "Reconciles of BareMetalHosts that returned an error.",
	})
	metricHostErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "metal3_host_error_total", Help: "Host errors recorded in status, by errorType.",
	}, []string{"errorType"})
	metricStateChanges = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "metal3_provisioning_state_change_total", Help: "Provisioning state changes.",
	}, []string{"from", "to"})
	metricProvisionerUnavailable = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "metal3_provisioner_not_ready_total", Help: "Times a host waited because the provisioner was not available.",
	})
	metricDeleteDelayed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "metal3_delete_delayed_for_detached_total", Help: "Times deletion waited for a detached annotation with deleteAction delay.",
	})
	metricWaitingForImage = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "metal3_waiting_for_preprov_image_total", Help: "Reconciles that ended with the host waiting for its PreprovisioningImage.",
	})
	metricServicingFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "metal3_servicing_failures_total", Help: "Live updates (servicing) that failed.",
	})
	metricServicingDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "metal3_operation_service_duration_seconds",
		Help:    "Duration of live updates (servicing), from operationalStatus servicing to OK.",
		Buckets: prometheus.ExponentialBuckets(5, 2, 12),
	})
	// operationDuration: metal3_operation_{register,inspect,provision,deprovision}_duration_seconds.
	operationDuration = map[metal3.ProvisioningState]prometheus.Histogram{}
	hostsPerState     = &stateCollector{desc: prometheus.NewDesc("metal3_hosts",
		"BareMetalHosts by provisioning state.", []string{"state"}, nil),
		servicing: prometheus.NewDesc("metal3_hosts_servicing", "BareMetalHosts in a live update (operationalStatus servicing).", nil, nil)}
)

func init() {
	for state, op := range map[metal3.ProvisioningState]string{
		metal3.StateRegistering: "register", metal3.StateInspecting: "inspect",
		metal3.StateProvisioning: "provision", metal3.StateDeprovisioning: "deprovision",
	} {
		operationDuration[state] = prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "metal3_operation_" + op + "_duration_seconds",
			Help:    "Duration of the " + op + " operation (from operationHistory).",
			Buckets: prometheus.ExponentialBuckets(0.5, 2, 14),
		})
		metrics.Registry.MustRegister(operationDuration[state])
	}
	metrics.Registry.MustRegister(metricReconciles, metricReconcileErrors, metricHostErrors, metricStateChanges,
		metricProvisionerUnavailable, metricDeleteDelayed, metricWaitingForImage, metricServicingFailures, metricServicingDuration, hostsPerState)
}

// recordMetrics counts what a reconcile did, once its writes succeeded.
func recordMetrics(fx *effects) {
	for _, t := range fx.transitions {
		metricStateChanges.WithLabelValues(string(t[0]), string(t[1])).Inc()
	}
	for _, op := range fx.finishedOps {
		if h, ok := operationDuration[op.state]; ok {
			h.Observe(op.duration.Seconds())
		}
	}
	for _, t := range fx.hostErrors {
		metricHostErrors.WithLabelValues(string(t)).Inc()
	}
	if fx.deleteDelayed {
		metricDeleteDelayed.Inc()
	}
	if fx.waitedForImage {
		metricWaitingForImage.Inc()
	}
	if fx.servicingFailed {
		metricServicingFailures.Inc()
	}
	if fx.serviced != nil {
		metricServicingDuration.Observe(fx.serviced.Seconds())
	}
}

// stateCollector counts hosts per state from the manager's cache when scraped, so no bookkeeping
// can drift. The newest manager's cache wins (tests run several in one process).
type stateCollector struct {
	desc      *prometheus.Desc
	servicing *prometheus.Desc
	mu        sync.Mutex
	reader    client.Reader
}

func (c *stateCollector) use(r client.Reader) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reader = r
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc; ch <- c.servicing }

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	r := c.reader
	c.mu.Unlock()
	if r == nil {
		return
	}
	var hosts metal3.BareMetalHostList
	// Read-only counting: no deep copy of every cached host on each scrape.
	if err := r.List(context.Background(), &hosts, client.UnsafeDisableDeepCopy); err != nil {
		return
	}
	counts := map[metal3.ProvisioningState]int{}
	servicing := 0
	for i := range hosts.Items {
		counts[hosts.Items[i].Status.Provisioning.State]++
		if hosts.Items[i].Status.OperationalStatus == metal3.OperationalStatusServicing {
			servicing++
		}
	}
	ch <- prometheus.MustNewConstMetric(c.servicing, prometheus.GaugeValue, float64(servicing))
	for state, n := range counts {
		label := string(state)
		if label == "" {
			label = "none"
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), label)
	}
}
