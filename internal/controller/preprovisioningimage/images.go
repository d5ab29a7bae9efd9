package preprovisioningimage

import (
	"fmt"
	"sort"
	"strings"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/statustext"
)

// Environment variables, named as metal3's default image provider reads them. Each has
// per-architecture variants: <VAR>_<ARCH> (DEPLOY_ISO_URL_AARCH64) and <BASE>_BY_ARCH
// ("x86_64:http://…,aarch64:http://…", architectures case-insensitive), the first winning; the
// plain variable serves every architecture without a variant of its own.
const (
	EnvISOURL     = "DEPLOY_ISO_URL"
	EnvRamdiskURL = "DEPLOY_RAMDISK_URL"
	EnvKernelURL  = "DEPLOY_KERNEL_URL"
)

// byArchVar is the <BASE>_BY_ARCH variable of each URL variable.
var byArchVar = map[string]string{
	EnvISOURL:     "DEPLOY_ISO_BY_ARCH",
	EnvRamdiskURL: "DEPLOY_RAMDISK_BY_ARCH",
	EnvKernelURL:  "DEPLOY_KERNEL_BY_ARCH",
}

// Images are the fixed agent images the controller hands out, from the environment.
type Images struct {
	env map[string]string
}

// ImagesFromEnv reads the images from an environment (os.Environ's form, "KEY=value").
func ImagesFromEnv(environ []string) Images {
	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "DEPLOY_") && strings.TrimSpace(v) != "" {
			env[k] = strings.TrimSpace(v)
		}
	}
	return Images{env: env}
}

// Configured reports whether any image is configured (an ISO, or an initrd with its kernel, for
// some architecture): without one the controller has nothing to hand out and is not started
// (metal3's CanStart), so that an external image builder can serve the images (as in OpenShift,
// where only DEPLOY_KERNEL_URL is set).
func (im Images) Configured() bool {
	has := func(variable string) bool {
		for k := range im.env {
			if strings.HasPrefix(k, variable) || strings.HasPrefix(k, byArchVar[variable]) {
				return true
			}
		}
		return false
	}
	return has(EnvISOURL) || (has(EnvRamdiskURL) && has(EnvKernelURL))
}

// url is the variable's value for arch: <VAR>_<ARCH>, then <BASE>_BY_ARCH, then <VAR>.
func (im Images) url(variable, arch string) string {
	if v := im.archURL(variable, arch); v != "" {
		return v
	}
	return im.env[variable]
}

// archURL is the variable's value set for arch alone (<VAR>_<ARCH> or <BASE>_BY_ARCH), "" when
// only the plain variable could serve it.
func (im Images) archURL(variable, arch string) string {
	if arch == "" {
		return ""
	}
	if v := im.env[variable+"_"+strings.ToUpper(arch)]; v != "" {
		return v
	}
	return lookupByArch(im.env[byArchVar[variable]], arch)
}

// ForArch: the format's image (for an initrd, its ramdisk) is set for arch alone, not taken from
// the plain variable, which is most often the image of the controller's own architecture.
func (im Images) ForArch(format metal3.ImageFormat, arch string) bool {
	switch format {
	case metal3.ImageFormatISO:
		return im.archURL(EnvISOURL, arch) != ""
	case metal3.ImageFormatInitRD:
		return im.archURL(EnvRamdiskURL, arch) != ""
	}
	return false
}

// lookupByArch finds arch in "arch:url,arch:url" (the URL may contain colons).
func lookupByArch(list, arch string) string {
	if arch == "" {
		return ""
	}
	for item := range strings.SplitSeq(list, ",") {
		a, u, ok := strings.Cut(strings.TrimSpace(item), ":")
		if ok && strings.EqualFold(a, arch) && u != "" {
			return u
		}
	}
	return ""
}

// Image is one image the controller hands out.
type Image struct {
	URL       string
	KernelURL string
}

// Image returns the image of a format for an architecture; ok is false when none is configured.
// An initrd needs a kernel to boot with, as in metal3.
func (im Images) Image(format metal3.ImageFormat, arch string) (Image, bool) {
	switch format {
	case metal3.ImageFormatISO:
		u := im.url(EnvISOURL, arch)
		return Image{URL: u}, u != ""
	case metal3.ImageFormatInitRD:
		u, k := im.url(EnvRamdiskURL, arch), im.url(EnvKernelURL, arch)
		return Image{URL: u, KernelURL: k}, u != "" && k != ""
	}
	return Image{}, false
}

// Formats lists the formats configured for an architecture.
func (im Images) Formats(arch string) []metal3.ImageFormat {
	var out []metal3.ImageFormat
	for _, f := range []metal3.ImageFormat{metal3.ImageFormatISO, metal3.ImageFormatInitRD} {
		if _, ok := im.Image(f, arch); ok {
			out = append(out, f)
		}
	}
	return out
}

// String lists what is configured (the startup log), credentials in the URLs (user:password@,
// token parameters) redacted.
func (im Images) String() string {
	keys := make([]string, 0, len(im.env))
	for k := range im.env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%s", k, statustext.Redact(im.env[k])))
	}
	return strings.Join(parts, " ")
}
