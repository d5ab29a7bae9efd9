// Package nmstate turns a host's network data, nmstate YAML as OpenShift writes it into the
// `nmstate` key of a host's preprovisioning network data Secret, into NetworkManager keyfiles for
// the agent image (/etc/NetworkManager/system-connections/<name>.nmconnection).
//
// # Why NetworkManager writes the keyfiles
//
// OpenShift's image-customization-controller runs `nmstatectl gc`, which is not packaged in
// Debian. NetworkManager's own command line client has an offline mode (`nmcli --offline
// connection add …`, Debian package network-manager) that validates a profile and prints it as a
// keyfile without a running daemon, so the keyfiles come from NetworkManager itself and not from a
// hand-written writer. This package parses and checks the nmstate document (so that an error
// names the nmstate field, not an nmcli property), maps each interface to nmcli arguments and runs
// nmcli once per profile. Profile UUIDs are derived from the interface name, so the same network
// data always gives the same bytes (image URLs are derived from content).
//
// # Supported nmstate
//
// Top level: interfaces, routes, dns-resolver. Anything else is refused with its field name;
// nothing is silently dropped.
//
//   - interfaces[]: name (required, a Linux interface name), type (required: ethernet, bond or
//     vlan), state (up only), mac-address, identifier (name or mac-address; with mac-address the
//     ethernet profile matches the NIC by MAC instead of by name), mtu, ipv4, ipv6,
//     link-aggregation (bond), vlan (vlan).
//   - ipv4 / ipv6: enabled, dhcp, address[] {ip, prefix-length}, auto-dns, auto-gateway,
//     auto-routes; ipv6 also autoconf. Static addresses may be combined with DHCP.
//   - link-aggregation: mode (balance-rr, active-backup, balance-xor, broadcast, 802.3ad,
//     balance-tlb, balance-alb), options (a map of bonding options, passed to the kernel driver),
//     port[] (or slaves[], nmstate 1.x). A port may be listed as an ethernet interface of its own
//     (for its MAC or MTU) but must not have IP configuration.
//   - vlan: base-iface, id (0–4094).
//   - routes.config[]: destination, next-hop-address, next-hop-interface (required: the route is
//     put on that interface's profile), metric, table-id.
//   - dns-resolver.config: server[], search[]. Servers go on the first interface with a static
//     address of their family (else the first with that family enabled), search domains on the
//     first interface that got a server (else the first with IPv4 or IPv6 enabled).
//
// Not supported (refused by field name): other interface types (linux-bridge, ovs, bond options
// for ports, team, …), state down/absent, ethernet/ethtool/sriov settings, dhcp-client-id,
// route-rules, routes with state absent, hostname, ovs-db and every other key.
package nmstate
