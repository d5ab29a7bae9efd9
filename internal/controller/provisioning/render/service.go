package render

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func init() { register(component{name: "metal3-state", order: 15, build: buildStateService}) }

// buildStateService is the metal3-state Service: how the baremetal-operator (and anything in the
// cluster) reaches Ironic and its image server, wherever the metal3 pod runs.
func buildStateService(in *Input, s *Stack) {
	ports := []corev1.ServicePort{
		{Name: "ironic", Port: IronicPort, TargetPort: intstr.FromInt32(IronicPort), Protocol: corev1.ProtocolTCP},
		{Name: "http", Port: HTTPPort, TargetPort: intstr.FromInt32(HTTPPort), Protocol: corev1.ProtocolTCP},
	}
	if !in.Spec.DisableVirtualMediaTLS {
		ports = append(ports, corev1.ServicePort{Name: "vmedia-https", Port: VMediaTLSPort, TargetPort: intstr.FromInt32(VMediaTLSPort), Protocol: corev1.ProtocolTCP})
	}
	// Selected by the component label alone, as OpenShift's operator does: the DaemonSets it ran
	// beside the metal3 pod (ironic-proxy, metal3-image-cache) carry k8s-app: metal3 too, and
	// until they are gone (OpenShiftLeftovers) their nodes must not become Ironic's endpoints.
	s.Objects = append(s.Objects, service(in.Namespace, StateService, StateService, map[string]string{ComponentLabel: StateService}, ports...))
}

// OpenShift's operator ran these beside the metal3 pod, owned by the Provisioning object: the
// ironic-proxy DaemonSet and its Service (provisioning network Disabled, or virtual media over
// the external network) and the metal3-image-cache DaemonSet (provisioningOSDownloadURL). This
// operator builds none of them; after it takes a cluster over they would hold Ironic's host port
// 6385 on every control-plane node (the new metal3 pod never scheduled) and crash-loop once their
// first-level cache was gone, so they are removed when the Provisioning object owns them.
const (
	IronicProxy = "ironic-proxy"
	ImageCache  = "metal3-image-cache"
)

// OpenShiftLeftovers are those objects (kind, namespace and name only).
func OpenShiftLeftovers(namespace string) []client.Object {
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Namespace: namespace} }
	return []client.Object{
		&appsv1.DaemonSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"}, ObjectMeta: meta(IronicProxy)},
		&appsv1.DaemonSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"}, ObjectMeta: meta(ImageCache)},
		&corev1.Service{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}, ObjectMeta: meta(IronicProxy)},
	}
}

// IronicSANs are the names Ironic's certificate must carry: the Service's names, the
// provisioning IP and the external IPs (what the baremetal-operator, the agents and the BMCs use).
// A provisioningIP a Disabled stack ignores stays a name: a name sends no host anywhere, and the
// certificate then survives a switch to Disabled and back.
func IronicSANs(in Input) []string {
	sans := []string{StateService + "." + in.Namespace + ".svc", StateService + "." + in.Namespace + ".svc.cluster.local"}
	if in.Spec.ProvisioningIP != "" {
		sans = append(sans, in.Spec.ProvisioningIP)
	}
	return append(sans, in.Spec.ExternalIPs...)
}

// ServiceSANs are the names of a webhook Service's certificate.
func ServiceSANs(namespace, svc string) []string {
	return []string{svc + "." + namespace + ".svc", svc + "." + namespace + ".svc.cluster.local"}
}
