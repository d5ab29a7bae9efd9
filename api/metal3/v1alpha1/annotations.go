package v1alpha1

// Annotations, labels and finalizers. Their values are metal3's: tools written for metal3
// (cluster-api-provider-metal3, clusterctl move, the assisted service) set and read them.

// Annotations on a BareMetalHost.
const (
	// PausedAnnotation stops reconciliation of the host while present. Its value names who paused
	// it (CAPM3 uses "metal3.io/capm3"); any value pauses.
	PausedAnnotation = "baremetalhost.metal3.io/paused"

	// DetachedAnnotation removes the host from the provisioner without changing its provisioning
	// state; status.operationalStatus becomes "detached". The value is empty or the JSON form of
	// DetachedAnnotationArguments.
	DetachedAnnotation = "baremetalhost.metal3.io/detached"

	// StatusAnnotation carries a JSON copy of the status, written by tools that move hosts between
	// clusters. When a host has an empty status and this annotation, the status is restored from it
	// and the annotation removed.
	StatusAnnotation = "baremetalhost.metal3.io/status"

	// RebootAnnotationPrefix requests a reboot. The plain key is one-shot (removed once the host is
	// off); keys with a suffix ("reboot.metal3.io/<owner>") keep the host off until their owner
	// removes them. The value is empty or the JSON form of RebootAnnotationArguments.
	RebootAnnotationPrefix = "reboot.metal3.io"

	// InspectAnnotationPrefix with an empty value on an available host requests re-inspection;
	// with the value "disabled" it disables inspection (deprecated: use spec.inspectionMode).
	InspectAnnotationPrefix = "inspect.metal3.io"

	// InspectAnnotationValueDisabled is the value of InspectAnnotationPrefix that disables inspection.
	//
	// Deprecated: use spec.inspectionMode: disabled.
	InspectAnnotationValueDisabled = "disabled"

	// HardwareDetailsAnnotation carries JSON HardwareDetails to use instead of inspection. It is
	// consumed into status.hardware and removed.
	HardwareDetailsAnnotation = InspectAnnotationPrefix + "/hardwaredetails"
)

// Labels.
const (
	// EnvironmentLabel marks every Secret the operator reads, so that its Secret cache can be
	// limited to them instead of holding every Secret of the cluster.
	EnvironmentLabel = "environment.metal3.io"
	// EnvironmentLabelValue is the value of EnvironmentLabel.
	EnvironmentLabelValue = "baremetal"
)

// Finalizers.
const (
	// BareMetalHostFinalizer blocks deletion of a host until it is deprovisioned and removed from
	// the provisioner.
	BareMetalHostFinalizer = "baremetalhost.metal3.io"
	// SecretsFinalizer is put on Secrets a host uses (BMC credentials, user/network/meta data,
	// preprovisioning network data) while the host uses them.
	SecretsFinalizer = BareMetalHostFinalizer + "/secret"
	// HardwareDataFinalizer is put on HardwareData by the host controller.
	HardwareDataFinalizer = BareMetalHostFinalizer + "/hardwareData"
	// HostPreprovisioningImageFinalizer is a finalizer another controller may put on a
	// PreprovisioningImage to keep its image served (ICC waits for it); the baremetal-operator
	// adds none: it deletes the image only once the host no longer boots the agent. metal3's
	// baremetal-operator puts it on the images it makes: this one removes it from its host's
	// image when it deletes it (or finds it deleted), as metal3 does.
	HostPreprovisioningImageFinalizer = BareMetalHostFinalizer + "/preprovisioningImage"
	// PreprovisioningImageFinalizer is put on a PreprovisioningImage by the image controller, which
	// discards the built image before removing it.
	PreprovisioningImageFinalizer = "preprovisioningimage.metal3.io"
	// DataImageFinalizer is put on DataImages by the host controller.
	DataImageFinalizer = "dataimage.metal3.io"
	// BMCEventSubscriptionFinalizer is put on BMCEventSubscriptions by their controller.
	BMCEventSubscriptionFinalizer = "bmceventsubscription.metal3.io"
)

// RebootMode is how a host is turned off for a reboot.
type RebootMode string

const (
	// RebootModeHard cuts the power.
	RebootModeHard RebootMode = "hard"
	// RebootModeSoft asks the operating system to shut down (falls back to hard when the BMC
	// cannot do it).
	RebootModeSoft RebootMode = "soft"
)

// RebootAnnotationArguments is the JSON value of a reboot annotation. When several reboot
// annotations are present, any hard one wins.
type RebootAnnotationArguments struct {
	Mode RebootMode `json:"mode"`
	// Force reboots even a host that is running the inspection or deploy ramdisk.
	Force bool `json:"force"`
}

// DetachedDeleteAction says what deleting a detached host does.
type DetachedDeleteAction string

const (
	// DetachedDeleteActionDelay blocks deletion of the host while the detached annotation is there.
	DetachedDeleteActionDelay DetachedDeleteAction = "delay"
	// DetachedDeleteActionDelete deletes the host without deprovisioning it (the default).
	DetachedDeleteActionDelete DetachedDeleteAction = "delete"
)

// DetachedAnnotationArguments is the JSON value of the detached annotation.
type DetachedAnnotationArguments struct {
	// DeleteAction is what deleting the host does while it is detached.
	DeleteAction DetachedDeleteAction `json:"deleteAction,omitempty"`
	// Force detaches the host whatever its state, aborting work in progress in the provisioner.
	// +optional
	Force bool `json:"force,omitempty"`
}

// Labels and annotations on a PreprovisioningImage for OpenShift's assisted installer flow
// (the host controller copies a host's labels to its PreprovisioningImage).
const (
	// InfraEnvLabel links a host to an assisted-service InfraEnv. An image customization
	// controller builds such a host's image only once IgnitionOverrideURIAnnotation is set.
	InfraEnvLabel = "infraenvs.agent-install.openshift.io"
	// IgnitionOverrideURIAnnotation names an Ignition config (http or https) that is merged into
	// the agent image's own.
	IgnitionOverrideURIAnnotation = "baremetal.openshift.io/ignition-override-uri"
	// ImageSHA256Annotation is Metalforge's: the image-customization-controller writes the
	// sha256 of the image at status.imageUrl here, as "<hex digest>  <file name>" (the
	// sha256sum line of the URL's last path element). The PreprovisioningImage status has no
	// checksum field, and a field of our own would be pruned where metal3's CRD is installed.
	ImageSHA256Annotation = "preprovisioningimage.metalforge.io/sha256sum"
)

// HTTPHeadersVersionAnnotation is Metalforge's: on a BMCEventSubscription, a keyed digest
// ("hmac-sha256:<hex>") of the headers from its spec.httpHeadersRef Secret that the subscription
// on the BMC carries. The BMCEventSubscription controller creates the subscription again when
// the headers change (a rotated token), not when only the Secret's metadata does; the status has
// no field for it, and one of our own would be pruned where metal3's CRD is installed.
const HTTPHeadersVersionAnnotation = "bmceventsubscription.metalforge.io/http-headers-version"
