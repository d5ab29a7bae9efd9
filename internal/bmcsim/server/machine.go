package server

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/metalforge/metalforge/internal/bmcsim/agent"
)

// This file implements agent.Machine: the server as its in-band agent sees it.

// ID is the Redfish system id (also the manager and chassis id).
func (s *Server) ID() string { return s.id }

// MACAddresses lists the NIC MACs, boot NIC first.
func (s *Server) MACAddresses() []string {
	macs := make([]string, len(s.HW.NICs))
	for i, n := range s.HW.NICs {
		macs[i] = n.MAC
	}
	return macs
}

// BootMAC is the MAC of the NIC the server boots from.
func (s *Server) BootMAC() string { return s.HW.NICs[0].MAC }

// Inventory is the hardware as ironic-python-agent would report it. RAID volumes appear as disks
// (the OS sees the controller's logical drives) followed by the drives no volume uses.
func (s *Server) Inventory() agent.Inventory {
	p := &s.fleet.cfg.Profile
	st := s.Snapshot()
	inv := agent.Inventory{
		CPU: agent.CPU{
			ModelName:    p.CPU.Model,
			Frequency:    strconv.Itoa(p.CPU.SpeedMHz),
			Count:        s.HW.TotalThreads,
			Architecture: p.CPU.Arch,
		},
		Memory: agent.Memory{
			Total:      int64(s.HW.MemoryGiB) << 30,
			PhysicalMB: s.HW.MemoryGiB * 1024,
		},
		BMCAddress: "127.0.0.1",
		SystemVendor: agent.SystemVendor{
			ProductName:  p.Model,
			SerialNumber: s.HW.Serial,
			Manufacturer: p.Manufacturer,
			Firmware:     agent.Firmware{Vendor: p.Manufacturer, Version: st.Firmware.BIOS},
		},
		Boot: agent.Boot{CurrentBootMode: bootModeName(st.Boot.Mode), PXEInterface: s.BootMAC()},
	}
	if p.CPU.Arch == "x86_64" {
		inv.CPU.Flags = []string{"fpu", "vme", "pae", "lm", "vmx", "sse4_2", "avx2"}
	}
	for i, n := range s.HW.NICs {
		inv.Interfaces = append(inv.Interfaces, agent.Interface{
			Name: fmt.Sprintf("eno%d", i+1), MACAddress: n.MAC, HasCarrier: true, SpeedMbps: n.SpeedMbps,
			Vendor: n.Vendor, Product: n.Product, PCIAddress: n.PCI,
		})
	}
	used := map[string]bool{}
	dev := 0
	for _, v := range st.Volumes {
		for _, d := range v.Drives {
			used[d] = true
		}
		inv.Disks = append(inv.Disks, agent.Disk{
			Name: diskName(dev), Model: "Virtual Disk", Size: v.CapacityBytes, Vendor: p.Manufacturer,
			Serial: fmt.Sprintf("%sV%s", s.HW.Serial, v.ID), HCTL: fmt.Sprintf("0:2:%d:0", dev),
			ByPath: fmt.Sprintf("/dev/disk/by-path/pci-0000:17:00.0-scsi-0:2:%d:0", dev),
		})
		dev++
	}
	for _, d := range s.HW.Drives {
		if used[d.ID] {
			continue
		}
		inv.Disks = append(inv.Disks, agent.Disk{
			Name: diskName(dev), Model: d.Model, Size: d.SizeBytes, Rotational: d.MediaType == "HDD",
			WWN: d.WWN, Serial: d.Serial, Vendor: d.Vendor, HCTL: fmt.Sprintf("0:0:%d:0", dev),
			ByPath: fmt.Sprintf("/dev/disk/by-path/pci-0000:17:00.0-sas-phy%d-lun-0", dev),
		})
		dev++
	}
	return inv
}

func bootModeName(mode string) string {
	if mode == "Legacy" {
		return "bios"
	}
	return "uefi"
}

// diskName gives Linux names: /dev/sda ... /dev/sdz, /dev/sdaa ...
func diskName(i int) string {
	var b strings.Builder
	b.WriteString("/dev/sd")
	if i >= 26 {
		b.WriteByte(byte('a' + i/26 - 1))
	}
	b.WriteByte(byte('a' + i%26))
	return b.String()
}

// PowerOff turns the server off as its running OS would (standby.power_off).
func (s *Server) PowerOff() {
	s.mu.Lock()
	if s.st.Power != PowerOn {
		s.mu.Unlock()
		return
	}
	op := s.powerOffLocked()
	s.mu.Unlock()
	s.fleet.markDirty()
	// The agent calls this from its own goroutine; Stop runs later on the queue, never inside it.
	s.enqueue(op)
}

// WriteDisk records that an image was written to the root disk. A server that is off writes
// nothing: its agent is stopped on the run queue a moment after the power off (a ForceOff, a
// factory reset), and a write it finishes meanwhile must not reach the disk.
func (s *Server) WriteDisk(imageURL string) {
	s.update(func(st *State) bool {
		if st.Power != PowerOn {
			return false
		}
		st.DiskImage = imageURL
		st.DiskWrites++
		return true
	})
}

// FailDeploy reports whether the agent should crash in the middle of a deploy.
func (s *Server) FailDeploy() bool { return s.fleet.Faults.For(s.Name).FailDeploy }

// LoseAgentToken reports whether the agent should lose the lookup answer that carries its token.
func (s *Server) LoseAgentToken() bool { return s.fleet.Faults.For(s.Name).LoseAgentToken }
