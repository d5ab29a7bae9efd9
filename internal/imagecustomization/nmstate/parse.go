package nmstate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// maxDocument bounds what Parse reads: network data for one host is a few kilobytes.
const maxDocument = 256 << 10

var bondModes = []string{"balance-rr", "active-backup", "balance-xor", "broadcast", "802.3ad", "balance-tlb", "balance-alb"}

// Parse reads an nmstate YAML (or JSON) document and checks it against the supported subset. A
// *FieldError names the first field that cannot be used.
func Parse(doc []byte) (*State, error) {
	if len(doc) > maxDocument {
		return nil, fieldErr("", "the document is %d bytes, more than %d", len(doc), maxDocument)
	}
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return nil, fieldErr("", "not valid YAML: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fieldErr("", "not valid YAML: %v", err)
	}
	if v == nil {
		return nil, fieldErr("", "the document is empty")
	}
	top, err := asObject("", v)
	if err != nil {
		return nil, fieldErr("", "the document must be a mapping, not %s", describe(v))
	}
	s := &State{}
	if err := parseInterfaces(top, s); err != nil {
		return nil, err
	}
	if err := parseRoutes(top, s); err != nil {
		return nil, err
	}
	if err := parseDNS(top, s); err != nil {
		return nil, err
	}
	if err := top.finish("interfaces", "routes", "dns-resolver"); err != nil {
		return nil, err
	}
	if len(s.Interfaces) == 0 {
		return nil, fieldErr("interfaces", "no interface is configured")
	}
	return s, check(s)
}

func parseInterfaces(top *object, s *State) error {
	list, err := top.list("interfaces")
	if err != nil {
		return err
	}
	for i, v := range list {
		o, err := asObject(index("interfaces", i), v)
		if err != nil {
			return err
		}
		in, err := parseInterface(o, i)
		if err != nil {
			return err
		}
		if s.Interface(in.Name) != nil {
			return fieldErr(o.field("name"), "%q is listed twice", in.Name)
		}
		s.Interfaces = append(s.Interfaces, in)
	}
	return nil
}

func parseInterface(o *object, i int) (Interface, error) {
	in := Interface{Index: i}
	var err error
	var ok bool
	if in.Name, ok, err = o.str("name"); err != nil {
		return in, err
	} else if !ok {
		return in, fieldErr(o.field("name"), "is required")
	}
	if err := checkIfname(in.Name); err != nil {
		return in, fieldErr(o.field("name"), "%s", err)
	}
	if in.Type, ok, err = o.str("type"); err != nil {
		return in, err
	} else if !ok {
		return in, fieldErr(o.field("type"), "is required")
	}
	if !slices.Contains([]string{TypeEthernet, TypeBond, TypeVLAN}, in.Type) {
		return in, fieldErr(o.field("type"), "%q is not supported (supported: ethernet, bond, vlan)", in.Type)
	}
	if state, ok, err := o.str("state"); err != nil {
		return in, err
	} else if ok && state != "up" {
		return in, fieldErr(o.field("state"), "%q is not supported (only up: the agent image configures interfaces, it does not remove them)", state)
	}
	if err := parseLink(o, &in); err != nil {
		return in, err
	}
	if in.IPv4, err = parseIP(o, "ipv4"); err != nil {
		return in, err
	}
	if in.IPv6, err = parseIP(o, "ipv6"); err != nil {
		return in, err
	}
	if err := parseBond(o, &in); err != nil {
		return in, err
	}
	if err := parseVLAN(o, &in); err != nil {
		return in, err
	}
	return in, o.finish("name", "type", "state", "mac-address", "identifier", "mtu", "ipv4", "ipv6", "link-aggregation", "vlan")
}

// parseLink reads mac-address, identifier and mtu.
func parseLink(o *object, in *Interface) error {
	mac, ok, err := o.str("mac-address")
	if err != nil {
		return err
	}
	if ok {
		hw, perr := net.ParseMAC(mac)
		if perr != nil || len(hw) != 6 {
			return fieldErr(o.field("mac-address"), "%q is not an Ethernet MAC address", mac)
		}
		in.MAC = strings.ToUpper(hw.String())
	}
	ident, ok, err := o.str("identifier")
	if err != nil {
		return err
	}
	switch {
	case !ok || ident == "name":
	case ident == "mac-address":
		if in.MAC == "" {
			return fieldErr(o.field("identifier"), "mac-address needs mac-address to be set")
		}
		if in.Type != TypeEthernet {
			return fieldErr(o.field("identifier"), "mac-address is supported for ethernet interfaces only")
		}
		in.MatchMAC = true
	default:
		return fieldErr(o.field("identifier"), "%q is not supported (name or mac-address)", ident)
	}
	if in.MAC != "" && in.Type != TypeEthernet {
		return fieldErr(o.field("mac-address"), "is supported for ethernet interfaces only")
	}
	mtu, ok, err := o.integer("mtu", 68, 65535)
	if err != nil {
		return err
	}
	if ok {
		in.MTU = mtu
	}
	return nil
}

func parseIP(parent *object, family string) (IP, error) {
	var ip IP
	o, ok, err := parent.object(family)
	if err != nil || !ok {
		return ip, err
	}
	if ip.Enabled, _, err = o.boolean("enabled"); err != nil {
		return ip, err
	}
	if ip.DHCP, _, err = o.boolean("dhcp"); err != nil {
		return ip, err
	}
	supported := []string{"enabled", "dhcp", "address", "auto-dns", "auto-gateway", "auto-routes"}
	if family == "ipv6" {
		supported = append(supported, "autoconf")
		if ip.Autoconf, _, err = o.boolean("autoconf"); err != nil {
			return ip, err
		}
	}
	for _, f := range []struct {
		key string
		dst *bool
	}{{"auto-dns", &ip.NoAutoDNS}, {"auto-gateway", &ip.NoAutoGateway}, {"auto-routes", &ip.NoAutoRoutes}} {
		v, set, err := o.boolean(f.key)
		if err != nil {
			return ip, err
		}
		*f.dst = set && !v
	}
	list, err := o.list("address")
	if err != nil {
		return ip, err
	}
	for i, v := range list {
		a, err := asObject(index(o.field("address"), i), v)
		if err != nil {
			return ip, err
		}
		p, err := parseAddress(a, family)
		if err != nil {
			return ip, err
		}
		ip.Addresses = append(ip.Addresses, p)
	}
	if err := o.finish(supported...); err != nil {
		return ip, err
	}
	if !ip.Enabled && (ip.DHCP || ip.Autoconf || len(ip.Addresses) > 0) {
		return ip, fieldErr(o.field("enabled"), "must be true when dhcp, autoconf or an address is given")
	}
	if ip.Enabled && family == "ipv4" && !ip.DHCP && len(ip.Addresses) == 0 {
		return ip, fieldErr(o.path, "enabled without dhcp and without an address")
	}
	return ip, nil
}

func parseAddress(a *object, family string) (netip.Prefix, error) {
	s, ok, err := a.str("ip")
	if err != nil {
		return netip.Prefix{}, err
	}
	if !ok {
		return netip.Prefix{}, fieldErr(a.field("ip"), "is required")
	}
	addr, perr := netip.ParseAddr(s)
	if perr != nil || addr.Zone() != "" {
		return netip.Prefix{}, fieldErr(a.field("ip"), "%q is not an IP address", s)
	}
	if (family == "ipv4") != addr.Is4() {
		return netip.Prefix{}, fieldErr(a.field("ip"), "%q is not an %s address", s, strings.ToUpper(family[:2])+family[2:])
	}
	bits, ok, err := a.integer("prefix-length", 0, addr.BitLen())
	if err != nil {
		return netip.Prefix{}, err
	}
	if !ok {
		return netip.Prefix{}, fieldErr(a.field("prefix-length"), "is required")
	}
	if err := a.finish("ip", "prefix-length"); err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(addr, bits), nil
}

func parseBond(o *object, in *Interface) error {
	la, ok, err := o.object("link-aggregation")
	if err != nil {
		return err
	}
	if !ok {
		if in.Type == TypeBond {
			return fieldErr(o.field("link-aggregation"), "is required for a bond")
		}
		return nil
	}
	if in.Type != TypeBond {
		return fieldErr(o.field("link-aggregation"), "is only for type bond")
	}
	b := &Bond{Options: map[string]string{}}
	var found bool
	if b.Mode, found, err = la.str("mode"); err != nil {
		return err
	} else if !found {
		return fieldErr(la.field("mode"), "is required")
	}
	if !slices.Contains(bondModes, b.Mode) {
		return fieldErr(la.field("mode"), "%q is not a bonding mode (%s)", b.Mode, strings.Join(bondModes, ", "))
	}
	if opts, found, err := la.object("options"); err != nil {
		return err
	} else if found {
		for _, k := range slices.Sorted(maps.Keys(opts.m)) {
			v, err := bondOption(opts, k)
			if err != nil {
				return err
			}
			if k == "mode" || !validOption(k) || !validOption(v) {
				return fieldErr(opts.field(k), "is not a usable bonding option")
			}
			b.Options[k] = v
		}
	}
	for _, key := range []string{"port", "slaves"} {
		ports, err := la.strings(key)
		if err != nil {
			return err
		}
		for i, p := range ports {
			if err := checkIfname(p); err != nil {
				return fieldErr(index(la.field(key), i), "%s", err)
			}
			if slices.Contains(b.Ports, p) {
				// One keyfile per port: a second would be the same file, which Ignition refuses.
				return fieldErr(index(la.field(key), i), "%q is listed twice (port and slaves are one list)", p)
			}
			b.Ports = append(b.Ports, p)
		}
	}
	if err := la.finish("mode", "options", "port", "slaves"); err != nil {
		return err
	}
	in.Bond = b
	return nil
}

// bondOption is the value of a bonding option as NetworkManager's bond.options takes it: a string
// or a number as written, a boolean (nmstate's documents write use_carrier: true) as 1 or 0, the
// numbers the kernel's bonding driver and NetworkManager read for a flag.
func bondOption(opts *object, key string) (string, error) {
	if v, ok := opts.get(key); ok {
		if b, isBool := v.(bool); isBool {
			if b {
				return "1", nil
			}
			return "0", nil
		}
	}
	v, _, err := opts.str(key)
	return v, err
}

// validOption: bonding option names and values are words; a comma or "=" would change what
// NetworkManager reads from bond.options.
func validOption(s string) bool {
	return s != "" && !strings.ContainsAny(s, ",= \t\n\"'")
}

func parseVLAN(o *object, in *Interface) error {
	vo, ok, err := o.object("vlan")
	if err != nil {
		return err
	}
	if !ok {
		if in.Type == TypeVLAN {
			return fieldErr(o.field("vlan"), "is required for a vlan")
		}
		return nil
	}
	if in.Type != TypeVLAN {
		return fieldErr(o.field("vlan"), "is only for type vlan")
	}
	v := &VLAN{}
	var found bool
	if v.BaseIface, found, err = vo.str("base-iface"); err != nil {
		return err
	} else if !found {
		return fieldErr(vo.field("base-iface"), "is required")
	}
	if err := checkIfname(v.BaseIface); err != nil {
		return fieldErr(vo.field("base-iface"), "%s", err)
	}
	if v.ID, found, err = vo.integer("id", 0, 4094); err != nil {
		return err
	} else if !found {
		return fieldErr(vo.field("id"), "is required")
	}
	if err := vo.finish("base-iface", "id"); err != nil {
		return err
	}
	in.VLAN = v
	return nil
}

// checkIfname accepts what Linux accepts as an interface name (and keeps it safe as a file name).
func checkIfname(name string) error {
	if name == "" || len(name) > 15 || name == "." || name == ".." {
		return fmt.Errorf("%q is not an interface name (1 to 15 characters)", name)
	}
	if strings.ContainsAny(name, "/: \t\n\x00*?\"'\\,;") {
		return fmt.Errorf("%q is not an interface name (no '/', ':', spaces, quotes or wildcards)", name)
	}
	return nil
}
