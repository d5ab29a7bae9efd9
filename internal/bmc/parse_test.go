package bmc

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// schemeRow is what one scheme must produce, written out independently of the implementation's
// table so that a slip in either shows up here.
type schemeRow struct {
	driver     string
	interfaces Interfaces
	transports bool // also accepted as +http / +https
	needsMAC   bool
	secureBoot bool
	isoPPI     bool
	provNet    bool
	raid       bool
}

var wantSchemes = map[string]schemeRow{
	"ipmi": {
		driver: "ipmi", interfaces: Interfaces{Boot: "ipxe", RAID: "no-raid"}, provNet: true,
	},
	"libvirt": {
		driver: "ipmi", interfaces: Interfaces{Boot: "ipxe", RAID: "no-raid"}, provNet: true, needsMAC: true,
	},
	"redfish": {
		driver:     "redfish",
		interfaces: Interfaces{Boot: "ipxe", RAID: "redfish", Firmware: "redfish", Inspect: "redfish"},
		transports: true, secureBoot: true, provNet: true, raid: true,
	},
	"ilo5-redfish": {
		driver:     "redfish",
		interfaces: Interfaces{Boot: "ipxe", RAID: "redfish", Firmware: "redfish", Inspect: "redfish"},
		transports: true, secureBoot: true, provNet: true, raid: true,
	},
	"redfish-virtualmedia": {
		driver:     "redfish",
		interfaces: Interfaces{Boot: "redfish-virtual-media", RAID: "redfish", Firmware: "redfish", Inspect: "redfish"},
		transports: true, secureBoot: true, isoPPI: true, raid: true,
	},
	"ilo5-virtualmedia": {
		driver:     "redfish",
		interfaces: Interfaces{Boot: "redfish-virtual-media", RAID: "redfish", Firmware: "redfish", Inspect: "redfish"},
		transports: true, secureBoot: true, isoPPI: true, raid: true,
	},
	"redfish-uefihttp": {
		driver:     "redfish",
		interfaces: Interfaces{Boot: "redfish-https", RAID: "redfish", Firmware: "redfish", Inspect: "redfish"},
		transports: true, secureBoot: true, isoPPI: true, raid: true,
	},
	"idrac-redfish": {
		driver: "idrac",
		interfaces: Interfaces{
			Boot: "ipxe", BIOS: "idrac-redfish", Management: "idrac-redfish", Power: "idrac-redfish",
			RAID: "idrac-redfish", Vendor: "idrac-redfish", Firmware: "redfish", Inspect: "idrac-redfish",
		},
		transports: true, secureBoot: true, provNet: true, raid: true,
	},
	"idrac-virtualmedia": {
		driver: "idrac",
		interfaces: Interfaces{
			Boot: "idrac-redfish-virtual-media", BIOS: "idrac-redfish", Management: "idrac-redfish", Power: "idrac-redfish",
			RAID: "idrac-redfish", Vendor: "idrac-redfish", Firmware: "redfish", Inspect: "idrac-redfish",
		},
		transports: true, secureBoot: true, isoPPI: true, raid: true,
	},
}

func TestTypesMatchesSchemeTable(t *testing.T) {
	got := Types()
	var want []string
	for typ := range wantSchemes {
		want = append(want, typ)
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("Types() = %v, want %v", got, want)
	}
}

// TestParseEveryScheme parses every scheme and variant (plain, +http, +https, upper case) and checks
// the whole Access, then driver_info.
func TestParseEveryScheme(t *testing.T) {
	for typ, row := range wantSchemes {
		variants := []string{typ, strings.ToUpper(typ)}
		if row.transports {
			variants = append(variants, typ+"+http", typ+"+https", strings.ToUpper(typ)+"+HTTP")
		}
		for _, scheme := range variants {
			t.Run(scheme, func(t *testing.T) {
				address := scheme + "://10.0.0.5:8000/redfish/v1/Systems/1"
				a, err := Parse(address)
				if err != nil {
					t.Fatalf("Parse(%q): %v", address, err)
				}
				want := &Access{
					Type:                            typ,
					Scheme:                          strings.ToLower(scheme),
					Host:                            "10.0.0.5",
					Port:                            "8000",
					Path:                            "/redfish/v1/Systems/1",
					Driver:                          row.driver,
					Interfaces:                      row.interfaces,
					NeedsMAC:                        row.needsMAC,
					SupportsSecureBoot:              row.secureBoot,
					SupportsISOPreprovisioningImage: row.isoPPI,
					RequiresProvisioningNetwork:     row.provNet,
					SupportsRAID:                    row.raid,
				}
				if row.driver == "ipmi" {
					want.PrivilegeLevel = "ADMINISTRATOR"
				}
				if !reflect.DeepEqual(a, want) {
					t.Fatalf("Parse(%q)\n got %+v\nwant %+v", address, a, want)
				}

				info := a.DriverInfo("admin", "s3cret", false)
				var wantInfo map[string]any
				if row.driver == "ipmi" {
					wantInfo = map[string]any{
						"ipmi_address": "10.0.0.5", "ipmi_port": "8000", "ipmi_username": "admin",
						"ipmi_password": "s3cret", "ipmi_priv_level": "ADMINISTRATOR",
					}
				} else {
					redfishScheme := "https"
					if strings.HasSuffix(strings.ToLower(scheme), "+http") {
						redfishScheme = "http"
					}
					wantInfo = map[string]any{
						"redfish_address": redfishScheme + "://10.0.0.5:8000", "redfish_system_id": "/redfish/v1/Systems/1",
						"redfish_username": "admin", "redfish_password": "s3cret",
					}
				}
				if !reflect.DeepEqual(info, wantInfo) {
					t.Fatalf("DriverInfo\n got %v\nwant %v", info, wantInfo)
				}
			})
		}
	}
}

// TestParseTransportSuffixOnlyOnRedfish: metal3 registers +http/+https for every Redfish-family
// scheme and for neither IPMI scheme.
func TestParseTransportSuffixOnlyOnRedfish(t *testing.T) {
	for typ, row := range wantSchemes {
		for _, suffix := range []string{"+http", "+https", "+ftp", "+"} {
			address := typ + suffix + "://10.0.0.5"
			_, err := Parse(address)
			wantOK := row.transports && (suffix == "+http" || suffix == "+https")
			if wantOK && err != nil {
				t.Errorf("Parse(%q): %v", address, err)
			}
			if !wantOK && !errors.Is(err, ErrUnknownScheme) {
				t.Errorf("Parse(%q) = %v, want ErrUnknownScheme", address, err)
			}
		}
	}
}

func TestParseAddressForms(t *testing.T) {
	tests := map[string]struct {
		address                       string
		typ, scheme, host, port, path string
		privilegeLevel                string
	}{
		"bare IPv4": {
			address: "192.168.1.10", typ: "ipmi", scheme: "ipmi", host: "192.168.1.10", privilegeLevel: "ADMINISTRATOR",
		},
		"bare IPv4 with port": {
			address: "192.168.1.10:6230", typ: "ipmi", scheme: "ipmi", host: "192.168.1.10", port: "6230",
			privilegeLevel: "ADMINISTRATOR",
		},
		"bare host name with port (metal3 would read the name as a scheme)": {
			address: "bmc-01.example.com:623", typ: "ipmi", scheme: "ipmi", host: "bmc-01.example.com", port: "623",
			privilegeLevel: "ADMINISTRATOR",
		},
		"bare host name": {
			address: "bmc-01", typ: "ipmi", scheme: "ipmi", host: "bmc-01", privilegeLevel: "ADMINISTRATOR",
		},
		"bare bracketed IPv6 with port": {
			address: "[fd00::1]:623", typ: "ipmi", scheme: "ipmi", host: "fd00::1", port: "623",
			privilegeLevel: "ADMINISTRATOR",
		},
		"bare bracketed IPv6": {
			address: "[fd00::1]", typ: "ipmi", scheme: "ipmi", host: "fd00::1", privilegeLevel: "ADMINISTRATOR",
		},
		"ipmi with privilege level": {
			address: "ipmi://10.1.1.1:624?privilegelevel=OPERATOR", typ: "ipmi", scheme: "ipmi", host: "10.1.1.1",
			port: "624", privilegeLevel: "OPERATOR",
		},
		"ipmi privilege level is upper-cased": {
			address: "ipmi://10.1.1.1?privilegelevel=user&other=x", typ: "ipmi", scheme: "ipmi", host: "10.1.1.1",
			privilegeLevel: "USER",
		},
		"ipmi first privilege level wins": {
			address: "ipmi://10.1.1.1?privilegelevel=callback&privilegelevel=bogus", typ: "ipmi", scheme: "ipmi",
			host: "10.1.1.1", privilegeLevel: "CALLBACK",
		},
		"libvirt with path": {
			address: "libvirt://192.168.122.1:6233/", typ: "libvirt", scheme: "libvirt", host: "192.168.122.1",
			port: "6233", path: "/", privilegeLevel: "ADMINISTRATOR",
		},
		"opaque form accepted by metal3": {
			address: "ipmi:10.1.1.1:6230", typ: "ipmi", scheme: "ipmi", host: "10.1.1.1", port: "6230",
			privilegeLevel: "ADMINISTRATOR",
		},
		"opaque redfish form": {
			address: "redfish+http:bmc.lab:8000/redfish/v1/Systems/abc", typ: "redfish", scheme: "redfish+http",
			host: "bmc.lab", port: "8000", path: "/redfish/v1/Systems/abc",
		},
		"redfish bracketed IPv6 with port": {
			address: "redfish://[fe80::1]:8000/redfish/v1/Systems/1", typ: "redfish", scheme: "redfish",
			host: "fe80::1", port: "8000", path: "/redfish/v1/Systems/1",
		},
		"redfish IPv4-mapped IPv6": {
			address: "redfish://[::ffff:10.0.0.1]/redfish/v1/Systems/1", typ: "redfish", scheme: "redfish",
			host: "::ffff:10.0.0.1", path: "/redfish/v1/Systems/1",
		},
		"redfish without path": {
			address: "redfish-virtualmedia://bmc.example.com", typ: "redfish-virtualmedia",
			scheme: "redfish-virtualmedia", host: "bmc.example.com",
		},
		"path is percent-decoded": {
			address: "idrac-virtualmedia://10.0.0.1/redfish/v1/Systems/System%2EEmbedded%2E1",
			typ:     "idrac-virtualmedia", scheme: "idrac-virtualmedia", host: "10.0.0.1",
			path: "/redfish/v1/Systems/System.Embedded.1",
		},
		"redfish query and fragment are ignored": {
			address: "redfish://10.0.0.1/redfish/v1/Systems/1?x=%zz#frag", typ: "redfish", scheme: "redfish",
			host: "10.0.0.1", path: "/redfish/v1/Systems/1",
		},
		"mixed-case scheme is lower-cased": {
			address: "Redfish-VirtualMedia+HTTPS://10.0.0.1/redfish/v1/Systems/1", typ: "redfish-virtualmedia",
			scheme: "redfish-virtualmedia+https", host: "10.0.0.1", path: "/redfish/v1/Systems/1",
		},
		"port with leading zeros is normalised": {
			address: "ipmi://10.0.0.1:0623", typ: "ipmi", scheme: "ipmi", host: "10.0.0.1", port: "623",
			privilegeLevel: "ADMINISTRATOR",
		},
		"highest port": {
			address: "redfish://10.0.0.1:65535", typ: "redfish", scheme: "redfish", host: "10.0.0.1", port: "65535",
		},
		"63-character DNS label": {
			address: "redfish://" + strings.Repeat("a", 63) + ".example", typ: "redfish", scheme: "redfish",
			host: strings.Repeat("a", 63) + ".example",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			a, err := Parse(tc.address)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.address, err)
			}
			got := [6]string{a.Type, a.Scheme, a.Host, a.Port, a.Path, a.PrivilegeLevel}
			want := [6]string{tc.typ, tc.scheme, tc.host, tc.port, tc.path, tc.privilegeLevel}
			if got != want {
				t.Fatalf("Parse(%q) type, scheme, host, port, path, privilege level\n got %q\nwant %q",
					tc.address, got, want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := map[string]struct {
		address string
		want    error
		// substrings the message must contain: what is wrong and what is allowed
		msg []string
	}{
		"empty":                 {address: "", want: ErrMissingHost, msg: []string{"empty", "host[:port]"}},
		"unknown scheme":        {address: "foo://10.0.0.1", want: ErrUnknownScheme, msg: []string{`unknown scheme "foo"`, "supported: ipmi, libvirt, redfish,", "idrac-virtualmedia", "+http"}},
		"removed scheme ilo4":   {address: "ilo4://10.0.0.1", want: ErrUnknownScheme, msg: []string{`"ilo4"`, "supported:"}},
		"removed scheme irmc":   {address: "irmc://10.0.0.1", want: ErrUnknownScheme, msg: []string{`"irmc"`}},
		"removed scheme idrac":  {address: "idrac://10.0.0.1", want: ErrUnknownScheme, msg: []string{`"idrac"`}},
		"ipmi with transport":   {address: "ipmi+https://10.0.0.1", want: ErrUnknownScheme, msg: []string{"ipmi takes no +https suffix", "Redfish-family"}},
		"bad transport":         {address: "redfish+ftp://10.0.0.1", want: ErrUnknownScheme, msg: []string{"must be http or https"}},
		"empty scheme":          {address: "://10.0.0.1", want: ErrUnknownScheme, msg: []string{`nothing before "://"`, "supported schemes"}},
		"opaque unknown scheme": {address: "foo:bar", want: ErrUnknownScheme, msg: []string{`unknown scheme "foo"`}},
		"http URL":              {address: "https://10.0.0.1/redfish/v1/Systems/1", want: ErrUnknownScheme, msg: []string{`"https"`}},
		"missing host":          {address: "redfish:///redfish/v1/Systems/1", want: ErrMissingHost, msg: []string{"no host"}},
		"missing host opaque":   {address: "redfish:/redfish/v1/Systems/1", want: ErrMissingHost},
		"scheme only":           {address: "redfish-virtualmedia://", want: ErrMissingHost},
		"port without host":     {address: "ipmi://:623", want: ErrMissingHost, msg: []string{"no host before the port"}},
		"bare port only":        {address: ":623", want: ErrMissingHost},
		"query only":            {address: "redfish://?x", want: ErrMissingHost},
		"port zero":             {address: "redfish://10.0.0.1:0/redfish/v1/Systems/1", want: ErrInvalidPort, msg: []string{"port 0 is out of range", "1-65535"}},
		"port too high":         {address: "ipmi://10.0.0.1:65536", want: ErrInvalidPort, msg: []string{"65536", "1-65535"}},
		"huge port":             {address: "10.0.0.1:99999999999999999999999", want: ErrInvalidPort, msg: []string{"out of range"}},
		"port not a number":     {address: "redfish://10.0.0.1:http/", want: ErrInvalidPort, msg: []string{`port "http" is not a number`}},
		"negative port":         {address: "redfish://10.0.0.1:-1/", want: ErrInvalidPort},
		"empty port":            {address: "redfish://10.0.0.1:/redfish/v1/Systems/1", want: ErrInvalidPort, msg: []string{"empty port"}},
		"bare empty port":       {address: "10.0.0.1:", want: ErrInvalidPort},
		"IPv6 empty port":       {address: "redfish://[fe80::1]:/x", want: ErrInvalidPort},
		"IPv6 bad port":         {address: "redfish://[fe80::1]:abc/x", want: ErrInvalidPort},
		"unbracketed IPv6":      {address: "redfish://fe80::1/redfish/v1/Systems/1", want: ErrInvalidHost, msg: []string{"must be enclosed in brackets", "[fe80::1]"}},
		"bare unbracketed IPv6": {address: "fd00::1", want: ErrInvalidHost, msg: []string{"brackets"}},
		"unclosed bracket":      {address: "redfish://[fe80::1/redfish", want: ErrInvalidHost, msg: []string{`without a closing "]"`}},
		"IPv4 in brackets":      {address: "redfish://[10.0.0.1]/x", want: ErrInvalidHost, msg: []string{"not an IPv6 address"}},
		"IPv6 zone":             {address: "redfish://[fe80::1%25eth0]/x", want: ErrInvalidHost, msg: []string{"zone IDs"}},
		"junk after bracket":    {address: "redfish://[fe80::1]x/x", want: ErrInvalidHost, msg: []string{`after "]"`}},
		"bad IPv4":              {address: "redfish://10.0.0.256/redfish/v1/Systems/1", want: ErrInvalidHost, msg: []string{`"10.0.0.256"`, "not a valid IPv4"}},
		"three-part IPv4":       {address: "10.0.0:623", want: ErrInvalidHost},
		"underscore in host":    {address: "redfish://bmc_01.lab/x", want: ErrInvalidHost, msg: []string{"DNS name"}},
		"label starts with -":   {address: "ipmi://-bmc.lab", want: ErrInvalidHost},
		"trailing dot":          {address: "ipmi://bmc.lab.", want: ErrInvalidHost},
		"label too long":        {address: "ipmi://" + strings.Repeat("a", 64) + ".lab", want: ErrInvalidHost},
		"name too long":         {address: "ipmi://" + strings.Repeat("abcdefghi.", 26), want: ErrInvalidHost, msg: []string{"253"}},
		"non-ASCII host":        {address: "redfish://bmc-ä.lab/x", want: ErrInvalidHost},
		"Systems collection":    {address: "redfish://10.0.0.1/redfish/v1/Systems", want: ErrMissingSystemPath, msg: []string{"Systems collection", "/redfish/v1/Systems/1", "leave the path empty"}},
		"Systems collection /":  {address: "idrac-virtualmedia://10.0.0.1/redfish/v1/Systems/", want: ErrMissingSystemPath},
		"Systems any case":      {address: "redfish-virtualmedia+http://10.0.0.1/Redfish/V1/systems//", want: ErrMissingSystemPath},
		"userinfo":              {address: "redfish://admin:hunter2@10.0.0.1/redfish/v1/Systems/1", want: ErrCredentialsInAddress, msg: []string{"not allowed", "Secret", "<redacted>@10.0.0.1/redfish/v1/Systems/1"}},
		"user only":             {address: "ipmi://admin@10.0.0.1", want: ErrCredentialsInAddress},
		"bare userinfo":         {address: "admin:hunter2@10.0.0.1", want: ErrCredentialsInAddress},
		"password with slash":   {address: "redfish://admin:hun/ter2@10.0.0.1/x", want: ErrCredentialsInAddress},
		"space":                 {address: "redfish://10.0.0.1/redfish/v1/Systems/1 ", want: ErrMalformed, msg: []string{"whitespace"}},
		"leading space":         {address: " 10.0.0.1", want: ErrMalformed},
		"tab":                   {address: "ipmi://10.0.0.1\t", want: ErrMalformed},
		"newline":               {address: "ipmi://10.0.0.1\n", want: ErrMalformed},
		"NUL":                   {address: "ipmi://10.0.0.1\x00", want: ErrMalformed},
		"invalid UTF-8":         {address: "redfish://10.0.0.1/\xff", want: ErrMalformed, msg: []string{"UTF-8"}},
		"bad escape":            {address: "redfish://10.0.0.1/redfish/v1/Systems/%zz", want: ErrMalformed, msg: []string{"percent-encoding"}},
		"escaped control":       {address: "redfish://10.0.0.1/redfish/v1/Systems/%00", want: ErrMalformed, msg: []string{"control"}},
		"bad IPMI query":        {address: "ipmi://10.0.0.1?privilegelevel=%zz", want: ErrMalformed, msg: []string{"?privilegelevel="}},
		"bad privilege level":   {address: "ipmi://10.0.0.1?privilegelevel=ROOT", want: ErrInvalidPrivilegeLevel, msg: []string{"ADMINISTRATOR, OPERATOR, USER, CALLBACK"}},
		"empty privilege level": {address: "libvirt://10.0.0.1?privilegelevel=", want: ErrInvalidPrivilegeLevel},
		"garbage":               {address: "%%%", want: ErrInvalidHost},
		"just a slash":          {address: "/", want: ErrMissingHost},
		"just a colon":          {address: ":", want: ErrMissingHost},
		"just brackets":         {address: "[]", want: ErrInvalidHost},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			a, err := Parse(tc.address)
			if err == nil {
				t.Fatalf("Parse(%q) = %+v, want error %v", tc.address, a, tc.want)
			}
			if a != nil {
				t.Errorf("Parse(%q) returned an Access with an error", tc.address)
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("Parse(%q) error %q is not %v", tc.address, err, tc.want)
			}
			var addrErr *AddressError
			if !errors.As(err, &addrErr) {
				t.Fatalf("Parse(%q) error %T is not an *AddressError", tc.address, err)
			}
			for _, s := range tc.msg {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("Parse(%q) error %q does not mention %q", tc.address, err, s)
				}
			}
			for _, secret := range []string{"hunter2", "hun/ter2", "admin:"} {
				if strings.Contains(err.Error(), secret) || strings.Contains(addrErr.Address, secret) {
					t.Errorf("Parse(%q) error %q repeats the credentials", tc.address, err)
				}
			}
		})
	}
}

// TestParseErrorsNeverRepeatCredentials puts user information into otherwise good and bad addresses
// of every form, and checks that no part of it reaches the error.
func TestParseErrorsNeverRepeatCredentials(t *testing.T) {
	const user, password = "root-user", "Pa55/w0rd?#:x"
	addresses := []string{
		"redfish://10.0.0.1/redfish/v1/Systems/1",
		"redfish+http://[fe80::1]:8000/redfish/v1/Systems/1",
		"idrac-virtualmedia://bmc.example.com",
		"ipmi://10.0.0.1:623",
		"foo://10.0.0.1",
		"redfish://10.0.0.1:99999/x",
		"10.0.0.1",
		"[fd00::1]:623",
	}
	for _, address := range addresses {
		for _, injected := range injectUserinfo(address, user+":"+password) {
			_, err := Parse(injected)
			if !errors.Is(err, ErrCredentialsInAddress) {
				t.Errorf("Parse(%q) = %v, want ErrCredentialsInAddress", injected, err)
				continue
			}
			msg := err.Error()
			for _, part := range []string{user, "Pa55", "w0rd"} {
				if strings.Contains(msg, part) {
					t.Errorf("Parse(%q) error %q contains %q", injected, msg, part)
				}
			}
		}
	}
}

// injectUserinfo returns address with userinfo+"@" placed where a URL's user information goes, and
// also at the very front.
func injectUserinfo(address, userinfo string) []string {
	out := []string{userinfo + "@" + address}
	if i := strings.Index(address, "://"); i >= 0 {
		out = append(out, address[:i+3]+userinfo+"@"+address[i+3:])
	}
	return out
}
