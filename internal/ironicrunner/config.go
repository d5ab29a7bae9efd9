package ironicrunner

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

// Config is the runner's environment, parsed.
type Config struct {
	// ProvisioningIP is Ironic's address (PROVISIONING_IP without its prefix); Prefix is the
	// prefix length when PROVISIONING_IP had one (the static IP to set).
	ProvisioningIP netip.Addr
	Prefix         int
	// Interface (PROVISIONING_INTERFACE) and MACs (PROVISIONING_MACS) find the provisioning
	// interface when there is no IP, or where to put the static one.
	Interface string
	MACs      []string
	// ExternalIP (IRONIC_EXTERNAL_IP) is where hosts outside the provisioning network reach Ironic.
	ExternalIP netip.Addr
	// ListenAll (LISTEN_ALL_INTERFACES, default true): listen on every address, not only Ironic's.
	ListenAll bool
	// NoIPv6: the kernel has no IPv6, so listening on every address means IPv4's (the runner
	// probes this; see listenAddress).
	NoIPv6 bool

	APIPort       int // IRONIC_LISTEN_PORT, default 6385
	HTTPPort      int // HTTP_PORT, default 6180
	VMediaTLSPort int // VMEDIA_TLS_PORT; 0: no HTTPS for virtual media

	// CertFile and KeyFile (IRONIC_CERT_FILE, IRONIC_KEY_FILE) serve the API and virtual media
	// over TLS when both exist.
	CertFile, KeyFile string
	// Htpasswd (IRONIC_HTPASSWD, or HTTP_BASIC_HTPASSWD, or the file MountedHtpasswd) turns on
	// HTTP basic authentication.
	Htpasswd string
	// Insecure (IRONIC_INSECURE): the agent does not verify Ironic's certificate (ipa-insecure=1).
	Insecure bool
	// WebserverCACert (WEBSERVER_CACERT_FILE) is the CA file the conductor verifies image
	// servers with (webserver_verify_ca).
	WebserverCACert string
	// KernelParams (IRONIC_KERNEL_PARAMS) are added to the agent's kernel command line.
	KernelParams string
	// KernelIPFromAddresses (IRONIC_KERNEL_IP_FROM_ADDRESSES, default false) adds the agent's ip=
	// option for the families of the addresses it is given (Ironic's and ExternalIP). The
	// cluster-baremetal-operator asks for it when Ironic's address is the node's (status.hostIP),
	// which only the running pod knows.
	KernelIPFromAddresses bool
	FastTrack             bool // IRONIC_FAST_TRACK, default true

	// SharedDir is the volume shared with the HTTP server (SHARED_DIR, default /shared).
	SharedDir string
	// DataDir holds the database (IRONIC_DATA_DIR, default /var/lib/ironic).
	DataDir string
	// ConfDir is where ironic.conf and the htpasswd are written (IRONIC_CONF_DIR, default /etc/ironic).
	ConfDir string
	// ESPImage is the EFI system partition for the UEFI ISOs Ironic builds (IRONIC_ESP_IMAGE,
	// default /usr/share/ironic-runner/esp.img when that file exists).
	ESPImage string

	// IPXEDir holds the iPXE loaders dnsmasq serves over TFTP (IPXE_CUSTOM_FIRMWARE_DIR, default
	// /usr/lib/ipxe, where Debian's ipxe package puts them).
	IPXEDir string

	// DHCP (dnsmasq mode): DHCPRange is DHCP_RANGE ("start,end[,prefix]"), Gateway GATEWAY_IP,
	// DNS DNS_IP ("provisioning": Ironic's address).
	DHCPRange, Gateway, DNS string
}

// MountedHtpasswd is where metal3's image (and OpenShift's operator, which mounts the credentials
// Secret there) puts the htpasswd when no variable carries it.
const MountedHtpasswd = "/auth/ironic/htpasswd"

// DefaultESPImage is where the Ironic image keeps its EFI system partition.
const DefaultESPImage = "/usr/share/ironic-runner/esp.img"

// DefaultIPXEDir is where the Ironic image (Debian's ipxe package) keeps the iPXE loaders.
const DefaultIPXEDir = "/usr/lib/ipxe"

// FromEnv reads the configuration from getenv. Errors name the variable.
func FromEnv(getenv func(string) string) (Config, error) {
	c := Config{
		Interface: strings.TrimSpace(getenv("PROVISIONING_INTERFACE")),
		CertFile:  getenv("IRONIC_CERT_FILE"), KeyFile: getenv("IRONIC_KEY_FILE"),
		// HTTP_BASIC_HTPASSWD: the name older deployments of metal3's image use.
		Htpasswd:        strings.TrimSpace(orDefault(getenv("IRONIC_HTPASSWD"), getenv("HTTP_BASIC_HTPASSWD"))),
		KernelParams:    strings.TrimSpace(getenv("IRONIC_KERNEL_PARAMS")),
		WebserverCACert: strings.TrimSpace(getenv("WEBSERVER_CACERT_FILE")),
		SharedDir:       orDefault(getenv("SHARED_DIR"), "/shared"), DataDir: orDefault(getenv("IRONIC_DATA_DIR"), "/var/lib/ironic"),
		ConfDir: orDefault(getenv("IRONIC_CONF_DIR"), "/etc/ironic"), ESPImage: getenv("IRONIC_ESP_IMAGE"),
		IPXEDir:   orDefault(getenv("IPXE_CUSTOM_FIRMWARE_DIR"), DefaultIPXEDir),
		DHCPRange: strings.TrimSpace(getenv("DHCP_RANGE")), Gateway: strings.TrimSpace(getenv("GATEWAY_IP")), DNS: strings.TrimSpace(getenv("DNS_IP")),
	}
	var errs []error
	if v := strings.TrimSpace(getenv("PROVISIONING_IP")); v != "" {
		if p, err := netip.ParsePrefix(v); err == nil {
			c.ProvisioningIP, c.Prefix = p.Addr(), p.Bits()
		} else if a, err := netip.ParseAddr(v); err == nil {
			c.ProvisioningIP = a
		} else {
			errs = append(errs, fmt.Errorf("PROVISIONING_IP=%q: want an IP address, optionally with a /prefix", v))
		}
	}
	if v := strings.TrimSpace(getenv("IRONIC_EXTERNAL_IP")); v != "" {
		a, err := netip.ParseAddr(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("IRONIC_EXTERNAL_IP=%q: want an IP address", v))
		}
		c.ExternalIP = a
	}
	for _, mac := range strings.Split(getenv("PROVISIONING_MACS"), ",") {
		if mac = strings.TrimSpace(mac); mac == "" {
			continue
		}
		if _, err := net.ParseMAC(mac); err != nil {
			errs = append(errs, fmt.Errorf("PROVISIONING_MACS: %q is not a MAC address", mac))
		}
		c.MACs = append(c.MACs, strings.ToLower(mac))
	}
	var err error
	if c.APIPort, err = port(getenv, "IRONIC_LISTEN_PORT", 6385); err != nil {
		errs = append(errs, err)
	}
	if c.HTTPPort, err = port(getenv, "HTTP_PORT", 6180); err != nil {
		errs = append(errs, err)
	}
	if c.VMediaTLSPort, err = port(getenv, "VMEDIA_TLS_PORT", 0); err != nil {
		errs = append(errs, err)
	}
	for name, dst := range map[string]*bool{"IRONIC_INSECURE": &c.Insecure, "IRONIC_FAST_TRACK": &c.FastTrack, "LISTEN_ALL_INTERFACES": &c.ListenAll,
		"IRONIC_KERNEL_IP_FROM_ADDRESSES": &c.KernelIPFromAddresses} {
		def := name == "IRONIC_FAST_TRACK" || name == "LISTEN_ALL_INTERFACES"
		v := getenv(name)
		if v == "" {
			*dst = def
			continue
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: want true or false", name, v))
		}
		*dst = b
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		errs = append(errs, errors.New("IRONIC_CERT_FILE and IRONIC_KEY_FILE go together"))
	}
	if c.ESPImage == "" {
		if _, err := os.Stat(DefaultESPImage); err == nil {
			c.ESPImage = DefaultESPImage
		}
	}
	return c, errors.Join(errs...)
}

func orDefault(v, def string) string {
	if strings.TrimSpace(v) == "" {
		return def
	}
	return strings.TrimSpace(v)
}

func port(getenv func(string) string, name string, def int) (int, error) {
	v := strings.TrimSpace(getenv(name))
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("%s=%q: want a port number", name, v)
	}
	return n, nil
}

// TLS reports whether the API and virtual media are served over TLS (both files exist).
func (c Config) TLS() bool {
	if c.CertFile == "" {
		return false
	}
	_, errC := os.Stat(c.CertFile)
	_, errK := os.Stat(c.KeyFile)
	return errC == nil && errK == nil
}

// urlHost is an address for a URL (IPv6 in brackets).
func urlHost(a netip.Addr) string {
	if a.Is6() {
		return "[" + a.String() + "]"
	}
	return a.String()
}

// listenAddress is where Ironic's API binds: every address, or Ironic's. Every address is "::"
// whatever Ironic's own family: the pod is on the host's network, and the kubelet's probe and the
// metal3-state endpoints use the node's primary address, IPv6 on an IPv6-primary cluster with an
// IPv4 provisioning network. Ironic's server (cheroot) makes "::" dual-stack (IPV6_V6ONLY off),
// so IPv4 clients are still served; only a kernel without IPv6 gets "0.0.0.0".
func (c Config) listenAddress(ironicIP netip.Addr) string {
	switch {
	case !c.ListenAll:
		return ironicIP.String()
	case c.NoIPv6:
		return "0.0.0.0"
	}
	return "::"
}

// IPv6Available reports whether the kernel can listen on IPv6 (it cannot when booted with
// ipv6.disable=1).
func IPv6Available() bool {
	ln, err := net.Listen("tcp6", "[::]:0")
	if err != nil {
		return false
	}
	_ = ln.Close()
	return true
}
