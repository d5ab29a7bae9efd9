// Package v1beta1 holds the sro.openshift.io/v1beta1 API of the special-resource-operator:
// SpecialResource (a kernel driver delivered as a container, one DaemonSet per kernel version) and
// PreflightValidation (can every SpecialResource serve an upcoming kernel?).
//
// The shape follows the special-resource-operator's v1beta1 (seed 004): spec.namespace,
// nodeSelector, configuration, driverContainer{source, buildArgs, runArgs, artifacts}, dependsOn
// and status conditions Ready / Progressing / Errored. It adds what kernel-module-management
// learned: per-kernel image mappings (literal or regular expression), a typed module list instead
// of opaque values, a pull Secret, and a recipe reference. The package imports nothing of the
// project (depguard rule for api/).
// +kubebuilder:object:generate=true
// +groupName=sro.openshift.io
package v1beta1
