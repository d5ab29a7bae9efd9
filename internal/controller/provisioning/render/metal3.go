package render

import (
	"maps"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/provisioning/secrets"
)

// metal3Labels are the metal3 Deployment's and pod's labels, and its selector (OpenShift's); the
// metal3-state Service selects by the component label alone. Cloned where used: objects are
// changed after rendering.
var metal3Labels = map[string]string{"k8s-app": "metal3", ComponentLabel: StateService}

func init() { register(component{name: "metal3", order: 10, build: buildMetal3}) }

// buildMetal3 is the metal3 Deployment: Ironic and its HTTP server on the host's network, the
// agent images copied in first, and for a provisioning network the static IP and (Managed) the
// DHCP server. Recreate: two Ironics on one node would fight over the ports, and Ironic's database
// lives in the pod.
func buildMetal3(in *Input, s *Stack) {
	spec := corev1.PodSpec{
		HostNetwork:        true,
		DNSPolicy:          corev1.DNSClusterFirstWithHostNet,
		PriorityClassName:  "system-node-critical",
		ServiceAccountName: ServiceAccount,
		// No container of the pod calls the Kubernetes API, and the account can read every
		// Secret: its token stays out of a pod on the host's network.
		AutomountServiceAccountToken: ptrTo(false),
		NodeSelector:                 controlPlaneSelector(in),
		Tolerations:                  controlPlaneTolerations(),
		InitContainers:               append(in.staticIPSet(), in.machineOSImages()),
		Containers:                   append([]corev1.Container{in.ironicContainer(), in.httpdContainer()}, in.networkContainers()...),
		Volumes: []corev1.Volume{
			emptyDirVolume("metal3-shared"),
			emptyDirVolume("metal3-data"),
			{Name: "metal3-images", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
				Path: hostImagesDir, Type: ptrTo(corev1.HostPathDirectoryOrCreate)}}},
			secretVolume("metal3-ironic-tls", secrets.IronicTLS, secrets.KeyCert, secrets.KeyKey),
		},
	}
	privileged(&spec)
	d := &appsv1.Deployment{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{
			Name: Metal3Deployment, Namespace: in.Namespace,
			Labels:      maps.Clone(metal3Labels),
			Annotations: map[string]string{OwnedAnnotation: ""},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas:                ptrTo[int32](1),
			Selector:                &metav1.LabelSelector{MatchLabels: maps.Clone(metal3Labels)},
			Strategy:                appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			ProgressDeadlineSeconds: ptrTo(progressDeadline),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels: maps.Clone(metal3Labels),
					Annotations: map[string]string{
						"target.workload.openshift.io/management": `{"effect": "PreferredDuringScheduling"}`,
						TLSFingerprintAnnotation:                  in.IronicTLSFingerprint,
						CredentialsFingerprintAnnotation:          in.IronicCredentialsFingerprint,
					},
				},
				Spec: spec,
			},
		},
	}
	s.Metal3 = d
	s.Objects = append(s.Objects, d)
}

// progressDeadline is how long a rollout may take before the Deployment reports
// ProgressDeadlineExceeded, which the operator reports as DeployTimedOut (OpenShift's 5 minutes).
const progressDeadline int32 = 300

// ControlPlaneLabel marks control-plane nodes (OpenShift's nodes carry it with the older
// node-role.kubernetes.io/master, which the API server now warns about in a node selector).
const ControlPlaneLabel = "node-role.kubernetes.io/control-plane"

// ControlPlaneTolerations let a pod run on control-plane nodes (both taint names) and ride out a
// node that stops answering for two minutes.
func ControlPlaneTolerations() []corev1.Toleration { return controlPlaneTolerations() }

func controlPlaneSelector(in *Input) map[string]string {
	if in.Platform.ExternalControlPlane {
		return nil
	}
	return map[string]string{ControlPlaneLabel: ""}
}

func controlPlaneTolerations() []corev1.Toleration {
	return []corev1.Toleration{
		{Key: "node-role.kubernetes.io/master", Effect: corev1.TaintEffectNoSchedule, Operator: corev1.TolerationOpExists},
		{Key: ControlPlaneLabel, Effect: corev1.TaintEffectNoSchedule, Operator: corev1.TolerationOpExists},
		{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists},
		{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoExecute, Operator: corev1.TolerationOpExists, TolerationSeconds: ptrTo[int64](120)},
		{Key: "node.kubernetes.io/unreachable", Effect: corev1.TaintEffectNoExecute, Operator: corev1.TolerationOpExists, TolerationSeconds: ptrTo[int64](120)},
	}
}

// addressEnv tells a runner mode where the provisioning network is: the IP (with its prefix on a
// provisioning network, so the static IP can be set; the host's IP when there is no network, or
// no IP nor interface is given), the interface, and the MACs that identify it.
func (in *Input) addressEnv() []corev1.EnvVar {
	var env []corev1.EnvVar
	switch {
	case in.provisioningIPWithPrefix() != "":
		env = append(env, envVar("PROVISIONING_IP", in.provisioningIPWithPrefix()))
	case in.provisioningIP() != "":
		env = append(env, envVar("PROVISIONING_IP", in.provisioningIP()))
	case in.Spec.ProvisioningInterface == "" || in.networkDisabled():
		env = append(env, fieldEnv("PROVISIONING_IP", "status.hostIP"))
	}
	if in.Spec.ProvisioningInterface != "" && !in.networkDisabled() {
		env = append(env, envVar("PROVISIONING_INTERFACE", in.Spec.ProvisioningInterface))
	}
	if len(in.Spec.ProvisioningMacAddresses) > 0 && !in.networkDisabled() {
		env = append(env, envVar("PROVISIONING_MACS", strings.Join(in.Spec.ProvisioningMacAddresses, ",")))
	}
	return env
}

// externalIP is where hosts reach Ironic when not over the provisioning network: the first
// external IP, or the host's own address when virtual media goes over the external network.
func (in *Input) externalIPEnv() []corev1.EnvVar {
	switch {
	case len(in.Spec.ExternalIPs) > 0:
		return []corev1.EnvVar{envVar("IRONIC_EXTERNAL_IP", in.Spec.ExternalIPs[0])}
	case in.Spec.VirtualMediaViaExternalNetwork && !in.networkDisabled():
		return []corev1.EnvVar{fieldEnv("IRONIC_EXTERNAL_IP", "status.hostIP")}
	}
	return nil
}

func (in *Input) portEnv() []corev1.EnvVar {
	env := []corev1.EnvVar{envVar("HTTP_PORT", strconv.Itoa(HTTPPort))}
	if !in.Spec.DisableVirtualMediaTLS {
		env = append(env, envVar("VMEDIA_TLS_PORT", strconv.Itoa(VMediaTLSPort)))
	}
	return env
}

func certEnv() []corev1.EnvVar {
	return []corev1.EnvVar{
		envVar("IRONIC_CERT_FILE", ironicCertDir+"/"+secrets.KeyCert),
		envVar("IRONIC_KEY_FILE", ironicCertDir+"/"+secrets.KeyKey),
	}
}

// noProxy are Ironic's own addresses, which must never go through the cluster proxy.
func (in *Input) noProxy() []string {
	out := []string{StateService + "." + in.Namespace + ".svc", StateService + "." + in.Namespace + ".svc.cluster.local"}
	if in.provisioningIP() != "" {
		out = append(out, in.provisioningIP())
	}
	return append(out, in.Spec.ExternalIPs...)
}

func sharedMounts() []corev1.VolumeMount {
	return []corev1.VolumeMount{
		{Name: "metal3-shared", MountPath: sharedDir},
		{Name: "metal3-images", MountPath: imagesDir},
	}
}

func (in *Input) ironicContainer() corev1.Container {
	env := append(in.addressEnv(), in.externalIPEnv()...)
	env = append(env, in.portEnv()...)
	env = append(env, certEnv()...)
	env = append(env,
		envVar("IRONIC_LISTEN_PORT", strconv.Itoa(IronicPort)),
		secretEnv("IRONIC_HTPASSWD", secrets.IronicCredentials, secrets.KeyHtpasswd),
		// The agent Ironic boots cannot verify Ironic's self-signed certificate: nothing puts
		// the CA into that image (the image-customization-controller's images carry it, and
		// tell the agent not to verify either, as OpenShift's do).
		envVar("IRONIC_INSECURE", "true"),
	)
	env = append(env, in.kernelParamsEnv()...)
	env = append(env, envVar("IRONIC_FAST_TRACK", "true"))
	env = append(env, in.proxyEnv(in.noProxy()...)...)
	return corev1.Container{
		Name:    "metal3-ironic",
		Image:   in.Images.Ironic,
		Command: []string{RunnerPath},
		Args:    []string{"ironic"},
		Env:     env,
		Ports:   []corev1.ContainerPort{{Name: "ironic", ContainerPort: IronicPort, HostPort: IronicPort, Protocol: corev1.ProtocolTCP}},
		VolumeMounts: append(sharedMounts(),
			corev1.VolumeMount{Name: "metal3-data", MountPath: ironicDataDir},
			corev1.VolumeMount{Name: "metal3-ironic-tls", MountPath: ironicCertDir, ReadOnly: true},
		),
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(IronicPort), Scheme: corev1.URISchemeHTTPS}},
			PeriodSeconds: 10, TimeoutSeconds: 5, FailureThreshold: 3,
		},
		Resources: requests("50m", "500Mi"),
	}
}

// kernelParamsEnv is the agent's kernel parameters, with the ip= option of the families hosts
// reach Ironic over; when those depend on the node's address, the runner adds it
// (metal3IPOptions).
func (in *Input) kernelParamsEnv() []corev1.EnvVar {
	const params = "rd.net.timeout.carrier=30"
	if options, ok := in.metal3IPOptions(); ok {
		return []corev1.EnvVar{envVar("IRONIC_KERNEL_PARAMS", params+" "+options)}
	}
	return []corev1.EnvVar{envVar("IRONIC_KERNEL_PARAMS", params), envVar("IRONIC_KERNEL_IP_FROM_ADDRESSES", "true")}
}

func (in *Input) httpdContainer() corev1.Container {
	env := append(in.addressEnv(), in.portEnv()...)
	env = append(env, certEnv()...)
	ports := []corev1.ContainerPort{{Name: "http", ContainerPort: HTTPPort, HostPort: HTTPPort, Protocol: corev1.ProtocolTCP}}
	if !in.Spec.DisableVirtualMediaTLS {
		ports = append(ports, corev1.ContainerPort{Name: "vmedia-https", ContainerPort: VMediaTLSPort, HostPort: VMediaTLSPort, Protocol: corev1.ProtocolTCP})
	}
	return corev1.Container{
		Name:    "metal3-httpd",
		Image:   in.Images.Ironic,
		Command: []string{RunnerPath},
		Args:    []string{"httpd"},
		Env:     env,
		Ports:   ports,
		VolumeMounts: append(sharedMounts(),
			corev1.VolumeMount{Name: "metal3-ironic-tls", MountPath: ironicCertDir, ReadOnly: true}),
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(HTTPPort), Scheme: corev1.URISchemeHTTP}},
			PeriodSeconds: 10, TimeoutSeconds: 5, FailureThreshold: 3,
		},
		Resources: requests("5m", "30Mi"),
	}
}

// machineOSImages copies the agent's kernel and initramfs into the shared image directory, where
// Ironic builds each host's boot image from them (OpenShift's machine-os-images contract). It gets
// IP_OPTIONS as OpenShift's does, unless they depend on the node's address (metal3IPOptions):
// copy-metal applies them only to the live ISO, which --pxe does not copy.
func (in *Input) machineOSImages() corev1.Container {
	var env []corev1.EnvVar
	if options, ok := in.metal3IPOptions(); ok {
		env = append(env, envVar("IP_OPTIONS", options))
	}
	return corev1.Container{
		Name:         "metal3-machine-os-images",
		Image:        in.Images.MachineOSImages,
		Command:      []string{CopyMetalPath},
		Args:         []string{"--pxe", imagesDir},
		Env:          append(env, in.proxyEnv()...),
		VolumeMounts: sharedMounts(),
		Resources:    requests("10m", "50Mi"),
	}
}

// staticIPSet puts the provisioning IP on the provisioning interface before Ironic starts (a
// provisioning network with an IP only).
func (in *Input) staticIPSet() []corev1.Container {
	if !in.staticIP() {
		return nil
	}
	return []corev1.Container{in.runnerNetContainer("metal3-static-ip-set", []string{"static-ip", "set"}, nil, "NET_ADMIN")}
}

// staticIP: the stack puts the provisioning IP on its interface, named by provisioningInterface or
// found by provisioningMacAddresses. Without either, the interface is the one that already holds
// the IP (the admin's, or NetworkManager's): the static-IP containers would turn that address into
// one with a lifetime, delete it when the pod stops, and the next pod could then find no interface
// at all (the address was the only way to find it).
func (in *Input) staticIP() bool {
	return in.provisioningIP() != "" && (in.Spec.ProvisioningInterface != "" || len(in.Spec.ProvisioningMacAddresses) > 0)
}

// networkContainers keep the static IP in place, and run dnsmasq on a provisioning network: DHCP
// and TFTP on a Managed one, TFTP only on an Unmanaged one (its DHCP server is the user's, and
// points PXE hosts at Ironic's address for the iPXE loader), as OpenShift's operator does.
func (in *Input) networkContainers() []corev1.Container {
	var out []corev1.Container
	if in.staticIP() {
		out = append(out, in.runnerNetContainer("metal3-static-ip-manager", []string{"static-ip", "refresh"}, nil, "NET_ADMIN"))
	}
	if mode := in.mode(); mode != metal3.ProvisioningNetworkDisabled {
		env := in.portEnv()
		if mode == metal3.ProvisioningNetworkManaged {
			env = append(in.dhcpEnv(), env...)
		}
		c := in.runnerNetContainer("metal3-dnsmasq", []string{"dnsmasq"}, env, "NET_ADMIN", "NET_RAW", "NET_BIND_SERVICE")
		// Its TFTP root is /shared/tftpboot: the iPXE loaders it puts there, and the PXE files
		// Ironic writes there, must be on the volume both containers share.
		c.VolumeMounts = []corev1.VolumeMount{{Name: "metal3-shared", MountPath: sharedDir}}
		out = append(out, c)
	}
	return out
}

// dhcpEnv: the range as dnsmasq wants it ("start,end,prefix"), the gateway and DNS it hands out.
func (in *Input) dhcpEnv() []corev1.EnvVar {
	bits := ""
	if p := in.provisioningIPWithPrefix(); p != "" {
		bits = p[strings.LastIndex(p, "/")+1:]
	}
	dhcpRange := strings.ReplaceAll(in.Spec.ProvisioningDHCPRange, " ", "")
	if bits != "" {
		dhcpRange += "," + bits
	}
	env := []corev1.EnvVar{envVar("DHCP_RANGE", dhcpRange)}
	if in.Spec.ProvisioningNetworkGateway != "" {
		env = append(env, envVar("GATEWAY_IP", in.Spec.ProvisioningNetworkGateway))
	}
	if in.Spec.ProvisioningDNS {
		env = append(env, envVar("DNS_IP", "provisioning"))
	}
	return env
}

func (in *Input) runnerNetContainer(name string, args []string, extra []corev1.EnvVar, caps ...corev1.Capability) corev1.Container {
	return corev1.Container{
		Name:            name,
		Image:           in.Images.Ironic,
		Command:         []string{RunnerPath},
		Args:            args,
		Env:             append(in.addressEnv(), extra...),
		SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: caps}},
		Resources:       requests("5m", "20Mi"),
	}
}

func requests(cpu, memory string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory),
	}}
}
