package provisioning

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Metrics of the operator, served on the manager's /metrics endpoint with controller-runtime's own.
var (
	metricReconciles = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "cluster_baremetal_operator_reconcile_total", Help: "Reconciles of the Provisioning singleton.",
	})
	metricReconcileErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "cluster_baremetal_operator_reconcile_errors_total", Help: "Reconciles of the Provisioning singleton that returned an error.",
	})
	metricWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cluster_baremetal_operator_writes_total", Help: "Objects of the stack created, updated and deleted.",
	}, []string{"operation"})
	metricCondition = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cluster_baremetal_operator_condition", Help: "The baremetal ClusterOperator's conditions: 1 when True, 0 otherwise.",
	}, []string{"condition"})
)

func init() {
	metrics.Registry.MustRegister(metricReconciles, metricReconcileErrors, metricWrites, metricCondition)
}
