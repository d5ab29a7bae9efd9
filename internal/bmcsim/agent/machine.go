package agent

// Machine is what the simulated agent sees of the server it runs on. bmcsim's simulated server
// implements it; the agent never touches Redfish state directly.
type Machine interface {
	// ID is the server's Redfish system id (unique within one bmcsim).
	ID() string
	// MACAddresses lists the server's NIC MACs, boot NIC first; the agent looks itself up with them.
	MACAddresses() []string
	// Inventory is the hardware as the agent reports it to Ironic during inspection.
	Inventory() Inventory
	// PowerOff turns the server off as the running OS would (standby.power_off); the BMC then reports Off.
	PowerOff()
	// WriteDisk records that an image was written to the root disk, so the server later boots "from disk".
	WriteDisk(imageURL string)
	// FailDeploy reports whether fault injection wants this server's agent to crash in the middle of a deploy.
	FailDeploy() bool
	// LoseAgentToken reports whether fault injection wants the agent to lose the lookup answer that
	// carries its token.
	LoseAgentToken() bool
}

// Inventory is the hardware inventory in the shape ironic-python-agent reports it
// (POST /v1/continue_inspection "inventory").
type Inventory struct {
	Interfaces   []Interface  `json:"interfaces"`
	CPU          CPU          `json:"cpu"`
	Memory       Memory       `json:"memory"`
	Disks        []Disk       `json:"disks"`
	BMCAddress   string       `json:"bmc_address,omitempty"`
	SystemVendor SystemVendor `json:"system_vendor"`
	Boot         Boot         `json:"boot"`
	Hostname     string       `json:"hostname,omitempty"`
}

// Interface is one NIC.
type Interface struct {
	Name        string `json:"name"`
	MACAddress  string `json:"mac_address"`
	IPv4Address string `json:"ipv4_address,omitempty"`
	IPv6Address string `json:"ipv6_address,omitempty"`
	HasCarrier  bool   `json:"has_carrier"`
	SpeedMbps   int    `json:"speed_mbps,omitempty"`
	Vendor      string `json:"vendor,omitempty"`
	Product     string `json:"product,omitempty"`
	PCIAddress  string `json:"pci_address,omitempty"`
}

// CPU describes the processors.
type CPU struct {
	ModelName    string   `json:"model_name"`
	Frequency    string   `json:"frequency"`
	Count        int      `json:"count"`
	Architecture string   `json:"architecture"`
	Flags        []string `json:"flags,omitempty"`
}

// Memory describes RAM.
type Memory struct {
	Total      int64 `json:"total"`
	PhysicalMB int   `json:"physical_mb"`
}

// Disk is one block device.
type Disk struct {
	Name       string `json:"name"`
	Model      string `json:"model,omitempty"`
	Size       int64  `json:"size"`
	Rotational bool   `json:"rotational"`
	WWN        string `json:"wwn,omitempty"`
	Serial     string `json:"serial,omitempty"`
	Vendor     string `json:"vendor,omitempty"`
	HCTL       string `json:"hctl,omitempty"`
	ByPath     string `json:"by_path,omitempty"`
}

// SystemVendor identifies the machine.
type SystemVendor struct {
	ProductName  string   `json:"product_name"`
	SerialNumber string   `json:"serial_number"`
	Manufacturer string   `json:"manufacturer"`
	Firmware     Firmware `json:"firmware"`
}

// Firmware is the system firmware (BIOS/UEFI).
type Firmware struct {
	Vendor    string `json:"vendor,omitempty"`
	Version   string `json:"version,omitempty"`
	BuildDate string `json:"build_date,omitempty"`
}

// Boot is the current boot mode.
type Boot struct {
	CurrentBootMode string `json:"current_boot_mode"`
	PXEInterface    string `json:"pxe_interface,omitempty"`
}
