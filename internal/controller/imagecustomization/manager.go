package imagecustomization

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/cacheview"
)

// CacheViews are how the controller needs its manager to cache what it reads: Secrets only when
// labelled (the host controller labels the Secrets hosts use; loadSecret labels one it reads
// through the API reader), so the process never holds every Secret of the cluster.
func CacheViews() []cacheview.View {
	return []cacheview.View{{
		Object: &corev1.Secret{}, Owner: "image customization controller",
		Label:   labels.SelectorFromSet(labels.Set{metal3.EnvironmentLabel: metal3.EnvironmentLabelValue}),
		Reduced: "only Secrets labelled " + metal3.EnvironmentLabel + "=" + metal3.EnvironmentLabelValue + " are cached (read others through the API reader)",
	}}
}
