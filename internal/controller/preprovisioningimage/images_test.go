package preprovisioningimage

import (
	"reflect"
	"strings"
	"testing"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

// TestImagesPerArchitecture: <VAR>_<ARCH> wins over <BASE>_BY_ARCH, which wins over <VAR>; the
// plain variables serve every architecture without its own; an initrd needs its kernel.
func TestImagesPerArchitecture(t *testing.T) {
	iso, initrd := metal3.ImageFormatISO, metal3.ImageFormatInitRD
	tests := map[string]struct {
		env    []string
		format metal3.ImageFormat
		arch   string
		want   Image
		ok     bool
	}{
		"plain ISO for any architecture": {env: []string{"DEPLOY_ISO_URL=http://i/x.iso"}, format: iso, arch: "aarch64", want: Image{URL: "http://i/x.iso"}, ok: true},
		"plain ISO without architecture": {env: []string{"DEPLOY_ISO_URL=http://i/x.iso"}, format: iso, want: Image{URL: "http://i/x.iso"}, ok: true},
		"per-architecture ISO": {env: []string{"DEPLOY_ISO_URL=http://i/x.iso", "DEPLOY_ISO_URL_AARCH64=http://i/a.iso"},
			format: iso, arch: "aarch64", want: Image{URL: "http://i/a.iso"}, ok: true},
		"per-architecture ISO leaves others on the plain one": {env: []string{"DEPLOY_ISO_URL=http://i/x.iso", "DEPLOY_ISO_URL_AARCH64=http://i/a.iso"},
			format: iso, arch: "x86_64", want: Image{URL: "http://i/x.iso"}, ok: true},
		"BY_ARCH list, case-insensitive, URL with colons": {env: []string{"DEPLOY_ISO_BY_ARCH=x86_64:http://i:8080/x.iso, AARCH64:file:///s/a.iso"},
			format: iso, arch: "aarch64", want: Image{URL: "file:///s/a.iso"}, ok: true},
		"<VAR>_<ARCH> wins over BY_ARCH": {env: []string{"DEPLOY_ISO_BY_ARCH=aarch64:http://i/by.iso", "DEPLOY_ISO_URL_AARCH64=http://i/var.iso"},
			format: iso, arch: "aarch64", want: Image{URL: "http://i/var.iso"}, ok: true},
		"BY_ARCH without the architecture falls back": {env: []string{"DEPLOY_ISO_URL=http://i/x.iso", "DEPLOY_ISO_BY_ARCH=aarch64:http://i/a.iso"},
			format: iso, arch: "ppc64le", want: Image{URL: "http://i/x.iso"}, ok: true},
		"only another architecture's ISO": {env: []string{"DEPLOY_ISO_URL_AARCH64=http://i/a.iso"}, format: iso, arch: "x86_64", want: Image{}, ok: false},
		"initrd with its kernel": {env: []string{"DEPLOY_RAMDISK_URL=http://i/r", "DEPLOY_KERNEL_URL=http://i/k"},
			format: initrd, arch: "x86_64", want: Image{URL: "http://i/r", KernelURL: "http://i/k"}, ok: true},
		"per-architecture kernel only": {env: []string{"DEPLOY_RAMDISK_URL=http://i/r", "DEPLOY_KERNEL_URL=http://i/k", "DEPLOY_KERNEL_URL_AARCH64=http://i/ka"},
			format: initrd, arch: "aarch64", want: Image{URL: "http://i/r", KernelURL: "http://i/ka"}, ok: true},
		"initrd without a kernel": {env: []string{"DEPLOY_RAMDISK_URL=http://i/r"}, format: initrd, arch: "x86_64", want: Image{URL: "http://i/r"}, ok: false},
		"empty values are unset":  {env: []string{"DEPLOY_ISO_URL= "}, format: iso, arch: "x86_64", want: Image{}, ok: false},
	}
	for name, tc := range tests {
		got, ok := ImagesFromEnv(tc.env).Image(tc.format, tc.arch)
		if ok != tc.ok || got != tc.want {
			t.Errorf("%s: %+v %t, want %+v %t", name, got, ok, tc.want, tc.ok)
		}
	}
}

func TestImagesConfigured(t *testing.T) {
	tests := map[string]struct {
		env  []string
		want bool
	}{
		"nothing": {nil, false},
		"only the kernel (OpenShift: ICC serves)": {[]string{"DEPLOY_KERNEL_URL=http://i/k", "PATH=/bin"}, false},
		"an ISO":                             {[]string{"DEPLOY_ISO_URL=http://i/x.iso"}, true},
		"an aarch64 ISO only":                {[]string{"DEPLOY_ISO_URL_AARCH64=http://i/a.iso"}, true},
		"ramdisk and kernel":                 {[]string{"DEPLOY_RAMDISK_URL=http://i/r", "DEPLOY_KERNEL_URL=http://i/k"}, true},
		"ramdisk without kernel":             {[]string{"DEPLOY_RAMDISK_URL=http://i/r"}, false},
		"ramdisk and kernel by architecture": {[]string{"DEPLOY_RAMDISK_BY_ARCH=x86_64:http://i/r", "DEPLOY_KERNEL_BY_ARCH=x86_64:http://i/k"}, true},
	}
	for name, tc := range tests {
		if got := ImagesFromEnv(tc.env).Configured(); got != tc.want {
			t.Errorf("%s: %t", name, got)
		}
	}
	im := ImagesFromEnv([]string{"DEPLOY_ISO_URL=http://i/x.iso", "DEPLOY_RAMDISK_URL=http://i/r", "DEPLOY_KERNEL_URL=http://i/k"})
	if got := im.Formats("x86_64"); !reflect.DeepEqual(got, []metal3.ImageFormat{metal3.ImageFormatISO, metal3.ImageFormatInitRD}) {
		t.Errorf("formats %v", got)
	}
}

// The startup log line lists the configured URLs without their credentials.
func TestImagesStringRedactsCredentials(t *testing.T) {
	got := ImagesFromEnv([]string{"DEPLOY_ISO_URL=https://user:s3cret@images.example/a.iso", "DEPLOY_KERNEL_URL=http://i/k?token=s3cret"}).String()
	if strings.Contains(got, "s3cret") || !strings.Contains(got, "DEPLOY_ISO_URL=https://") || !strings.Contains(got, "images.example/a.iso") {
		t.Errorf("String() = %q: want the URLs without credentials", got)
	}
}
