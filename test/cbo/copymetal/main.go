// Command copymetal stands in for OpenShift's machine-os-images image in the end-to-end test: its
// /bin/copy-metal writes the agent's kernel and initramfs where the metal3 pod expects them. The
// real image copies CoreOS-based ironic-python-agent images; this one writes bmcsim's simulated
// agent images (internal/bmcsim/agent/deployimage), which bmcsim's servers boot.
//
//	copy-metal --pxe DIR    ironic-python-agent.kernel and .initramfs into DIR
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
	flag.Parse()
	if !*pxe || flag.NArg() != 1 {
		log.Fatal("usage: copy-metal --pxe DIR")
	}
	dir := flag.Arg(0)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		log.Fatal(err)
	}
	for name, data := range map[string][]byte{
		"ironic-python-agent.kernel":    deployimage.Kernel(),
		"ironic-python-agent.initramfs": deployimage.Ramdisk(),
	} {
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
