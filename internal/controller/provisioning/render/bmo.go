package render

import (
	"fmt"
	"strconv"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/metalforge/metalforge/internal/controller/provisioning/secrets"
	"github.com/metalforge/metalforge/internal/provisioner/ironic"
)

// Leader election timings of the baremetal-operator: OpenShift's, as the cluster-baremetal-operator
// uses for itself (cmd/cluster-baremetal-operator); a leader keeps its lease through 107 s without
// the API server.
const (
	LeaseDuration = 137 * time.Second
	RenewDeadline = 107 * time.Second
	RetryPeriod   = 26 * time.Second
)

// bmoLabels select the baremetal-operator pod; its webhook Service uses them.
var bmoLabels = map[string]string{"k8s-app": "metal3-baremetal-operator", ComponentLabel: BMODeployment}

func init() { register(component{name: "baremetal-operator", order: 20, build: buildBMO}) }

// buildBMO is the baremetal-operator Deployment, its webhook Service, and (once it runs) its
// webhook configuration. It reaches Ironic through the metal3-state Service over TLS, verifying
// Ironic's certificate with the CA, as the Ironic user.
func buildBMO(in *Input, s *Stack) {
	args := []string{
		"--provisioner=ironic",
		"--leader-elect",
		// OpenShift's timings, as the operator's own: the default 10 s renew deadline makes the
		// operator exit whenever the API server is away longer (a single-node kube-apiserver
		// rollout), and the Recreate Deployment then restarts it over and over.
		"--leader-elect-lease-duration=" + LeaseDuration.String(),
		"--leader-elect-renew-deadline=" + RenewDeadline.String(),
		"--leader-elect-retry-period=" + RetryPeriod.String(),
		"--webhook-port=" + strconv.Itoa(BMOWebhookPort),
		"--webhook-cert-dir=" + bmoCertDir,
		"--health-probe-bind-address=:" + strconv.Itoa(BMOHealthPort),
		"--metrics-bind-address=:" + strconv.Itoa(BMOMetricsPort),
	}
	if !in.Spec.WatchAllNamespaces {
		args = append(args, "--namespace=$(POD_NAMESPACE)")
	}
	env := []corev1.EnvVar{
		fieldEnv("POD_NAMESPACE", "metadata.namespace"),
		envVar(ironic.EnvEndpoint, fmt.Sprintf("https://%s.%s.svc.cluster.local:%d/v1/", StateService, in.Namespace, IronicPort)),
		envVar(ironic.EnvCACertFile, ironicCADir+"/"+secrets.KeyCA),
		envVar(ironic.EnvAuthRootDir, authDir),
		// Without the image-customization-controller every host boots the agent Ironic builds
		// from these (the machine OS images init container put them there; the URLs are
		// Ironic's, which has /shared). With it (icc.go) only the kernel stays, for an initrd
		// image that names none.
		envVar(ironic.EnvDeployKernelURL, "file://"+imagesDir+"/"+agentKernel),
		envVar(ironic.EnvDeployRamdiskURL, "file://"+imagesDir+"/"+agentInitramfs),
		envVar(ironic.EnvLiveISOPersistent, "Never"),
	}
	env = append(env, in.proxyEnv(in.noProxy()...)...)
	d := &appsv1.Deployment{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{
			Name: BMODeployment, Namespace: in.Namespace, Labels: bmoLabels,
			Annotations: map[string]string{OwnedAnnotation: ""},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas:                ptrTo[int32](1),
			Selector:                &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "metal3-baremetal-operator"}},
			Strategy:                appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			ProgressDeadlineSeconds: ptrTo(progressDeadline),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels: bmoLabels,
					// It reads Ironic's CA and credentials at start: new ones restart it.
					Annotations: map[string]string{
						TLSFingerprintAnnotation:         in.IronicCAFingerprint,
						CredentialsFingerprintAnnotation: in.IronicCredentialsFingerprint,
					},
				},
				Spec: corev1.PodSpec{
					ServiceAccountName: ServiceAccount,
					PriorityClassName:  "system-node-critical",
					NodeSelector:       controlPlaneSelector(in),
					Tolerations:        controlPlaneTolerations(),
					Containers: []corev1.Container{{
						Name:    "metal3-baremetal-operator",
						Image:   in.Images.BaremetalOperator,
						Command: []string{BMOPath},
						Args:    args,
						Env:     env,
						Ports: []corev1.ContainerPort{
							{Name: "webhook-server", ContainerPort: BMOWebhookPort, Protocol: corev1.ProtocolTCP},
							{Name: "health", ContainerPort: BMOHealthPort, Protocol: corev1.ProtocolTCP},
							{Name: "metrics", ContainerPort: BMOMetricsPort, Protocol: corev1.ProtocolTCP},
						},
						VolumeMounts: []corev1.VolumeMount{
							{Name: "ironic-credentials", MountPath: authDir + "/ironic", ReadOnly: true},
							{Name: "ironic-ca", MountPath: ironicCADir, ReadOnly: true},
							{Name: "webhook-cert", MountPath: bmoCertDir, ReadOnly: true},
						},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(BMOHealthPort)}},
							PeriodSeconds: 10, TimeoutSeconds: 5, FailureThreshold: 3,
						},
						LivenessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(BMOHealthPort)}},
							PeriodSeconds: 20, TimeoutSeconds: 5, FailureThreshold: 6,
							InitialDelaySeconds: 20,
						},
						Resources: requests("10m", "50Mi"),
					}},
					Volumes: []corev1.Volume{
						// The user and password only: the htpasswd is Ironic's.
						secretVolume("ironic-credentials", secrets.IronicCredentials, secrets.KeyUsername, secrets.KeyPassword),
						secretVolume("ironic-ca", secrets.IronicTLS, secrets.KeyCA),
						secretVolume("webhook-cert", secrets.BMOWebhookCert, secrets.KeyCert, secrets.KeyKey),
					},
				},
			},
		},
	}
	s.BMO = d
	s.Objects = append(s.Objects, d, service(in.Namespace, BMOWebhookService, BMODeployment, d.Spec.Selector.MatchLabels,
		corev1.ServicePort{Name: "https", Port: 443, TargetPort: intstr.FromInt32(BMOWebhookPort), Protocol: corev1.ProtocolTCP}))
	s.AfterBMO = append(s.AfterBMO, bmoWebhookConfig(in))
}

// bmoWebhook is one of the baremetal-operator's validating webhooks (config/webhook, generated
// from the markers in internal/webhooks; a test keeps the two equal).
type bmoWebhook struct{ name, resource, path string }

var bmoWebhooks = []bmoWebhook{
	{"baremetalhost.metal3.io", "baremetalhosts", "/validate-metal3-io-v1alpha1-baremetalhost"},
	{"bmceventsubscription.metal3.io", "bmceventsubscriptions", "/validate-metal3-io-v1alpha1-bmceventsubscription"},
	{"hostfirmwarecomponents.metal3.io", "hostfirmwarecomponents", "/validate-metal3-io-v1alpha1-hostfirmwarecomponents"},
	{"dataimage.metal3.io", "dataimages", "/validate-metal3-io-v1alpha1-dataimage"},
}

func bmoWebhookConfig(in *Input) *admissionv1.ValidatingWebhookConfiguration {
	cfg := &admissionv1.ValidatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: BMOWebhookConfig, Labels: labels(BMODeployment)},
	}
	for _, w := range bmoWebhooks {
		cfg.Webhooks = append(cfg.Webhooks, validatingWebhook(w.name, w.resource, w.path, in.Namespace, BMOWebhookService, in.BMOWebhookCABundle))
	}
	return cfg
}

// validatingWebhook is a CREATE/UPDATE webhook of a metal3.io resource, failing closed: bad input
// is rejected even when the server is down (the cluster baremetal operator's Ignore let every write
// through for years while its handler was missing). An object being deleted is not sent (the
// handlers accept it anyway): removing its finalizers must not need the server, which may be gone
// for good (the operator uninstalled or scaled down leaves this configuration behind).
func validatingWebhook(name, resource, path, namespace, svc string, caBundle []byte) admissionv1.ValidatingWebhook {
	fail := admissionv1.Fail
	none := admissionv1.SideEffectClassNone
	return admissionv1.ValidatingWebhook{
		Name:                    name,
		AdmissionReviewVersions: []string{"v1"},
		ClientConfig: admissionv1.WebhookClientConfig{
			Service:  &admissionv1.ServiceReference{Namespace: namespace, Name: svc, Path: &path, Port: ptrTo[int32](443)},
			CABundle: caBundle,
		},
		Rules: []admissionv1.RuleWithOperations{{
			Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
			Rule:       admissionv1.Rule{APIGroups: []string{"metal3.io"}, APIVersions: []string{"v1alpha1"}, Resources: []string{resource}},
		}},
		MatchConditions: []admissionv1.MatchCondition{{Name: "not-being-deleted", Expression: "!has(object.metadata.deletionTimestamp)"}},
		FailurePolicy:   &fail,
		SideEffects:     &none,
		TimeoutSeconds:  ptrTo[int32](10),
	}
}

// CBOWebhookConfig is the operator's own webhook configuration (Provisioning), pointing at the
// cluster-baremetal-webhook-service of the release manifests. It exists whenever the platform
// gets a stack, with or without a Provisioning object (it validates the object's creation).
func CBOWebhookConfiguration(namespace string, caBundle []byte) *admissionv1.ValidatingWebhookConfiguration {
	return &admissionv1.ValidatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: CBOWebhookConfig, Labels: labels("cluster-baremetal-operator")},
		Webhooks: []admissionv1.ValidatingWebhook{validatingWebhook("provisioning.metal3.io", "provisionings",
			"/validate-metal3-io-v1alpha1-provisioning", namespace, CBOWebhookService, caBundle)},
	}
}

func service(namespace, name, component string, selector map[string]string, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels(component)},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: selector,
			Ports:    ports,
		},
	}
}
