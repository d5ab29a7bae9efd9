package render

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/controller/provisioning/platform"
)

// Names of what the stack consists of, as OpenShift's cluster-baremetal-operator names them.
const (
	Metal3Deployment  = "metal3"
	BMODeployment     = "metal3-baremetal-operator"
	StateService      = "metal3-state"
	BMOWebhookService = "baremetal-operator-webhook-service"
	BMOWebhookConfig  = "baremetal-operator-validating-webhook-configuration"
	CBOWebhookService = "cluster-baremetal-webhook-service"
	CBOWebhookConfig  = "cluster-baremetal-validating-webhook-configuration"
	// ServiceAccount runs every pod of the stack (and the operator), as in OpenShift.
	ServiceAccount = "cluster-baremetal-operator"
)

// Ports of the stack (OpenShift's).
const (
	IronicPort     = 6385
	HTTPPort       = 6180
	VMediaTLSPort  = 6183
	BMOWebhookPort = 9447
	BMOHealthPort  = 9446
	BMOMetricsPort = 8085
	CBOWebhookPort = 9443
)

// Labels and annotations.
const (
	// OwnedAnnotation marks a Deployment this operator manages ("claims"); it wins over
	// MAOOwnedAnnotation, the machine-api-operator's mark from before this operator existed.
	OwnedAnnotation    = "baremetal.openshift.io/owned"
	MAOOwnedAnnotation = "machine.openshift.io/owned"
	// ComponentLabel is on every object of the stack; its value names the component.
	ComponentLabel = "baremetal.openshift.io/cluster-baremetal-operator"
	// TLSFingerprintAnnotation on a pod template carries a digest of the certificate the pod
	// loads at start, so that a renewed certificate rolls the Deployment.
	TLSFingerprintAnnotation = "baremetal.openshift.io/tls-fingerprint"
	// CredentialsFingerprintAnnotation on a pod template carries a digest of the Ironic
	// credentials (never the credentials), which Ironic and the baremetal-operator read at start:
	// new credentials restart both, so they never disagree.
	CredentialsFingerprintAnnotation = "baremetal.openshift.io/credentials-fingerprint"
	// PullSecretFingerprintAnnotation on the image-customization-controller's pod template
	// carries a digest of the pull secret it reads at start (never the secret).
	PullSecretFingerprintAnnotation = "baremetal.openshift.io/pull-secret-fingerprint"
)

// Paths inside the containers.
const (
	// RunnerPath is the Ironic runner in the Ironic image.
	RunnerPath = "/usr/local/bin/ironic-runner"
	// BMOPath is the baremetal-operator in its image.
	BMOPath = "/usr/local/bin/baremetal-operator"
	// CopyMetalPath copies the agent images out of the machine OS images image (OpenShift's).
	CopyMetalPath = "/bin/copy-metal"

	sharedDir     = "/shared"
	imagesDir     = "/shared/html/images"
	ironicCertDir = "/certs/ironic"
	ironicCADir   = "/certs/ca/ironic"
	authDir       = "/auth"
	bmoCertDir    = "/etc/baremetal-operator/tls"
	ironicDataDir = "/var/lib/ironic"
	// hostImagesDir keeps the agent images on the node across pod restarts.
	hostImagesDir = "/var/lib/metal3/images"
	// Agent images as the machine OS images image writes them.
	agentKernel    = "ironic-python-agent.kernel"
	agentInitramfs = "ironic-python-agent.initramfs"
)

// Images is the images file (images.json from the cluster-baremetal-operator-images ConfigMap),
// with OpenShift's keys. The stack uses the baremetal-operator, Ironic and machine OS images, and,
// when imageCustomizationController is there, the image-customization-controller with the agent
// image (baremetalIronicAgent) it builds into every host's image; the Ironic runner in the Ironic
// image also does what OpenShift runs the static-IP-manager and downloader images for, so those
// keys are accepted and unused.
type Images struct {
	BaremetalOperator            string `json:"baremetalOperator"`
	Ironic                       string `json:"baremetalIronic"`
	MachineOSDownloader          string `json:"baremetalMachineOsDownloader,omitempty"`
	StaticIPManager              string `json:"baremetalStaticIpManager,omitempty"`
	IronicAgent                  string `json:"baremetalIronicAgent,omitempty"`
	ImageCustomizationController string `json:"imageCustomizationController,omitempty"`
	MachineOSImages              string `json:"machineOSImages"`
	ClusterBaremetalOperator     string `json:"clusterBaremetalOperator,omitempty"`
	KubeRBACProxy                string `json:"kubeRBACProxy,omitempty"`
}

// ReadImages reads and checks an images file. Errors name the file and the key.
func ReadImages(path string) (Images, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Images{}, fmt.Errorf("reading the images file: %w", err)
	}
	return ParseImages(path, data)
}

// ParseImages parses an images file's content; name is for messages.
func ParseImages(name string, data []byte) (Images, error) {
	var im Images
	if err := json.Unmarshal(data, &im); err != nil {
		return Images{}, fmt.Errorf("images file %s is not a JSON object of image references: %w", name, err)
	}
	var missing []string
	for key, v := range map[string]string{"baremetalOperator": im.BaremetalOperator, "baremetalIronic": im.Ironic, "machineOSImages": im.MachineOSImages} {
		if strings.TrimSpace(v) == "" {
			missing = append(missing, key)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return Images{}, fmt.Errorf("images file %s has no image for %s", name, strings.Join(missing, ", "))
	}
	return im, nil
}

// Input is everything the stack is rendered from.
type Input struct {
	// Namespace is where the stack runs (openshift-machine-api).
	Namespace string
	// Spec is the Provisioning spec, already validated.
	Spec metal3.ProvisioningSpec
	// Images are the container images.
	Images Images
	// Platform is what the platform allows.
	Platform platform.Features
	// IronicTLSFingerprint digests Ironic's certificate (rolls Ironic when it is renewed);
	// IronicCAFingerprint digests its CA (rolls the baremetal-operator, which trusts it).
	IronicTLSFingerprint string
	IronicCAFingerprint  string
	// IronicCredentialsFingerprint digests the Ironic credentials (secrets.CredentialsFingerprint):
	// new credentials roll Ironic and the baremetal-operator together.
	IronicCredentialsFingerprint string
	// PullSecretFingerprint digests the operator's copy of the cluster's pull secret
	// (secrets.PullSecretFingerprint); "" when the cluster has none.
	PullSecretFingerprint string
	// BMOWebhookCABundle verifies the baremetal-operator's webhook certificate.
	BMOWebhookCABundle []byte
	// Proxy is the cluster's proxy (nil: none).
	Proxy *Proxy
	// IronicHostIPs are the metal3 pod's addresses (the endpoints of the metal3-state Service; the
	// pod uses its node's network), sorted by SortAddresses: where hosts reach Ironic when the
	// spec names no address for it. Empty until the pod has one.
	IronicHostIPs []string
}

// Proxy is the cluster-wide proxy, from the Proxy object's status.
type Proxy struct {
	HTTPProxy, HTTPSProxy, NoProxy string
}
