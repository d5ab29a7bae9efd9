package server

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/metalforge/metalforge/internal/bmcsim/config"
)

// Hardware is what one server is made of. It is derived from the profile and the server's name and
// index, so it is the same on every start; it never changes while bmcsim runs.
type Hardware struct {
	UUID       string
	Serial     string
	Processors []Processor
	DIMMs      []DIMM
	Drives     []Drive
	NICs       []NIC
	// TotalThreads and MemoryGiB are the summaries Ironic's inspection reads.
	TotalThreads int
	MemoryGiB    int
}

// Processor is one socket.
type Processor struct {
	ID           string
	Socket       string
	Cores        int
	Threads      int
	Model        string
	Manufacturer string
	SpeedMHz     int
	Arch         string // x86_64 or aarch64
}

// DIMM is one memory module.
type DIMM struct {
	ID       string
	SizeMiB  int
	Type     string
	SpeedMHz int
	Serial   string
}

// Drive is one physical disk.
type Drive struct {
	ID        string
	SizeBytes int64
	MediaType string
	Protocol  string
	Model     string
	Vendor    string
	Serial    string
	WWN       string
}

// NIC is one network interface.
type NIC struct {
	ID        string
	MAC       string
	SpeedMbps int
	Vendor    string
	Product   string
	PCI       string
}

// nameUUID derives a stable RFC 4122 (version 5 style) UUID from a name.
func nameUUID(name string) string {
	sum := sha1.Sum([]byte("metalforge-bmcsim/" + name))
	sum[6] = (sum[6] & 0x0f) | 0x50
	sum[8] = (sum[8] & 0x3f) | 0x80
	h := hex.EncodeToString(sum[:16])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// password derives a server's BMC password from the secret, so restarts give the same one.
func password(secret, name string) string {
	sum := sha256.Sum256([]byte(secret + "/" + name))
	return hex.EncodeToString(sum[:])[:20]
}

// MAC returns the MAC of NIC nic on server index under the profile's prefix.
func MAC(prefix string, index, nic int) string {
	return fmt.Sprintf("%s:%02x:%02x:%02x", strings.ToLower(prefix), (index>>8)&0xff, index&0xff, nic&0xff)
}

func newHardware(p *config.Profile, name string, index int) *Hardware {
	uuid := nameUUID(name)
	serial := strings.ToUpper(strings.ReplaceAll(uuid, "-", "")[:10])
	hw := &Hardware{UUID: uuid, Serial: serial}
	for i := range p.CPU.Sockets {
		hw.Processors = append(hw.Processors, Processor{
			ID: fmt.Sprintf("CPU%d", i), Socket: fmt.Sprintf("CPU %d", i+1),
			Cores: p.CPU.CoresPerSocket, Threads: p.CPU.CoresPerSocket * p.CPU.ThreadsPerCore,
			Model: p.CPU.Model, Manufacturer: p.CPU.Manufacturer, SpeedMHz: p.CPU.SpeedMHz, Arch: p.CPU.Arch,
		})
		hw.TotalThreads += p.CPU.CoresPerSocket * p.CPU.ThreadsPerCore
	}
	for i := range p.Memory.DIMMs {
		hw.DIMMs = append(hw.DIMMs, DIMM{
			ID: fmt.Sprintf("DIMM%d", i), SizeMiB: p.Memory.DIMMGiB * 1024, Type: p.Memory.Type,
			SpeedMHz: p.Memory.SpeedMHz, Serial: fmt.Sprintf("%sM%02d", serial, i),
		})
		hw.MemoryGiB += p.Memory.DIMMGiB
	}
	for i, d := range p.Disks {
		hw.Drives = append(hw.Drives, Drive{
			ID: d.Name, SizeBytes: int64(d.SizeGiB) << 30, MediaType: d.MediaType, Protocol: d.Protocol,
			Model: d.Model, Vendor: d.Vendor, Serial: fmt.Sprintf("%s%s%02d", d.SerialPrefix, serial, i),
			WWN: fmt.Sprintf("0x5000c500%04x%04x", index&0xffff, i&0xffff),
		})
	}
	for i, n := range p.NICs {
		hw.NICs = append(hw.NICs, NIC{
			ID: n.Name, MAC: MAC(p.MACPrefix, index, i), SpeedMbps: n.SpeedMbps, Vendor: n.Vendor,
			Product: n.Product, PCI: fmt.Sprintf("0000:%02x:00.%d", 0x18+i/8, i%8),
		})
	}
	return hw
}
