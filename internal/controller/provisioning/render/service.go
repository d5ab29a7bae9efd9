package render

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
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
	s.Objects = append(s.Objects, service(in.Namespace, StateService, StateService, map[string]string{"k8s-app": "metal3"}, ports...))
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
