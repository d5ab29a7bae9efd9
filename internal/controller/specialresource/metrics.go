package specialresource

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
)

// Metrics per SpecialResource (names from the special-resource-operator where it had one).
var (
	metricState = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "sro_specialresource_state",
		Help: "1 for the condition (Ready, Progressing, Errored) that is True on each SpecialResource.",
	}, []string{"specialresource", "state"})
	metricNodes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "sro_used_nodes",
		Help: "Selected nodes running an available driver pod for their current kernel, per SpecialResource.",
	}, []string{"specialresource"})
	metricKernels = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "sro_kernels_served",
		Help: "Distinct kernels among the selected nodes whose driver image exists, per SpecialResource.",
	}, []string{"specialresource"})
	metricBuilds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sro_builds_total",
		Help: "Driver image builds per SpecialResource, by result (started, failed).",
	}, []string{"specialresource", "result"})
)

func init() {
	metrics.Registry.MustRegister(metricState, metricNodes, metricKernels, metricBuilds)
}

// recordMetrics updates a SpecialResource's metrics after its status was written.
func recordMetrics(s *scope, out outcome) {
	name := s.sr.Name
	for _, c := range conditionTypes {
		v := 0.0
		if c == out.condition {
			v = 1
		}
		metricState.WithLabelValues(name, c).Set(v)
	}
	metricNodes.WithLabelValues(name).Set(float64(s.sr.Status.NodesServed))
	served := 0
	for _, k := range s.sr.Status.Kernels {
		if k.ImageState == sro.ImageExists {
			served++
		}
	}
	metricKernels.WithLabelValues(name).Set(float64(served))
	if s.fx.buildsStarted > 0 {
		metricBuilds.WithLabelValues(name, "started").Add(float64(s.fx.buildsStarted))
	}
	if s.fx.buildsFailed > 0 {
		metricBuilds.WithLabelValues(name, "failed").Add(float64(s.fx.buildsFailed))
	}
}

// forgetMetrics drops a deleted SpecialResource's series.
func forgetMetrics(name string) {
	l := prometheus.Labels{"specialresource": name}
	metricState.DeletePartialMatch(l)
	metricNodes.DeletePartialMatch(l)
	metricKernels.DeletePartialMatch(l)
	metricBuilds.DeletePartialMatch(l)
}
