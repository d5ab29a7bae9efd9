package nmstate

import (
	"math"
	"net/netip"
)

func parseRoutes(top *object, s *State) error {
	ro, ok, err := top.object("routes")
	if err != nil || !ok {
		return err
	}
	list, err := ro.list("config")
	if err != nil {
		return err
	}
	for i, v := range list {
		o, err := asObject(index(ro.field("config"), i), v)
		if err != nil {
			return err
		}
		r, err := parseRoute(o, i)
		if err != nil {
			return err
		}
		s.Routes = append(s.Routes, r)
	}
	return ro.finish("config")
}

func parseRoute(o *object, i int) (Route, error) {
	r := Route{Index: i}
	if state, ok, err := o.str("state"); err != nil {
		return r, err
	} else if ok {
		return r, fieldErr(o.field("state"), "%q is not supported (routes are only added)", state)
	}
	dst, ok, err := o.str("destination")
	if err != nil {
		return r, err
	}
	if !ok {
		return r, fieldErr(o.field("destination"), "is required")
	}
	if r.Destination, err = netip.ParsePrefix(dst); err != nil {
		return r, fieldErr(o.field("destination"), "%q is not an address/prefix-length", dst)
	}
	r.Destination = r.Destination.Masked()
	if nh, ok, err := o.str("next-hop-address"); err != nil {
		return r, err
	} else if ok {
		if r.NextHop, err = netip.ParseAddr(nh); err != nil || r.NextHop.Zone() != "" {
			return r, fieldErr(o.field("next-hop-address"), "%q is not an IP address", nh)
		}
		if r.NextHop.Is4() != r.Destination.Addr().Is4() {
			return r, fieldErr(o.field("next-hop-address"), "%q is not of the destination's address family", nh)
		}
	}
	if r.Interface, ok, err = o.str("next-hop-interface"); err != nil {
		return r, err
	} else if !ok {
		return r, fieldErr(o.field("next-hop-interface"), "is required (the route goes on that interface's profile)")
	}
	if m, ok, err := o.integer("metric", 0, math.MaxUint32); err != nil {
		return r, err
	} else if ok {
		r.Metric = &m
	}
	if t, ok, err := o.integer("table-id", 1, math.MaxUint32); err != nil {
		return r, err
	} else if ok {
		r.TableID = &t
	}
	return r, o.finish("destination", "next-hop-address", "next-hop-interface", "metric", "table-id")
}

func parseDNS(top *object, s *State) error {
	do, ok, err := top.object("dns-resolver")
	if err != nil || !ok {
		return err
	}
	co, ok, err := do.object("config")
	if err != nil {
		return err
	}
	if ok {
		servers, err := co.strings("server")
		if err != nil {
			return err
		}
		for i, sv := range servers {
			a, err := netip.ParseAddr(sv)
			if err != nil || a.Zone() != "" {
				return fieldErr(index(co.field("server"), i), "%q is not an IP address", sv)
			}
			s.DNS.Servers = append(s.DNS.Servers, a)
		}
		if s.DNS.Search, err = co.strings("search"); err != nil {
			return err
		}
		for i, d := range s.DNS.Search {
			if !validOption(d) {
				return fieldErr(index(co.field("search"), i), "%q is not a domain name", d)
			}
		}
		if err := co.finish("server", "search"); err != nil {
			return err
		}
	}
	return do.finish("config")
}

// check verifies what involves several fields: bond ports, VLAN bases, routes and DNS servers
// referring to interfaces that can carry them.
func check(s *State) error {
	ports := s.ports()
	for _, in := range s.Interfaces {
		if in.Bond != nil {
			for j, p := range in.Bond.Ports {
				f := index(index("interfaces", in.Index)+".link-aggregation.port", j)
				if owner := ports[p]; owner != in.Name {
					return fieldErr(f, "%q is a port of both %s and %s", p, owner, in.Name)
				}
				pi := s.Interface(p)
				if pi == nil {
					continue
				}
				if pi.Type != TypeEthernet {
					return fieldErr(f, "%q is a %s; bond ports must be ethernet interfaces", p, pi.Type)
				}
				if pi.IPv4.Enabled || pi.IPv6.Enabled {
					return fieldErr(index("interfaces", pi.Index)+".ipv4", "%s is a port of bond %s and cannot have IP configuration of its own", p, in.Name)
				}
			}
		}
		if in.VLAN != nil && in.VLAN.BaseIface == in.Name {
			return fieldErr(index("interfaces", in.Index)+".vlan.base-iface", "a VLAN cannot be its own base interface")
		}
	}
	for _, r := range s.Routes {
		f := index("routes.config", r.Index) + ".next-hop-interface"
		in := s.Interface(r.Interface)
		if in == nil {
			return fieldErr(f, "%q is not one of the interfaces", r.Interface)
		}
		if _, port := ports[in.Name]; port {
			return fieldErr(f, "%q is a bond port; put the route on the bond", r.Interface)
		}
		if ip := in.ip(r.Destination.Addr().Is4()); !ip.Enabled {
			return fieldErr(f, "%q does not have %s enabled", r.Interface, family(r.Destination.Addr().Is4()))
		}
	}
	for i, a := range s.DNS.Servers {
		if s.dnsInterface(a.Is4()) == nil {
			return fieldErr(index("dns-resolver.config.server", i), "no interface has %s enabled for this server", family(a.Is4()))
		}
	}
	if len(s.DNS.Search) > 0 && s.searchInterface() == nil {
		return fieldErr("dns-resolver.config.search", "no interface has IPv4 or IPv6 enabled")
	}
	return nil
}

func (in *Interface) ip(v4 bool) *IP {
	if v4 {
		return &in.IPv4
	}
	return &in.IPv6
}

func family(v4 bool) string {
	if v4 {
		return "IPv4"
	}
	return "IPv6"
}

// dnsInterface is where servers of a family go: the first interface with a static address of
// that family, else the first with the family enabled.
func (s *State) dnsInterface(v4 bool) *Interface {
	var enabled *Interface
	for i := range s.Interfaces {
		ip := s.Interfaces[i].ip(v4)
		if len(ip.Addresses) > 0 {
			return &s.Interfaces[i]
		}
		if ip.Enabled && enabled == nil {
			enabled = &s.Interfaces[i]
		}
	}
	return enabled
}

// searchInterface is where search domains go: the interface that got the first server, else the
// first with any address family enabled.
func (s *State) searchInterface() *Interface {
	if len(s.DNS.Servers) > 0 {
		return s.dnsInterface(s.DNS.Servers[0].Is4())
	}
	for i := range s.Interfaces {
		if s.Interfaces[i].IPv4.Enabled || s.Interfaces[i].IPv6.Enabled {
			return &s.Interfaces[i]
		}
	}
	return nil
}
