package hostfirmwarecomponents

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/metalforge/metalforge/internal/statustext"
	"github.com/metalforge/metalforge/internal/webhooks"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
)

// Component names Ironic's firmware interface updates (metal3's rule): the BIOS, the BMC, or a
// NIC by the id Ironic reports ("nic:<id>").
const (
	componentBIOS = "bios"
	componentBMC  = "bmc"
	nicPrefix     = "nic:"
)

// validateUpdates checks spec.updates against the components the host reports (see
// validateComponent). Each error names the field and the rule it breaks. A component listed twice
// is flashed twice, in order (Ironic's firmware.update takes the list as it is; metal3 admits it).
func validateUpdates(updates []metal3.FirmwareUpdate, reported []metal3.FirmwareComponentStatus, unsupported error) []error {
	var errs []error
	for i, u := range updates {
		field := fmt.Sprintf("spec.updates[%d]", i)
		err := validateComponent(u.Component, reported)
		if err == nil && unsupported != nil {
			err = fmt.Errorf("%q cannot be updated: %w", u.Component, unsupported)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s.component: %w", field, err))
		}
		if err := validateURL(u.URL); err != nil {
			errs = append(errs, fmt.Errorf("%s.url: %w", field, err))
		}
	}
	return errs
}

func validateComponent(c string, reported []metal3.FirmwareComponentStatus) error {
	nic, isNIC := strings.CutPrefix(c, nicPrefix)
	if c != componentBIOS && c != componentBMC && (!isNIC || nic == "") {
		return fmt.Errorf("%q is not a firmware component; use bios, bmc or nic:<id>", c)
	}
	// Checked against the list only when the host reports components of c's kind: Ironic lists
	// bios and bmc from the System and Manager (bmc only when the Manager has a firmware
	// version) and NICs only for network adapters whose controllers report a firmware package
	// version (nic:<serial number>, else nic:<Redfish id>; many BMCs report none), while its
	// firmware.update step takes nic:<id> all the same (metal3 checks the names only).
	var names []string
	ofKind := false
	for _, r := range reported {
		names = append(names, r.Component)
		ofKind = ofKind || r.Component == c || (isNIC && strings.HasPrefix(r.Component, nicPrefix))
	}
	if ofKind && !slices.Contains(names, c) {
		return fmt.Errorf("%q is not among the host's components (%s)", c, strings.Join(names, ", "))
	}
	return nil
}

// validateURL: Ironic hands an http or https URL to the BMC, and copies a file on its side
// (file:///shared/html/…, allowed only under its file_url_allowed_paths, which it checks) to its
// own HTTP server; so an absolute http(s) URL with a host, or a file URL with an absolute path.
func validateURL(raw string) error {
	if raw == "" {
		return fmt.Errorf("missing: the URL of the firmware image")
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
	case u.Scheme == "http" || u.Scheme == "https":
		if u.Host != "" {
			return nil
		}
	case u.Scheme == "file":
		if webhooks.IronicLocalFile(u) {
			return nil
		}
		if !strings.Contains(raw, "@") {
			return fmt.Errorf("%q names no file on Ironic's host: write file:///<absolute path>, with no host but localhost", raw)
		}
	}
	if strings.Contains(raw, "@") && (err != nil || !strings.Contains(statustext.Redact(raw), "***@")) {
		// User information the status text cleaner does not remove (unparsable: a password with
		// a space or '#'; or no "scheme://" before it: "admin:s3cret@fw.example/bmc.bin" parses
		// as scheme "admin", and a credential query parameter redacted beside it does not make
		// it safe): not repeated in status or events.
		return fmt.Errorf("not an http, https or file URL (not shown: it may hold credentials)")
	}
	return fmt.Errorf("%q is not an http, https or file URL", raw)
}
