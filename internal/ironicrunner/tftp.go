package ironicrunner

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// The iPXE loaders a PXE client gets over TFTP before iPXE fetches Ironic's boot script: the
// UEFI one (SNP only: it drives the NIC through the firmware's own driver) and the legacy BIOS
// one (UNDI: through the NIC's PXE ROM).
const (
	EFILoader  = "snponly.efi"
	BIOSLoader = "undionly.kpxe"
)

// TFTPRoot is dnsmasq's TFTP root: on the volume shared with Ironic, which writes the PXE boot
// interface's files there.
func (c Config) TFTPRoot() string { return filepath.Join(c.SharedDir, "tftpboot") }

// FillTFTPRoot copies the iPXE loaders from the image (IPXEDir) into the TFTP root, as metal3's
// dnsmasq container does: Ironic places loaders itself only when [pxe]loader_file_paths names
// them, and dnsmasq's TFTP root starts empty. A loader the image lacks is reported and skipped:
// clients with iPXE in their ROM still boot. Each file is written under a temporary name and
// renamed, so a restarted container never serves half a loader.
func FillTFTPRoot(c Config, logf func(string, ...any)) error {
	root := c.TFTPRoot()
	if err := os.MkdirAll(root, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", root, err)
	}
	for _, name := range []string{EFILoader, BIOSLoader} {
		src := filepath.Join(c.IPXEDir, name)
		if _, err := os.Stat(src); err != nil {
			logf("WARNING: %s is missing (%v): PXE clients that need it cannot boot (IPXE_CUSTOM_FIRMWARE_DIR names another directory)", src, err)
			continue
		}
		if err := copyFile(src, filepath.Join(root, name)); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src) //nolint:gosec // the image's own loader
	if err != nil {
		return fmt.Errorf("reading %s: %w", src, err)
	}
	defer in.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".*")
	if err != nil {
		return fmt.Errorf("copying %s: %w", src, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, in); err != nil {
		tmp.Close()
		return fmt.Errorf("copying %s: %w", src, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("copying %s: %w", src, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("copying %s: %w", src, err)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return fmt.Errorf("copying %s: %w", src, err)
	}
	return nil
}
