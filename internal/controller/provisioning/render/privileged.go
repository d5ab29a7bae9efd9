package render

import corev1 "k8s.io/api/core/v1"

// privileged makes every container of a pod privileged, as OpenShift's operator does for the pods
// that reach into the node: the metal3 pod (host network, where the static IP and DHCP change the
// node's interfaces; host paths; root) and the image-customization-controller (a host path, which
// SELinux keeps an unprivileged container from writing). The service account may use the
// privileged SCC for them (provisioning.NamespaceRules); the baremetal-operator and the operator
// itself stay unprivileged.
func privileged(spec *corev1.PodSpec) {
	for _, list := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range list {
			if list[i].SecurityContext == nil {
				list[i].SecurityContext = &corev1.SecurityContext{}
			}
			list[i].SecurityContext.Privileged = ptrTo(true)
		}
	}
}
