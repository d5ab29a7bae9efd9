package bmc

import (
	"net"
	"strings"

	"github.com/metalforge/metalforge/internal/statustext"
)

// Access is what one BMC address means for Ironic. Parse fills every field; it holds no credentials,
// so it is safe to log.
type Access struct {
	// Type is the scheme without +http/+https, e.g. "redfish-virtualmedia"; "ipmi" for a bare
	// host[:port]. Always one of Types().
	Type string
	// Scheme is the scheme as written, lower-cased, including any +http/+https suffix, e.g.
	// "redfish+http"; "ipmi" for a bare host[:port]. It decides the scheme of redfish_address.
	Scheme string
	// Host is a host name or IP address (IPv6 without brackets).
	Host string
	// Port is the port in decimal, "" when the address has none.
	Port string
	// Path is the percent-decoded URL path, e.g. "/redfish/v1/Systems/1"; "" when absent. For
	// Redfish types it is the system path; IPMI types ignore it.
	Path string
	// PrivilegeLevel is the IPMI privilege level (ipmi_priv_level) from ?privilegelevel=,
	// upper-cased; "ADMINISTRATOR" when absent. Always "" for Redfish types.
	PrivilegeLevel string
	// Driver is the Ironic hardware type: "ipmi", "redfish" or "idrac".
	Driver string
	// Interfaces are the Ironic interfaces to set on the node; "" leaves Ironic's default.
	Interfaces Interfaces
	// NeedsMAC: the host cannot be registered without spec.bootMACAddress, whatever the
	// inspection mode. True only for libvirt (see the package doc).
	NeedsMAC bool
	// SupportsSecureBoot: Ironic can turn UEFI secure boot on and off through this BMC.
	SupportsSecureBoot bool
	// SupportsISOPreprovisioningImage: the host can boot the preprovisioning image as an ISO
	// (virtual media or UEFI HTTP boot) instead of kernel+initramfs over PXE.
	SupportsISOPreprovisioningImage bool
	// RequiresProvisioningNetwork: the boot interface is (i)PXE, so a provisioning network with
	// DHCP must reach the host.
	RequiresProvisioningNetwork bool
	// SupportsRAID: hardware RAID can be configured through the BMC (the RAID interface is not
	// "no-raid").
	SupportsRAID bool
}

// Interfaces are the Ironic per-node interfaces. An empty string leaves the choice to Ironic, which
// uses the hardware type's default.
type Interfaces struct {
	Boot       string
	BIOS       string
	Management string
	Power      string
	RAID       string
	Vendor     string
	Firmware   string
	// Inspect is the out-of-band inspect interface, used when inspection is done through the BMC
	// rather than by the agent; "" when the BMC cannot inspect.
	Inspect string
	// Deploy is always "": the deploy interface depends on the image (ramdisk for live ISOs,
	// custom-agent for custom deploy), not on the BMC, and is chosen by the provisioner.
	Deploy string
}

const (
	ipmiDefaultPort           = "623"
	ipmiDefaultPrivilegeLevel = "ADMINISTRATOR"
	// redfishServiceRoot as a system path means "no system given": Ironic then uses the BMC's only
	// system.
	redfishServiceRoot = "redfish/v1"
)

// DriverInfo returns the node's driver_info for this address, exactly as metal3 builds it. The
// caller adds deploy kernel/ramdisk/ISO keys. The result holds the password; pass it through
// RedactDriverInfo before logging it. An Access whose Driver is unknown yields an empty map.
//
// IPMI (ipmi, libvirt): ipmi_address, ipmi_port (623 by default), ipmi_username, ipmi_password,
// ipmi_priv_level, and ipmi_verify_ca=false when verification is disabled (ipmitool ignores it;
// metal3 sets it, so we do too).
//
// Redfish family: redfish_address ("https://host[:port]", or "http://" for a +http scheme; IPv6 in
// brackets), redfish_system_id (the path, only when it is neither empty nor /redfish/v1),
// redfish_username, redfish_password, and redfish_verify_ca=false when verification is disabled.
func (a *Access) DriverInfo(username, password string, disableCertificateVerification bool) map[string]any {
	switch a.Driver {
	case DriverIPMI:
		port := a.Port
		if port == "" {
			port = ipmiDefaultPort
		}
		level := a.PrivilegeLevel
		if level == "" {
			level = ipmiDefaultPrivilegeLevel
		}
		info := map[string]any{
			"ipmi_address":    a.Host,
			"ipmi_port":       port,
			"ipmi_username":   username,
			"ipmi_password":   password,
			"ipmi_priv_level": level,
		}
		if disableCertificateVerification {
			info["ipmi_verify_ca"] = false
		}
		return info
	case DriverRedfish, DriverIDRAC:
		info := map[string]any{
			"redfish_address":  a.redfishAddress(),
			"redfish_username": username,
			"redfish_password": password,
		}
		if p := strings.Trim(a.Path, "/"); p != "" && p != redfishServiceRoot {
			info["redfish_system_id"] = a.Path
		}
		if disableCertificateVerification {
			info["redfish_verify_ca"] = false
		}
		return info
	default:
		return map[string]any{}
	}
}

// redfishAddress is scheme://host[:port], the scheme taken from a +http/+https suffix.
func (a *Access) redfishAddress() string {
	scheme := transportHTTPS
	if strings.HasSuffix(a.Scheme, "+"+transportHTTP) {
		scheme = transportHTTP
	}
	return scheme + "://" + a.hostPort()
}

// hostPort is host[:port] with IPv6 literals in brackets.
func (a *Access) hostPort() string {
	if a.Port != "" {
		return net.JoinHostPort(a.Host, a.Port)
	}
	if strings.Contains(a.Host, ":") {
		return "[" + a.Host + "]"
	}
	return a.Host
}

// String returns the canonical form of the address: Parse(a.String()) gives back an equal Access.
// It never contains credentials.
func (a *Access) String() string {
	var b strings.Builder
	b.WriteString(a.Scheme)
	b.WriteString("://")
	b.WriteString(a.hostPort())
	b.WriteString(escapePath(a.Path))
	if a.PrivilegeLevel != "" && a.PrivilegeLevel != ipmiDefaultPrivilegeLevel {
		b.WriteString("?privilegelevel=")
		b.WriteString(a.PrivilegeLevel)
	}
	return b.String()
}

// escapePath percent-encodes everything in p but RFC 3986 unreserved characters, sub-delims, ":"
// and "/". Notably "@", "%", "?" and "#" are encoded, so the result re-parses to p.
func escapePath(p string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		c := p[i]
		if isPathChar(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&0xf])
	}
	return b.String()
}

func isPathChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("-._~!$&'()*+,;=:/", c) >= 0
}

// redactedValue replaces secrets in RedactDriverInfo's result.
const redactedValue = "******"

// secretKeyParts mark driver_info keys whose values are secrets.
var secretKeyParts = []string{"password", "passphrase", "secret", "token"}

// RedactDriverInfo returns a copy of a driver_info map that is safe to log: the value of every key
// naming a password, passphrase, secret or token is replaced by "******" (an empty or nil value is
// kept, so a missing password is still visible). The input is not modified.
func RedactDriverInfo(info map[string]any) map[string]any {
	out := make(map[string]any, len(info))
	for k, v := range info {
		if isSecretKey(k) && v != nil && v != "" {
			v = redactedValue
		} else if text, ok := v.(string); ok {
			v = statustext.Redact(text) // user:password@ and tokens in URLs (deploy_iso, …)
		}
		out[k] = v
	}
	return out
}

func isSecretKey(key string) bool {
	key = strings.ToLower(key)
	for _, part := range secretKeyParts {
		if strings.Contains(key, part) {
			return true
		}
	}
	return false
}

// BootsFromISO reports whether the BMC at address boots its host from an ISO (virtual media or
// UEFI HTTP boot): such a host needs no DHCP lease nor TFTP, so PROVISIONING_LIMIT neither counts
// nor holds it (metal3's rule). False for an address that does not parse.
func BootsFromISO(address string) bool {
	a, err := Parse(address)
	return err == nil && a.SupportsISOPreprovisioningImage
}
