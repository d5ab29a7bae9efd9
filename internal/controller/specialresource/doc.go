// Package specialresource is the SpecialResource controller: it delivers a kernel driver, as a
// container, to the nodes a SpecialResource selects, with one DaemonSet per kernel version among
// them, and keeps doing so while those nodes' kernels change one node at a time.
//
// How a reconcile runs (specialresource_controller.go): fetch the SpecialResource, ensure its
// finalizer, then run the phases of phases.go in order until one has to stop:
//
//	validate      the spec (internal/sro/validation: the webhook's checks) and dependency cycles
//	recipe        the built-in recipe or the ConfigMap's (read from the API server; a change of
//	              the ConfigMap wakes the SpecialResources that use it: recipewatch.go)
//	namespace     spec.namespace, created (and then owned) when absent
//	nodes         the selected nodes, grouped by kernel (status.nodeInfo.kernelVersion)
//	dependencies  dependsOn SpecialResources: created when missing, Ready (with an image for
//	              each of our kernels, when we use theirs) before we go on
//	images        per kernel: the image in the registry, or a build of it
//	builds        builds no longer needed: succeeded with the image there, or superseded
//	render        the recipe, two-pass, kernel-affine manifests once per kernel
//	objects       what exists of the rendered objects (and wait-for-logs pod logs)
//	move          after a change of spec.namespace, the old namespace's driver stops first;
//	              write then removes what the operator created there as deletion does (move.go)
//	plan          (pure, plan.go) what to apply, state by state and kernel by kernel; what to
//	              prune; which nodes get which state labels (labels.go: node by node)
//
// Phases read (the cache, the registry, pod logs) and record what they decided in the scope;
// only the driver writes (write.go): namespace, dependencies, builds, objects in state order,
// prunes, node labels, then the status in ONE merge patch (skipped when nothing changed), then
// the events. Each reconcile goes as far as it can: states without a wait annotation do not
// stop it. Kernels progress independently: a new kernel waiting for its build does not hold
// back the others' drivers (only the later shared states, until its image exists or fails), a
// kernel whose image failed holds back nothing (unless every kernel failed, or its previous
// driver still serves), and a kernel's objects are removed only when no selected node runs it.
// A reconcile that cannot go through (it waits for a dependency, a phase stops or fails before
// the plan, the API server refuses an object) writes only what no longer holds (hold.go): nothing
// new, but nodes whose driver stopped lose their state labels, and the objects of kernels no
// selected node runs go.
package specialresource
