package ironicrunner

import (
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
)

// DnsmasqConf is the DHCP and TFTP configuration of a Managed provisioning network: leases from
// DHCP_RANGE on the provisioning interface, iPXE chain-loaded over TFTP (the UEFI or the BIOS
// loader, FillTFTPRoot puts them in the TFTP root) and then pointed at
// Ironic's boot script over HTTP, the gateway (or none; on IPv6 never a default route), and
// Ironic's address as DNS server when DNS_IP is "provisioning". No DNS service of its own (port=0).
//
// Without DHCP_RANGE (an Unmanaged provisioning network, whose DHCP server is someone else's and
// points hosts at Ironic's address for their boot file) it serves TFTP only, as metal3's image
// does: without it, PXE hosts there never got the iPXE loader.
func DnsmasqConf(c Config, ip netip.Addr, iface string) (string, error) {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	w("# Written by ironic-runner dnsmasq.")
	w("port=0")
	w("interface=%s", iface)
	w("bind-dynamic")
	w("log-dhcp")
	w("enable-tftp")
	w("tftp-root=%s", c.TFTPRoot())
	if strings.TrimSpace(c.DHCPRange) == "" {
		return b.String(), nil // TFTP only
	}
	parts := strings.Split(c.DHCPRange, ",")
	if len(parts) < 2 {
		return "", fmt.Errorf("DHCP_RANGE=%q: want start,end[,prefix]", c.DHCPRange)
	}
	start, err1 := netip.ParseAddr(strings.TrimSpace(parts[0]))
	end, err2 := netip.ParseAddr(strings.TrimSpace(parts[1]))
	if err1 != nil || err2 != nil || start.Is4() != end.Is4() {
		return "", fmt.Errorf("DHCP_RANGE=%q: want two addresses of one family", c.DHCPRange)
	}
	// The fields after the addresses, as metal3's image passes them through to dnsmasq: a prefix
	// length (what the cluster-baremetal-operator writes), an IPv4 netmask, and a lease time.
	bits, lease := c.Prefix, ""
	for _, f := range parts[2:] {
		f = strings.TrimSpace(f)
		if n, err := strconv.Atoi(f); err == nil {
			bits = n
		} else if m, err := netip.ParseAddr(f); err == nil && m.Is4() && start.Is4() {
			ones, size := net.IPMask(m.AsSlice()).Size()
			if size == 0 {
				return "", fmt.Errorf("DHCP_RANGE=%q: %s is not a netmask", c.DHCPRange, f)
			}
			bits = ones
		} else if leaseTime.MatchString(f) {
			lease = "," + f
		} else {
			return "", fmt.Errorf("DHCP_RANGE=%q: %q is neither a prefix length, a netmask nor a lease time", c.DHCPRange, f)
		}
	}
	if start.Is4() {
		mask := ""
		if bits > 0 {
			mask = "," + net.IP(net.CIDRMask(bits, 32)).String()
		}
		w("dhcp-range=%s,%s%s%s", start, end, mask, lease)
		// A client already running iPXE (option 175) gets Ironic's boot script. Any other gets
		// the iPXE loader of its firmware (client architecture, RFC 4578): 7 and 9 are x86-64
		// UEFI, the rest legacy BIOS, which cannot run an EFI binary.
		w("dhcp-match=ipxe,175")
		w("dhcp-match=set:efi,option:client-arch,7")
		w("dhcp-match=set:efi,option:client-arch,9")
		w("dhcp-boot=tag:ipxe,http://%s:%d/boot.ipxe", urlHost(ip), c.HTTPPort)
		w("dhcp-boot=tag:efi,tag:!ipxe,%s", EFILoader)
		w("dhcp-boot=tag:!efi,tag:!ipxe,%s", BIOSLoader)
		switch c.Gateway {
		case "":
			w("dhcp-option=3") // no default route through the provisioning network
		default:
			w("dhcp-option=3,%s", c.Gateway)
		}
		if dns, ok := dnsServer(c.DNS, ip); ok && dns.Is4() {
			w("dhcp-option=6,%s", dns)
		}
	} else {
		if bits == 0 {
			bits = 64
		}
		w("dhcp-range=%s,%s,%d%s", start, end, bits, lease)
		// Router advertisements carry the prefix; router lifetime 0 (and the default interval)
		// keeps the provisioning network from being anyone's default route, as dhcp-option=3
		// does for IPv4 and metal3's ironic-image does. Without it dnsmasq announces itself as
		// default router for three intervals (1800 s).
		w("enable-ra")
		w("ra-param=%s,0,0", iface)
		w("dhcp-match=set:ipxe6,option6:user-class,iPXE")
		// DHCPv6 network boot is UEFI only: no BIOS loader.
		w("dhcp-option=tag:!ipxe6,option6:bootfile-url,tftp://%s/%s", urlHost(ip), EFILoader)
		w("dhcp-option=tag:ipxe6,option6:bootfile-url,http://%s:%d/boot.ipxe", urlHost(ip), c.HTTPPort)
		if dns, ok := dnsServer(c.DNS, ip); ok && dns.Is6() {
			w("dhcp-option=option6:dns-server,%s", urlHost(dns))
		}
	}
	return b.String(), nil
}

// ProvisioningInterface names the interface dnsmasq and the static IP use: the named one, the one
// with a provisioning MAC, or the one holding the provisioning IP.
func ProvisioningInterface(c Config, links []Link) (string, error) {
	if c.Interface != "" {
		return c.Interface, nil
	}
	if name := interfaceByMAC(c.MACs, links); name != "" {
		return name, nil
	}
	for _, l := range links {
		for _, a := range l.Addrs {
			if a.Addr() == c.ProvisioningIP {
				return l.Name, nil
			}
		}
	}
	return "", fmt.Errorf("%w: no provisioning interface (PROVISIONING_INTERFACE, PROVISIONING_MACS)", errNoAddress)
}

// leaseTime is a dnsmasq lease time: seconds, or a number with m, h, d or w, or infinite.
var leaseTime = regexp.MustCompile(`^([0-9]+[smhdw]?|infinite)$`)

// dnsServer is the DNS server handed out: Ironic's address for DNS_IP=provisioning, the address
// DNS_IP names (metal3's image passes it through), none when unset or not an address.
func dnsServer(dns string, ironic netip.Addr) (netip.Addr, bool) {
	if dns == "provisioning" {
		return ironic, true
	}
	a, err := netip.ParseAddr(strings.Trim(dns, "[]"))
	return a, err == nil
}
