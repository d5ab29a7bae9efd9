package ironicrunner

import (
	"fmt"
	"os"
)

// ESPWarning says what is wrong with the EFI system partition image, "" when nothing is. Without
// one, Ironic builds no UEFI virtual media ISO from the agent's kernel and ramdisk: such a host's
// deployment fails much later, in Ironic, with an error that does not name the image. Hosts that
// boot the image-customization-controller's ISOs (which carry their own) or whose driver_info
// names a bootloader do not need it, so this is a warning and Ironic starts anyway.
func ESPWarning(c Config) string {
	const consequence = "Ironic cannot build UEFI virtual media ISOs from a kernel and ramdisk " +
		"(hosts need the image-customization-controller's ISOs, or a bootloader in their driver_info)"
	if c.ESPImage == "" {
		return fmt.Sprintf("WARNING: no EFI system partition image (IRONIC_ESP_IMAGE is unset and %s does not exist): %s",
			DefaultESPImage, consequence)
	}
	if _, err := os.Stat(c.ESPImage); err != nil {
		return fmt.Sprintf("WARNING: IRONIC_ESP_IMAGE=%s cannot be read (%v): %s", c.ESPImage, err, consequence)
	}
	return ""
}
