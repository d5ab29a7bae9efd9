// Package sroclusteroperator reports the special-resource-operator on OpenShift's
// ClusterOperator "special-resource-operator" (config.openshift.io/v1): Available, Progressing
// (some SpecialResource is), Degraded, and Upgradeable, which is False while a
// PreflightValidation names a kernel that some SpecialResource has no driver image for — so the
// cluster-version operator holds the upgrade until it holds. (The special-resource-operator never
// shipped Upgradeable; kernel-module-management has no ClusterOperator.) The controller is set
// up only where the cluster serves ClusterOperators.
package sroclusteroperator
