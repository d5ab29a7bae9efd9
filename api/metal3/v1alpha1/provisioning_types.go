package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Provisioning is OpenShift's cluster-baremetal-operator configuration; it shares the metal3.io
// group. Field names and validation match that operator's CRD so installer-written objects apply.

const (
	// ProvisioningSingletonName is the only accepted name of a Provisioning object.
	ProvisioningSingletonName = "provisioning-configuration"
	// ProvisioningFinalizer blocks deletion of the Provisioning object until the stack it
	// deployed is removed.
	ProvisioningFinalizer = "provisioning.metal3.io"
	// ProvisioningPausedAnnotation on the Provisioning object stops its reconciliation.
	ProvisioningPausedAnnotation = "provisioning.metal3.io/paused"
)

// ProvisioningNetwork is how the provisioning network is run.
// +kubebuilder:validation:Enum=Managed;Unmanaged;Disabled
type ProvisioningNetwork string

const (
	// ProvisioningNetworkManaged: the operator runs DHCP on the provisioning network.
	ProvisioningNetworkManaged ProvisioningNetwork = "Managed"
	// ProvisioningNetworkUnmanaged: a provisioning network exists; DHCP is external.
	ProvisioningNetworkUnmanaged ProvisioningNetwork = "Unmanaged"
	// ProvisioningNetworkDisabled: no provisioning network; virtual media only.
	ProvisioningNetworkDisabled ProvisioningNetwork = "Disabled"
)

// BootIsoSource is where the boot ISO is served from.
// +kubebuilder:validation:Enum=local;http
type BootIsoSource string

const (
	// BootIsoSourceLocal caches the ISO and serves it from the provisioning service.
	BootIsoSourceLocal BootIsoSource = "local"
	// BootIsoSourceHTTP serves the ISO directly from its HTTP location.
	BootIsoSourceHTTP BootIsoSource = "http"
)

// PreProvisioningOSDownloadURLs are CoreOS live image URLs.
type PreProvisioningOSDownloadURLs struct {
	// IsoURL is the live ISO, for virtual media.
	IsoURL string `json:"isoURL,omitempty"`
	// KernelURL is the kernel, for PXE.
	KernelURL string `json:"kernelURL,omitempty"`
	// InitramfsURL is the initramfs, for PXE.
	InitramfsURL string `json:"initramfsURL,omitempty"`
	// RootfsURL is the root file system, for PXE.
	RootfsURL string `json:"rootfsURL,omitempty"`
}

// UnsupportedConfigOverrides are unsupported settings for debugging.
type UnsupportedConfigOverrides struct {
	// IronicAgentImage overrides the agent container image built into preprovisioning images.
	IronicAgentImage string `json:"ironicAgentImage,omitempty"`
}

// PrometheusExporter configures the hardware sensor metrics exporter.
type PrometheusExporter struct {
	// Enabled deploys the exporter in OpenShift; this operator does not deploy it (accepted, with
	// an admission warning, and kept).
	// +optional
	Enabled bool `json:"enabled,omitempty"`
	// SensorCollectionInterval is how often sensor data is collected, in seconds.
	// +optional
	// +kubebuilder:default=60
	// +kubebuilder:validation:Minimum=60
	SensorCollectionInterval int `json:"sensorCollectionInterval,omitempty"`
	// DisableDefaultPrometheusRules skips the default hardware alert rules.
	// +optional
	DisableDefaultPrometheusRules bool `json:"disableDefaultPrometheusRules,omitempty"`
}

// ProvisioningSpec configures the provisioning stack. Beyond the enums, validation happens in
// the operator (webhook and every reconcile), not in the schema.
type ProvisioningSpec struct {
	// ProvisioningInterface is the control-plane NIC on the provisioning network, e.g. "eth1".
	ProvisioningInterface string `json:"provisioningInterface,omitempty"`

	// ProvisioningMacAddresses identify the provisioning NICs by MAC instead of name. OpenShift
	// fills them from the control-plane hosts' bootMACAddress when empty; this operator does not:
	// without them or provisioningInterface the metal3 pod starts only on a node where an
	// interface already holds provisioningIP.
	ProvisioningMacAddresses []string `json:"provisioningMacAddresses,omitempty"`

	// ProvisioningIP is the provisioning service's IP: inside provisioningNetworkCIDR, outside the
	// DHCP range.
	ProvisioningIP string `json:"provisioningIP,omitempty"` //nolint:tagliatelle // wire compatibility

	// ProvisioningNetworkCIDR is the provisioning subnet; at least a /64 for managed IPv6.
	ProvisioningNetworkCIDR string `json:"provisioningNetworkCIDR,omitempty"` //nolint:tagliatelle // wire compatibility

	// ProvisioningDHCPExternal selects Unmanaged when provisioningNetwork is empty.
	//
	// Deprecated: use provisioningNetwork.
	ProvisioningDHCPExternal bool `json:"provisioningDHCPExternal,omitempty"` //nolint:tagliatelle // wire compatibility

	// ProvisioningDHCPRange is "start,end" inside the CIDR; required when Managed.
	ProvisioningDHCPRange string `json:"provisioningDHCPRange,omitempty"` //nolint:tagliatelle // wire compatibility

	// ProvisioningNetworkGateway is the default gateway handed out by DHCP (Managed only).
	ProvisioningNetworkGateway string `json:"provisioningNetworkGateway,omitempty"`

	// ProvisioningOSDownloadURL is a legacy qcow2 OS image URL (with a sha256 query parameter).
	ProvisioningOSDownloadURL string `json:"provisioningOSDownloadURL,omitempty"` //nolint:tagliatelle // wire compatibility

	// ProvisioningNetwork is Managed, Unmanaged or Disabled; empty means Managed (or Unmanaged
	// with provisioningDHCPExternal).
	ProvisioningNetwork ProvisioningNetwork `json:"provisioningNetwork,omitempty"`

	// ProvisioningDNS hands out DNS through the provisioning DHCP server.
	ProvisioningDNS bool `json:"provisioningDNS,omitempty"` //nolint:tagliatelle // wire compatibility

	// AdditionalNTPServers are added to the agent ramdisk's time configuration.
	AdditionalNTPServers []string `json:"additionalNTPServers,omitempty"` //nolint:tagliatelle // wire compatibility

	// WatchAllNamespaces makes the stack manage hosts in every namespace, not only its own.
	WatchAllNamespaces bool `json:"watchAllNamespaces,omitempty"`

	// BootIsoSource is where the boot ISO is served from.
	BootIsoSource BootIsoSource `json:"bootIsoSource,omitempty"`

	// VirtualMediaViaExternalNetwork makes hosts boot virtual media and reach the provisioning
	// service over the external network even when a provisioning network exists.
	VirtualMediaViaExternalNetwork bool `json:"virtualMediaViaExternalNetwork,omitempty"`

	// PreprovisioningOSDownloadURLs are CoreOS live image URLs.
	PreprovisioningOSDownloadURLs PreProvisioningOSDownloadURLs `json:"preProvisioningOSDownloadURLs,omitempty"` //nolint:tagliatelle // wire compatibility

	// DisableVirtualMediaTLS serves virtual media over plain HTTP, for BMCs that refuse HTTPS.
	DisableVirtualMediaTLS bool `json:"disableVirtualMediaTLS,omitempty"` //nolint:tagliatelle // wire compatibility

	// UnsupportedConfigOverrides are unsupported settings.
	// +optional
	UnsupportedConfigOverrides *UnsupportedConfigOverrides `json:"unsupportedConfigOverrides,omitempty"`

	// PrometheusExporter configures hardware sensor metrics.
	// +optional
	PrometheusExporter *PrometheusExporter `json:"prometheusExporter,omitempty"`

	// ExternalIPs are the provisioning service's external addresses; the first is advertised.
	// +optional
	ExternalIPs []string `json:"externalIPs,omitempty"` //nolint:tagliatelle // wire compatibility
}

// OperatorCondition is a condition in OpenShift's operator status shape.
type OperatorCondition struct {
	// Type of the condition.
	Type string `json:"type"`
	// Status is True, False or Unknown.
	Status metav1.ConditionStatus `json:"status"`
	// LastTransitionTime is when the status last changed.
	// +optional
	// +nullable
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
	// +optional
	Reason string `json:"reason,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
}

// GenerationStatus records the last generation of a resource the operator acted on.
type GenerationStatus struct {
	Group     string `json:"group"`
	Resource  string `json:"resource"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// LastGeneration is the resource's generation the operator last acted on.
	LastGeneration int64 `json:"lastGeneration"`
	// Hash is for resources without a generation (Secrets, ConfigMaps).
	// +optional
	Hash string `json:"hash"`
}

// OperatorStatus has the JSON shape of OpenShift's operator/v1 OperatorStatus, which
// cluster-baremetal-operator inlines into the Provisioning status. It is written here so the API
// package depends on Kubernetes machinery only.
type OperatorStatus struct {
	// ObservedGeneration is the spec generation the operator last finished.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []OperatorCondition `json:"conditions,omitempty"`
	// +optional
	Version string `json:"version,omitempty"`
	// +optional
	ReadyReplicas int32 `json:"readyReplicas"`
	// LatestAvailableRevision is the newest deployment revision; it only increases.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self >= oldSelf",message="must only increase"
	LatestAvailableRevision int32 `json:"latestAvailableRevision,omitempty"`
	// Generations track the resources the operator deployed.
	// +optional
	// +listType=map
	// +listMapKey=group
	// +listMapKey=resource
	// +listMapKey=namespace
	// +listMapKey=name
	Generations []GenerationStatus `json:"generations,omitempty"`
}

// ProvisioningStatus is the Provisioning operator's status.
type ProvisioningStatus struct {
	OperatorStatus `json:",inline"`
}

// Provisioning configures the bare-metal provisioning stack of a cluster. It is a singleton
// named "provisioning-configuration", normally created by the installer.
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=provisionings,scope=Cluster
// +kubebuilder:subresource:status
type Provisioning struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ProvisioningSpec   `json:"spec,omitempty"`
	Status ProvisioningStatus `json:"status,omitempty"`
}

// ProvisioningList is a list of Provisionings.
// +kubebuilder:object:root=true
type ProvisioningList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Provisioning `json:"items"`
}

func init() {
	register(&Provisioning{}, &ProvisioningList{})
}
