package nmstate

import (
	"fmt"
	"net/netip"
)

// Interface types.
const (
	TypeEthernet = "ethernet"
	TypeBond     = "bond"
	TypeVLAN     = "vlan"
)

// State is the supported part of an nmstate document, checked.
type State struct {
	Interfaces []Interface
	Routes     []Route
	DNS        DNS
}

// Interface is one entry of interfaces[].
type Interface struct {
	// Index is the position in interfaces[], for messages.
	Index int
	Name  string
	Type  string
	// MAC is mac-address; MatchMAC is identifier: mac-address.
	MAC      string
	MatchMAC bool
	MTU      int
	IPv4     IP
	IPv6     IP
	Bond     *Bond
	VLAN     *VLAN
}

// IP is the ipv4 or ipv6 section of an interface.
type IP struct {
	Enabled bool
	DHCP    bool
	// Autoconf is IPv6 router advertisements (SLAAC).
	Autoconf  bool
	Addresses []netip.Prefix
	// NoAutoDNS, NoAutoGateway and NoAutoRoutes are auto-dns, auto-gateway and auto-routes set to
	// false (nmstate's default is true).
	NoAutoDNS, NoAutoGateway, NoAutoRoutes bool
}

// Bond is link-aggregation.
type Bond struct {
	Mode string
	// Options are the bonding options other than mode, by name.
	Options map[string]string
	Ports   []string
}

// VLAN is the vlan section.
type VLAN struct {
	BaseIface string
	ID        int
}

// Route is one entry of routes.config[].
type Route struct {
	Index       int
	Destination netip.Prefix
	NextHop     netip.Addr // zero: none
	Interface   string
	Metric      *int
	TableID     *int
}

// DNS is dns-resolver.config.
type DNS struct {
	Servers []netip.Addr
	Search  []string
}

// FieldError is an nmstate document that cannot be used, naming the field.
type FieldError struct {
	// Field is the path of the field, e.g. "interfaces[0].ipv4.address[1].ip".
	Field string
	Msg   string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return "nmstate: " + e.Msg
	}
	return fmt.Sprintf("nmstate: %s: %s", e.Field, e.Msg)
}

func fieldErr(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Interface returns the interface named name, or nil.
func (s *State) Interface(name string) *Interface {
	for i := range s.Interfaces {
		if s.Interfaces[i].Name == name {
			return &s.Interfaces[i]
		}
	}
	return nil
}

// ports returns the bond each port belongs to.
func (s *State) ports() map[string]string {
	m := map[string]string{}
	for _, in := range s.Interfaces {
		if in.Bond != nil {
			for _, p := range in.Bond.Ports {
				m[p] = in.Name
			}
		}
	}
	return m
}
