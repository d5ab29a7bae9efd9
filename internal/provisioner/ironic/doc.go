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
// What the provisioner keeps in memory beyond Ironic: the newest read of each node and the node
// watcher (package nodewatch, behind the nodeWatch interface: reads only save requests), and a few
// facts per node that change decisions (nodeMemory: credentials written, power change asked,
// verification restarted, boot port found, operations that did not start, the last failed virtual
// media attach or detach), dropped as a whole when the node is deleted. Time comes from an
// injected clock (Provisioner.now). Log lines go to the logger in the call's context, which
// carries the host's keys.
//
// Files by concern:
//   - provisioner (New, requeue delays, logger), config (environment), client (HTTP, auth,
//     microversion), metrics (requests per operation), errors (classifying Ironic's answers),
//     sanitize (text safe for status);
//   - node (read, write, state changes, results), nodelist (the list of every node, Watch and
//     Changes, the nodeWatch interface), memory (nodeMemory), patch (JSON patches of what
//     differs), nodeconfig (agent image, boot mode, interfaces: what several operations set),
//     decide (the pure decisions), stall (nodes Ironic stopped working on), settle (the pause
//     after manual cleaning);
//   - the operations: register, inspect (+ hardware for inventory conversion), prepare (+ raid,
//     steps), provision (+ instanceinfo, configdrive), deprovision, adopt, power, service,
//     firmware, capacity, remove (detach and delete), dataimage (virtual media attach, detach and
//     read, with the failure Ironic leaves only in last_error), eventsubscription (Redfish event
//     subscriptions through the node's vendor passthru).
package ironic
