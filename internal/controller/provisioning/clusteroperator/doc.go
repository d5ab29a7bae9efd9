// Package clusteroperator is the `baremetal` ClusterOperator: what its conditions say in each
// situation the cluster-baremetal-operator can be in (one row per reason, the table of OpenShift's
// operator), its versions and its related objects. Everything here is pure; the controller reads
// the object, calls Apply and writes the status once when Apply reports a change.
//
// Conditions follow OpenShift's rules for ClusterOperators: Available and Degraded never flip
// during a normal upgrade or rollout (only a missing deployment or bad input makes them move),
// Progressing says when the operator is moving from one steady state to another, Disabled=True
// marks a platform where the operator has nothing to do, and Upgradeable=False holds a minor
// upgrade back while hosts are in the middle of an operation an Ironic restart would break.
// lastTransitionTime moves only when a condition's status changes (the ClusterOperator API's
// definition), so a changing message never looks like a flap.
package clusteroperator
