package clusteroperator

import (
	configv1 "github.com/openshift/api/config/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metalforge/metalforge/internal/controller/provisioning/render"
	"github.com/metalforge/metalforge/internal/controller/provisioning/secrets"
)

// RBACName is the name of the operator's ClusterRole, Role, their bindings and its
// ServiceAccount (manifests/0000_31_cluster-baremetal-operator_05_rbac.yaml).
const RBACName = "cluster-baremetal-operator"

// Annotations every object of the release payload carries, the ClusterOperator included: it
// belongs to the baremetal capability and to the payload's profiles.
var Annotations = map[string]string{
	"capability.openshift.io/name":                                "baremetal",
	"include.release.openshift.io/self-managed-high-availability": "true",
	"include.release.openshift.io/single-node-developer":          "true",
}

// metal3Resources are the metal3.io resources, namespaced ones in the operator's namespace (the
// order is the one must-gather lists them in).
var metal3Resources = []struct {
	resource   string
	namespaced bool
}{
	{"baremetalhosts", true},
	{"provisionings", false},
	{"hostfirmwaresettings", true},
	{"firmwareschemas", true},
	{"preprovisioningimages", true},
	{"bmceventsubscriptions", true},
	{"hostfirmwarecomponents", true},
	{"dataimages", true},
	{"hostupdatepolicies", true},
	{"hardwaredata", true},
}

// RelatedObjects are what `oc adm must-gather` collects for the operator: its namespace, every
// metal3.io resource, the Deployments of the stack (the image-customization-controller's too,
// which a stack without it simply lacks) and the operator's RBAC, the Role and RoleBinding that
// let it read the cluster's pull secret in openshift-config included.
func RelatedObjects(namespace string) []configv1.ObjectReference {
	refs := []configv1.ObjectReference{{Group: "", Resource: "namespaces", Name: namespace}}
	for _, r := range metal3Resources {
		ref := configv1.ObjectReference{Group: "metal3.io", Resource: r.resource}
		if r.namespaced {
			ref.Namespace = namespace
		}
		refs = append(refs, ref)
	}
	for _, name := range []string{render.Metal3Deployment, render.BMODeployment, render.ICCDeployment} {
		refs = append(refs, configv1.ObjectReference{Group: "apps", Resource: "deployments", Namespace: namespace, Name: name})
	}
	return append(refs,
		configv1.ObjectReference{Group: "rbac.authorization.k8s.io", Resource: "clusterroles", Name: RBACName},
		configv1.ObjectReference{Group: "rbac.authorization.k8s.io", Resource: "clusterrolebindings", Name: RBACName},
		configv1.ObjectReference{Group: "rbac.authorization.k8s.io", Resource: "roles", Namespace: namespace, Name: RBACName},
		configv1.ObjectReference{Group: "rbac.authorization.k8s.io", Resource: "rolebindings", Namespace: namespace, Name: RBACName},
		configv1.ObjectReference{Group: "rbac.authorization.k8s.io", Resource: "roles", Namespace: secrets.ClusterPullSecretNamespace, Name: RBACName},
		configv1.ObjectReference{Group: "rbac.authorization.k8s.io", Resource: "rolebindings", Namespace: secrets.ClusterPullSecretNamespace, Name: RBACName},
		configv1.ObjectReference{Group: "", Resource: "serviceaccounts", Namespace: namespace, Name: RBACName},
	)
}

// New is the ClusterOperator as the operator creates it when the release payload's copy is
// missing (the payload normally creates it first). Its status is written by Apply.
func New() *configv1.ClusterOperator {
	annotations := make(map[string]string, len(Annotations))
	for k, v := range Annotations {
		annotations[k] = v
	}
	return &configv1.ClusterOperator{ObjectMeta: metav1.ObjectMeta{Name: Name, Annotations: annotations}}
}
