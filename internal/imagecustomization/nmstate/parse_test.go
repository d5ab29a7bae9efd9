package nmstate

import (
	"errors"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

const staticDoc = `
interfaces:
- name: eno1
  type: ethernet
  state: up
  mac-address: 52:54:00:00:00:01
  identifier: mac-address
  mtu: 9000
  ipv4:
    enabled: true
    dhcp: false
    address:
    - ip: 192.0.2.10
      prefix-length: 24
  ipv6:
    enabled: true
    autoconf: false
    dhcp: false
    address:
    - {ip: "2001:db8::10", prefix-length: 64}
routes:
  config:
  - destination: 0.0.0.0/0
    next-hop-address: 192.0.2.1
    next-hop-interface: eno1
    metric: 100
  - destination: 198.51.100.0/24
    next-hop-address: 192.0.2.254
    next-hop-interface: eno1
    table-id: 200
dns-resolver:
  config:
    server: [192.0.2.53, "2001:db8::53"]
    search: [example.com]
`

func TestParseStatic(t *testing.T) {
	s, err := Parse([]byte(staticDoc))
	if err != nil {
		t.Fatal(err)
	}
	in := s.Interface("eno1")
	if in == nil || !in.MatchMAC || in.MAC != "52:54:00:00:00:01" || in.MTU != 9000 {
		t.Fatalf("interface: %+v", in)
	}
	if got := in.IPv4.Addresses; len(got) != 1 || got[0] != netip.MustParsePrefix("192.0.2.10/24") {
		t.Errorf("ipv4 addresses %v", got)
	}
	if got := in.IPv6.Addresses; len(got) != 1 || got[0] != netip.MustParsePrefix("2001:db8::10/64") {
		t.Errorf("ipv6 addresses %v", got)
	}
	if len(s.Routes) != 2 || *s.Routes[0].Metric != 100 || *s.Routes[1].TableID != 200 || s.Routes[1].Metric != nil {
		t.Errorf("routes %+v", s.Routes)
	}
	if len(s.DNS.Servers) != 2 || s.DNS.Search[0] != "example.com" {
		t.Errorf("dns %+v", s.DNS)
	}
}

// Every unsupported or wrong field is refused with its path, never dropped.
func TestParseErrorsNameTheField(t *testing.T) {
	eth := "interfaces:\n- name: eth0\n  type: ethernet\n  ipv4: {enabled: true, dhcp: true}\n"
	tests := map[string]struct {
		doc, field, contains string
	}{
		"not yaml":                  {"interfaces: [", "", "not valid YAML"},
		"empty":                     {"", "", "empty"},
		"not a mapping":             {"- a\n- b\n", "", "must be a mapping"},
		"no interfaces":             {"dns-resolver: {config: {server: [192.0.2.1]}}", "interfaces", "no interface"},
		"unknown top level key":     {eth + "ovs-db: {}\n", "ovs-db", "not supported"},
		"route-rules refused":       {eth + "route-rules: {config: []}\n", "route-rules", "not supported"},
		"bridge refused":            {"interfaces:\n- {name: br0, type: linux-bridge}\n", "interfaces[0].type", `"linux-bridge" is not supported`},
		"missing name":              {"interfaces:\n- {type: ethernet}\n", "interfaces[0].name", "is required"},
		"bad name":                  {"interfaces:\n- {name: a/b, type: ethernet}\n", "interfaces[0].name", "not an interface name"},
		"long name":                 {"interfaces:\n- {name: abcdefghijklmnop, type: ethernet}\n", "interfaces[0].name", "1 to 15"},
		"duplicate":                 {"interfaces:\n- {name: e, type: ethernet}\n- {name: e, type: ethernet}\n", "interfaces[1].name", "listed twice"},
		"state absent":              {"interfaces:\n- {name: e, type: ethernet, state: absent}\n", "interfaces[0].state", `"absent" is not supported`},
		"ethtool refused":           {"interfaces:\n- {name: e, type: ethernet, ethtool: {}}\n", "interfaces[0].ethtool", "not supported"},
		"bad mac":                   {"interfaces:\n- {name: e, type: ethernet, mac-address: zz}\n", "interfaces[0].mac-address", "not an Ethernet MAC"},
		"identifier without mac":    {"interfaces:\n- {name: e, type: ethernet, identifier: mac-address}\n", "interfaces[0].identifier", "needs mac-address"},
		"mtu range":                 {"interfaces:\n- {name: e, type: ethernet, mtu: 10}\n", "interfaces[0].mtu", "from 68 to 65535"},
		"dhcp-client-id refused":    {"interfaces:\n- {name: e, type: ethernet, ipv4: {enabled: true, dhcp: true, dhcp-client-id: mac}}\n", "interfaces[0].ipv4.dhcp-client-id", "not supported"},
		"autoconf on ipv4":          {"interfaces:\n- {name: e, type: ethernet, ipv4: {enabled: true, autoconf: true}}\n", "interfaces[0].ipv4.autoconf", "not supported"},
		"bad ip":                    {"interfaces:\n- {name: e, type: ethernet, ipv4: {enabled: true, address: [{ip: 300.1.1.1, prefix-length: 24}]}}\n", "interfaces[0].ipv4.address[0].ip", `"300.1.1.1" is not an IP address`},
		"v6 address in ipv4":        {"interfaces:\n- {name: e, type: ethernet, ipv4: {enabled: true, address: [{ip: '2001:db8::1', prefix-length: 64}]}}\n", "interfaces[0].ipv4.address[0].ip", "not an IPv4 address"},
		"prefix too long":           {"interfaces:\n- {name: e, type: ethernet, ipv4: {enabled: true, address: [{ip: 192.0.2.1, prefix-length: 33}]}}\n", "interfaces[0].ipv4.address[0].prefix-length", "from 0 to 32"},
		"missing prefix":            {"interfaces:\n- {name: e, type: ethernet, ipv4: {enabled: true, address: [{ip: 192.0.2.1}]}}\n", "interfaces[0].ipv4.address[0].prefix-length", "is required"},
		"address but disabled":      {"interfaces:\n- {name: e, type: ethernet, ipv4: {enabled: false, address: [{ip: 192.0.2.1, prefix-length: 24}]}}\n", "interfaces[0].ipv4.enabled", "must be true"},
		"ipv4 enabled with nothing": {"interfaces:\n- {name: e, type: ethernet, ipv4: {enabled: true}}\n", "interfaces[0].ipv4", "without dhcp and without an address"},
		"enabled not a bool":        {"interfaces:\n- {name: e, type: ethernet, ipv4: {enabled: yes please}}\n", "interfaces[0].ipv4.enabled", "must be true or false"},
		"bond without aggregation":  {"interfaces:\n- {name: bond0, type: bond}\n", "interfaces[0].link-aggregation", "is required for a bond"},
		"bad bond mode":             {"interfaces:\n- {name: bond0, type: bond, link-aggregation: {mode: fastest}}\n", "interfaces[0].link-aggregation.mode", "not a bonding mode"},
		"bond option injection":     {"interfaces:\n- {name: bond0, type: bond, link-aggregation: {mode: active-backup, options: {miimon: '1,mode=0'}}}\n", "interfaces[0].link-aggregation.options.miimon", "not a usable bonding option"},
		"aggregation on ethernet":   {"interfaces:\n- {name: e, type: ethernet, link-aggregation: {mode: active-backup}}\n", "interfaces[0].link-aggregation", "only for type bond"},
		"port listed twice":         {"interfaces:\n- {name: b, type: bond, link-aggregation: {mode: active-backup, port: [eno1, eno1]}}\n", "interfaces[0].link-aggregation.port[1]", `"eno1" is listed twice`},
		"port also a slave":         {"interfaces:\n- {name: b, type: bond, link-aggregation: {mode: active-backup, port: [eno1], slaves: [eno1]}}\n", "interfaces[0].link-aggregation.slaves[0]", `"eno1" is listed twice`},
		"port is a vlan":            {"interfaces:\n- {name: v, type: vlan, vlan: {base-iface: e, id: 5}}\n- {name: b, type: bond, link-aggregation: {mode: active-backup, port: [v]}}\n", "interfaces[1].link-aggregation.port[0]", "bond ports must be ethernet"},
		"port with ip":              {"interfaces:\n- {name: e, type: ethernet, ipv4: {enabled: true, dhcp: true}}\n- {name: b, type: bond, link-aggregation: {mode: active-backup, port: [e]}}\n", "interfaces[0].ipv4", "cannot have IP configuration"},
		"port in two bonds":         {"interfaces:\n- {name: b1, type: bond, link-aggregation: {mode: active-backup, port: [e]}}\n- {name: b2, type: bond, link-aggregation: {mode: active-backup, port: [e]}}\n", "interfaces[0].link-aggregation.port[0]", "port of both"},
		"vlan id range":             {"interfaces:\n- {name: v, type: vlan, vlan: {base-iface: e, id: 5000}}\n", "interfaces[0].vlan.id", "from 0 to 4094"},
		"vlan without base":         {"interfaces:\n- {name: v, type: vlan, vlan: {id: 5}}\n", "interfaces[0].vlan.base-iface", "is required"},
		"vlan own base":             {"interfaces:\n- {name: v, type: vlan, vlan: {base-iface: v, id: 5}}\n", "interfaces[0].vlan.base-iface", "its own base"},
		"route unknown interface":   {eth + "routes: {config: [{destination: 0.0.0.0/0, next-hop-address: 192.0.2.1, next-hop-interface: eth9}]}\n", "routes.config[0].next-hop-interface", `"eth9" is not one of the interfaces`},
		"route without interface":   {eth + "routes: {config: [{destination: 0.0.0.0/0, next-hop-address: 192.0.2.1}]}\n", "routes.config[0].next-hop-interface", "is required"},
		"route family disabled":     {eth + "routes: {config: [{destination: '::/0', next-hop-address: '2001:db8::1', next-hop-interface: eth0}]}\n", "routes.config[0].next-hop-interface", "does not have IPv6 enabled"},
		"route mixed families":      {eth + "routes: {config: [{destination: 0.0.0.0/0, next-hop-address: '2001:db8::1', next-hop-interface: eth0}]}\n", "routes.config[0].next-hop-address", "address family"},
		"route absent":              {eth + "routes: {config: [{destination: 0.0.0.0/0, state: absent, next-hop-interface: eth0}]}\n", "routes.config[0].state", "only added"},
		"route bad destination":     {eth + "routes: {config: [{destination: default, next-hop-interface: eth0}]}\n", "routes.config[0].destination", "not an address/prefix-length"},
		"routes running refused":    {eth + "routes: {running: []}\n", "routes.running", "not supported"},
		"dns bad server":            {eth + "dns-resolver: {config: {server: [dns.example.com]}}\n", "dns-resolver.config.server[0]", "not an IP address"},
		"dns family missing":        {eth + "dns-resolver: {config: {server: ['2001:db8::53']}}\n", "dns-resolver.config.server[0]", "no interface has IPv6"},
		"dns options refused":       {eth + "dns-resolver: {config: {options: [rotate]}}\n", "dns-resolver.config.options", "not supported"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc))
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v (%T), want a *FieldError", err, err)
			}
			if fe.Field != tc.field || !strings.Contains(fe.Msg, tc.contains) {
				t.Errorf("got field %q message %q; want field %q with %q", fe.Field, fe.Msg, tc.field, tc.contains)
			}
			if tc.field != "" && !strings.Contains(err.Error(), tc.field+":") {
				t.Errorf("message %q does not name the field", err)
			}
		})
	}
}

func TestParseBondVLANAndPorts(t *testing.T) {
	doc := `
interfaces:
- name: eno1
  type: ethernet
  mtu: 9000
- name: bond0
  type: bond
  link-aggregation:
    mode: 802.3ad
    options: {miimon: '100', lacp_rate: fast}
    slaves: [eno1, eno2]
  ipv4: {enabled: false}
- name: bond0.100
  type: vlan
  vlan: {base-iface: bond0, id: 100}
  ipv4:
    enabled: true
    dhcp: true
    auto-dns: false
    auto-gateway: false
`
	s, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	b := s.Interface("bond0").Bond
	if b.Mode != "802.3ad" || b.Options["miimon"] != "100" || len(b.Ports) != 2 {
		t.Errorf("bond %+v", b)
	}
	v := s.Interface("bond0.100")
	if v.VLAN.BaseIface != "bond0" || v.VLAN.ID != 100 || !v.IPv4.NoAutoDNS || !v.IPv4.NoAutoGateway || v.IPv4.NoAutoRoutes {
		t.Errorf("vlan %+v", v)
	}
	names := map[string]bool{}
	for _, p := range Profiles(s) {
		names[p.Name] = true
	}
	for _, n := range []string{"eno1", "eno2", "bond0", "bond0.100"} {
		if !names[n] {
			t.Errorf("no profile for %s (profiles %v)", n, names)
		}
	}
}

// Boolean bonding options, as nmstate's documents write them (use_carrier: true), are the 1 or 0
// NetworkManager's bond.options takes; strings and numbers stay as written.
func TestParseBondBooleanOptions(t *testing.T) {
	s, err := Parse([]byte(`
interfaces:
- name: bond0
  type: bond
  link-aggregation:
    mode: active-backup
    options: {use_carrier: true, all_slaves_active: false, miimon: 140, primary_reselect: always}
    port: [eno1, eno2]
`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"use_carrier": "1", "all_slaves_active": "0", "miimon": "140", "primary_reselect": "always"}
	if got := s.Interface("bond0").Bond.Options; !maps.Equal(got, want) {
		t.Errorf("options %v, want %v", got, want)
	}
	for _, p := range Profiles(s) {
		if i := slices.Index(p.Args, "bond.options"); i >= 0 {
			if got := p.Args[i+1]; got != "mode=active-backup,all_slaves_active=0,miimon=140,primary_reselect=always,use_carrier=1" {
				t.Errorf("bond.options %q", got)
			}
			return
		}
	}
	t.Error("no profile sets bond.options")
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(staticDoc))
	f.Add([]byte("interfaces:\n- {name: b, type: bond, link-aggregation: {mode: active-backup, port: [e]}}\n"))
	f.Add([]byte("interfaces:\n- {name: v, type: vlan, vlan: {base-iface: e, id: 5}, ipv6: {enabled: true, autoconf: true}}\n"))
	f.Fuzz(func(t *testing.T, doc []byte) {
		s, err := Parse(doc)
		if err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is not a *FieldError", err)
			}
			return
		}
		// Whatever parses maps to profiles for every interface, with names that stay file names.
		ps := Profiles(s)
		if len(ps) < len(s.Interfaces) {
			t.Fatalf("%d profiles for %d interfaces", len(ps), len(s.Interfaces))
		}
		for _, p := range ps {
			if checkIfname(p.Name) != nil {
				t.Fatalf("profile name %q", p.Name)
			}
		}
	})
}
