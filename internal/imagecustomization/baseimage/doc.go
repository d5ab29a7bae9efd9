// Package baseimage finds and describes the base agent images the image-customization-controller
// customizes: a CoreOS live ISO (DEPLOY_ISO), a live initramfs (DEPLOY_INITRD) and its kernel
// (DEPLOY_KERNEL), per CPU architecture. Nothing is copied: a base is read once at start to hash
// it (its content identifies it, so image URLs stay the same across restarts while the content
// does) and then served from disk with a small overlay per host.
//
// # The CoreOS live ISO layout it accepts
//
// Fedora CoreOS and RHCOS live ISOs, and the ISOs `make` builds for tests and the demo
// (internal/bmcsim/agent/deployimage.WriteLiveISO), have:
//
//   - coreos/igninfo.json: {"file": "images/ignition.img"} and optionally "offset" and "length"
//     within that file: the Ignition embed area. Without the JSON (ISOs before 2021) the whole of
//     images/ignition.img is the area. The area is zero-filled in a pristine ISO (256 KiB in
//     FCOS and RHCOS); the live initramfs unpacks a compressed cpio archive found there, whose
//     config.ign is the Ignition config.
//   - coreos/kargs.json: {"default": "<kernel arguments>", "files": [{"path", "offset"[, "pad",
//     "end"]}], "size": N}: each listed boot configuration (EFI/<vendor>/grub.cfg,
//     isolinux/isolinux.cfg) holds at offset an N-byte area with the kernel arguments, the end
//     character ("\n") and pad characters ("#"). Only the minimal ISO rewrites it.
//   - images/pxeboot/{vmlinuz,initrd.img,rootfs.img}: kernel, initramfs and the root filesystem
//     the live initramfs mounts (or, without it, fetches from coreos.live.rootfs_url).
//   - El Torito boot: isolinux/isolinux.bin (BIOS) and images/efiboot.img (UEFI).
//
// Names are matched case-insensitively, so plain ISO 9660 names (IMAGES/IGNITION.IMG) work too.
// A base may be a regular file or a block device.
//
// # Architectures
//
// DEPLOY_ISO, DEPLOY_INITRD and DEPLOY_KERNEL name the images for the controller's own
// architecture; images for other architectures sit beside them with the architecture before the
// extension, as OpenShift lays them out: ironic-python-agent_aarch64.iso (or
// ironic-python-agent.aarch64.iso) next to ironic-python-agent.iso.
package baseimage
