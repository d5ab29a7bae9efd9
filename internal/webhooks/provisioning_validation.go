package webhooks

import (
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	metal3 "github.com/metalforge/metalforge/api/metal3/v1alpha1"
	"github.com/metalforge/metalforge/internal/statustext"
)

// The rules follow the cluster baremetal operator's provisioning_validation.go, which OpenShift
// installs and upgrades rely on; additions are marked as ours.

var provisioningNetworks = []metal3.ProvisioningNetwork{
	metal3.ProvisioningNetworkManaged, metal3.ProvisioningNetworkUnmanaged, metal3.ProvisioningNetworkDisabled,
}

const (
	// minManagedIPv6Prefix: dnsmasq cannot hand out addresses from an IPv6 network larger than
	// a /64.
	minManagedIPv6Prefix = 64
	sha256HexLen         = 64
	osDownloadURLForm    = "an http:// or https:// URL of a .qcow2.gz or .qcow2.xz image with its checksum as ?sha256=<64 hex digits>"
)

// ProvisioningNetworkMode is the effective network mode: spec.provisioningNetwork, or when it is
// empty Managed, or Unmanaged with the deprecated provisioningDHCPExternal.
func ProvisioningNetworkMode(spec *metal3.ProvisioningSpec) metal3.ProvisioningNetwork {
	switch {
	case spec.ProvisioningNetwork != "":
		return spec.ProvisioningNetwork
	case spec.ProvisioningDHCPExternal:
		return metal3.ProvisioningNetworkUnmanaged
	default:
		return metal3.ProvisioningNetworkManaged
	}
}

// ValidateProvisioning returns what is wrong with a Provisioning's spec. The singleton name is
// checked on create only (ValidateProvisioningCreate): an object cannot be renamed.
func ValidateProvisioning(prov *metal3.Provisioning) field.ErrorList {
	path := field.NewPath("spec")
	spec := &prov.Spec
	if spec.ProvisioningNetwork != "" && !slices.Contains(provisioningNetworks, spec.ProvisioningNetwork) {
		// Everything else depends on the mode.
		return field.ErrorList{field.NotSupported(path.Child("provisioningNetwork"), spec.ProvisioningNetwork, provisioningNetworks)}
	}
	var errs field.ErrorList
	errs = append(errs, validateOSDownloadURL(spec.ProvisioningOSDownloadURL, path.Child("provisioningOSDownloadURL"))...)
	errs = append(errs, validatePreprovisioningOSDownloadURLs(&spec.PreprovisioningOSDownloadURLs, path.Child("preProvisioningOSDownloadURLs"))...)
	errs = append(errs, validateProvisioningAddresses(spec, path)...)
	errs = append(errs, validateProvisioningSettings(spec, path)...)

	mode := ProvisioningNetworkMode(spec)
	if spec.ProvisioningNetworkGateway != "" && mode != metal3.ProvisioningNetworkManaged {
		errs = append(errs, field.Forbidden(path.Child("provisioningNetworkGateway"), fmt.Sprintf(
			"only used when provisioningNetwork is %q (it is handed out by the operator's DHCP server); the mode is %q", metal3.ProvisioningNetworkManaged, mode)))
	}
	switch mode {
	case metal3.ProvisioningNetworkDisabled:
		// Without a provisioning network the IP is optional (the host IP is used) and the CIDR
		// unused; a given IP must still be an IP.
		if spec.ProvisioningIP == "" && spec.ProvisioningNetworkCIDR == "" {
			return errs
		}
		if _, err := parseIP(spec.ProvisioningIP, path.Child("provisioningIP")); err != nil {
			errs = append(errs, err)
		}
	default:
		errs = append(errs, validateProvisioningNetwork(spec, mode, path)...)
	}
	return errs
}

// ValidateProvisioningOn adds the platform's rule to ValidateProvisioning: the network mode must be
// one the platform supports (modes, as the cluster baremetal operator's EnabledFeatures give them;
// a platform with none gets no deployment at all and its objects are not checked against it).
func ValidateProvisioningOn(prov *metal3.Provisioning, platform string, modes []metal3.ProvisioningNetwork) field.ErrorList {
	errs := ValidateProvisioning(prov)
	mode := ProvisioningNetworkMode(&prov.Spec)
	if len(modes) > 0 && slices.Contains(provisioningNetworks, mode) && !slices.Contains(modes, mode) {
		msg := fmt.Sprintf("provisioningNetwork %q is not supported on platform %s: use %s", mode, platform, quoteAll(modes...))
		if prov.Spec.ProvisioningNetwork == "" {
			msg = fmt.Sprintf("provisioningNetwork is empty, which means %q, and that is not supported on platform %s: set it to %s", mode, platform, quoteAll(modes...))
		}
		errs = append(errs, field.Invalid(field.NewPath("spec", "provisioningNetwork"), prov.Spec.ProvisioningNetwork, msg))
	}
	return errs
}

// ValidateProvisioningCreate adds the create-only rule to ValidateProvisioning: the object is a
// singleton, and the operator ignores any other name.
func ValidateProvisioningCreate(prov *metal3.Provisioning) field.ErrorList {
	return append(validateProvisioningName(prov), ValidateProvisioning(prov)...)
}

func validateProvisioningName(prov *metal3.Provisioning) field.ErrorList {
	if prov.Name == metal3.ProvisioningSingletonName {
		return nil
	}
	return field.ErrorList{field.Invalid(field.NewPath("metadata", "name"), prov.Name, fmt.Sprintf(
		"Provisioning is a singleton and must be named %q", metal3.ProvisioningSingletonName))}
}

// validateProvisioningNetwork checks a Managed or Unmanaged network: the provisioning IP inside
// the CIDR, and for Managed the DHCP range and the gateway. Neither provisioningInterface nor
// provisioningMacAddresses is required: the Ironic runner then uses the interface that already
// holds the provisioning IP (ironicrunner.ProvisioningInterface).
func validateProvisioningNetwork(spec *metal3.ProvisioningSpec, mode metal3.ProvisioningNetwork, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	ipPath, cidrPath := path.Child("provisioningIP"), path.Child("provisioningNetworkCIDR")
	ip, ipErr := parseIP(spec.ProvisioningIP, ipPath)
	if ipErr != nil {
		errs = append(errs, ipErr)
	}
	var cidr netip.Prefix
	switch spec.ProvisioningNetworkCIDR {
	case "":
		errs = append(errs, field.Required(cidrPath, fmt.Sprintf("the provisioning subnet, e.g. 172.22.0.0/24, is required when provisioningNetwork is %q", mode)))
	default:
		p, err := netip.ParsePrefix(spec.ProvisioningNetworkCIDR)
		if err != nil {
			errs = append(errs, field.Invalid(cidrPath, spec.ProvisioningNetworkCIDR, "must be a CIDR, e.g. 172.22.0.0/24 or fd00:1101::/64"))
		} else {
			cidr = p.Masked()
		}
	}
	if mode == metal3.ProvisioningNetworkManaged && cidr.IsValid() && cidr.Addr().Is6() && cidr.Bits() < minManagedIPv6Prefix {
		errs = append(errs, field.Invalid(cidrPath, spec.ProvisioningNetworkCIDR, fmt.Sprintf(
			"must be a /%d or longer prefix for a Managed IPv6 network: the DHCP server (dnsmasq) cannot serve a larger one", minManagedIPv6Prefix)))
	}
	if ipErr != nil || !cidr.IsValid() {
		return errs // the remaining checks compare addresses
	}
	errs = append(errs, validateHostAddress(ip, cidr, ipPath, spec.ProvisioningIP, spec.ProvisioningNetworkCIDR)...)
	if mode != metal3.ProvisioningNetworkManaged {
		return errs // the DHCP range and gateway are only used by the operator's DHCP server
	}

	var gateway netip.Addr
	if spec.ProvisioningNetworkGateway != "" {
		gwPath := path.Child("provisioningNetworkGateway")
		gw, err := parseIP(spec.ProvisioningNetworkGateway, gwPath)
		if err != nil {
			errs = append(errs, err)
		} else {
			gateway = gw
			errs = append(errs, validateHostAddress(gw, cidr, gwPath, spec.ProvisioningNetworkGateway, spec.ProvisioningNetworkCIDR)...)
			if gw == ip {
				errs = append(errs, field.Invalid(gwPath, spec.ProvisioningNetworkGateway, "must differ from provisioningIP"))
			}
		}
	}
	return append(errs, validateDHCPRange(spec, ip, gateway, cidr, path)...)
}

// validateHostAddress: addr must be inside cidr and usable by a host: not the network address
// and, for IPv4 networks larger than a /31, not the broadcast address. (The cluster baremetal
// operator checks the latter for the gateway only; a provisioning IP there is just as unusable,
// so we check both.)
func validateHostAddress(addr netip.Addr, cidr netip.Prefix, path *field.Path, raw, rawCIDR string) field.ErrorList {
	if !cidr.Contains(addr) {
		return field.ErrorList{field.Invalid(path, raw, fmt.Sprintf("must be inside provisioningNetworkCIDR %q", rawCIDR))}
	}
	if isNetworkOrBroadcast(addr, cidr) {
		return field.ErrorList{field.Invalid(path, raw, fmt.Sprintf("must be a usable host address of %q, not its network or broadcast address", rawCIDR))}
	}
	return nil
}

func isNetworkOrBroadcast(addr netip.Addr, cidr netip.Prefix) bool {
	if addr.Is4() && cidr.Bits() >= 31 {
		return false // RFC 3021: every address of a /31 (and the one of a /32) is a host
	}
	if addr == cidr.Addr() {
		return true
	}
	if addr.Is6() {
		return false // IPv6 has no broadcast address
	}
	b := cidr.Addr().As4()
	mask := net.CIDRMask(cidr.Bits(), 32)
	for i := range b {
		b[i] |= ^mask[i]
	}
	return addr == netip.AddrFrom4(b)
}

// validateDHCPRange checks the Managed mode's "start,end" range: required, both ends inside the
// CIDR, and neither the provisioning IP nor the gateway inside it.
func validateDHCPRange(spec *metal3.ProvisioningSpec, ip, gateway netip.Addr, cidr netip.Prefix, path *field.Path) field.ErrorList {
	rangePath := path.Child("provisioningDHCPRange")
	raw := spec.ProvisioningDHCPRange
	if raw == "" {
		return field.ErrorList{field.Required(rangePath, fmt.Sprintf(
			"required when provisioningNetwork is %q: the \"start,end\" addresses the DHCP server hands out, inside provisioningNetworkCIDR", metal3.ProvisioningNetworkManaged))}
	}
	parts := strings.Split(strings.ReplaceAll(raw, ", ", ","), ",")
	if len(parts) != 2 {
		return field.ErrorList{field.Invalid(rangePath, raw, `must be "start,end", two IP addresses separated by a comma, e.g. "172.22.0.10,172.22.0.100"`)}
	}
	var ends [2]netip.Addr
	var errs field.ErrorList
	for i, part := range parts {
		a, err := netip.ParseAddr(part)
		if err != nil || a.Zone() != "" {
			return append(errs, field.Invalid(rangePath, raw, fmt.Sprintf(`%q is not an IP address; the range must be "start,end"`, part)))
		}
		if a.Is4In6() {
			return append(errs, field.Invalid(rangePath, raw, fmt.Sprintf("%q is an IPv4-mapped IPv6 address: write it as %s", part, a.Unmap())))
		}
		ends[i] = a
		if !cidr.Contains(ends[i]) {
			errs = append(errs, field.Invalid(rangePath, raw, fmt.Sprintf("%s is not inside provisioningNetworkCIDR %q", part, spec.ProvisioningNetworkCIDR)))
		}
	}
	if len(errs) > 0 {
		return errs
	}
	start, end := ends[0], ends[1]
	if start.Compare(end) > 0 { // ours: an inverted range hands out nothing
		errs = append(errs, field.Invalid(rangePath, raw, "the start address must not be after the end address"))
	}
	inRange := func(a netip.Addr) bool { return a.Compare(start) >= 0 && a.Compare(end) <= 0 }
	if inRange(ip) {
		errs = append(errs, field.Invalid(path.Child("provisioningIP"), spec.ProvisioningIP, fmt.Sprintf("must be outside provisioningDHCPRange %q", raw)))
	}
	if gateway.IsValid() && inRange(gateway) {
		errs = append(errs, field.Invalid(path.Child("provisioningNetworkGateway"), spec.ProvisioningNetworkGateway, fmt.Sprintf("must be outside provisioningDHCPRange %q", raw)))
	}
	return errs
}

// parseIP parses a plain IP address: no zone, and (ours) no IPv4-mapped IPv6 form. The stack
// uses the address as written (Ironic's URLs and certificate, the static IP with the CIDR's
// prefix, dnsmasq), where ::ffff:172.22.0.3 is an IPv6 address; validated as its IPv4 address,
// it would pass here and break there.
func parseIP(raw string, path *field.Path) (netip.Addr, *field.Error) {
	if raw == "" {
		return netip.Addr{}, field.Required(path, "an IP address is required here")
	}
	a, err := netip.ParseAddr(raw)
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, field.Invalid(path, raw, "must be an IPv4 or IPv6 address, e.g. 172.22.0.3")
	}
	if a.Is4In6() {
		return netip.Addr{}, field.Invalid(path, raw, fmt.Sprintf("is an IPv4-mapped IPv6 address: write it as %s", a.Unmap()))
	}
	return a, nil
}

// validateOSDownloadURL checks the legacy OS image URL: http(s), a qcow2.gz/xz path and a
// sha256 query parameter, which the image downloader requires.
func validateOSDownloadURL(raw string, path *field.Path) field.ErrorList {
	if raw == "" {
		return nil
	}
	shown := statustext.Redact(raw) // the ClusterOperator quotes these messages
	u, err := parseURL(raw, "http", "https")
	if err != nil {
		return field.ErrorList{field.Invalid(path, shown, statustext.Redact(fmt.Sprintf("must be %s: %v", osDownloadURLForm, err)))}
	}
	var errs field.ErrorList
	sum := u.Query().Get("sha256")
	switch {
	case sum == "":
		errs = append(errs, field.Invalid(path, shown, "the sha256 query parameter is missing: it must be "+osDownloadURLForm))
	case len(sum) != sha256HexLen || !isHex(sum): // hex: ours, the operator checks the length only
		errs = append(errs, field.Invalid(path, shown, fmt.Sprintf("the sha256 query parameter must be %d hexadecimal digits", sha256HexLen)))
	}
	if !strings.HasSuffix(u.Path, ".qcow2.gz") && !strings.HasSuffix(u.Path, ".qcow2.xz") {
		errs = append(errs, field.Invalid(path, shown, "is an OS image and its path must end in .qcow2.gz or .qcow2.xz"))
	}
	return errs
}

func isHex(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil
}

// validatePreprovisioningOSDownloadURLs (ours: the operator does not use them and checks
// nothing) requires each given URL to be a downloadable http(s) URL.
func validatePreprovisioningOSDownloadURLs(urls *metal3.PreProvisioningOSDownloadURLs, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, u := range []struct{ name, value string }{
		{"isoURL", urls.IsoURL}, {"kernelURL", urls.KernelURL}, {"initramfsURL", urls.InitramfsURL}, {"rootfsURL", urls.RootfsURL},
	} {
		if u.value == "" {
			continue
		}
		if _, err := parseURL(u.value, "http", "https"); err != nil {
			errs = append(errs, field.Invalid(path.Child(u.name), statustext.Redact(u.value), statustext.Redact(err.Error())))
		}
	}
	return errs
}

// validateProvisioningAddresses (ours) checks that the MAC and external IP lists hold what they
// say: both end up in environment variables of the provisioning stack, where a typo surfaces
// only as a pod that never gets an address.
func validateProvisioningAddresses(spec *metal3.ProvisioningSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, mac := range spec.ProvisioningMacAddresses {
		if !macAddress.MatchString(mac) {
			errs = append(errs, field.Invalid(path.Child("provisioningMacAddresses").Index(i), mac, "must be six colon-separated hexadecimal bytes, xx:xx:xx:xx:xx:xx"))
		}
	}
	for i, ip := range spec.ExternalIPs {
		if _, err := parseIP(ip, path.Child("externalIPs").Index(i)); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// maxInterfaceNameLen is Linux's IFNAMSIZ less the terminating NUL.
const maxInterfaceNameLen = 15

// minSensorCollectionInterval is the exporter's minimum, in seconds (also the schema's minimum).
const minSensorCollectionInterval = 60

// validateProvisioningSettings (ours: the operator checks none of these) covers the remaining
// fields that end up in the stack's configuration, where a bad value surfaces late and far away:
// the interface name in the DHCP server's and Ironic's configuration, the NTP servers in the agent
// ramdisk, the image reference in a pod spec, the enums of objects stored before the schema had
// them.
func validateProvisioningSettings(spec *metal3.ProvisioningSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if name := spec.ProvisioningInterface; name != "" {
		if why := interfaceNameProblem(name); why != "" {
			errs = append(errs, field.Invalid(path.Child("provisioningInterface"), name, why))
		}
	}
	for i, server := range spec.AdditionalNTPServers {
		if _, err := netip.ParseAddr(server); err == nil {
			continue
		}
		if msgs := validation.IsDNS1123Subdomain(strings.ToLower(server)); len(msgs) > 0 {
			errs = append(errs, field.Invalid(path.Child("additionalNTPServers").Index(i), server,
				"must be an IP address or a DNS name of an NTP server, e.g. 0.pool.ntp.org"))
		}
	}
	switch spec.BootIsoSource {
	case "", metal3.BootIsoSourceLocal, metal3.BootIsoSourceHTTP:
	default:
		errs = append(errs, field.NotSupported(path.Child("bootIsoSource"), spec.BootIsoSource,
			[]metal3.BootIsoSource{metal3.BootIsoSourceLocal, metal3.BootIsoSourceHTTP}))
	}
	if o := spec.UnsupportedConfigOverrides; o != nil && o.IronicAgentImage != "" {
		// Weak: a reference without a tag (":latest" implied) is one every container runtime
		// pulls, and OpenShift's operator accepted it; refused here, a Provisioning stored
		// before would stop the stack at the next reconcile.
		if _, err := name.ParseReference(o.IronicAgentImage, name.WeakValidation); err != nil {
			errs = append(errs, field.Invalid(path.Child("unsupportedConfigOverrides", "ironicAgentImage"), o.IronicAgentImage,
				"must be a container image reference, e.g. quay.io/metal3-io/ironic-agent:latest or an image@sha256:<digest>"))
		}
	}
	if p := spec.PrometheusExporter; p != nil && p.SensorCollectionInterval != 0 && p.SensorCollectionInterval < minSensorCollectionInterval {
		errs = append(errs, field.Invalid(path.Child("prometheusExporter", "sensorCollectionInterval"), p.SensorCollectionInterval,
			fmt.Sprintf("must be at least %d seconds", minSensorCollectionInterval)))
	}
	return errs
}

// interfaceNameProblem says why name cannot be a Linux network interface name ("" when it can).
func interfaceNameProblem(name string) string {
	switch {
	case len(name) > maxInterfaceNameLen:
		return fmt.Sprintf("must be a network interface name of at most %d characters, e.g. eth1", maxInterfaceNameLen)
	case name == "." || name == "..":
		return "must be a network interface name, e.g. eth1"
	case strings.ContainsAny(name, "/: \t\n\r\v\f"):
		return "must be a network interface name, e.g. eth1: no slash, colon or white space"
	}
	return ""
}
