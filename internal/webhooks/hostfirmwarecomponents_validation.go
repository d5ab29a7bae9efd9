package webhooks

import (
	"fmt"
	"net/url"
	"path"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

// nicComponentPrefix starts the name of a NIC firmware component, "nic:<id>".
const nicComponentPrefix = "nic:"

// firmwareURLSchemes: what Ironic's redfish firmware interface fetches: HTTP(S), handed to the
// BMC, or a file on Ironic's side (file:///shared/html/…), which Ironic copies to its own HTTP
// server and allows only under its file_url_allowed_paths. metal3 also lets oci:// through, which
// Ironic's firmware updates cannot fetch; swift:// needs a Swift Metalforge does not deploy.
var firmwareURLSchemes = []string{"http", "https", "file"}

// ValidateHostFirmwareComponents returns what is wrong with the requested firmware updates:
// component names and URLs. A component may be listed more than once, as metal3 admits: Ironic
// flashes the images one after the other (a BMC that needs an intermediate version on the way).
func ValidateHostFirmwareComponents(hfc *metal3.HostFirmwareComponents) field.ErrorList {
	path := field.NewPath("spec", "updates")
	var errs field.ErrorList
	for i, u := range hfc.Spec.Updates {
		p := path.Index(i)
		switch {
		case u.Component == "bmc", u.Component == "bios":
		case strings.HasPrefix(u.Component, nicComponentPrefix) && validNICID(strings.TrimPrefix(u.Component, nicComponentPrefix)):
		default:
			errs = append(errs, field.Invalid(p.Child("component"), u.Component, `must be "bmc", "bios" or "nic:<id>" (the NIC's id as status.components lists it: its serial number, or its Redfish id when it has none)`))
		}

		if u.URL == "" {
			errs = append(errs, field.Required(p.Child("url"), "the firmware image to flash: an "+quoteSchemes(firmwareURLSchemes)+" URL"))
		} else if parsed, err := parseURL(u.URL, firmwareURLSchemes...); err != nil {
			errs = append(errs, field.Invalid(p.Child("url"), u.URL, fmt.Sprintf("%v (firmware for %q)", err, u.Component)))
		} else if strings.EqualFold(parsed.Scheme, "file") && !IronicLocalFile(parsed) {
			errs = append(errs, field.Invalid(p.Child("url"), u.URL, fmt.Sprintf(
				"a file URL names a file on Ironic's host: file:///<absolute path>, with no host but localhost (firmware for %q)", u.Component)))
		}
	}
	return errs
}

func validNICID(id string) bool {
	return id != "" && !strings.ContainsFunc(id, func(r rune) bool { return r <= ' ' || r == 0x7f })
}

// IronicLocalFile: a file URL Ironic can copy: no host (or localhost) and an absolute path to a
// file. The HostFirmwareComponents controller checks its URLs with it too.
func IronicLocalFile(u *url.URL) bool {
	return (u.Host == "" || u.Host == "localhost") && strings.HasPrefix(u.Path, "/") && path.Clean(u.Path) != "/"
}
