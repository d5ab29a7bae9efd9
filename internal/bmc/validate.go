package bmc

import (
	"errors"
	"fmt"
)

// BootModeUEFISecureBoot is the metal3 spec.bootMode value that needs secure boot support. It is
// repeated here so that this package stays free of API imports.
const BootModeUEFISecureBoot = "UEFISecureBoot"

// Sentinels for what a host asks of its BMC that the BMC type cannot give. Validate returns
// *CapabilityError values wrapping them.
var (
	// ErrBootMACRequired: the BMC type needs spec.bootMACAddress and it is empty.
	ErrBootMACRequired = errors.New("boot MAC address required")
	// ErrSecureBootUnsupported: spec.bootMode is UEFISecureBoot and the BMC type cannot do it.
	ErrSecureBootUnsupported = errors.New("secure boot not supported")
	// ErrHardwareRAIDUnsupported: hardware RAID volumes are requested and the BMC type has no RAID
	// interface.
	ErrHardwareRAIDUnsupported = errors.New("hardware RAID not supported")
)

// CapabilityError says which part of a host spec the BMC type cannot serve, and what would work.
type CapabilityError struct {
	// Type is the BMC type, e.g. "ipmi".
	Type string
	// Field is the BareMetalHost spec field at fault, e.g. "bootMode".
	Field string
	// Reason names the problem and what is allowed.
	Reason string
	// Err is one of ErrBootMACRequired, ErrSecureBootUnsupported, ErrHardwareRAIDUnsupported.
	Err error
}

func (e *CapabilityError) Error() string {
	return fmt.Sprintf("%s: BMC address type %q %s", e.Field, e.Type, e.Reason)
}

// Unwrap returns the sentinel.
func (e *CapabilityError) Unwrap() error { return e.Err }

// capabilityCheck is one row of Validate's table.
type capabilityCheck struct {
	field    string
	sentinel error
	reason   string
	violated func(a *Access, bootMAC, bootMode string, hardwareRAID bool) bool
}

var capabilityChecks = []capabilityCheck{
	{
		field:    "bootMACAddress",
		sentinel: ErrBootMACRequired,
		reason:   "requires bootMACAddress: a virtual BMC cannot report the host's NICs",
		violated: func(a *Access, bootMAC, _ string, _ bool) bool { return a.NeedsMAC && bootMAC == "" },
	},
	{
		field:    "bootMode",
		sentinel: ErrSecureBootUnsupported,
		reason:   "does not support secure boot; use bootMode UEFI or legacy, or a Redfish-based BMC address",
		violated: func(a *Access, _, bootMode string, _ bool) bool {
			return bootMode == BootModeUEFISecureBoot && !a.SupportsSecureBoot
		},
	},
	{
		field:    "raid.hardwareRAIDVolumes",
		sentinel: ErrHardwareRAIDUnsupported,
		reason:   "does not support hardware RAID; use softwareRAIDVolumes, or a Redfish-based BMC address",
		violated: func(a *Access, _, _ string, hardwareRAID bool) bool { return hardwareRAID && !a.SupportsRAID },
	},
}

// Validate checks what a host spec asks of this BMC against what its type supports: a boot MAC when
// the type needs one (libvirt), secure boot for bootMode UEFISecureBoot, and hardware RAID when
// hardware RAID volumes are set. It returns nil or the errors.Join of one *CapabilityError per
// violation. It is pure and checks nothing else: the MAC's format, and the rule that a MAC is also
// needed when inspection is disabled, belong to the caller.
func (a *Access) Validate(bootMACAddress, bootMode string, hardwareRAID bool) error {
	var errs []error
	for _, c := range capabilityChecks {
		if c.violated(a, bootMACAddress, bootMode, hardwareRAID) {
			errs = append(errs, &CapabilityError{Type: a.Type, Field: c.field, Reason: c.reason, Err: c.sentinel})
		}
	}
	return errors.Join(errs...)
}
