package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// ImageFormat is the format of a preprovisioning (agent) image.
// +kubebuilder:validation:Enum=iso;initrd
type ImageFormat string

const (
	// ImageFormatISO is a bootable ISO (virtual media).
	ImageFormatISO ImageFormat = "iso"
	// ImageFormatInitRD is an initramfs booted with a kernel over the network.
	ImageFormatInitRD ImageFormat = "initrd"
)

// PreprovisioningImageSpec asks for an agent image for one host. The host controller creates it
// with the host's name and keeps it in sync with the host.
type PreprovisioningImageSpec struct {
	// NetworkDataName is the Secret in the same namespace whose network data is built into the
	// image.
	// +optional
	NetworkDataName string `json:"networkDataName,omitempty"`

	// Architecture is the CPU architecture to build for, e.g. "x86_64".
	// +optional
	Architecture string `json:"architecture,omitempty"`

	// AcceptFormats are the formats the host can boot, most preferred first.
	// +optional
	AcceptFormats []ImageFormat `json:"acceptFormats,omitempty"`
}

// SecretStatus identifies one version of a Secret.
type SecretStatus struct {
	Name    string `json:"name,omitempty"`
	Version string `json:"version,omitempty"`
}

// PreprovisioningImageStatus describes the built image. It is usable when the Ready condition is
// True for the current generation and format, architecture and network data match the spec.
type PreprovisioningImageStatus struct {
	// ImageURL is where the built image is downloaded from.
	ImageURL string `json:"imageUrl,omitempty"` //nolint:tagliatelle // wire compatibility with metal3

	// KernelURL is where the kernel for an initrd image is downloaded from.
	// +optional
	KernelURL string `json:"kernelUrl,omitempty"` //nolint:tagliatelle // wire compatibility with metal3

	// ExtraKernelParams are kernel parameters to boot an initrd image with.
	// +optional
	ExtraKernelParams string `json:"extraKernelParams,omitempty"`

	// Format is the format of the image at imageUrl.
	// +optional
	Format ImageFormat `json:"format,omitempty"`

	// NetworkData is the network data Secret version built into the image.
	// +optional
	NetworkData SecretStatus `json:"networkData,omitempty"`

	// Architecture is the CPU architecture the image was built for.
	Architecture string `json:"architecture,omitempty"`

	// Conditions: Ready and Error.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchMergeKey=type
	// +patchStrategy=merge
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// PreprovisioningImage is a request for a host-specific agent image (ISO or initrd) with the
// host's network data built in.
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=ppimg
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status",description="Whether the image is ready"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].reason",description="The reason for the image readiness status"
type PreprovisioningImage struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PreprovisioningImageSpec   `json:"spec,omitempty"`
	Status PreprovisioningImageStatus `json:"status,omitempty"`
}

// PreprovisioningImageList is a list of PreprovisioningImages.
// +kubebuilder:object:root=true
type PreprovisioningImageList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PreprovisioningImage `json:"items"`
}

func init() {
	register(&PreprovisioningImage{}, &PreprovisioningImageList{})
}
