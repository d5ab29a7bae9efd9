package v1alpha1

// HardwareDetails is what inspection found on a host.
type HardwareDetails struct {
	// SystemVendor identifies the system.
	SystemVendor HardwareSystemVendor `json:"systemVendor,omitempty"`
	// Firmware is the system firmware.
	Firmware Firmware `json:"firmware,omitempty"`
	// RAMMebibytes is the memory size in MiB.
	RAMMebibytes int `json:"ramMebibytes,omitempty"`
	// NIC lists the network interfaces.
	NIC []NIC `json:"nics,omitempty"`
	// Storage lists the disks.
	Storage []Storage `json:"storage,omitempty"`
	// CPU describes the processors.
	CPU CPU `json:"cpu,omitempty"`
	// Hostname is the host name seen at inspection time.
	Hostname string `json:"hostname,omitempty"`
}

// HardwareSystemVendor identifies a whole system.
type HardwareSystemVendor struct {
	Manufacturer string `json:"manufacturer,omitempty"`
	ProductName  string `json:"productName,omitempty"`
	SerialNumber string `json:"serialNumber,omitempty"`
}

// Firmware is a host's system firmware.
type Firmware struct {
	// BIOS is the BIOS/UEFI firmware.
	BIOS BIOS `json:"bios,omitempty"`
}

// BIOS identifies a BIOS/UEFI firmware build.
type BIOS struct {
	// Date is the release date as the firmware reports it.
	Date string `json:"date,omitempty"`
	// Vendor of the firmware.
	Vendor string `json:"vendor,omitempty"`
	// Version of the firmware.
	Version string `json:"version,omitempty"`
}

// ClockSpeed is a clock frequency in MHz.
// +kubebuilder:validation:Format=double
type ClockSpeed float64

// ClockSpeed units.
const (
	MegaHertz ClockSpeed = 1.0
	GigaHertz            = 1000 * MegaHertz
)

// CPU describes the processors of a host.
type CPU struct {
	Arch           string     `json:"arch,omitempty"`
	Model          string     `json:"model,omitempty"`
	ClockMegahertz ClockSpeed `json:"clockMegahertz,omitempty"`
	Flags          []string   `json:"flags,omitempty"`
	Count          int        `json:"count,omitempty"`
}

// Capacity is a size in bytes.
type Capacity int64

// Capacity units.
const (
	Byte     Capacity = 1
	KibiByte          = Byte * 1024
	KiloByte          = Byte * 1000
	MebiByte          = KibiByte * 1024
	MegaByte          = KiloByte * 1000
	GibiByte          = MebiByte * 1024
	GigaByte          = MegaByte * 1000
	TebiByte          = GibiByte * 1024
	TeraByte          = GigaByte * 1000
)

// DiskType is the kind of a disk.
type DiskType string

// Disk types.
const (
	HDD  DiskType = "HDD"
	SSD  DiskType = "SSD"
	NVME DiskType = "NVME"
)

// Storage describes one disk.
type Storage struct {
	// Name is a device name stable across reboots when one exists, e.g.
	// "/dev/disk/by-path/pci-0000:01:00.0-scsi-0:2:0:0".
	Name string `json:"name,omitempty"`

	// AlternateNames are other device names, e.g. "/dev/sda"; not all of them, and not stable.
	AlternateNames []string `json:"alternateNames,omitempty"`

	// Rotational is true for spinning disks. Prefer type.
	Rotational bool `json:"rotational,omitempty"`

	// Type is HDD, SSD or NVME.
	// +kubebuilder:validation:Optional
	// +kubebuilder:validation:Enum=HDD;SSD;NVME
	Type DiskType `json:"type,omitempty"`

	// SizeBytes is the size in bytes.
	SizeBytes Capacity `json:"sizeBytes,omitempty"`

	Vendor       string `json:"vendor,omitempty"`
	Model        string `json:"model,omitempty"`
	SerialNumber string `json:"serialNumber,omitempty"`

	WWN                string `json:"wwn,omitempty"`
	WWNVendorExtension string `json:"wwnVendorExtension,omitempty"`
	WWNWithExtension   string `json:"wwnWithExtension,omitempty"`

	// HCTL is the SCSI address.
	HCTL string `json:"hctl,omitempty"`
}

// VLANID is a 12-bit 802.1Q VLAN identifier.
// +kubebuilder:validation:Type=integer
// +kubebuilder:validation:Minimum=0
// +kubebuilder:validation:Maximum=4094
type VLANID int32

// VLAN is a VLAN seen on a NIC.
type VLAN struct {
	ID   VLANID `json:"id,omitempty"`
	Name string `json:"name,omitempty"`
}

// LLDP is what the switch port a NIC is plugged into announces.
type LLDP struct {
	// SwitchID is the switch chassis ID.
	// +optional
	SwitchID string `json:"switchID,omitempty"`
	// PortID is the switch port ID.
	// +optional
	PortID string `json:"portID,omitempty"`
	// SwitchSystemName is the switch's system name.
	// +optional
	SwitchSystemName string `json:"switchSystemName,omitempty"`
}

// NIC describes one network interface. A dual-stack interface appears twice, once per address.
type NIC struct {
	// Name is the interface name, e.g. "eno1".
	Name string `json:"name,omitempty"`

	// Model is the vendor and product IDs, e.g. "0x8086 0x1572".
	Model string `json:"model,omitempty"`

	// MAC is the interface's MAC address.
	// +kubebuilder:validation:Pattern=`[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}`
	MAC string `json:"mac,omitempty"`

	// IP is the interface's IPv4 or IPv6 address, if any.
	IP string `json:"ip,omitempty"`

	// SpeedGbps is the link speed in Gbit/s.
	SpeedGbps int `json:"speedGbps,omitempty"`

	// VLANs are the VLANs seen on the interface.
	VLANs []VLAN `json:"vlans,omitempty"`

	// VLANID is the untagged VLAN.
	VLANID VLANID `json:"vlanId,omitempty"`

	// PXE is true when the interface can PXE boot.
	PXE bool `json:"pxe,omitempty"`

	// LLDP is what the switch announces on this interface.
	// +optional
	LLDP *LLDP `json:"lldp,omitempty"`

	// PCIAddress is the interface's PCI address, e.g. "0000:3b:00.0".
	// +optional
	PCIAddress string `json:"pciAddress,omitempty"`
}
