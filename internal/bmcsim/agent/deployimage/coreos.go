package deployimage

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/cavaliergopher/cpio"

	"github.com/metalforge/metalforge/internal/iso"
)

// Paths of a CoreOS (Fedora CoreOS / RHCOS) live ISO, which the image-customization-controller
// customizes. coreos-installer and the assisted-image-service read the same files.
const (
	LiveIgnInfoPath = "coreos/igninfo.json" // {"file": "images/ignition.img"[, "offset", "length"]}
	LiveKargsPath   = "coreos/kargs.json"   // {"default", "files": [{"path", "offset"}], "size"}
	LiveEmbedPath   = "images/ignition.img" // the Ignition embed area, zero-filled
	LiveKernelPath  = "images/pxeboot/vmlinuz"
	LiveInitrdPath  = "images/pxeboot/initrd.img"
	LiveRootfsPath  = "images/pxeboot/rootfs.img"
	LiveEFIBootPath = "images/efiboot.img"
	LiveGrubPath    = "EFI/fedora/grub.cfg"
	LiveIsolinuxCfg = "isolinux/isolinux.cfg"
	LiveIsolinuxBin = "isolinux/isolinux.bin"
	// LiveEmbedSize is the embed area of Fedora CoreOS and RHCOS live ISOs (256 KiB).
	LiveEmbedSize = 256 << 10
	// LiveKargsSize is the length of each kernel argument embed area.
	LiveKargsSize = 1137
	// RootfsMarker starts the live root filesystem image.
	RootfsMarker = "METALFORGE-AGENT-ROOTFS"
)

// LiveOptions shape a CoreOS-layout live ISO.
type LiveOptions struct {
	// VolumeID defaults to "METALFORGE-LIVE".
	VolumeID string
	// RootfsSource is a file whose content becomes images/pxeboot/rootfs.img (benchmarks use a
	// large one); empty means a small marker file.
	RootfsSource string
	// NoRootfs leaves rootfs.img out, as a minimal ISO does.
	NoRootfs bool
	// ExtraKargs follow the default kernel arguments (a minimal ISO's coreos.live.rootfs_url).
	ExtraKargs string
}

// LiveKargs are the default kernel arguments of the live image.
func LiveKargs(volumeID string) string {
	return "mitigations=auto,nosmt coreos.liveiso=" + volumeID + " ignition.firstboot ignition.platform.id=metal"
}

// LiveInitramfs is the live initramfs: a gzip-compressed newc cpio archive whose one file
// carries the ramdisk marker, so that an initramfs with an Ignition archive appended is a valid
// concatenation of archives as the kernel unpacks it.
func LiveInitramfs() []byte {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	cw := cpio.NewWriter(zw)
	data := Ramdisk()
	must(cw.WriteHeader(&cpio.Header{Name: "usr/lib/metalforge-agent", Mode: cpio.TypeReg | 0o644, Size: int64(len(data)), Inode: 1}))
	_, err := cw.Write(data)
	must(err)
	must(cw.Close())
	must(zw.Close())
	return buf.Bytes()
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

// Rootfs is the small live root filesystem image.
func Rootfs() []byte { return markerFile(RootfsMarker) }

// WriteLiveISO writes a live ISO in CoreOS's layout to path: kernel, initramfs and root
// filesystem under images/pxeboot, a zero-filled 256 KiB Ignition embed area described by
// coreos/igninfo.json, kernel argument embed areas in the GRUB and isolinux configurations
// described by coreos/kargs.json, and El Torito entries for BIOS (isolinux) and UEFI
// (images/efiboot.img). bmcsim's agent recognises it by the kernel marker. The same options give
// the same bytes.
func WriteLiveISO(path string, o LiveOptions) error {
	vol := o.VolumeID
	if vol == "" {
		vol = "METALFORGE-LIVE"
	}
	kargs := LiveKargs(vol)
	if o.ExtraKargs != "" {
		kargs += " " + o.ExtraKargs
	}
	grub, grubOff, err := kargsFile("menuentry 'Metalforge agent (Live)' --class gnu-linux --class os {\n\tlinux /"+LiveKernelPath+" ",
		kargs, "\tinitrd /"+LiveInitrdPath+" /"+LiveEmbedPath+"\n}\n")
	if err != nil {
		return err
	}
	isolinux, isoOff, err := kargsFile("default live\nlabel live\n  kernel /"+LiveKernelPath+"\n  append initrd=/"+LiveInitrdPath+",/"+LiveEmbedPath+" ",
		kargs, "")
	if err != nil {
		return err
	}
	kargsJSON, err := json.MarshalIndent(map[string]any{
		"default": kargs,
		"files":   []map[string]any{{"path": LiveGrubPath, "offset": grubOff}, {"path": LiveIsolinuxCfg, "offset": isoOff}},
		"size":    LiveKargsSize,
	}, "", "  ")
	if err != nil {
		return err
	}
	files := []iso.File{
		{Path: LiveIgnInfoPath, Data: []byte(`{"file": "` + LiveEmbedPath + `"}` + "\n")},
		{Path: LiveKargsPath, Data: append(kargsJSON, '\n')},
		{Path: LiveGrubPath, Data: grub},
		{Path: LiveIsolinuxCfg, Data: isolinux},
		{Path: LiveIsolinuxBin, Data: make([]byte, 2048)},
		{Path: LiveEFIBootPath, Data: ESP()},
		{Path: LiveEmbedPath, Data: make([]byte, LiveEmbedSize)},
		{Path: LiveKernelPath, Data: Kernel()},
		{Path: LiveInitrdPath, Data: LiveInitramfs()},
	}
	switch {
	case o.NoRootfs:
	case o.RootfsSource != "":
		files = append(files, iso.File{Path: LiveRootfsPath, Source: o.RootfsSource})
	default:
		files = append(files, iso.File{Path: LiveRootfsPath, Data: Rootfs()})
	}
	err = iso.WriteFile(path, iso.Options{VolumeID: vol, Publisher: "metalforge", Boot: &iso.Boot{
		Catalog: "isolinux/boot.cat",
		Entries: []iso.BootEntry{
			{Platform: iso.BIOS, File: LiveIsolinuxBin, LoadSectors: 4, InfoTable: true},
			{Platform: iso.EFI, File: LiveEFIBootPath},
		},
	}}, files)
	if err != nil {
		return fmt.Errorf("writing the live ISO: %w", err)
	}
	return nil
}

// kargsFile lays out a boot configuration with a kernel argument embed area: the arguments, a
// newline, then '#' up to LiveKargsSize bytes (a comment to GRUB and isolinux), as coreos-installer
// expects. It returns the file and the area's offset in it.
func kargsFile(before, kargs, after string) ([]byte, int, error) {
	if len(kargs)+1 > LiveKargsSize {
		return nil, 0, fmt.Errorf("kernel arguments longer than %d bytes", LiveKargsSize-1)
	}
	area := kargs + "\n" + strings.Repeat("#", LiveKargsSize-len(kargs)-1)
	return []byte(before + area + "\n" + after), len(before), nil
}
