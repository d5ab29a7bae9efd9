package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BootMode is the firmware boot mode of a host.
// +kubebuilder:validation:Enum=UEFI;UEFISecureBoot;legacy
type BootMode string

const (
	// UEFI boots in UEFI mode.
	UEFI BootMode = "UEFI"
	// UEFISecureBoot boots in UEFI mode and turns secure boot on after provisioning.
	UEFISecureBoot BootMode = "UEFISecureBoot"
	// Legacy boots in BIOS mode, for hardware whose UEFI does not work.
	Legacy BootMode = "legacy"
	// DefaultBootMode is used when spec.bootMode is empty.
	DefaultBootMode = UEFI
)

// InspectionMode says how a host's hardware is inspected.
// +kubebuilder:validation:Enum=disabled;agent;fast
type InspectionMode string

const (
	// InspectionModeDisabled skips inspection; bootMACAddress is then required.
	InspectionModeDisabled InspectionMode = "disabled"
	// InspectionModeAgent boots the agent ramdisk and inspects in-band (the default).
	InspectionModeAgent InspectionMode = "agent"
	// InspectionModeFast inspects out-of-band through the BMC (Redfish) without booting a
	// ramdisk: seconds instead of minutes, with fewer details.
	InspectionModeFast InspectionMode = "fast"
)

// AutomatedCleaningMode says whether disks are cleaned before provisioning and after
// deprovisioning.
// +kubebuilder:validation:Enum=metadata;disabled
type AutomatedCleaningMode string

const (
	// CleaningModeMetadata wipes partition tables and metadata (the default).
	CleaningModeMetadata AutomatedCleaningMode = "metadata"
	// CleaningModeDisabled skips automated cleaning.
	CleaningModeDisabled AutomatedCleaningMode = "disabled"
)

// BMCDetails says how to reach a host's baseboard management controller.
type BMCDetails struct {
	// Address is the BMC URL; its scheme selects the driver, e.g.
	// "redfish-virtualmedia://10.0.0.5/redfish/v1/Systems/1" or "ipmi://10.0.0.5:623".
	Address string `json:"address"`

	// CredentialsName is the Secret in the host's namespace holding the keys "username" and
	// "password".
	CredentialsName string `json:"credentialsName"`

	// DisableCertificateVerification skips verification of the BMC's TLS certificate. Needed for
	// self-signed certificates; insecure.
	DisableCertificateVerification bool `json:"disableCertificateVerification,omitempty"`
}

// BareMetalHostSpec is the desired state of a host.
type BareMetalHostSpec struct {
	// Taints was meant for the corresponding Machine.
	//
	// Deprecated: never implemented; kept so that manifests that set it are accepted.
	// +optional
	Taints []corev1.Taint `json:"taints,omitempty"`

	// BMC says how to reach the host's BMC. A host without BMC details stays unmanaged.
	BMC BMCDetails `json:"bmc,omitempty"`

	// RAID is applied while preparing, before provisioning. When unset the current RAID
	// configuration is left alone. Only one of hardwareRAIDVolumes and softwareRAIDVolumes may be
	// set.
	RAID *RAIDConfig `json:"raid,omitempty"`

	// Firmware held a few fixed BIOS settings.
	//
	// Deprecated: rejected by the webhook; use HostFirmwareSettings.
	Firmware *FirmwareConfig `json:"firmware,omitempty"`

	// HardwareProfile names a hardware profile.
	//
	// Deprecated: use architecture and rootDeviceHints. "empty" is accepted.
	HardwareProfile string `json:"hardwareProfile,omitempty"`

	// RootDeviceHints select the disk the image is written to. Without hints the first suitable
	// disk is used.
	RootDeviceHints *RootDeviceHints `json:"rootDeviceHints,omitempty"`

	// BootMode is the firmware boot mode. Legacy is only for hardware whose UEFI does not work;
	// UEFISecureBoot turns secure boot on after provisioning. Empty means UEFI; the schema has
	// no default, as metal3's, so a stored host keeps the field as its manifest had it.
	// +optional
	BootMode BootMode `json:"bootMode,omitempty"`

	// BootMACAddress is the MAC address of the NIC the host provisions through (the PXE NIC for
	// network boot). Never the BMC's MAC. Required for libvirt and when inspection is disabled.
	// +kubebuilder:validation:Pattern=`[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}`
	BootMACAddress string `json:"bootMACAddress,omitempty"`

	// Online is the desired power state. In stable states (available, provisioned) the power is
	// kept equal to it.
	Online bool `json:"online"`

	// ConsumerRef marks the host as in use by the referenced object (for example a CAPM3
	// Metal3Machine).
	ConsumerRef *corev1.ObjectReference `json:"consumerRef,omitempty"`

	// Image is written to the host; setting it starts provisioning.
	Image *Image `json:"image,omitempty"`

	// UserData references the Secret (key "userData", else "value") passed to the config drive
	// for first-boot software such as cloud-init.
	UserData *corev1.SecretReference `json:"userData,omitempty"`

	// PreprovisioningNetworkDataName is the Secret in the host's namespace with the network
	// configuration for the agent ramdisk (built into its PreprovisioningImage). It is also the
	// config drive's network data when networkData is not set.
	PreprovisioningNetworkDataName string `json:"preprovisioningNetworkDataName,omitempty"`

	// NetworkData references the Secret (key "networkData", else "value") with the network
	// configuration passed to the config drive.
	NetworkData *corev1.SecretReference `json:"networkData,omitempty"`

	// MetaData references the Secret (key "metaData", else "value") with the config drive's
	// metadata. Generated when unset; most users leave it unset.
	MetaData *corev1.SecretReference `json:"metaData,omitempty"`

	// Description is free text to help people identify the host.
	Description string `json:"description,omitempty"`

	// ExternallyProvisioned says something else put the running image on the host; only power is
	// managed. Settable at creation, or later only while the host is available.
	ExternallyProvisioned bool `json:"externallyProvisioned,omitempty"`

	// AutomatedCleaningMode says whether disks are cleaned before provisioning and after
	// deprovisioning.
	// +optional
	// +kubebuilder:default=metadata
	AutomatedCleaningMode AutomatedCleaningMode `json:"automatedCleaningMode,omitempty"`

	// CustomDeploy runs a deploy step of a site-specific deploy ramdisk instead of writing an
	// image. Setting it starts provisioning.
	// +optional
	CustomDeploy *CustomDeploy `json:"customDeploy,omitempty"`

	// Architecture is the CPU architecture, e.g. "x86_64" or "aarch64". Filled from inspection
	// when empty.
	// +optional
	Architecture string `json:"architecture,omitempty"`

	// DisablePowerOff replaces power off with reboot, for hosts that must never be off. Cannot be
	// combined with online: false.
	// +optional
	DisablePowerOff bool `json:"disablePowerOff,omitempty"`

	// InspectionMode says how the hardware is inspected: "agent" (default), "fast" (out-of-band
	// through the BMC) or "disabled".
	// +optional
	InspectionMode InspectionMode `json:"inspectionMode,omitempty"`
}

// BareMetalHost is a physical server managed through its BMC.
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=bmh;bmhost
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Status",type="string",JSONPath=".status.operationalStatus",description="Operational status",priority=1
// +kubebuilder:printcolumn:name="State",type="string",JSONPath=".status.provisioning.state",description="Provisioning status"
// +kubebuilder:printcolumn:name="Consumer",type="string",JSONPath=".spec.consumerRef.name",description="Consumer using this host"
// +kubebuilder:printcolumn:name="BMC",type="string",JSONPath=".spec.bmc.address",description="Address of management controller",priority=1
// +kubebuilder:printcolumn:name="Online",type="string",JSONPath=".spec.online",description="Whether the host is online or not"
// +kubebuilder:printcolumn:name="Error",type="string",JSONPath=".status.errorType",description="Type of the most recent error"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="Time duration since creation of BaremetalHost"
type BareMetalHost struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   BareMetalHostSpec   `json:"spec,omitempty"`
	Status BareMetalHostStatus `json:"status,omitempty"`
}

// BareMetalHostList is a list of BareMetalHosts.
// +kubebuilder:object:root=true
type BareMetalHostList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BareMetalHost `json:"items"`
}

func init() {
	register(&BareMetalHost{}, &BareMetalHostList{})
}
