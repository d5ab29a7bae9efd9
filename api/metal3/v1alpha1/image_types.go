package v1alpha1

import "strings"

// ChecksumType is the algorithm of an image checksum.
// +kubebuilder:validation:Enum=md5;sha256;sha512;auto
type ChecksumType string

const (
	// MD5 checksum (assumed when checksumType is empty, as in metal3).
	MD5 ChecksumType = "md5"
	// SHA256 checksum.
	SHA256 ChecksumType = "sha256"
	// SHA512 checksum.
	SHA512 ChecksumType = "sha512"
	// AutoChecksum lets the provisioner detect the algorithm from the checksum's length.
	AutoChecksum ChecksumType = "auto"
)

// Image formats of Image.DiskFormat.
const (
	// DiskFormatLiveISO boots an ISO 9660 image without writing it to disk.
	DiskFormatLiveISO = "live-iso"
)

// Image is an image to write to a host, or the one that was written.
type Image struct {
	// URL is where the image is downloaded from (http(s):// or oci://).
	URL string `json:"url"`

	// Checksum is the image checksum, or a URL of a checksum file. Required except for live-iso
	// and oci:// images.
	Checksum string `json:"checksum,omitempty"`

	// ChecksumType is the checksum algorithm; "auto", or empty, lets Ironic tell it from the
	// checksum (metal3 since v0.10).
	ChecksumType ChecksumType `json:"checksumType,omitempty"`

	// DiskFormat is the image format. "live-iso" boots the ISO instead of writing it to disk.
	// +kubebuilder:validation:Enum=raw;qcow2;vdi;vmdk;live-iso
	DiskFormat *string `json:"format,omitempty"`

	// OCIAuthSecretName names a docker-config Secret in the host's namespace with registry
	// credentials for oci:// images.
	// +optional
	OCIAuthSecretName *string `json:"ociAuthSecretName,omitempty"`
}

// IsLiveISO reports whether the image is booted as a live ISO rather than written to disk.
func (image *Image) IsLiveISO() bool {
	return image != nil && image.DiskFormat != nil && *image.DiskFormat == DiskFormatLiveISO
}

// IsOCI reports whether the image comes from an OCI registry (oci:// URL).
func (image *Image) IsOCI() bool {
	return image != nil && strings.HasPrefix(strings.ToLower(image.URL), "oci://")
}

// CustomDeploy replaces writing an image with a deploy step of a custom deploy ramdisk.
type CustomDeploy struct {
	// Method is the deploy step's name, specific to the ramdisk.
	Method string `json:"method"`
}
