// Package scheme builds the runtime.Scheme every Metalforge binary and test uses: the built-in
// Kubernetes kinds (client-go), the project's own API groups, and the OpenShift groups the
// operators talk to (config.openshift.io for ClusterOperator, build.openshift.io for driver
// builds), whose Go types come from github.com/openshift/api.
package scheme

import (
	buildv1 "github.com/openshift/api/build/v1"
	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	sro "github.com/metalforge/metalforge/api/sro/v1beta1"
)

// addToScheme lists every group the project registers. Add new API groups here.
var addToScheme = runtime.SchemeBuilder{
	clientgoscheme.AddToScheme,
	metal3.AddToScheme,
	sro.AddToScheme,
	configv1.Install,
	buildv1.Install,
}

// AddToScheme adds the built-in kinds and the project's kinds to s.
func AddToScheme(s *runtime.Scheme) error {
	return addToScheme.AddToScheme(s)
}

// New returns a fresh scheme with every kind the project uses. Each caller gets its own, so a test
// that registers extra kinds does not change anyone else's.
func New() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(AddToScheme(s))
	return s
}
