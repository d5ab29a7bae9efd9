package provisioning

import (
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/metalforge/metalforge/internal/controller/provisioning/render"
	"github.com/metalforge/metalforge/internal/controller/provisioning/secrets"
)

// The operator's permissions. They are written here rather than as kubebuilder markers, which
// would merge them into the baremetal-operator's role in config/rbac; the release manifests
// (internal/release) grant these together with the baremetal-operator's, because every pod of the
// stack runs as the operator's service account, as in OpenShift. The end-to-end test runs the
// operator and the stack with exactly the manifests' RBAC.

// ClusterRules are the operator's cluster-wide permissions.
func ClusterRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{"metal3.io"}, Resources: []string{"provisionings"}, Verbs: []string{"get", "list", "watch", "update", "patch"}},
		{APIGroups: []string{"metal3.io"}, Resources: []string{"provisionings/status", "provisionings/finalizers"}, Verbs: []string{"get", "update", "patch"}},
		{APIGroups: []string{"metal3.io"}, Resources: []string{"baremetalhosts"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"config.openshift.io"}, Resources: []string{"infrastructures", "proxies"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"config.openshift.io"}, Resources: []string{"clusteroperators"}, Verbs: []string{"get", "list", "watch", "create"}},
		{APIGroups: []string{"config.openshift.io"}, Resources: []string{"clusteroperators/status"}, Verbs: []string{"get", "update", "patch"}},
		{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"validatingwebhookconfigurations"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}},
	}
}

// PrivilegedSCC is the security context constraint the stack's privileged pods are admitted under.
const PrivilegedSCC = "privileged"

// NamespaceRules are its permissions in the stack's namespace.
func NamespaceRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		// OpenShift's operator's DaemonSets, removed after a takeover (render.IronicProxy).
		{APIGroups: []string{"apps"}, Resources: []string{"daemonsets"}, ResourceNames: []string{render.IronicProxy, render.ImageCache},
			Verbs: []string{"get", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"services", "secrets"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		// Where the metal3 pod runs (the image-customization-controller's Ironic URL).
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "list", "watch"}},
		// Whether a container of the stack crash-loops.
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}},
		// The stack's pods run as this account, and OpenShift admits the metal3 pod (host network,
		// host paths, root, network capabilities) and the image-customization-controller (root, a
		// host path) only under the privileged SCC. OpenShift's operator grants every SCC; the
		// one it needs is enough.
		{APIGroups: []string{"security.openshift.io"}, Resources: []string{"securitycontextconstraints"},
			ResourceNames: []string{PrivilegedSCC}, Verbs: []string{"use"}},
	}
}

// ConfigNamespaceRules are its permissions in the cluster's configuration namespace
// (openshift-config): reading the cluster's pull secret, by name, for the
// image-customization-controller; the operator caches that one Secret with a metadata.name field
// selector, which the API server authorizes by name for list and watch too. This Role is what that
// cache needs, not a limit: the operator's ClusterRole holds the baremetal-operator's permissions
// (it grants them, and the stack runs under its service account), reading Secrets everywhere
// (the hosts' BMC credentials) among them.
func ConfigNamespaceRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{secrets.ClusterPullSecretName},
			Verbs: []string{"get", "list", "watch"}},
	}
}
