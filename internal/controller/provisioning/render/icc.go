package render

import (
	"errors"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/metalforge/metalforge/internal/controller/provisioning/secrets"
	"github.com/metalforge/metalforge/internal/provisioner/ironic"
)

// Names of the image-customization-controller's objects (OpenShift's).
const (
	ICCDeployment = "metal3-image-customization"
	ICCService    = "metal3-image-customization-service"
	// ICCConfigSecret holds the agent image and Ironic's URLs for the assisted service, which
	// builds the agent's configuration into its own images from them (OpenShift's keys).
	ICCConfigSecret = "metal3-image-customization-config"
	// ICCPath is the controller in its image.
	ICCPath = "/usr/local/bin/image-customization-controller"
)

// Ports of the image-customization-controller: its image server (behind the Service's port 80, as
// OpenShift's) and its probes.
const (
	ICCPort       = 8084
	ICCHealthPort = 9448
)

// Keys of the config Secret, and the controller's environment (cmd/image-customization-controller).
const (
	envIronicBaseURL    = "IRONIC_BASE_URL"
	envIronicAgentImage = "IRONIC_AGENT_IMAGE"
)

const (
	// iccWorkDir is the controller's image cache (the URL key, one record per image). It is a
	// directory of the node, so that a restarted or upgraded controller serves every image under
	// the same URL: an image URL that changes makes the hosts waiting for it boot again.
	iccWorkDir     = "/var/lib/image-customization-controller"
	hostICCWorkDir = "/var/lib/metal3/image-customization"
	// The base agent images as the machine OS images image writes them (copy-metal --all).
	agentISO    = "ironic-python-agent.iso"
	agentRootfs = "ironic-python-agent.rootfs"
	// pullSecretVolume holds the operator's copy of the cluster's pull secret (OpenShift's volume
	// name); pullSecretPath is the file the controller reads it from (OpenShift's path).
	pullSecretVolume = "ironic-agent-pull-secret"
	pullSecretPath   = "/run/secrets/pull-secret"
	// containersDir is the node's containers configuration: its registries.conf holds a
	// disconnected cluster's mirrors (the machine-config operator writes them there), which the
	// controller writes into every host's image (REGISTRIES_CONF_PATH, as OpenShift's operator
	// passes it) so that hosts pull the agent image through them. The directory is mounted
	// read-only rather than the file (OpenShift mounts the file with FileOrCreate): a node without
	// the file gives none, instead of an empty file the kubelet creates in the node's /etc.
	containersDir = "/etc/containers"
)

// iccLabels select the image-customization-controller's pod; its Service uses them.
var iccLabels = map[string]string{"k8s-app": ICCDeployment, ComponentLabel: ICCDeployment}

func init() { register(component{name: "image-customization-controller", order: 30, build: buildICC}) }

// ICCDeployed reports whether the stack has the image-customization-controller: the images file
// names its image. Without it hosts boot the agent Ironic builds from the machine OS images.
func (in *Input) ICCDeployed() bool { return in.Images.ImageCustomizationController != "" }

// AgentImage is the ironic-python-agent container every host's image runs: the Provisioning
// object's unsupported override, else the images file's.
func (in *Input) AgentImage() string {
	if o := in.Spec.UnsupportedConfigOverrides; o != nil && o.IronicAgentImage != "" {
		return o.IronicAgentImage
	}
	return in.Images.IronicAgent
}

// CheckICC says what keeps the image-customization-controller from being deployed (nil when
// nothing does, or when the images file does not ask for it).
func CheckICC(in Input) error {
	if in.ICCDeployed() && in.AgentImage() == "" {
		return errors.New("the images file names imageCustomizationController but not baremetalIronicAgent, and " +
			"spec.unsupportedConfigOverrides.ironicAgentImage is not set: the image-customization-controller needs the agent image")
	}
	return nil
}

// IronicAddresses are where hosts reach Ironic, as its own configuration says (the Ironic
// runner's IRONIC_EXTERNAL_IP and PROVISIONING_IP): the external IPs; else the address of the
// node the metal3 pod runs on (IronicHostIPs) when virtual media goes over the external network or
// there is no provisioning network (a provisioningIP left in the spec of a Disabled one is
// ignored); else the provisioning IP. Nil while the node's address is not known yet.
func (in *Input) IronicAddresses() []string {
	switch {
	case len(in.Spec.ExternalIPs) > 0:
		return in.Spec.ExternalIPs
	case in.ironicOnNode():
		return in.IronicHostIPs
	}
	return []string{in.provisioningIP()}
}

// ironicOnNode reports whether hosts reach Ironic at the address of the node the metal3 pod runs
// on (status.hostIP in the pod, IronicHostIPs here): no external IPs, and virtual media over the
// external network or no provisioning IP (none is used without a provisioning network).
func (in *Input) ironicOnNode() bool {
	return len(in.Spec.ExternalIPs) == 0 && (in.Spec.VirtualMediaViaExternalNetwork || in.provisioningIP() == "")
}

// ironicBaseURL is IRONIC_BASE_URL: Ironic's API at each of its addresses ("" when none is known).
func (in *Input) ironicBaseURL() string {
	var urls []string
	for _, a := range in.IronicAddresses() {
		urls = append(urls, "https://"+net.JoinHostPort(a, strconv.Itoa(IronicPort)))
	}
	return strings.Join(urls, ",")
}

// ConfigAddresses are the addresses in the Ironic URLs of the image-customization config Secret's
// data (ICCConfigSecret: what the controller was last given), sorted as SortAddresses does; none
// when it has none.
func ConfigAddresses(data map[string][]byte) []string {
	var addrs []string
	for _, u := range strings.Split(string(data[envIronicBaseURL]), ",") {
		if parsed, err := url.Parse(strings.TrimSpace(u)); err == nil && parsed.Hostname() != "" {
			addrs = append(addrs, parsed.Hostname())
		}
	}
	return SortAddresses(addrs)
}

// buildICC is the image-customization-controller: its Deployment, the Service Ironic downloads
// the images through, and the config Secret; it turns on PreprovisioningImages in the
// baremetal-operator. Without its image in the images file, it lists its objects as absent, so a
// stack that had it loses it.
func buildICC(in *Input, s *Stack) {
	deployment := &appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: ICCDeployment, Namespace: in.Namespace}}
	svc := &corev1.Service{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: ICCService, Namespace: in.Namespace}}
	cfg := &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: ICCConfigSecret, Namespace: in.Namespace}}
	if !in.ICCDeployed() {
		s.Absent = append(s.Absent, deployment, svc, cfg)
		return
	}
	replicas := int32(1)
	if in.ironicBaseURL() == "" {
		// The controller cannot start without Ironic's URL. Its objects exist all the same (an
		// operator that skipped them until the metal3 pod had an address left the stack without
		// them: OpenShift's bug 2038272); it runs once the address is known.
		replicas = 0
		s.Waiting = append(s.Waiting, "the metal3 pod's address (Ironic's URL for the image-customization-controller)")
	}
	deployment.Labels = iccLabels
	deployment.Annotations = map[string]string{OwnedAnnotation: ""}
	deployment.Spec = appsv1.DeploymentSpec{
		Replicas: &replicas,
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": ICCDeployment}},
		// One controller at a time owns the work directory's records.
		Strategy:                appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
		ProgressDeadlineSeconds: ptrTo(progressDeadline),
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{
				Labels: iccLabels,
				// The controller reads CA_BUNDLE at start: a new CA restarts it.
				Annotations: map[string]string{TLSFingerprintAnnotation: in.IronicCAFingerprint},
			},
			Spec: corev1.PodSpec{
				ServiceAccountName: ServiceAccount,
				PriorityClassName:  "system-node-critical",
				NodeSelector:       controlPlaneSelector(in),
				Tolerations:        controlPlaneTolerations(),
				InitContainers:     []corev1.Container{in.baseImages()},
				Containers:         []corev1.Container{in.iccContainer()},
				Volumes: []corev1.Volume{
					emptyDirVolume("base-images"),
					{Name: "work", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
						Path: hostICCWorkDir, Type: ptrTo(corev1.HostPathDirectoryOrCreate)}}},
					secretVolume("ironic-ca", secrets.IronicTLS, secrets.KeyCA),
					{Name: "containers-config", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
						Path: containersDir, Type: ptrTo(corev1.HostPathDirectoryOrCreate)}}},
				},
			},
		},
	}
	if in.PullSecretFingerprint != "" {
		mountPullSecret(&deployment.Spec.Template, in.PullSecretFingerprint)
	}
	privileged(&deployment.Spec.Template.Spec)
	svc.Labels = labels(ICCDeployment)
	svc.Spec = corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Selector: deployment.Spec.Selector.MatchLabels,
		Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(ICCPort), Protocol: corev1.ProtocolTCP}}}
	cfg.Labels = labels(ICCDeployment)
	cfg.Type = corev1.SecretTypeOpaque
	cfg.Data = map[string][]byte{envIronicAgentImage: []byte(in.AgentImage())}
	if u := in.ironicBaseURL(); u != "" {
		cfg.Data[envIronicBaseURL] = []byte(u)
	}
	s.Objects = append(s.Objects, svc, cfg, deployment)
	s.ICC = deployment
	in.buildPreprovImages(s)
}

// buildPreprovImages turns the baremetal-operator to per-host images, built by this controller,
// and lets Ironic reach it past the cluster proxy (Ironic downloads every image from it).
func (in *Input) buildPreprovImages(s *Stack) {
	c := &s.BMO.Spec.Template.Spec.Containers[0]
	c.Args = append(c.Args, "--build-preprov-image", "--external-preprov-image-builder")
	// The image's own initramfs (and, if it has none, DEPLOY_KERNEL_URL's kernel) boots the agent:
	// the machine OS images' initramfs must not stand in for a host's image.
	c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == ironic.EnvDeployRamdiskURL })
	svcNames := ServiceSANs(in.Namespace, ICCService)
	for _, list := range [][]corev1.Container{s.Metal3.Spec.Template.Spec.Containers, s.Metal3.Spec.Template.Spec.InitContainers} {
		for i := range list {
			for j := range list[i].Env {
				if e := &list[i].Env[j]; e.Name == "NO_PROXY" && e.ValueFrom == nil {
					e.Value = strings.Join(append([]string{e.Value}, svcNames...), ",")
				}
			}
		}
	}
}

// mountPullSecret gives the controller the operator's copy of the cluster's pull secret as the
// file it reads at start and writes into every host's image (podman on the host pulls the agent
// image with it), read-only, and the copy's digest on the pod template: the controller reads the
// file only at start, and a subPath mount never sees a new version, so a rotated secret restarts
// it. A file, never a variable: the Deployment and every process's environment would show it.
func mountPullSecret(t *corev1.PodTemplateSpec, fingerprint string) {
	t.Annotations[PullSecretFingerprintAnnotation] = fingerprint
	t.Spec.Volumes = append(t.Spec.Volumes, secretVolume(pullSecretVolume, secrets.PullSecret, secrets.KeyDockerConfigJSON))
	c := &t.Spec.Containers[0]
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: pullSecretVolume, MountPath: pullSecretPath,
		SubPath: secrets.KeyDockerConfigJSON, ReadOnly: true})
}

// iccPublishURL is the address under which Ironic (in the metal3 pod) downloads the images: the
// Service's name, resolved by the cluster's DNS also from the host network.
func (in *Input) iccPublishURL() string {
	return "http://" + ICCService + "." + in.Namespace + ".svc.cluster.local"
}

// baseImages copies the base agent images (the live ISO, its initramfs and kernel) out of the
// machine OS images image, as the metal3 pod does for Ironic.
func (in *Input) baseImages() corev1.Container {
	env := []corev1.EnvVar{envVar("IP_OPTIONS", in.ipOptions())}
	return corev1.Container{
		Name:         "machine-os-images",
		Image:        in.Images.MachineOSImages,
		Command:      []string{CopyMetalPath},
		Args:         []string{"--all", imagesDir},
		Env:          append(env, in.proxyEnv()...),
		VolumeMounts: []corev1.VolumeMount{{Name: "base-images", MountPath: imagesDir}},
		Resources:    requests("10m", "50Mi"),
	}
}

// iccContainer runs the controller with the flags and environment cmd/image-customization-controller
// reads. The agent's Ignition gets Ironic's URL, the CA of Ironic's certificate, the agent image,
// the NTP servers and the ip= options of the families hosts reach Ironic over (ipOptions).
func (in *Input) iccContainer() corev1.Container {
	args := []string{
		"-images-bind-addr=:" + strconv.Itoa(ICCPort),
		"-images-publish-addr=" + in.iccPublishURL(),
		"-work-dir=" + iccWorkDir,
		"-health-probe-bind-address=:" + strconv.Itoa(ICCHealthPort),
	}
	if !in.Spec.WatchAllNamespaces {
		// Where the baremetal-operator makes PreprovisioningImages (its hosts' namespace).
		args = append(args, "-namespace=$(POD_NAMESPACE)")
	}
	env := []corev1.EnvVar{
		fieldEnv("POD_NAMESPACE", "metadata.namespace"),
		envVar("DEPLOY_ISO", imagesDir+"/"+agentISO),
		envVar("DEPLOY_INITRD", imagesDir+"/"+agentInitramfs),
		envVar("DEPLOY_KERNEL", imagesDir+"/"+agentKernel),
	}
	addrs := in.IronicAddresses()
	if u := in.ironicBaseURL(); u != "" {
		env = append(env, envVar(envIronicBaseURL, u),
			// Hosts booting an initramfs fetch the live root file system from Ironic's image
			// server (the metal3 pod's machine OS images), which they reach, not from this
			// controller's cluster-internal address.
			envVar("IRONIC_ROOTFS_URL", "http://"+net.JoinHostPort(addrs[0], strconv.Itoa(HTTPPort))+"/images/"+agentRootfs))
	}
	env = append(env,
		envVar(envIronicAgentImage, in.AgentImage()),
		envVar("IP_OPTIONS", in.ipOptions()),
		envVar("CA_BUNDLE", ironicCADir+"/"+secrets.KeyCA),
		envVar("REGISTRIES_CONF_PATH", containersDir+"/registries.conf"),
	)
	if len(in.Spec.AdditionalNTPServers) > 0 {
		env = append(env, envVar("ADDITIONAL_NTP_SERVERS", strings.Join(in.Spec.AdditionalNTPServers, ",")))
	}
	// The controller fetches Ignition overrides through the proxy, never Ironic's addresses.
	env = append(env, in.proxyEnv(addrs...)...)
	return corev1.Container{
		Name:    "machine-image-customization-controller",
		Image:   in.Images.ImageCustomizationController,
		Command: []string{ICCPath},
		Args:    args,
		Env:     env,
		Ports: []corev1.ContainerPort{
			{Name: "http", ContainerPort: ICCPort, Protocol: corev1.ProtocolTCP},
			{Name: "health", ContainerPort: ICCHealthPort, Protocol: corev1.ProtocolTCP},
		},
		VolumeMounts: []corev1.VolumeMount{
			{Name: "base-images", MountPath: imagesDir, ReadOnly: true},
			{Name: "work", MountPath: iccWorkDir},
			{Name: "ironic-ca", MountPath: ironicCADir, ReadOnly: true},
			{Name: "containers-config", MountPath: containersDir, ReadOnly: true},
		},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(ICCHealthPort)}},
			PeriodSeconds: 10, TimeoutSeconds: 5, FailureThreshold: 3,
		},
		LivenessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(ICCHealthPort)}},
			PeriodSeconds: 20, TimeoutSeconds: 5, FailureThreshold: 6, InitialDelaySeconds: 20,
		},
		Resources: requests("10m", "100Mi"),
	}
}

// SortAddresses orders Ironic's addresses as IRONIC_BASE_URL lists them (IPv4 first), without
// duplicates; anything that is no IP address is dropped.
func SortAddresses(addrs []string) []string {
	var ips []netip.Addr
	for _, a := range addrs {
		if ip, err := netip.ParseAddr(a); err == nil && !slices.Contains(ips, ip.Unmap()) {
			ips = append(ips, ip.Unmap())
		}
	}
	slices.SortFunc(ips, func(a, b netip.Addr) int { return a.Compare(b) })
	out := make([]string, 0, len(ips))
	for _, ip := range ips {
		out = append(out, ip.String())
	}
	return out
}
