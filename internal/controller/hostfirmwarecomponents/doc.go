// Package hostfirmwarecomponents is the HostFirmwareComponents controller.
//
// Once a host is registered and the provisioner reports firmware components for it (Ironic's
// redfish firmware interface: the BIOS, the BMC, and NICs by id), the controller creates its
// HostFirmwareComponents (same name and namespace, owned by the host, no updates) and keeps
// status.components in line with the versions the provisioner reads. It checks spec.updates (a
// known component, bios, bmc or nic:<id>, each at most once, and an http or https URL) and sets the
// conditions metal3 defines: ChangeDetected (updates not applied yet) and Valid (reasons OK and
// InvalidComponent, the message naming the field and the rule, and a ValidationFailed Event once).
//
// status.updates is what was applied: the host controller writes it when preparing or servicing
// finished with those updates, and that write wakes this controller, which reads the new versions
// and clears ChangeDetected. Versions are read again every five minutes, every minute while
// updates wait (metal3's delays), and on the host's state and operational status changes; the
// status is written only when something in it changed.
package hostfirmwarecomponents
