// Package hostfirmwaresettings is the HostFirmwareSettings and FirmwareSchema controller.
//
// Once a host is registered with the provisioner, the controller creates its HostFirmwareSettings
// (same name and namespace, owned by the host, an empty spec) and keeps its status in line with
// what the provisioner reads from the host: status.settings (password settings left out),
// status.schema naming the FirmwareSchema that describes them, and the conditions metal3 defines:
// ChangeDetected (spec.settings differ from the host's) and Valid (every spec setting is known,
// settable and of the right type, in range or among the allowed values; the message names the
// setting and the rule it breaks, and a ValidationFailed Event says the same once). The host
// controller applies the changes that are both detected and valid for the current generation:
// while preparing, or on reboot of a provisioned host whose HostUpdatePolicy allows it.
//
// Settings are read again every five minutes, every minute while a change is pending (metal3's
// delays), when the spec changes, and when the host changes state or operational status (so the
// status follows preparing and servicing). The status is written only when something in it changed
// (status.lastUpdated moves with a change, not with each read): at a thousand hosts, a write per
// read would be three writes a second for nothing.
//
// FirmwareSchemas are content-addressed and shared (schema.go): one object per distinct schema in a
// namespace, written once and never updated, without owner references; the cleaner (cleanup.go)
// deletes a schema once no HostFirmwareSettings names it, found through a cache index of
// HostFirmwareSettings by schema name. docs/dev/firmware.md explains why (metal3's shared schema
// with one owner reference per host was rewritten for every host).
//
// Files: controller.go (driver, configuration), status.go (status and conditions from what was
// read), validate.go (the rules), schema.go (naming and creating schemas), cleanup.go (deleting
// unused ones), cacheview.go (schemas cached without their content).
package hostfirmwaresettings
