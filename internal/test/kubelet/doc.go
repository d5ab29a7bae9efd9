// Package kubelet runs the Deployments of a namespace as processes, for end-to-end tests on a
// machine without a container runtime: a small stand-in for the kubelet, the deployment
// controller and the endpoints controller, so that what an operator renders is run as written.
//
// For each Deployment it starts one pod: the init containers in order, then the containers, each
// as a process in a mount namespace of its own whose root is an overlay of the image's layers
// (directories: an extracted OCI image, or a prepared root such as the Ironic one), with the pod's
// volumes mounted where the pod spec says (Secrets and ConfigMaps written as files, emptyDirs,
// hostPaths under the node's directory, the service account token), /etc/hosts naming the
// Services of the namespace, and the environment resolved as the kubelet resolves it (values,
// $(VAR) expansion, field references, Secret and ConfigMap keys). The process runs as the image's
// user unless the pod says otherwise. Readiness probes decide when the pod is ready; the
// Deployment's status and the EndpointSlices of the Services that select the pod follow. A
// Deployment scaled to zero has no pod. Where a Service's port differs from its target port, the
// pod's address answers on the Service's port too (the Service's name resolves to the pod).
//
// Containers need root (mount namespaces, overlayfs, chroot). The process that starts them is
// the test binary itself, re-executed: TestMain must call MaybeInit first.
//
// Not emulated: resource limits, network namespaces per pod (pods share the test's network
// namespace: pod IPs are extra loopback addresses), capabilities, image pulls, more than one
// replica, rolling updates (a changed pod template replaces the pod: Recreate).
package kubelet
