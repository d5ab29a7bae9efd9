package v1alpha1

// RootDeviceHints select the disk an image is written to. All given hints must match.
type RootDeviceHints struct {
	// DeviceName is a Linux device name like "/dev/vda", or a by-path link like
	// "/dev/disk/by-path/pci-0000:01:00.0-scsi-0:2:0:0". Exact match.
	DeviceName string `json:"deviceName,omitempty"`

	// HCTL is a SCSI address like "0:0:0:0". Exact match.
	HCTL string `json:"hctl,omitempty"`

	// Model is a vendor-specific device identifier. Substring match.
	Model string `json:"model,omitempty"`

	// Vendor is the device vendor. Substring match.
	Vendor string `json:"vendor,omitempty"`

	// SerialNumber is the device serial number. Exact match.
	SerialNumber string `json:"serialNumber,omitempty"`

	// MinSizeGigabytes is the smallest acceptable size in GB.
	// +kubebuilder:validation:Minimum=0
	MinSizeGigabytes int `json:"minSizeGigabytes,omitempty"`

	// WWN is the unique storage identifier. Exact match.
	WWN string `json:"wwn,omitempty"`

	// WWNWithExtension is the WWN with the vendor extension appended. Exact match.
	WWNWithExtension string `json:"wwnWithExtension,omitempty"`

	// WWNVendorExtension is the vendor's storage identifier. Exact match.
	WWNVendorExtension string `json:"wwnVendorExtension,omitempty"`

	// Rotational selects spinning (true) or solid-state (false) disks.
	Rotational *bool `json:"rotational,omitempty"`
}

// HardwareRAIDVolume is one logical disk built by the RAID controller.
type HardwareRAIDVolume struct {
	// SizeGibibytes is the size in GiB; 0 or unset uses the whole capacity.
	// +kubebuilder:validation:Minimum=0
	SizeGibibytes *int `json:"sizeGibibytes,omitempty"`

	// Level is the RAID level; drivers may support only some.
	// +kubebuilder:validation:Enum="0";"1";"2";"5";"6";"1+0";"5+0";"6+0"
	Level string `json:"level"`

	// Name of the volume, unique on the host; generated when empty.
	// +kubebuilder:validation:MaxLength=64
	Name string `json:"name,omitempty"`

	// Rotational restricts the volume to spinning (true) or solid-state (false) disks.
	Rotational *bool `json:"rotational,omitempty"`

	// NumberOfPhysicalDisks defaults to the minimum the level needs.
	// +kubebuilder:validation:Minimum=1
	NumberOfPhysicalDisks *int `json:"numberOfPhysicalDisks,omitempty"`

	// Controller names the RAID controller to use.
	Controller string `json:"controller,omitempty"`

	// PhysicalDisks names the disks to use, in the controller's own naming.
	PhysicalDisks []string `json:"physicalDisks,omitempty"`
}

// SoftwareRAIDVolume is one Linux software RAID device.
type SoftwareRAIDVolume struct {
	// RootVolume makes this volume the root device. At most one volume may set it.
	// +kubebuilder:default=false
	RootVolume bool `json:"rootVolume,omitempty"`

	// SizeGibibytes is the size in GiB; 0 or unset uses the whole capacity.
	// +kubebuilder:validation:Minimum=0
	SizeGibibytes *int `json:"sizeGibibytes,omitempty"`

	// Level is the RAID level.
	// +kubebuilder:validation:Enum="0";"1";"1+0"
	Level string `json:"level"`

	// PhysicalDisks select the member disks, at least two.
	// +kubebuilder:validation:MinItems=2
	PhysicalDisks []RootDeviceHints `json:"physicalDisks,omitempty"`
}

// RAIDConfig is the RAID layout applied while preparing.
type RAIDConfig struct {
	// HardwareRAIDVolumes are the logical disks for hardware RAID; without root device hints the
	// first one is the root volume. "[]" clears the hardware RAID configuration.
	// +optional
	// +nullable
	HardwareRAIDVolumes []HardwareRAIDVolume `json:"hardwareRAIDVolumes"`

	// SoftwareRAIDVolumes are one or two software RAID devices; the first must be RAID-1 so a
	// single disk failure cannot make the host unbootable. Ignored when hardwareRAIDVolumes is
	// set. Software RAID is always recreated.
	// +optional
	// +nullable
	// +kubebuilder:validation:MaxItems=2
	SoftwareRAIDVolumes []SoftwareRAIDVolume `json:"softwareRAIDVolumes"`
}

// FirmwareConfig held a few fixed BIOS settings.
//
// Deprecated: no driver supports it; the webhook rejects it. Use HostFirmwareSettings.
type FirmwareConfig struct {
	// VirtualizationEnabled turned platform virtualization on.
	// +kubebuilder:validation:Enum=true;false
	VirtualizationEnabled *bool `json:"virtualizationEnabled,omitempty"`

	// SimultaneousMultithreadingEnabled turned SMT (hyper-threading) on.
	// +kubebuilder:validation:Enum=true;false
	SimultaneousMultithreadingEnabled *bool `json:"simultaneousMultithreadingEnabled,omitempty"`

	// SriovEnabled turned SR-IOV on.
	// +kubebuilder:validation:Enum=true;false
	SriovEnabled *bool `json:"sriovEnabled,omitempty"`
}
