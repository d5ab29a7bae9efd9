package agent

import (
	"sort"
	"strings"
)

// NICAddress is a static address the live system configured on a NIC.
type NICAddress struct {
	// Interface or MAC names the physical NIC (one of them is set).
	Interface, MAC string
	// IPv4 and IPv6 are the first static address of each family, without the prefix length.
	IPv4, IPv6 string
}

// keyfile is the part of a NetworkManager keyfile the simulation uses.
type keyfile struct {
	id, typ, ifname, mac, master, parent string
	ipv4, ipv6                           string
}

// parseKeyfile reads a NetworkManager keyfile (INI: [connection] id, type, interface-name,
// master; [ethernet] mac-address; [vlan] parent; [ipv4]/[ipv6] addressN=addr/prefix[,gateway]).
func parseKeyfile(data string) keyfile {
	var k keyfile
	section := ""
	for _, line := range strings.Split(data, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			section = line[1 : len(line)-1]
			continue
		}
		key, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		switch section + "." + key {
		case "connection.id":
			k.id = v
		case "connection.type":
			k.typ = v
		case "connection.interface-name":
			k.ifname = v
		case "connection.master", "connection.controller":
			k.master = v
		case "ethernet.mac-address":
			k.mac = strings.ToLower(v)
		case "vlan.parent":
			k.parent = v
		}
		if strings.HasPrefix(key, "address") && (section == "ipv4" || section == "ipv6") {
			addr, _, _ := strings.Cut(v, ",")
			addr, _, _ = strings.Cut(addr, "/")
			if section == "ipv4" && (k.ipv4 == "" || key == "address1") {
				k.ipv4 = addr
			}
			if section == "ipv6" && (k.ipv6 == "" || key == "address1") {
				k.ipv6 = addr
			}
		}
	}
	return k
}

// nicAddresses resolves keyfiles to the physical NICs that carry their addresses: an ethernet
// profile's own NIC (by interface name or MAC); a bond's address is reported on its first port,
// a VLAN's on its parent (resolved again). ironic-python-agent reports physical NICs, and a
// simulated server has no other devices.
func nicAddresses(files map[string]string) []NICAddress {
	byName := map[string]keyfile{}
	var names []string
	for _, data := range files {
		k := parseKeyfile(data)
		n := k.ifname
		if n == "" {
			n = k.id
		}
		byName[n] = k
		names = append(names, n)
	}
	sort.Strings(names)
	firstPort := map[string]string{}
	for _, n := range names {
		if m := byName[n].master; m != "" {
			if _, ok := firstPort[m]; !ok {
				firstPort[m] = n
			}
		}
	}
	// physical follows bonds and VLANs down to an ethernet profile.
	var physical func(n string, depth int) (keyfile, string, bool)
	physical = func(n string, depth int) (keyfile, string, bool) {
		k, ok := byName[n]
		if depth > 4 {
			return keyfile{}, "", false
		}
		switch {
		case ok && k.typ == "bond":
			return physical(firstPort[n], depth+1)
		case ok && k.typ == "vlan":
			return physical(k.parent, depth+1)
		case ok:
			return k, n, true
		case n != "":
			// A VLAN on a NIC without a profile of its own.
			return keyfile{}, n, true
		}
		return keyfile{}, "", false
	}
	var out []NICAddress
	for _, n := range names {
		k := byName[n]
		if k.ipv4 == "" && k.ipv6 == "" {
			continue
		}
		nic, name, ok := physical(n, 0)
		if !ok {
			continue
		}
		a := NICAddress{IPv4: k.ipv4, IPv6: k.ipv6}
		if nic.mac != "" && nic.ifname == "" {
			a.MAC = nic.mac
		} else {
			a.Interface = name
			if nic.ifname != "" {
				a.Interface = nic.ifname
			}
		}
		out = append(out, a)
	}
	return out
}

func describeNetwork(addrs []NICAddress) string {
	if len(addrs) == 0 {
		return "none"
	}
	var parts []string
	for _, a := range addrs {
		nic := a.Interface
		if nic == "" {
			nic = a.MAC
		}
		parts = append(parts, strings.TrimSpace(nic+" "+a.IPv4+" "+a.IPv6))
	}
	return strings.Join(parts, ", ")
}

// applyNetwork puts the configured addresses on the inventory's interfaces.
func applyNetwork(inv *Inventory, addrs []NICAddress) {
	for _, a := range addrs {
		for i := range inv.Interfaces {
			in := &inv.Interfaces[i]
			if (a.Interface != "" && in.Name == a.Interface) || (a.MAC != "" && strings.EqualFold(in.MACAddress, a.MAC)) {
				if a.IPv4 != "" {
					in.IPv4Address = a.IPv4
				}
				if a.IPv6 != "" {
					in.IPv6Address = a.IPv6
				}
			}
		}
	}
}
