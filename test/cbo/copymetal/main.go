// Command copymetal stands in for OpenShift's machine-os-images image in the end-to-end test: its
// /bin/copy-metal writes the agent images where the metal3 pod and the
// image-customization-controller expect them. The real image copies CoreOS-based
// ironic-python-agent images; this one writes bmcsim's simulated agent images
// (internal/bmcsim/agent/deployimage), which bmcsim's servers boot.
//
//	copy-metal --pxe DIR    ironic-python-agent.kernel and .initramfs into DIR (Ironic's ISOs)
//	copy-metal --all DIR    also the CoreOS-layout live ISO and root filesystem, with the live
//	                        initramfs (the image-customization-controller's base images)
package main

import (
	"flag"
	"log"
	"os"
	"path/filepath"

	"github.com/metalforge/metalforge/internal/bmcsim/agent/deployimage"
)

func main() {
	pxe := flag.Bool("pxe", false, "copy the kernel and initramfs (PXE and Ironic-built ISOs)")
	all := flag.Bool("all", false, "copy the live ISO, kernel, initramfs and root filesystem")
	flag.Parse()
	if *pxe == *all || flag.NArg() != 1 {
		log.Fatal("usage: copy-metal --pxe|--all DIR")
	}
	dir := flag.Arg(0)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		log.Fatal(err)
	}
	files := map[string][]byte{
		"ironic-python-agent.kernel":    deployimage.Kernel(),
		"ironic-python-agent.initramfs": deployimage.Ramdisk(),
	}
	if *all {
		// The live initramfs carries the same marker in a cpio archive, to which the
		// image-customization-controller appends its Ignition archive.
		files["ironic-python-agent.initramfs"] = deployimage.LiveInitramfs()
		files["ironic-python-agent.rootfs"] = deployimage.Rootfs()
		// The ISO writer's workspace: the image has no /tmp.
		if err := os.Setenv("TMPDIR", dir); err != nil {
			log.Fatal(err)
		}
		iso := filepath.Join(dir, ".ironic-python-agent.iso.tmp")
		if err := deployimage.WriteLiveISO(iso, deployimage.LiveOptions{}); err != nil {
			log.Fatal(err)
		}
		if err := os.Rename(iso, filepath.Join(dir, "ironic-python-agent.iso")); err != nil {
			log.Fatal(err)
		}
	}
	for name, data := range files {
		tmp := filepath.Join(dir, "."+name+".tmp")
		if err := os.WriteFile(tmp, data, 0o644); err != nil { //nolint:gosec // served to the hosts
			log.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			log.Fatal(err)
		}
	}
	log.Printf("copied the agent images into %s", dir)
}
