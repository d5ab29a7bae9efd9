// Package nodekernel is the node kernel-label controller of the special-resource-operator: it
// labels every node with the kernel it runs (specialresource.openshift.io/kernel-version.full,
// from status.nodeInfo.kernelVersion, or node-feature-discovery's label when the kubelet reports
// none), so that each kernel's driver DaemonSet can select exactly that kernel's nodes. One
// label per node, shared by every SpecialResource, written only when it is wrong.
//
// When a node reboots into a new kernel the kubelet reports it, this controller relabels the
// node at once, the old kernel's DaemonSet stops matching it and the new one's starts: the
// seed's rolling-upgrade picture, without node-feature-discovery.
package nodekernel
