package provisioning

import (
	"os"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	dto "github.com/prometheus/client_model/go"
)

type appsListT struct {
	deployments appsv1.DeploymentList
	secrets     corev1.SecretList
	services    corev1.ServiceList
}

func reconcileCount() float64 {
	var m dto.Metric
	_ = metricReconciles.Write(&m)
	return m.GetCounter().GetValue()
}

// reconcileErrors counts the reconciles that returned an error.
func reconcileErrors() float64 {
	var m dto.Metric
	_ = metricReconcileErrors.Write(&m)
	return m.GetCounter().GetValue()
}

// writeCount is every create, update and delete the controller made.
func writeCount() float64 {
	total := 0.0
	for _, op := range []string{"create", "update", "delete"} {
		var m dto.Metric
		_ = metricWrites.WithLabelValues(op).Write(&m)
		total += m.GetCounter().GetValue()
	}
	return total
}

func writeFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o600) }
