package bmc

import "strings"

// BMC types: the scheme of a BMC address without any +http/+https suffix.
const (
	TypeIPMI                = "ipmi"
	TypeLibvirt             = "libvirt"
	TypeRedfish             = "redfish"
	TypeRedfishVirtualMedia = "redfish-virtualmedia"
	TypeRedfishUEFIHTTP     = "redfish-uefihttp"
	TypeIDRACRedfish        = "idrac-redfish"
	TypeIDRACVirtualMedia   = "idrac-virtualmedia"
	TypeILO5Redfish         = "ilo5-redfish"
	TypeILO5VirtualMedia    = "ilo5-virtualmedia"
)

// Ironic hardware types (node.driver).
const (
	DriverIPMI    = "ipmi"
	DriverRedfish = "redfish"
	DriverIDRAC   = "idrac"
)

// Ironic interface names used in the table below.
const (
	ifaceIPXE               = "ipxe"
	ifaceNoRAID             = "no-raid"
	ifaceRedfish            = "redfish"
	ifaceRedfishVMedia      = "redfish-virtual-media"
	ifaceRedfishHTTPS       = "redfish-https"
	ifaceIDRACRedfish       = "idrac-redfish"
	ifaceIDRACRedfishVMedia = "idrac-redfish-virtual-media"
)

// Transports that may follow a Redfish-family scheme name after "+". The transport only chooses the
// scheme of redfish_address; https is the default.
const (
	transportHTTP  = "http"
	transportHTTPS = "https"
)

// kind is one row of the scheme table: everything that follows from the scheme name alone.
type kind struct {
	driver     string
	interfaces Interfaces
	// transports: the scheme is also accepted as name+http and name+https (metal3 registers both
	// for every Redfish-family scheme and for no IPMI one).
	transports bool
	needsMAC   bool
	secureBoot bool
	isoPPI     bool
	provNet    bool
}

// redfishFamily reports whether driver_info for the kind uses the redfish_* keys.
func (k kind) redfishFamily() bool { return k.driver != DriverIPMI }

// kinds is the scheme table. It mirrors metal3's pkg/hardwareutils/bmc at HEAD so that a host moved
// between metal3 and Metalforge gets the same Ironic node. An empty interface name leaves the choice
// to Ironic (the hardware type's default).
var kinds = map[string]kind{
	// IPMI boots over the network with iPXE, so it always needs a provisioning network; it has no
	// BMC-side RAID, secure boot or virtual media.
	TypeIPMI: {
		driver:     DriverIPMI,
		interfaces: Interfaces{Boot: ifaceIPXE, RAID: ifaceNoRAID},
		provNet:    true,
	},
	// libvirt is a VirtualBMC: IPMI in front of a VM. Several VMs share one BMC IP and the NICs
	// cannot be read through it, so the boot MAC has to be given up front.
	TypeLibvirt: {
		driver:     DriverIPMI,
		interfaces: Interfaces{Boot: ifaceIPXE, RAID: ifaceNoRAID},
		needsMAC:   true,
		provNet:    true,
	},
	TypeRedfish: {
		driver:     DriverRedfish,
		interfaces: Interfaces{Boot: ifaceIPXE, RAID: ifaceRedfish, Firmware: ifaceRedfish, Inspect: ifaceRedfish},
		transports: true, secureBoot: true, provNet: true,
	},
	TypeILO5Redfish: {
		driver:     DriverRedfish,
		interfaces: Interfaces{Boot: ifaceIPXE, RAID: ifaceRedfish, Firmware: ifaceRedfish, Inspect: ifaceRedfish},
		transports: true, secureBoot: true, provNet: true,
	},
	TypeRedfishVirtualMedia: {
		driver:     DriverRedfish,
		interfaces: Interfaces{Boot: ifaceRedfishVMedia, RAID: ifaceRedfish, Firmware: ifaceRedfish, Inspect: ifaceRedfish},
		transports: true, secureBoot: true, isoPPI: true,
	},
	TypeILO5VirtualMedia: {
		driver:     DriverRedfish,
		interfaces: Interfaces{Boot: ifaceRedfishVMedia, RAID: ifaceRedfish, Firmware: ifaceRedfish, Inspect: ifaceRedfish},
		transports: true, secureBoot: true, isoPPI: true,
	},
	// UEFI HTTP boot hands the firmware an ISO URL, so like virtual media it needs no provisioning
	// network and can boot an ISO preprovisioning image.
	TypeRedfishUEFIHTTP: {
		driver:     DriverRedfish,
		interfaces: Interfaces{Boot: ifaceRedfishHTTPS, RAID: ifaceRedfish, Firmware: ifaceRedfish, Inspect: ifaceRedfish},
		transports: true, secureBoot: true, isoPPI: true,
	},
	// The idrac hardware type defaults to WS-Man for several interfaces; every one is pinned to its
	// Redfish implementation. Firmware uses the generic redfish interface, as metal3 does; out-of-band
	// inspection has to be idrac-redfish: the idrac type swaps the generic redfish one for it, and
	// Ironic refuses a node asking for an interface its type does not list (drivers/drac.py), so
	// inspectionMode fast never enrolled a Dell host.
	TypeIDRACRedfish: {
		driver: DriverIDRAC,
		interfaces: Interfaces{
			Boot: ifaceIPXE, BIOS: ifaceIDRACRedfish, Management: ifaceIDRACRedfish, Power: ifaceIDRACRedfish,
			RAID: ifaceIDRACRedfish, Vendor: ifaceIDRACRedfish, Firmware: ifaceRedfish, Inspect: ifaceIDRACRedfish,
		},
		transports: true, secureBoot: true, provNet: true,
	},
	TypeIDRACVirtualMedia: {
		driver: DriverIDRAC,
		interfaces: Interfaces{
			Boot: ifaceIDRACRedfishVMedia, BIOS: ifaceIDRACRedfish, Management: ifaceIDRACRedfish, Power: ifaceIDRACRedfish,
			RAID: ifaceIDRACRedfish, Vendor: ifaceIDRACRedfish, Firmware: ifaceRedfish, Inspect: ifaceIDRACRedfish,
		},
		transports: true, secureBoot: true, isoPPI: true,
	},
}

// typeOrder lists the types in the order error messages and docs name them.
var typeOrder = []string{
	TypeIPMI, TypeLibvirt, TypeRedfish, TypeRedfishVirtualMedia, TypeRedfishUEFIHTTP,
	TypeIDRACRedfish, TypeIDRACVirtualMedia, TypeILO5Redfish, TypeILO5VirtualMedia,
}

// supportedSchemes is the "what is allowed" part of an unknown-scheme error.
var supportedSchemes = strings.Join(typeOrder, ", ") +
	" (all but ipmi and libvirt also as <scheme>+http or <scheme>+https), or a bare host[:port] for IPMI"

// Types returns every BMC type Parse can produce, in a stable order.
func Types() []string { return append([]string(nil), typeOrder...) }

// lookupScheme splits a lower-case scheme into its type and transport and finds its table row.
func lookupScheme(scheme string) (typ, transport string, k kind, ok bool) {
	typ, transport, suffixed := strings.Cut(scheme, "+")
	k, ok = kinds[typ]
	if !ok {
		return "", "", kind{}, false
	}
	if suffixed && (!k.transports || (transport != transportHTTP && transport != transportHTTPS)) {
		return "", "", kind{}, false
	}
	return typ, transport, k, true
}
