// Package config describes a simulated data center: how many servers, what hardware each has, how
// fast it boots and writes images, how slow its BMC answers and which faults are injected. It is read
// from a YAML or JSON file and overridden by bmcsim's flags.
package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/metalforge/metalforge/internal/bmcsim/fault"
)

// Config is the whole simulation.
type Config struct {
	// Hosts is the number of simulated servers.
	Hosts int `json:"hosts"`
	// NamePrefix names the servers NamePrefix0, NamePrefix1, ... The name is also the BMC user name.
	NamePrefix string `json:"namePrefix"`
	// Secret seeds the per-server BMC passwords, so that a restarted bmcsim gives the same ones.
	Secret string `json:"secret"`
	// Profile is the hardware every server has.
	Profile Profile `json:"profile"`
	// BootTime is the delay between a power-on and the agent starting (POST + ramdisk boot).
	BootTime Duration `json:"bootTime"`
	// WriteSpeedMBps is the simulated image write speed, passed to the agent.
	WriteSpeedMBps int `json:"writeSpeedMBps"`
	// BMCUpdateTime is how long a BMC takes to flash its own firmware and restart once it has
	// downloaded it; then Manager.FirmwareVersion changes (no host reset needed).
	BMCUpdateTime Duration `json:"bmcUpdateTime"`
	// RedfishLatency is added to every Redfish answer.
	RedfishLatency Duration `json:"redfishLatency"`
	// Faults are the global faults at start.
	Faults fault.Set `json:"faults"`
	// ServerFaults are per-server faults at start, by server name.
	ServerFaults map[string]fault.Set `json:"serverFaults,omitempty"`
}

// Profile is a server's hardware.
type Profile struct {
	Manufacturer string   `json:"manufacturer"`
	Model        string   `json:"model"`
	CPU          CPU      `json:"cpu"`
	Memory       Memory   `json:"memory"`
	Disks        []Disk   `json:"disks"`
	NICs         []NIC    `json:"nics"`
	Firmware     Firmware `json:"firmware"`
	// BootMode is the initial BootSourceOverrideMode: UEFI or Legacy.
	BootMode string `json:"bootMode"`
	// MACPrefix is the first three bytes of every MAC; the next two are the server index and the
	// last one the NIC index, so MACs are unique per server and stable across restarts.
	MACPrefix string `json:"macPrefix"`
	// RAIDTypes are the RAID levels the storage controller supports.
	RAIDTypes []string `json:"raidTypes"`
	// BIOS overrides default values of the built-in BIOS attributes (by attribute name).
	BIOS map[string]any `json:"bios,omitempty"`
}

// CPU describes the processors.
type CPU struct {
	Sockets        int    `json:"sockets"`
	CoresPerSocket int    `json:"coresPerSocket"`
	ThreadsPerCore int    `json:"threadsPerCore"`
	Model          string `json:"model"`
	Manufacturer   string `json:"manufacturer"`
	SpeedMHz       int    `json:"speedMHz"`
	// Arch is the Ironic/IPA architecture name: x86_64 or aarch64.
	Arch string `json:"arch"`
}

// Memory describes the DIMMs.
type Memory struct {
	DIMMs    int    `json:"dimms"`
	DIMMGiB  int    `json:"dimmGiB"`
	Type     string `json:"type"`
	SpeedMHz int    `json:"speedMHz"`
}

// Disk is one physical drive behind the storage controller.
type Disk struct {
	// Name is the Redfish Drive id (Disk0, ...).
	Name    string `json:"name"`
	SizeGiB int    `json:"sizeGiB"`
	// MediaType is SSD or HDD.
	MediaType string `json:"mediaType"`
	// Protocol is SAS, SATA or NVMe.
	Protocol string `json:"protocol"`
	Model    string `json:"model"`
	Vendor   string `json:"vendor"`
	// SerialPrefix starts the drive's serial number; the rest is derived from the server.
	SerialPrefix string `json:"serialPrefix"`
}

// NIC is one network interface.
type NIC struct {
	// Name is the Redfish EthernetInterface id (NIC1, ...).
	Name      string `json:"name"`
	SpeedMbps int    `json:"speedMbps"`
	Vendor    string `json:"vendor"`
	Product   string `json:"product"`
}

// Firmware holds the initial firmware versions.
type Firmware struct {
	BIOS string `json:"bios"`
	BMC  string `json:"bmc"`
	NIC  string `json:"nic"`
}

// Duration is a time.Duration written as "2s" in files.
type Duration struct{ time.Duration }

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads "2s" or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		d.Duration = v
		return nil
	}
	var secs float64
	if err := json.Unmarshal(b, &secs); err != nil {
		return fmt.Errorf("duration must be a string like \"2s\" or a number of seconds: %w", err)
	}
	d.Duration = time.Duration(secs * float64(time.Second))
	return nil
}

// Default returns the built-in configuration: one modest two-socket server.
func Default() Config {
	return Config{
		Hosts:          1,
		NamePrefix:     "host-",
		Secret:         "bmcsim",
		BootTime:       Duration{2 * time.Second},
		WriteSpeedMBps: 500,
		BMCUpdateTime:  Duration{5 * time.Second},
		Profile: Profile{
			Manufacturer: "Metalforge",
			Model:        "SimServer 1000",
			CPU: CPU{Sockets: 2, CoresPerSocket: 8, ThreadsPerCore: 2, Model: "Sim Xeon 8000",
				Manufacturer: "Intel(R) Corporation", SpeedMHz: 3000, Arch: "x86_64"},
			Memory: Memory{DIMMs: 4, DIMMGiB: 8, Type: "DDR5", SpeedMHz: 4800},
			Disks: []Disk{
				{Name: "Disk0", SizeGiB: 100, MediaType: "SSD", Protocol: "SAS", Model: "Sim SSD 100", Vendor: "SimDisk", SerialPrefix: "SSD"},
				{Name: "Disk1", SizeGiB: 100, MediaType: "SSD", Protocol: "SAS", Model: "Sim SSD 100", Vendor: "SimDisk", SerialPrefix: "SSD"},
			},
			NICs: []NIC{
				{Name: "NIC1", SpeedMbps: 10000, Vendor: "0x8086", Product: "0x1572"},
				{Name: "NIC2", SpeedMbps: 10000, Vendor: "0x8086", Product: "0x1572"},
			},
			Firmware:  Firmware{BIOS: "1.0.0", BMC: "1.00", NIC: "20.5.13"},
			BootMode:  "UEFI",
			MACPrefix: "52:54:00",
			RAIDTypes: []string{"RAID0", "RAID1", "RAID5", "RAID6", "RAID10"},
		},
	}
}

// Load reads a YAML or JSON file over the defaults: fields the file leaves out keep their default.
// Lists (disks, NICs, RAID types) replace the default list as a whole.
func Load(path string) (Config, error) {
	cfg := Default()
	data, err := os.ReadFile(path)
	if err != nil {
		return cfg, fmt.Errorf("reading bmcsim config: %w", err)
	}
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		return cfg, fmt.Errorf("parsing bmcsim config %s: %w", path, err)
	}
	return cfg, nil
}

var (
	namePrefixRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9-]{0,40}$`)
	idRE         = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,40}$`)
)

// Validate reports the first problem, naming the field.
func (c *Config) Validate() error {
	var errs []error
	if c.Hosts < 1 || c.Hosts > 65536 {
		errs = append(errs, fmt.Errorf("hosts: %d is not between 1 and 65536", c.Hosts))
	}
	if !namePrefixRE.MatchString(c.NamePrefix) {
		errs = append(errs, fmt.Errorf("namePrefix: %q must start with a letter and hold only letters, digits and '-'", c.NamePrefix))
	}
	if c.Secret == "" {
		errs = append(errs, errors.New("secret: must not be empty"))
	}
	if c.BootTime.Duration < 0 || c.RedfishLatency.Duration < 0 || c.BMCUpdateTime.Duration < 0 {
		errs = append(errs, errors.New("bootTime, redfishLatency, bmcUpdateTime: must not be negative"))
	}
	if c.WriteSpeedMBps <= 0 {
		errs = append(errs, fmt.Errorf("writeSpeedMBps: %d must be positive", c.WriteSpeedMBps))
	}
	if err := c.Faults.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("faults: %w", err))
	}
	for name, f := range c.ServerFaults {
		if err := f.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("serverFaults[%s]: %w", name, err))
		}
	}
	errs = append(errs, c.Profile.validate()...)
	return errors.Join(errs...)
}

func (p *Profile) validate() []error {
	var errs []error
	cpu := p.CPU
	if cpu.Sockets < 1 || cpu.CoresPerSocket < 1 || cpu.ThreadsPerCore < 1 || cpu.SpeedMHz < 1 {
		errs = append(errs, errors.New("profile.cpu: sockets, coresPerSocket, threadsPerCore and speedMHz must be positive"))
	}
	if cpu.Arch != "x86_64" && cpu.Arch != "aarch64" {
		errs = append(errs, fmt.Errorf("profile.cpu.arch: %q must be x86_64 or aarch64", cpu.Arch))
	}
	if p.Memory.DIMMs < 1 || p.Memory.DIMMGiB < 1 {
		errs = append(errs, errors.New("profile.memory: dimms and dimmGiB must be positive"))
	}
	if len(p.Disks) == 0 {
		errs = append(errs, errors.New("profile.disks: at least one disk is needed"))
	}
	seen := map[string]bool{}
	for i, d := range p.Disks {
		if !idRE.MatchString(d.Name) || seen[d.Name] {
			errs = append(errs, fmt.Errorf("profile.disks[%d].name: %q must be a unique id", i, d.Name))
		}
		seen[d.Name] = true
		if d.SizeGiB < 1 {
			errs = append(errs, fmt.Errorf("profile.disks[%d].sizeGiB: must be positive", i))
		}
		if d.MediaType != "SSD" && d.MediaType != "HDD" {
			errs = append(errs, fmt.Errorf("profile.disks[%d].mediaType: %q must be SSD or HDD", i, d.MediaType))
		}
		switch d.Protocol {
		case "SAS", "SATA", "NVMe":
		default:
			errs = append(errs, fmt.Errorf("profile.disks[%d].protocol: %q must be SAS, SATA or NVMe", i, d.Protocol))
		}
	}
	if len(p.NICs) == 0 || len(p.NICs) > 255 {
		errs = append(errs, errors.New("profile.nics: between 1 and 255 NICs are needed"))
	}
	seen = map[string]bool{}
	for i, n := range p.NICs {
		if !idRE.MatchString(n.Name) || seen[n.Name] {
			errs = append(errs, fmt.Errorf("profile.nics[%d].name: %q must be a unique id", i, n.Name))
		}
		seen[n.Name] = true
	}
	if p.BootMode != "UEFI" && p.BootMode != "Legacy" {
		errs = append(errs, fmt.Errorf("profile.bootMode: %q must be UEFI or Legacy", p.BootMode))
	}
	if mac, err := net.ParseMAC(p.MACPrefix + ":00:00:00"); err != nil || len(mac) != 6 {
		errs = append(errs, fmt.Errorf("profile.macPrefix: %q must be three bytes like 52:54:00", p.MACPrefix))
	}
	for i, r := range p.RAIDTypes {
		if _, ok := RAIDLevels[r]; !ok {
			errs = append(errs, fmt.Errorf("profile.raidTypes[%d]: %q is not a known RAID type", i, r))
		}
	}
	if p.Firmware.BIOS == "" || p.Firmware.BMC == "" {
		errs = append(errs, errors.New("profile.firmware: bios and bmc versions must be set"))
	}
	for name, v := range p.BIOS {
		a, ok := BIOSAttributeByName(name)
		if !ok {
			errs = append(errs, fmt.Errorf("profile.bios.%s: unknown attribute", name))
			continue
		}
		if err := a.Check(v); err != nil {
			errs = append(errs, fmt.Errorf("profile.bios.%s: %w", name, err))
		}
	}
	return errs
}

// RAIDLevel describes how many drives a RAID type takes and how much of them it can use.
type RAIDLevel struct {
	MinDrives  int
	MaxDrives  int // 0 means no limit
	EvenDrives bool
	VolumeType string
	// DataDrives is how many drives' worth of capacity a volume over n drives offers.
	DataDrives func(n int) int
}

// RAIDLevels are the RAID types bmcsim understands, with Redfish VolumeType names.
var RAIDLevels = map[string]RAIDLevel{
	"RAID0":  {MinDrives: 1, VolumeType: "NonRedundant", DataDrives: func(n int) int { return n }},
	"RAID1":  {MinDrives: 2, MaxDrives: 2, VolumeType: "Mirrored", DataDrives: func(int) int { return 1 }},
	"RAID5":  {MinDrives: 3, VolumeType: "StripedWithParity", DataDrives: func(n int) int { return n - 1 }},
	"RAID6":  {MinDrives: 4, VolumeType: "StripedWithParity", DataDrives: func(n int) int { return n - 2 }},
	"RAID10": {MinDrives: 4, EvenDrives: true, VolumeType: "SpannedMirrors", DataDrives: func(n int) int { return n / 2 }},
}
