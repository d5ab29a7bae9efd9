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
// Interfaces of type ethernet, bond and vlan with static IPv4/IPv6 addresses or DHCP, routes and
// DNS; docs/image-customization.md lists every supported field. Anything else is refused with its
// field name (a *FieldError), never silently dropped.
package nmstate
