// Package provisioning is the cluster-baremetal-operator's controller: it reconciles the
// Provisioning singleton (provisioning-configuration) into the bare-metal provisioning stack of the
// cluster and reports on it through the `baremetal` ClusterOperator.
//
// How a reconcile runs (provisioning_controller.go): observe reads everything the decision needs
// (the platform from the Infrastructure object, the ClusterOperator, the Provisioning object, the
// images file, the proxy, what is deployed, which hosts are busy: observe.go); decide turns that
// into a plan without touching the API server (decide.go, objects.go, secrets.go, delete.go); write
// carries the plan out in a fixed order (write.go): the finalizer first, then Secrets, the stack's
// objects, deletions, the Provisioning status and the ClusterOperator status (each once, and only
// when changed), then the events. Every decision is level-based: the same cluster gives the same
// plan, so a restart of the operator at any point is safe.
//
// The stack itself is rendered by the render package, the ClusterOperator's conditions come from
// the clusteroperator package's table, the platform's rules from the platform package and the
// credentials and certificates from the secrets package.
//
// Taking over a running stack: a metal3 Deployment made by the machine-api-operator (annotated
// machine.openshift.io/owned) is claimed with baremetal.openshift.io/owned. When its pod template
// already is what this operator would render, only the claim (annotation, owner reference) is
// written and Ironic keeps running with its database; otherwise the template is replaced once.
// The ClusterOperator exists before any claim and is never deleted: the machine-api-operator's
// downgrade guard looks for it.
package provisioning
