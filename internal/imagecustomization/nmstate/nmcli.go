package nmstate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/google/uuid"
)

// KeyfileDir is where NetworkManager reads keyfiles from.
const KeyfileDir = "/etc/NetworkManager/system-connections"

// Keyfile is one NetworkManager connection profile.
type Keyfile struct {
	// Name is the file name under KeyfileDir (<interface>.nmconnection, as nmstatectl names it).
	Name string
	Data []byte
}

// Generator writes keyfiles with nmcli's offline mode.
type Generator struct {
	// NMCLI is the nmcli program; empty means "nmcli" on PATH.
	NMCLI string
}

// ErrNoNMCLI means nmcli is not installed.
var ErrNoNMCLI = errors.New("nmcli not found: install NetworkManager's command line client (Debian: apt-get install network-manager) or give its path")

// Check finds nmcli and checks that it has the offline mode (NetworkManager 1.42 or later).
func (g Generator) Check(ctx context.Context) error {
	path, err := g.path()
	if err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, path, "--offline", "connection", "add", "type", "ethernet", "con-name", "probe", "ifname", "probe").Output()
	if err != nil || !bytes.Contains(out, []byte("[connection]")) {
		return fmt.Errorf("%s --offline does not write keyfiles (NetworkManager 1.42 or later is needed): %w", path, err)
	}
	return nil
}

func (g Generator) path() (string, error) {
	name := g.NMCLI
	if name == "" {
		name = "nmcli"
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%w (%s)", ErrNoNMCLI, name)
	}
	return p, nil
}

// Keyfiles returns the keyfiles for s, sorted by name: one per interface, plus an ethernet port
// profile for each bond port not listed as an interface. An nmcli refusal of the input is a
// *FieldError naming the interface; nmcli failing to run is a plain error.
func (g Generator) Keyfiles(ctx context.Context, s *State) ([]Keyfile, error) {
	nmcli, err := g.path()
	if err != nil {
		return nil, err
	}
	var out []Keyfile
	for _, p := range Profiles(s) {
		data, err := run(ctx, nmcli, p.Args)
		var refused refusal
		if errors.As(err, &refused) {
			return nil, fieldErr(p.Field, "NetworkManager refused the profile for %s: %v", p.Name, err)
		} else if err != nil {
			return nil, fmt.Errorf("nmcli for the profile of %s: %w", p.Name, err)
		}
		out = append(out, Keyfile{Name: p.Name + ".nmconnection", Data: data})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// refusal is nmcli refusing its input (a value out of range, an unknown type): the network
// data's fault, as opposed to nmcli failing to run, which is the controller's own.
type refusal string

func (r refusal) Error() string { return string(r) }

// nmcliInputError is nmcli's exit status for "invalid user input, wrong nmcli invocation"
// (nmcli(1), EXIT STATUS); its message is on stderr.
const nmcliInputError = 2

// invalidProfile is the message of a profile whose properties do not go together (NetworkManager's
// check of the whole connection, "ipv6.dns: this property is not allowed for 'method=link-local'"):
// the input's fault too, although nmcli exits 1 for it.
var invalidProfile = regexp.MustCompile(`^Error writing connection: [a-z0-9-]+\.[a-z0-9-]+: `)

func run(ctx context.Context, nmcli string, args []string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, nmcli, append([]string{"--offline", "connection", "add"}, args...)...)
	// Messages in English whatever the host's locale, so that they read the same in status.
	cmd.Env = append(os.Environ(), "LC_ALL=C", "LANG=C")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err == nil {
		return out, nil
	}
	msg := strings.TrimPrefix(strings.TrimSpace(stderr.String()), "Error: ")
	var exit *exec.ExitError
	if errors.As(err, &exit) && msg != "" && (exit.ExitCode() == nmcliInputError || invalidProfile.MatchString(msg)) {
		return nil, refusal(msg)
	}
	// Killed (memory, a timeout), not started (a process limit, a missing library), or an
	// internal error: retried like any failure of the controller's own, never blamed on the
	// network data (which would discard the host's image until the user edits it).
	if msg != "" {
		return nil, fmt.Errorf("%w: %s", err, msg)
	}
	return nil, err
}

// Profile is one nmcli offline invocation.
type Profile struct {
	// Name is the connection and file name (the interface name).
	Name string
	// Field is the nmstate field the profile comes from, for messages.
	Field string
	// Args follow "nmcli --offline connection add".
	Args []string
}

// uuidSpace makes profile UUIDs a function of the interface name: the same network data gives
// the same keyfiles, hence the same image and URL.
var uuidSpace = uuid.MustParse("8b8a3f0e-6c5e-4e59-9d2a-4d6f0f3c2b7a")

// Profiles maps s to nmcli arguments.
func Profiles(s *State) []Profile {
	ports := s.ports()
	routes := map[string][]Route{}
	for _, r := range s.Routes {
		routes[r.Interface] = append(routes[r.Interface], r)
	}
	dns4, dns6, search := s.dnsInterface(true), s.dnsInterface(false), s.searchInterface()
	var out []Profile
	for i := range s.Interfaces {
		in := &s.Interfaces[i]
		args := []string{"type", in.Type, "con-name", in.Name}
		if !in.MatchMAC {
			args = append(args, "ifname", in.Name)
		}
		args = append(args, "connection.uuid", profileUUID(in.Name), "connection.autoconnect", "yes")
		if in.MAC != "" {
			args = append(args, "ethernet.mac-address", in.MAC)
		}
		if in.MTU != 0 {
			args = append(args, "ethernet.mtu", strconv.Itoa(in.MTU))
		}
		switch {
		case in.Bond != nil:
			args = append(args, "bond.options", bondOptions(in.Bond))
		case in.VLAN != nil:
			args = append(args, "vlan.parent", in.VLAN.BaseIface, "vlan.id", strconv.Itoa(in.VLAN.ID))
		}
		if bond, isPort := ports[in.Name]; isPort {
			args = append(args, "connection.master", bond, "connection.slave-type", "bond")
		} else {
			var servers4, servers6, search4, search6 []string
			for _, a := range s.DNS.Servers {
				if a.Is4() && dns4 == in {
					servers4 = append(servers4, a.String())
				} else if a.Is6() && dns6 == in {
					servers6 = append(servers6, a.String())
				}
			}
			// NetworkManager ignores the settings of a disabled family: the domains go with
			// IPv4 when the interface has it, else with IPv6 (an IPv6-only interface).
			if search == in && in.IPv4.Enabled {
				search4 = s.DNS.Search
			} else if search == in {
				search6 = s.DNS.Search
			}
			args = append(args, ipArgs("ipv4", in.IPv4, false, routes[in.Name], servers4, search4)...)
			args = append(args, ipArgs("ipv6", in.IPv6, true, routes[in.Name], servers6, search6)...)
		}
		out = append(out, Profile{Name: in.Name, Field: index("interfaces", in.Index), Args: args})
	}
	// Ports named only in a bond's port list get a plain ethernet port profile.
	for _, in := range s.Interfaces {
		if in.Bond == nil {
			continue
		}
		for j, p := range in.Bond.Ports {
			if s.Interface(p) != nil {
				continue
			}
			out = append(out, Profile{
				Name: p, Field: index(index("interfaces", in.Index)+".link-aggregation.port", j),
				Args: []string{"type", TypeEthernet, "con-name", p, "ifname", p, "connection.uuid", profileUUID(p),
					"connection.autoconnect", "yes", "connection.master", in.Name, "connection.slave-type", "bond"},
			})
		}
	}
	return out
}

func profileUUID(name string) string {
	return uuid.NewSHA1(uuidSpace, []byte(name)).String()
}

func bondOptions(b *Bond) string {
	opts := []string{"mode=" + b.Mode}
	keys := make([]string, 0, len(b.Options))
	for k := range b.Options {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		opts = append(opts, k+"="+b.Options[k])
	}
	return strings.Join(opts, ",")
}

// ipArgs maps one address family of an interface to its ipv4.* or ipv6.* properties.
func ipArgs(p string, ip IP, v6 bool, routes []Route, servers, search []string) []string {
	method := "disabled"
	switch {
	case !ip.Enabled:
	case v6 && ip.DHCP && !ip.Autoconf:
		method = "dhcp"
	case ip.DHCP || ip.Autoconf:
		method = "auto"
	case len(ip.Addresses) > 0:
		method = "manual"
	case v6:
		method = "link-local"
	}
	args := []string{p + ".method", method}
	if !ip.Enabled {
		return args
	}
	if len(ip.Addresses) > 0 {
		args = append(args, p+".addresses", joinPrefixes(ip.Addresses))
	}
	var rs []string
	for _, r := range routes {
		if r.Destination.Addr().Is6() != v6 {
			continue
		}
		f := []string{r.Destination.String()}
		if r.NextHop.IsValid() {
			f = append(f, r.NextHop.String())
		}
		if r.Metric != nil {
			f = append(f, strconv.Itoa(*r.Metric))
		}
		if r.TableID != nil {
			f = append(f, "table="+strconv.Itoa(*r.TableID))
		}
		rs = append(rs, strings.Join(f, " "))
	}
	if len(rs) > 0 {
		args = append(args, p+".routes", strings.Join(rs, ", "))
	}
	if len(servers) > 0 {
		args = append(args, p+".dns", strings.Join(servers, ","))
	}
	if len(search) > 0 {
		args = append(args, p+".dns-search", strings.Join(search, ","))
	}
	if ip.NoAutoDNS {
		args = append(args, p+".ignore-auto-dns", "yes")
	}
	if ip.NoAutoGateway {
		args = append(args, p+".never-default", "yes")
	}
	if ip.NoAutoRoutes {
		args = append(args, p+".ignore-auto-routes", "yes")
	}
	return args
}

func joinPrefixes(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}
