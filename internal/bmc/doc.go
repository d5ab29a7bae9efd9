// Package bmc turns a BareMetalHost's BMC address into what Ironic needs: the hardware type
// (driver), the per-node interfaces, driver_info, and what the BMC can and cannot do. It is pure (no
// Kubernetes, no network) and wire-compatible with metal3's pkg/hardwareutils/bmc, so a host moved
// between metal3 and Metalforge gets the same Ironic node.
//
// # Address forms
//
//	host[:port]                      IPMI (the default when there is no scheme)
//	[fe80::1][:port]                 IPMI over IPv6
//	<scheme>://host[:port][/path]    any scheme below; IPv6 hosts in brackets
//	<scheme>:host[:port][/path]      also accepted, because metal3 accepts it
//
// Schemes are case-insensitive. Hosts are IPv4 addresses, bracketed IPv6 addresses or DNS names.
// Ports are 1-65535. The path is percent-decoded. IPMI addresses take ?privilegelevel=
// (ADMINISTRATOR by default; also OPERATOR, USER, CALLBACK). A fragment is ignored, and so is the
// query of a Redfish-family address.
//
// # Scheme table
//
// Each Redfish-family scheme is also accepted as <scheme>+http and <scheme>+https. The suffix only
// picks the scheme of redfish_address (https by default). "-" means Ironic's default for the driver.
//
//	scheme                driver   boot                         bios/mgmt/power/vendor  raid           firmware  inspect  ISO PPI  secure boot  prov. net  MAC
//	ipmi, host[:port]     ipmi     ipxe                         -                       no-raid        -         -        no       no           yes        no
//	libvirt               ipmi     ipxe                         -                       no-raid        -         -        no       no           yes        yes
//	redfish, ilo5-redfish redfish  ipxe                         -                       redfish        redfish   redfish  no       yes          yes        no
//	redfish-virtualmedia, redfish  redfish-virtual-media        -                       redfish        redfish   redfish  yes      yes          no         no
//	  ilo5-virtualmedia
//	redfish-uefihttp      redfish  redfish-https                -                       redfish        redfish   redfish  yes      yes          no         no
//	idrac-redfish         idrac    ipxe                         idrac-redfish           idrac-redfish  redfish   redfish  no       yes          yes        no
//	idrac-virtualmedia    idrac    idrac-redfish-virtual-media  idrac-redfish           idrac-redfish  redfish   redfish  yes      yes          no         no
//
// The deploy interface is never chosen here: it follows from the image, not the BMC.
//
// NeedsMAC is true only for libvirt, as in metal3 since it made the flag consistent (#3305,
// #3382): Ironic learns the MACs of every other type during inspection (Redfish even before it), but
// a VirtualBMC shares one IP between VMs and cannot see their NICs. A boot MAC is also needed
// whenever inspection is disabled; that rule belongs to the caller, which knows the inspection mode.
//
// # driver_info
//
// IPMI types: ipmi_address, ipmi_port (623 by default), ipmi_username, ipmi_password,
// ipmi_priv_level, and ipmi_verify_ca=false when certificate verification is disabled (metal3 sets
// it although ipmitool ignores it). Redfish family: redfish_address, redfish_system_id (the path,
// unless it is empty or /redfish/v1), redfish_username, redfish_password, and
// redfish_verify_ca=false when certificate verification is disabled. Use RedactDriverInfo before
// logging a driver_info.
//
// # System paths
//
// metal3 requires a system path for no scheme, and neither do we: with an empty path (or just the
// service root /redfish/v1) Ironic talks to the BMC's only system, which is what single-system BMCs
// (iDRAC, iLO, most others) need, virtual media and UEFI HTTP boot included. A multi-system BMC does
// need the path, but only the BMC can tell, so Ironic reports that at registration. The one path
// rejected here is one that can never work: the Systems collection with the ID left off
// (/redfish/v1/Systems, any case, with or without slashes), which would make Ironic read the
// collection as a system. That is ErrMissingSystemPath.
//
// # Where Parse is stricter than metal3
//
// Each of these addresses would have failed later, or would have done something other than intended:
//
//   - User information (user:password@host) is rejected, not silently dropped: credentials belong in
//     the Secret. Any "@" counts, because a password containing "/" moves the "@" out of the
//     authority. Error messages never repeat what precedes the last "@".
//   - Whitespace, control characters and invalid UTF-8 are rejected.
//   - An empty port ("host:") is rejected, and so are digits-and-dots hosts that are not IPv4
//     addresses ("10.0.0.256"), IPv4 addresses in brackets, and IPv6 zone IDs.
//   - ?privilegelevel= must be a level Ironic accepts (any case); an unparsable query is rejected.
//   - A Redfish path naming the Systems collection without an ID is rejected (above).
//
// One form is more lenient: "name:port" with a letter-first host name is IPMI host:port, where metal3
// reads "name" as an unknown scheme. ("name:text" with a non-digit after the colon is still an
// unknown scheme.)
//
// Every error from Parse is an *AddressError wrapping one of the Err* sentinels; its message names
// the problem and what is allowed, and never contains credentials.
package bmc
