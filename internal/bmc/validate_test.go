package bmc

import (
	"errors"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	const mac = "52:54:00:12:34:56"
	tests := map[string]struct {
		address      string
		bootMAC      string
		bootMode     string
		hardwareRAID bool
		want         []error
		msg          []string
	}{
		"ipmi, nothing asked":              {address: "10.0.0.1"},
		"ipmi needs no MAC":                {address: "ipmi://10.0.0.1", bootMode: "UEFI"},
		"libvirt with MAC":                 {address: "libvirt://10.0.0.1", bootMAC: mac},
		"libvirt without MAC":              {address: "libvirt://10.0.0.1", want: []error{ErrBootMACRequired}, msg: []string{"bootMACAddress", `"libvirt"`}},
		"redfish-virtualmedia without MAC": {address: "redfish-virtualmedia://10.0.0.1"},
		"ipmi secure boot":                 {address: "ipmi://10.0.0.1", bootMode: "UEFISecureBoot", want: []error{ErrSecureBootUnsupported}, msg: []string{"bootMode", "secure boot", "UEFI"}},
		"ipmi legacy":                      {address: "ipmi://10.0.0.1", bootMode: "legacy"},
		"ipmi hardware RAID":               {address: "ipmi://10.0.0.1", hardwareRAID: true, want: []error{ErrHardwareRAIDUnsupported}, msg: []string{"raid.hardwareRAIDVolumes", "softwareRAIDVolumes"}},
		"libvirt everything wrong": {
			address: "libvirt://10.0.0.1", bootMode: "UEFISecureBoot", hardwareRAID: true,
			want: []error{ErrBootMACRequired, ErrSecureBootUnsupported, ErrHardwareRAIDUnsupported},
		},
		"redfish secure boot and RAID":   {address: "redfish://10.0.0.1", bootMode: "UEFISecureBoot", hardwareRAID: true},
		"idrac-virtualmedia secure boot": {address: "idrac-virtualmedia://10.0.0.1", bootMode: "UEFISecureBoot", hardwareRAID: true},
		"redfish-uefihttp secure boot":   {address: "redfish-uefihttp://10.0.0.1", bootMode: "UEFISecureBoot", hardwareRAID: true},
		"ilo5-virtualmedia secure boot":  {address: "ilo5-virtualmedia://10.0.0.1", bootMode: "UEFISecureBoot", hardwareRAID: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			a, err := Parse(tc.address)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.address, err)
			}
			err = a.Validate(tc.bootMAC, tc.bootMode, tc.hardwareRAID)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate = nil, want %v", tc.want)
			}
			for _, w := range tc.want {
				if !errors.Is(err, w) {
					t.Errorf("Validate error %q is not %v", err, w)
				}
			}
			if n := len(err.(interface{ Unwrap() []error }).Unwrap()); n != len(tc.want) {
				t.Errorf("Validate returned %d errors, want %d: %v", n, len(tc.want), err)
			}
			var capErr *CapabilityError
			if !errors.As(err, &capErr) || capErr.Type == "" || capErr.Field == "" {
				t.Errorf("Validate error %#v carries no *CapabilityError with type and field", err)
			}
			for _, s := range tc.msg {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("Validate error %q does not mention %q", err, s)
				}
			}
		})
	}
}

// TestValidateFollowsCapabilityFlags checks Validate against each scheme's flags, so the checks
// cannot drift from the scheme table.
func TestValidateFollowsCapabilityFlags(t *testing.T) {
	for _, typ := range Types() {
		a, err := Parse(typ + "://10.0.0.1")
		if err != nil {
			t.Fatalf("Parse: %v", err)
		}
		err = a.Validate("", BootModeUEFISecureBoot, true)
		if got := errors.Is(err, ErrBootMACRequired); got != a.NeedsMAC {
			t.Errorf("%s: MAC required = %v, NeedsMAC = %v", typ, got, a.NeedsMAC)
		}
		if got := errors.Is(err, ErrSecureBootUnsupported); got == a.SupportsSecureBoot {
			t.Errorf("%s: secure boot rejected = %v, SupportsSecureBoot = %v", typ, got, a.SupportsSecureBoot)
		}
		if got := errors.Is(err, ErrHardwareRAIDUnsupported); got == a.SupportsRAID {
			t.Errorf("%s: RAID rejected = %v, SupportsRAID = %v", typ, got, a.SupportsRAID)
		}
	}
}
