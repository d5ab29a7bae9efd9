// Package webhooks holds the admission webhooks of the metal3.io API: validation of BareMetalHost,
// BMCEventSubscription, HostFirmwareComponents and DataImage, served by the baremetal-operator binary, and of
// the cluster-scoped Provisioning, which the cluster-baremetal-operator serves with its platform's
// rules (the baremetal-operator registers a Provisioning handler too, without those rules; the
// webhook configuration the cluster-baremetal-operator renders points at its own).
//
// Each kind has a pure validation function returning a field.ErrorList (ValidateBareMetalHost,
// ValidateProvisioning, ...) that table tests exercise directly and that controllers may call
// too (the cluster baremetal operator re-validates its Provisioning on every reconcile, because
// objects stored before a rule existed never passed it). The webhook
// types only decode, call those functions and turn the list into an Invalid (422) status, so
// every rejection names its field path and says what is allowed.
//
// # No defaulting webhook
//
// metal3 registers a Defaulter for BareMetalHost and HostFirmwareComponents, but it does nothing
// and metal3 generates no MutatingWebhookConfiguration for it. The only defaults metal3 has
// (spec.bootMode UEFI, spec.automatedCleaningMode metadata, status counters) are CRD schema
// defaults, which the API server applies itself. A mutating webhook would add a network hop
// and a failure point to every write without changing any object, so there is none.
//
// # Updates
//
// Updates are validated like creates plus the transition rules (immutable BMC address and boot
// MAC, externallyProvisioned only from available, immutable subscriptions). Two deliberate
// differences from metal3 keep objects stored before a rule existed manageable:
//
//   - an update is only rejected for errors it introduces: an error the old object already had,
//     identical in type, field, value and message, is not held against the update (so a
//     controller can still add a finalizer or remove an annotation);
//   - an update of an object that is being deleted is checked against the transition rules only
//     (its finalizers can always be removed, whatever its stored spec holds, but a BareMetalHost
//     being deprovisioned cannot be pointed at another BMC or NIC).
//
// # Annotations
//
// The reboot annotation's value is refused where metal3 refuses it (not JSON, an unknown mode);
// the detached annotation only for an unknown deleteAction in a JSON value (metal3 does not
// check it, and both controllers read any other value as the defaults). What metal3 accepts but
// the host controller ignores (an unknown field, a detached value that is not JSON) comes back
// as an admission warning when the update adds or changes it.
package webhooks
