// Package deployimage makes the project's small deploy images: a "kernel" and an "initramfs" that
// carry recognisable markers, a zero-filled ESP image for Ironic's UEFI ISO builder, and a deploy ISO
// with the kernel command line in /EFI/BOOT/grub.cfg, laid out like the ISOs Ironic builds.
// bmcsim's agent recognises a booted image as "the agent" by these markers.
package deployimage

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/metalforge/metalforge/internal/iso"
)

// Markers at the start of the kernel and initramfs files.
const (
	KernelMarker  = "METALFORGE-AGENT-KERNEL"
	RamdiskMarker = "METALFORGE-AGENT-RAMDISK"
)

// File names in the ISO, as Ironic lays them out (image_utils.create_boot_iso / grub_config_path).
const (
	ISOKernelPath  = "vmlinuz"
	ISORamdiskPath = "initrd"
	ISOGrubPath    = "EFI/BOOT/grub.cfg"
	ISOVolumeID    = "METALFORGE_AGENT"
	espSize        = 4 << 20
	markerFileSize = 64 << 10
)

// Kernel is the deploy "kernel": the marker padded to 64 KiB, so it looks like a file and not a tag.
func Kernel() []byte { return markerFile(KernelMarker) }

// Ramdisk is the deploy "initramfs".
func Ramdisk() []byte { return markerFile(RamdiskMarker) }

// ESP is the bootloader image Ironic puts into the UEFI boot ISO it builds; Ironic copies it as-is,
// and a zero-filled 4 MiB file is accepted.
func ESP() []byte { return make([]byte, espSize) }

func markerFile(marker string) []byte {
	b := make([]byte, markerFileSize)
	copy(b, marker+"\n")
	return b
}

// ISO builds the deploy ISO. apiURL becomes ipa-api-url; extra kernel parameters follow it.
func ISO(apiURL string, extraParams ...string) ([]byte, error) {
	params := append([]string{"nofb", "vga=normal"}, extraParams...)
	if apiURL != "" {
		params = append(params, "ipa-api-url="+apiURL)
	}
	params = append(params, "boot_method=vmedia")
	grub := fmt.Sprintf("set default=0\nset timeout=5\nmenuentry \"boot_partition\" {\nlinux /%s %s --\ninitrd /%s\n}\n",
		ISOKernelPath, strings.Join(params, " "), ISORamdiskPath)
	var b bytes.Buffer
	err := iso.Write(&b, iso.Options{VolumeID: ISOVolumeID, Publisher: "metalforge"}, []iso.File{
		{Path: ISOKernelPath, Data: Kernel()},
		{Path: ISORamdiskPath, Data: Ramdisk()},
		{Path: ISOGrubPath, Data: []byte(grub)},
	})
	if err != nil {
		return nil, fmt.Errorf("building the deploy ISO: %w", err)
	}
	return b.Bytes(), nil
}
