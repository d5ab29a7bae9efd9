package bmc

import (
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
)

var allSentinels = []error{
	ErrUnknownScheme, ErrMissingHost, ErrInvalidHost, ErrInvalidPort, ErrMissingSystemPath,
	ErrCredentialsInAddress, ErrInvalidPrivilegeLevel, ErrMalformed,
}

// FuzzParse checks, for any address and any credentials:
//   - Parse never panics and returns exactly one of an Access or an error;
//   - an error is an *AddressError wrapping one sentinel, and its message has no "@" but the
//     redaction marker's, so it cannot hold user information;
//   - an Access has a known Type, the table's driver, and a canonical String that parses back to it;
//   - DriverInfo puts the password under the password key and nowhere else (the other values do not
//     change with the password), and RedactDriverInfo hides it;
//   - the same address with user:password@ added is rejected with a message that does not change
//     with the user name or password, so it cannot carry them.
func FuzzParse(f *testing.F) {
	seeds := []string{
		"", "10.0.0.1", "10.0.0.1:623", "[fd00::1]:623", "bmc.example.com:623", "fd00::1",
		"ipmi://10.0.0.1:623?privilegelevel=operator", "ipmi:10.0.0.1", "libvirt://192.168.122.1:6233/",
		"redfish://10.0.0.1/redfish/v1/Systems/1", "redfish+http://[fe80::1]:8000/redfish/v1/Systems/1",
		"redfish-virtualmedia+https://bmc.lab/redfish/v1/Systems/System.Embedded.1",
		"redfish-uefihttp://10.0.0.1", "idrac-redfish://10.0.0.1/redfish/v1/", "idrac-virtualmedia://h/",
		"ilo5-redfish://h:443/redfish/v1/Systems/1", "ilo5-virtualmedia+http://h/redfish/v1/Systems/%2E",
		"redfish://10.0.0.1/redfish/v1/Systems", "redfish://admin:pw@10.0.0.1/", "foo://h", "ipmi+http://h",
		"redfish://h:0", "redfish://h:65536", "redfish://[10.0.0.1]/", "redfish://h/%zz", "://h", "a:b://h",
		"REDFISH:h:8000/x", "h:", "[fe80::1%25eth0]", "ipmi://h?privilegelevel=root", "redfish://h#x?y",
	}
	for _, s := range seeds {
		f.Add(s, "admin", "hunter2")
	}
	f.Fuzz(func(t *testing.T, address, username, password string) {
		a, err := Parse(address)
		if (a == nil) == (err == nil) {
			t.Fatalf("Parse(%q) = %v, %v: want exactly one of Access and error", address, a, err)
		}
		if err != nil {
			checkParseError(t, address, err)
		} else {
			checkAccess(t, address, a, username, password)
		}

		// Add user information and compare against the same address with other credentials.
		if strings.Contains(address, "@") {
			return
		}
		var msgs []string
		for _, cred := range [][2]string{{username, password}, {"u", "p"}, {"someone-else", "x/y?z#w@v:"}} {
			for _, injected := range injectUserinfo(address, cred[0]+":"+cred[1]) {
				_, err := Parse(injected)
				if !errors.Is(err, ErrCredentialsInAddress) {
					t.Fatalf("Parse(%q) = %v, want ErrCredentialsInAddress", injected, err)
				}
				checkParseError(t, injected, err)
				msgs = append(msgs, err.Error())
			}
		}
		// Each injection point gives one message, whatever the credentials.
		perPoint := len(msgs) / 3
		for i := perPoint; i < len(msgs); i++ {
			if msgs[i] != msgs[i%perPoint] {
				t.Fatalf("error depends on the credentials:\n%q\n%q", msgs[i%perPoint], msgs[i])
			}
		}
	})
}

func checkParseError(t *testing.T, address string, err error) {
	t.Helper()
	var addrErr *AddressError
	if !errors.As(err, &addrErr) {
		t.Fatalf("Parse(%q) error %T is not an *AddressError", address, err)
	}
	n := 0
	for _, s := range allSentinels {
		if errors.Is(err, s) {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("Parse(%q) error %q matches %d sentinels, want 1", address, err, n)
	}
	// Every "@" in a message must be the redaction marker's, so no "user:password@" can be there.
	if msg := err.Error(); strings.Count(msg, "@") != strings.Count(msg, redactedUserinfo) {
		t.Fatalf("Parse(%q) error %q contains user information", address, err)
	}
	if strings.Contains(address, "@") && !errors.Is(err, ErrCredentialsInAddress) {
		t.Fatalf("Parse(%q) = %v, want ErrCredentialsInAddress", address, err)
	}
}

func checkAccess(t *testing.T, address string, a *Access, username, password string) {
	t.Helper()
	if !slices.Contains(Types(), a.Type) {
		t.Fatalf("Parse(%q).Type = %q, not a known type", address, a.Type)
	}
	if want := kinds[a.Type].driver; a.Driver != want {
		t.Fatalf("Parse(%q).Driver = %q, want %q", address, a.Driver, want)
	}
	if a.Host == "" {
		t.Fatalf("Parse(%q) has no host", address)
	}
	b, err := Parse(a.String())
	if err != nil {
		t.Fatalf("Parse(%q).String() = %q does not parse: %v", address, a.String(), err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("round trip of %q through %q\n got %+v\nwant %+v", address, a.String(), b, a)
	}

	for _, disable := range []bool{false, true} {
		info := a.DriverInfo(username, password, disable)
		other := a.DriverInfo(username, password+"-other", disable)
		passwordKey := "redfish_password"
		if a.Driver == DriverIPMI {
			passwordKey = "ipmi_password"
		}
		if info[passwordKey] != password {
			t.Fatalf("DriverInfo[%s] = %v, want the password", passwordKey, info[passwordKey])
		}
		delete(info, passwordKey)
		delete(other, passwordKey)
		if !maps.EqualFunc(info, other, func(x, y any) bool { return x == y }) {
			t.Fatalf("driver_info outside %s depends on the password: %v vs %v", passwordKey, info, other)
		}
		// A marker that cannot come from the address must not appear outside the password key.
		const marker = "\x00fuzz-password\x00"
		for k, v := range a.DriverInfo(username, marker, disable) {
			if s, ok := v.(string); ok && k != passwordKey && strings.Contains(s, marker) {
				t.Fatalf("driver_info[%s] = %q contains the password", k, s)
			}
		}
		for k, v := range RedactDriverInfo(a.DriverInfo(username, marker, disable)) {
			if s, ok := v.(string); ok && strings.Contains(s, marker) {
				t.Fatalf("redacted driver_info[%s] = %q contains the password", k, s)
			}
		}
	}
}
