// Package host is the BareMetalHost controller: a state machine, written as a table, that takes a
// host from creation through registration, inspection, preparation and provisioning, keeps its
// power in line with spec.online, and takes it back and deletes it cleanly.
//
// How a reconcile runs (host_controller.go): fetch the host, ensure its finalizer, read its inputs
// (BMC credentials, user data: credentials.go), then run state handlers (handlers_*.go) in a loop
// until one has to wait; a handler only talks to the provisioner and edits the in-memory host. The
// driver then writes what the handlers decided (HardwareData, annotation removals, and the status
// in ONE merge patch, skipped when nothing changed) and emits the events. One reconcile can thus
// take a host through several states when the provisioner finishes each step at once, which keeps
// the API writes per host small. Safety comes from the provisioner being idempotent on its own
// state: a crash between two steps never repeats finished work.
//
// states.go declares the state machine: the transitions, and one row per state with everything
// the controller knows about it (handler, busy, registered, conditions, event reason, detach
// allowed, ...); a test fails when a row lacks a field. docs/host-state-machine.md is generated
// from it (make docs) and a test fails when it is stale. state_machine.go is the driver (run,
// moveTo, the typed outcomes).
//
// With --build-preprov-image (Config.PreprovisioningImages) each host has a PreprovisioningImage,
// its own agent image: agentimage.go decides (the image's spec, whether a built image is usable,
// what to write), agentimage_wait.go holds the handlers of a state that boots the agent until the
// image is ready (the row's agentImage fact) and hands it to the provisioner, agentimage_write.go
// reads the image before the handlers and writes it after them, like the other side objects.
package host
