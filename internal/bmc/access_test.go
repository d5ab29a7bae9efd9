package bmc

import (
	"reflect"
	"strings"
	"testing"
)

func TestDriverInfo(t *testing.T) {
	tests := map[string]struct {
		address       string
		disableVerify bool
		want          map[string]any
	}{
		"bare host gets the IPMI defaults": {
			address: "192.168.1.10",
			want: map[string]any{
				"ipmi_address": "192.168.1.10", "ipmi_port": "623", "ipmi_username": "u", "ipmi_password": "p",
				"ipmi_priv_level": "ADMINISTRATOR",
			},
		},
		"ipmi with port and privilege level": {
			address: "ipmi://bmc.lab:6230?privilegelevel=OPERATOR",
			want: map[string]any{
				"ipmi_address": "bmc.lab", "ipmi_port": "6230", "ipmi_username": "u", "ipmi_password": "p",
				"ipmi_priv_level": "OPERATOR",
			},
		},
		"ipmi IPv6 address has no brackets": {
			address: "ipmi://[fd00::5]",
			want: map[string]any{
				"ipmi_address": "fd00::5", "ipmi_port": "623", "ipmi_username": "u", "ipmi_password": "p",
				"ipmi_priv_level": "ADMINISTRATOR",
			},
		},
		"libvirt, verification disabled (metal3 sets ipmi_verify_ca)": {
			address: "libvirt://192.168.122.1:6233/", disableVerify: true,
			want: map[string]any{
				"ipmi_address": "192.168.122.1", "ipmi_port": "6233", "ipmi_username": "u", "ipmi_password": "p",
				"ipmi_priv_level": "ADMINISTRATOR", "ipmi_verify_ca": false,
			},
		},
		"redfish defaults to https and passes the system path": {
			address: "redfish://bmc.lab/redfish/v1/Systems/1",
			want: map[string]any{
				"redfish_address": "https://bmc.lab", "redfish_system_id": "/redfish/v1/Systems/1",
				"redfish_username": "u", "redfish_password": "p",
			},
		},
		"redfish+http with port": {
			address: "redfish+http://10.0.0.2:8000/redfish/v1/Systems/6a2b",
			want: map[string]any{
				"redfish_address": "http://10.0.0.2:8000", "redfish_system_id": "/redfish/v1/Systems/6a2b",
				"redfish_username": "u", "redfish_password": "p",
			},
		},
		"redfish+https is https": {
			address: "ilo5-virtualmedia+https://10.0.0.2/redfish/v1/Systems/1",
			want: map[string]any{
				"redfish_address": "https://10.0.0.2", "redfish_system_id": "/redfish/v1/Systems/1",
				"redfish_username": "u", "redfish_password": "p",
			},
		},
		"IPv6 redfish_address keeps brackets": {
			address: "redfish://[fe80::1]:8000/redfish/v1/Systems/1",
			want: map[string]any{
				"redfish_address": "https://[fe80::1]:8000", "redfish_system_id": "/redfish/v1/Systems/1",
				"redfish_username": "u", "redfish_password": "p",
			},
		},
		"IPv6 without port keeps brackets": {
			address: "redfish-uefihttp://[fe80::1]",
			want: map[string]any{
				"redfish_address": "https://[fe80::1]", "redfish_username": "u", "redfish_password": "p",
			},
		},
		"empty path: no system ID": {
			address: "redfish-virtualmedia://10.0.0.3",
			want: map[string]any{
				"redfish_address": "https://10.0.0.3", "redfish_username": "u", "redfish_password": "p",
			},
		},
		"slash path: no system ID": {
			address: "idrac-virtualmedia://10.0.0.3/",
			want: map[string]any{
				"redfish_address": "https://10.0.0.3", "redfish_username": "u", "redfish_password": "p",
			},
		},
		"service root: no system ID": {
			address: "idrac-redfish://10.0.0.3/redfish/v1/",
			want: map[string]any{
				"redfish_address": "https://10.0.0.3", "redfish_username": "u", "redfish_password": "p",
			},
		},
		"verification disabled": {
			address: "redfish-virtualmedia://10.0.0.3/redfish/v1/Systems/System.Embedded.1", disableVerify: true,
			want: map[string]any{
				"redfish_address": "https://10.0.0.3", "redfish_system_id": "/redfish/v1/Systems/System.Embedded.1",
				"redfish_username": "u", "redfish_password": "p", "redfish_verify_ca": false,
			},
		},
		"decoded path is passed on": {
			address: "redfish://10.0.0.3/redfish/v1/Systems/a%20b",
			want: map[string]any{
				"redfish_address": "https://10.0.0.3", "redfish_system_id": "/redfish/v1/Systems/a b",
				"redfish_username": "u", "redfish_password": "p",
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			a, err := Parse(tc.address)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.address, err)
			}
			got := a.DriverInfo("u", "p", tc.disableVerify)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("DriverInfo for %q\n got %v\nwant %v", tc.address, got, tc.want)
			}
		})
	}
}

func TestDriverInfoUnknownDriver(t *testing.T) {
	if got := (&Access{Driver: "fake-hardware"}).DriverInfo("u", "p", false); len(got) != 0 {
		t.Fatalf("DriverInfo for an unknown driver = %v, want empty", got)
	}
}

func TestRedactDriverInfo(t *testing.T) {
	in := map[string]any{
		"redfish_address":   "https://10.0.0.1",
		"redfish_username":  "admin",
		"redfish_password":  "hunter2",
		"ipmi_password":     "",
		"Some_Secret":       []byte("x"),
		"auth_token":        "tok",
		"kek_passphrase":    nil,
		"redfish_verify_ca": false,
		"deploy_iso":        "https://user:pw@images.example/agent.iso",
	}
	want := map[string]any{
		"redfish_address":   "https://10.0.0.1",
		"redfish_username":  "admin",
		"redfish_password":  "******",
		"ipmi_password":     "",
		"Some_Secret":       "******",
		"auth_token":        "******",
		"kek_passphrase":    nil,
		"redfish_verify_ca": false,
		"deploy_iso":        "https://***@images.example/agent.iso",
	}
	got := RedactDriverInfo(in)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("RedactDriverInfo\n got %v\nwant %v", got, want)
	}
	if in["redfish_password"] != "hunter2" {
		t.Fatalf("RedactDriverInfo modified its input")
	}
}

func TestStringRoundTrips(t *testing.T) {
	tests := map[string]string{
		"192.168.1.10": "ipmi://192.168.1.10",
		"ipmi:10.0.0.1:0623?privilegelevel=operator":             "ipmi://10.0.0.1:623?privilegelevel=OPERATOR",
		"REDFISH+HTTP://[FE80::1]:8000/redfish/v1/Systems/1?x#y": "redfish+http://[FE80::1]:8000/redfish/v1/Systems/1",
		"redfish://h/redfish/v1/Systems/a%40b%3F%23%25%20c":      "redfish://h/redfish/v1/Systems/a%40b%3F%23%25%20c",
		"idrac-virtualmedia://h/redfish/v1/Systems/%C3%A9":       "idrac-virtualmedia://h/redfish/v1/Systems/%C3%A9",
	}
	for address, want := range tests {
		a, err := Parse(address)
		if err != nil {
			t.Fatalf("Parse(%q): %v", address, err)
		}
		if got := a.String(); got != want {
			t.Errorf("Parse(%q).String() = %q, want %q", address, got, want)
		}
		b, err := Parse(a.String())
		if err != nil {
			t.Fatalf("Parse(%q): %v", a.String(), err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Errorf("round trip of %q\n got %+v\nwant %+v", address, b, a)
		}
	}
}

func TestAddressErrorTruncatesLongAddresses(t *testing.T) {
	_, err := Parse("redfish://10.0.0.1:x/" + strings.Repeat("a", 10000))
	if err == nil || len(err.Error()) > 1000 {
		t.Fatalf("error for a long address is %d bytes, want a bounded message", len(err.Error()))
	}
}
