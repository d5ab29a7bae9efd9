package ironicrunner

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"
)

// Link is a network interface as the runner sees it.
type Link struct {
	Name  string
	MAC   string
	Addrs []netip.Prefix
}

// Links lists the host's interfaces (the metal3 pod uses the host's network).
func Links() ([]Link, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("listing network interfaces: %w", err)
	}
	out := make([]Link, 0, len(ifs))
	for _, i := range ifs {
		l := Link{Name: i.Name, MAC: strings.ToLower(i.HardwareAddr.String())}
		addrs, err := i.Addrs()
		if err != nil {
			return nil, fmt.Errorf("reading the addresses of %s: %w", i.Name, err)
		}
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil {
				l.Addrs = append(l.Addrs, netip.PrefixFrom(p.Addr().Unmap(), p.Bits()))
			}
		}
		out = append(out, l)
	}
	return out, nil
}

// errNoAddress: the address is not there yet (the static IP is set by another container, a DHCP
// lease is pending); the caller waits.
var errNoAddress = errors.New("no address yet")

// IronicIP decides Ironic's address from the configuration and the links: the provisioning IP
// once it is on an interface; else the first global address of the provisioning interface (named,
// or found by MAC).
func IronicIP(c Config, links []Link) (netip.Addr, error) {
	if c.ProvisioningIP.IsValid() {
		for _, l := range links {
			for _, a := range l.Addrs {
				if a.Addr() == c.ProvisioningIP {
					return c.ProvisioningIP, nil
				}
			}
		}
		return netip.Addr{}, fmt.Errorf("%w: %s is on no interface", errNoAddress, c.ProvisioningIP)
	}
	name := c.Interface
	if name == "" && len(c.MACs) > 0 {
		name = interfaceByMAC(c.MACs, links)
		if name == "" {
			return netip.Addr{}, fmt.Errorf("%w: no interface has one of the MACs %s", errNoAddress, strings.Join(c.MACs, ","))
		}
	}
	if name == "" {
		return netip.Addr{}, errors.New("PROVISIONING_IP, PROVISIONING_INTERFACE or PROVISIONING_MACS is required")
	}
	for _, l := range links {
		if l.Name != name {
			continue
		}
		for _, a := range l.Addrs {
			if a.Addr().IsGlobalUnicast() {
				return a.Addr(), nil
			}
		}
		return netip.Addr{}, fmt.Errorf("%w: %s has no global address", errNoAddress, name)
	}
	return netip.Addr{}, fmt.Errorf("%w: no interface %s", errNoAddress, name)
}

func interfaceByMAC(macs []string, links []Link) string {
	for _, mac := range macs {
		for _, l := range links {
			if l.MAC == mac {
				return l.Name
			}
		}
	}
	return ""
}

// WaitIronicIP polls the links until IronicIP finds the address, as metal3's images wait for the
// provisioning interface. Errors other than a missing address end the wait.
func WaitIronicIP(ctx context.Context, c Config, links func() ([]Link, error), logf func(string, ...any)) (netip.Addr, error) {
	for i := 0; ; i++ {
		l, err := links()
		if err != nil {
			return netip.Addr{}, err
		}
		ip, err := IronicIP(c, l)
		if err == nil {
			return ip, nil
		}
		if !errors.Is(err, errNoAddress) {
			return netip.Addr{}, err
		}
		if i%10 == 0 {
			logf("waiting for the provisioning address: %v", err)
		}
		select {
		case <-ctx.Done():
			return netip.Addr{}, fmt.Errorf("waiting for the provisioning address: %w", ctx.Err())
		case <-time.After(time.Second):
		}
	}
}
