// Package ironic implements the provisioner interface on a real OpenStack Ironic (API 1.89 or
// newer), the way metal3's baremetal-operator drives it, so a host moved between metal3 and
// Metalforge finds the same Ironic node.
//
// Every method reads the node once (GET /v1/nodes/{id}), decides from its provision state what to
// do, and does at most one or two writes: a JSON patch of what differs (driver_info, instance_info,
// properties, extra) and one state change. Nothing waits inside a call; a call that started or
// follows work returns provisioner.Working with a short (manage, provide, power, busy) or long
// (inspect, clean, deploy, service) delay plus jitter, and the next call looks again.
//
// Errors are split three ways: Ironic cannot be reached or answers 5xx → provisioner.ErrUnavailable
// (the host keeps its state and waits); the node is gone (404, e.g. Ironic lost its database) →
// provisioner.ErrNeedsRegistration (the controller registers again, then adopts); Ironic busy (409,
// "node locked") → Working, never an error. A failed Ironic operation becomes provisioner.Failed
// with Ironic's last_error made stable and safe for status by sanitize: request IDs, provider bodies
// and known secrets removed.
//
// Files by concern: config (environment), client (HTTP, auth, microversion), node (lookup, patch,
// state changes, results), register, inspect (+ hardware for inventory conversion), prepare (+ raid,
// steps), provision (+ instanceinfo, configdrive), deprovision, adopt, power, service, firmware,
// capacity, remove (detach and delete).
package ironic
