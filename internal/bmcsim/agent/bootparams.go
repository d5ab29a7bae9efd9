package agent

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/metalforge/metalforge/internal/bmcsim/agent/deployimage"
	"github.com/metalforge/metalforge/internal/iso"
)

// ErrNotAgentImage means the booted ISO is not the project's deploy image, so no agent runs on it.
var ErrNotAgentImage = errors.New("not the agent image")

// BootInfo is what the agent learns from the image it booted, the way ironic-python-agent learns
// it from /proc/cmdline.
type BootInfo struct {
	// Params are the kernel parameters; a parameter without "=" maps to "".
	Params map[string]string
	// APIURL is the first of ipa-api-url (empty when the image has none).
	APIURL string
	// Token is ipa-agent-token: Ironic pregenerates one when it builds the ISO itself.
	Token string
	// InspectionCallbackURL is ipa-inspection-callback-url (set by Ironic for agent inspection when
	// it can pass kernel parameters).
	InspectionCallbackURL string
	// Ignition: the image carried an Ignition config (a customized CoreOS live image). Its
	// agent configuration's api_url then replaces ipa-api-url, as the file overrides the kernel
	// command line in ironic-python-agent.
	Ignition bool
	// Network are the static addresses of the image's NetworkManager keyfiles.
	Network []NICAddress
	// RootfsURL is coreos.live.rootfs_url for a live image without its root filesystem (a
	// minimal ISO, or an initramfs): the live system fetches it before anything runs.
	RootfsURL string
}

// ParseBootISO recognises the agent image by the kernel marker and reads the kernel command line
// from /EFI/BOOT/grub.cfg (or isolinux's config for legacy boot). When the ISO filesystem cannot be
// parsed it falls back to searching the raw bytes, since both files are stored uncompressed.
func ParseBootISO(image []byte) (BootInfo, error) {
	im, err := iso.Open(bytes.NewReader(image), int64(len(image)))
	if err != nil {
		return parseRaw(image, err)
	}
	if isLive(im) {
		return parseLiveISO(im)
	}
	kernel, err := im.ReadFile(deployimage.ISOKernelPath)
	if err != nil {
		return BootInfo{}, fmt.Errorf("%w: no /%s in the ISO (%w)", ErrNotAgentImage, deployimage.ISOKernelPath, err)
	}
	if !bytes.HasPrefix(kernel, []byte(deployimage.KernelMarker)) {
		return BootInfo{}, fmt.Errorf("%w: /%s has no agent marker", ErrNotAgentImage, deployimage.ISOKernelPath)
	}
	bi := newBootInfo(commandLine(im, deployimage.ISOGrubPath, "boot/grub/grub.cfg", "isolinux/isolinux.cfg"))
	// An image customization controller's initramfs (Ignition appended), which Ironic put into
	// the boot ISO it built: the live system reads the Ignition from it.
	if initrd, err := im.ReadFile(deployimage.ISORamdiskPath); err == nil {
		if err := applyIgnition(&bi, initrd); err != nil {
			return BootInfo{}, err
		}
	}
	return bi, nil
}

// commandLine is the kernel command line of the first configuration that has one; "" for the
// agent image without one (network boot style: the caller falls back to its URL).
func commandLine(im *iso.Image, configs ...string) string {
	for _, cfg := range configs {
		data, err := im.ReadFile(cfg)
		if err != nil {
			continue
		}
		if line, ok := kernelLine(string(data)); ok {
			return line
		}
	}
	return ""
}

// parseLiveISO reads a CoreOS live ISO: the kernel marker, the command line of its GRUB (any
// EFI/<vendor>/grub.cfg) or isolinux configuration, the Ignition config in its embed area, and
// whether it carries its root filesystem.
func parseLiveISO(im *iso.Image) (BootInfo, error) {
	kernel, err := im.ReadFile(liveKernelPath)
	if err != nil || !bytes.HasPrefix(kernel, []byte(deployimage.KernelMarker)) {
		return BootInfo{}, fmt.Errorf("%w: /%s has no agent marker", ErrNotAgentImage, liveKernelPath)
	}
	var configs []string
	if vendors, err := im.ReadDir("EFI"); err == nil {
		for _, v := range vendors {
			if v.IsDir {
				configs = append(configs, "EFI/"+v.Name+"/grub.cfg")
			}
		}
	}
	bi := newBootInfo(commandLine(im, append(configs, "isolinux/isolinux.cfg")...))
	area, err := liveEmbedArea(im)
	if err != nil {
		return BootInfo{}, err
	}
	if err := applyIgnition(&bi, area); err != nil {
		return BootInfo{}, err
	}
	if _, err := im.Stat(liveRootfsPath); err == nil {
		bi.RootfsURL = ""
	} else if bi.RootfsURL == "" {
		return BootInfo{}, fmt.Errorf("the live ISO has no /%s and no %s", liveRootfsPath, rootfsURLParam)
	}
	return bi, nil
}

// applyIgnition reads the Ignition config from an initramfs or embed area, if it has one.
func applyIgnition(bi *BootInfo, archives []byte) error {
	files, err := archiveFiles(archives)
	if err != nil {
		return err
	}
	config, ok := files[ignitionName]
	if !ok {
		return nil
	}
	lc, err := parseIgnition(config)
	if err != nil {
		return err
	}
	bi.Ignition = true
	if lc.APIURL != "" {
		bi.APIURL = lc.APIURL
	}
	if lc.InspectionCallbackURL != "" {
		bi.InspectionCallbackURL = lc.InspectionCallbackURL
	}
	if lc.Insecure {
		if bi.Params == nil {
			bi.Params = map[string]string{}
		}
		bi.Params["ipa-insecure"] = "1"
	}
	bi.Network = nicAddresses(lc.Keyfiles)
	return nil
}

func parseRaw(image []byte, cause error) (BootInfo, error) {
	if !bytes.Contains(image, []byte(deployimage.KernelMarker)) {
		return BootInfo{}, fmt.Errorf("%w: %w", ErrNotAgentImage, cause)
	}
	if i := bytes.Index(image, []byte("linux /vmlinuz")); i >= 0 {
		end := bytes.IndexByte(image[i:], '\n')
		if end < 0 {
			end = len(image) - i
		}
		if line, ok := kernelLine(string(image[i : i+end])); ok {
			return newBootInfo(line), nil
		}
	}
	return newBootInfo(""), nil
}

// kernelLine finds the kernel arguments in a grub ("linux /vmlinuz ARGS") or isolinux
// ("append ARGS") configuration.
func kernelLine(cfg string) (string, bool) {
	for _, line := range strings.Split(cfg, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "linux", "linuxefi", "kernel":
			if len(f) >= 2 {
				return strings.Join(f[2:], " "), true
			}
		case "append":
			return strings.Join(f[1:], " "), true
		}
	}
	return "", false
}

// ParseCmdline splits a kernel command line; parsing stops at "--" (arguments for init).
func ParseCmdline(cmdline string) map[string]string {
	params := map[string]string{}
	for _, f := range strings.Fields(cmdline) {
		if f == "--" {
			break
		}
		k, v, _ := strings.Cut(f, "=")
		params[k] = strings.Trim(v, `"`)
	}
	return params
}

func newBootInfo(cmdline string) BootInfo {
	p := ParseCmdline(cmdline)
	bi := BootInfo{Params: p, Token: p["ipa-agent-token"], InspectionCallbackURL: p["ipa-inspection-callback-url"], RootfsURL: p[rootfsURLParam]}
	if u := p["ipa-api-url"]; u != "" {
		bi.APIURL, _, _ = strings.Cut(u, ",")
	}
	return bi
}
