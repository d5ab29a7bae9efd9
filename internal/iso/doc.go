// Package iso writes and reads ISO 9660 images for the whole project: bmcsim's deploy ISO and the
// ISOs its tests boot, the kernel command line bmcsim's agent reads out of the ISOs Ironic hands to
// a BMC (built by Ironic with mkisofs or xorriso, Rock Ridge), and the per-host agent images of the
// image-customization-controller, which must find a file's bytes inside a base ISO of a gigabyte
// without loading it.
//
// # The library
//
// The format work is done by github.com/diskfs/go-diskfs (filesystem/iso9660): a maintained,
// widely used pure-Go library that reads and writes ISO 9660 with Rock Ridge, Joliet and El
// Torito, and is what OpenShift's assisted-image-service builds its ISO editing on. It replaced two
// hand-written writers and a reader that had grown in bmcsim. Its weight is small: this package
// links seven of its small packages (filesystem/iso9660 and what it needs: filesystem, backend,
// backend/file, partition/mbr, partition/part, version) plus github.com/djherbis/times and
// golang.org/x/sys, which we had already; the compression and logging modules its go.mod names
// (lz4, xz, zstd, lzo, logrus) serve its squashfs and disk packages, which we do not import, so
// they are neither built nor listed in our go.mod. bin/bmcsim grew by 370 KiB (3 %) with it.
//
// What this package adds on top, and why:
//
//   - Reproducible output. go-diskfs stamps time.Now() into the volume descriptor, takes directory
//     record and Rock Ridge times, owners and link counts from its staging directory on disk, and
//     has no option to fix them. Stable image URLs are derived from content, so the same input must
//     give the same bytes on any machine at any time: Write stages files with fixed modes and then
//     rewrites every time stamp, owner and link count in the finished image (reproducible.go).
//     Inputs that go-diskfs would lay out in an order that changes between runs (two groups of
//     names that clash in their 8.3 form in one directory; directories more than 7 levels deep,
//     which Rock Ridge relocates) are refused with an error instead.
//   - Paths as the rest of the project writes them: "/EFI/BOOT/grub.cfg" and "EFI/BOOT/grub.cfg"
//     are the same file (go-diskfs takes io/fs paths without a leading "/"), and a name that is not
//     found exactly is matched case-insensitively, for plain ISO 9660 images without Rock Ridge
//     whose names are upper case.
//   - Byte extents: Locate and Open give a file's offset and length in the image (Rock Ridge and
//     ISO 9660 store every file in one contiguous extent), so a caller can serve or patch a file in
//     place, as the assisted-image-service does with Location()*2048.
//   - Errors instead of panics: go-diskfs indexes slices with lengths read from the image, so a
//     damaged image can panic inside it; Open and the lookups turn that into an error.
//
// Limits, all from go-diskfs v1.9.4: images are read with 2048-byte sectors; a file of 4 GiB or
// more (several extents) is refused on both sides; a Rock Ridge name another tool split between a
// record and its continuation area (genisoimage does so for names over about 150 bytes) is read
// cut at the split, since go-diskfs joins NM pieces only within one area; Write orders a
// directory's records by the names as given rather than by their ISO 9660 form, which Linux,
// xorriso and isoinfo do not mind; and Open trusts the sizes an image records (go-diskfs allocates
// a directory's recorded size), so it is meant for images from a trusted source (our own,
// Ironic's, the operator's base ISO), not for arbitrary uploads.
package iso
