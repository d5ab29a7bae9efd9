package nmstate

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// generator finds nmcli; `make test` installs it (hack/host-packages.sh, Debian network-manager).
func generator(t *testing.T) Generator {
	t.Helper()
	if _, err := exec.LookPath("nmcli"); err != nil {
		t.Skip("nmcli is not installed; `make test` installs it (hack/host-packages.sh, Debian package network-manager)")
	}
	g := Generator{}
	if err := g.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	return g
}

func keyfiles(t *testing.T, doc string) map[string]string {
	t.Helper()
	s, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	kfs, err := generator(t).Keyfiles(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, k := range kfs {
		out[k.Name] = string(k.Data)
	}
	return out
}

func wantLines(t *testing.T, name, keyfile string, lines ...string) {
	t.Helper()
	have := map[string]bool{}
	for _, l := range strings.Split(keyfile, "\n") {
		have[strings.TrimSpace(l)] = true
	}
	for _, l := range lines {
		if !have[l] {
			t.Errorf("%s lacks %q:\n%s", name, l, keyfile)
		}
	}
}

// NetworkManager itself writes the keyfiles: static IPv4 and IPv6, routes, DNS, MAC matching.
func TestKeyfilesStatic(t *testing.T) {
	kf := keyfiles(t, staticDoc)
	if len(kf) != 1 {
		t.Fatalf("keyfiles %v", kf)
	}
	k := kf["eno1.nmconnection"]
	wantLines(t, "eno1", k,
		"id=eno1", "type=ethernet", "uuid="+profileUUID("eno1"), "mac-address=52:54:00:00:00:01", "mtu=9000",
		"[ipv4]", "address1=192.0.2.10/24", "method=manual", "dns=192.0.2.53;", "dns-search=example.com;",
		"route1=0.0.0.0/0,192.0.2.1,100", "route2=198.51.100.0/24,192.0.2.254", "route2_options=table=200",
		"[ipv6]", "address1=2001:db8::10/64", "dns=2001:db8::53;")
	if strings.Contains(k, "interface-name=") {
		t.Errorf("identifier: mac-address must match by MAC, not name:\n%s", k)
	}
	// The same network data gives the same bytes (UUIDs derive from the interface name).
	if again := keyfiles(t, staticDoc); again["eno1.nmconnection"] != k {
		t.Errorf("keyfile differs between runs")
	}
}

func TestKeyfilesBondVLANDHCP(t *testing.T) {
	kf := keyfiles(t, `
interfaces:
- name: bond0
  type: bond
  link-aggregation: {mode: active-backup, options: {miimon: '140'}, port: [eno1, eno2]}
- name: vlan100
  type: vlan
  vlan: {base-iface: bond0, id: 100}
  ipv4: {enabled: true, dhcp: true, auto-routes: false}
  ipv6: {enabled: true, dhcp: true, autoconf: false}
`)
	if len(kf) != 4 {
		t.Fatalf("want bond0, vlan100 and two port profiles; got %d", len(kf))
	}
	wantLines(t, "bond0", kf["bond0.nmconnection"], "type=bond", "interface-name=bond0", "mode=active-backup", "miimon=140", "[ipv4]", "method=disabled")
	wantLines(t, "vlan100", kf["vlan100.nmconnection"], "type=vlan", "parent=bond0", "id=100", "method=auto", "ignore-auto-routes=true", "method=dhcp")
	for _, p := range []string{"eno1", "eno2"} {
		wantLines(t, p, kf[p+".nmconnection"], "type=ethernet", "interface-name="+p, "master=bond0", "slave-type=bond")
	}
}

// NetworkManager takes a boolean bonding option as the 1 or 0 it becomes (nmstate's use_carrier:
// true).
func TestKeyfilesBondBooleanOption(t *testing.T) {
	kf := keyfiles(t, `
interfaces:
- name: bond0
  type: bond
  link-aggregation: {mode: active-backup, options: {miimon: 140, use_carrier: true, all_slaves_active: false}, port: [eno1]}
`)
	wantLines(t, "bond0", kf["bond0.nmconnection"], "type=bond", "mode=active-backup", "miimon=140", "use_carrier=1", "all_slaves_active=0")
}

// An IPv6-only interface keeps its DNS servers and search domains: NetworkManager ignores the
// [ipv4] settings of a disabled family, so the domains go in [ipv6].
func TestKeyfilesIPv6Only(t *testing.T) {
	kf := keyfiles(t, `
interfaces:
- name: eno1
  type: ethernet
  ipv6: {enabled: true, autoconf: true}
dns-resolver:
  config:
    server: ["2001:db8::53"]
    search: [example.com]
`)
	k := kf["eno1.nmconnection"]
	wantLines(t, "eno1", k, "[ipv4]", "method=disabled", "[ipv6]", "method=auto", "dns=2001:db8::53;", "dns-search=example.com;")
	if ipv4, _, _ := strings.Cut(strings.SplitN(k, "[ipv4]", 2)[1], "[ipv6]"); strings.Contains(ipv4, "dns-search") {
		t.Errorf("search domains in the disabled [ipv4] section:\n%s", k)
	}
}

func TestMissingNMCLI(t *testing.T) {
	s, err := Parse([]byte(staticDoc))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Generator{NMCLI: "/nonexistent/nmcli"}.Keyfiles(context.Background(), s)
	if !errors.Is(err, ErrNoNMCLI) || !strings.Contains(err.Error(), "apt-get install network-manager") {
		t.Errorf("error %v", err)
	}
}

// An nmcli that refuses its input (exit status 2, a message) makes a *FieldError naming the
// interface; one that fails to run (killed, an internal error without a message) a plain error,
// which the image-customization-controller retries instead of blaming the network data.
func TestNMCLIRefusalOrFailure(t *testing.T) {
	s, err := Parse([]byte(staticDoc))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, script string
		field        bool
		mention      string
	}{
		{"refuses a value", "echo \"Error: failed to modify ethernet.mtu: 'x' is out of range.\" >&2; exit 2", true, "out of range"},
		{"fails without a message", "exit 1", false, "exit status 1"},
		{"killed", "kill -9 $$", false, "signal: killed"},
		{"internal error with a message", "echo 'Error: could not create temporary file' >&2; exit 1", false, "temporary file"},
		{"refuses the whole profile (exit 1)", "echo \"Error: Error writing connection: ipv6.dns: this property is not allowed for 'method=link-local'\" >&2; exit 1", true, "ipv6.dns"},
		{"invocation error without a message", "exit 2", false, "exit status 2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			nmcli := filepath.Join(t.TempDir(), "nmcli")
			if err := os.WriteFile(nmcli, []byte("#!/bin/sh\n"+c.script+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			_, err := Generator{NMCLI: nmcli}.Keyfiles(context.Background(), s)
			var fe *FieldError
			if err == nil || errors.As(err, &fe) != c.field || !strings.Contains(err.Error(), c.mention) {
				t.Errorf("error %v (field error: %v), want field error %v mentioning %q", err, errors.As(err, &fe), c.field, c.mention)
			}
			if c.field && !strings.HasPrefix(fe.Field, "interfaces[") {
				t.Errorf("field %q does not name the interface", fe.Field)
			}
		})
	}
}

// The real nmcli refuses a profile whose properties do not go together with exit status 1: still
// the network data's fault, named as such (IPv6 without an address, DHCP or autoconf, with an IPv6
// DNS server: a link-local profile that may not carry DNS).
func TestNMCLIRefusesProfile(t *testing.T) {
	doc := `interfaces:
- name: eno1
  type: ethernet
  state: up
  ipv6:
    enabled: true
    dhcp: false
    autoconf: false
dns-resolver:
  config:
    server: [2001:db8::53]
`
	s, err := Parse([]byte(doc))
	if err != nil {
		t.Skipf("the parser refuses the document itself: %v", err)
	}
	_, err = generator(t).Keyfiles(context.Background(), s)
	var fe *FieldError
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), "ipv6.dns") {
		t.Fatalf("error %v, want a field error naming ipv6.dns", err)
	}
}
