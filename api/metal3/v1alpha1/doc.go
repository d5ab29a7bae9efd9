// Package v1alpha1 holds the metal3.io/v1alpha1 API types. They are written for Metalforge and kept
// wire-compatible with metal3's: same JSON keys, enums, defaults, short names, printer columns and
// condition types, so that manifests and clients written for metal3 work unchanged.
// +kubebuilder:object:generate=true
// +groupName=metal3.io
package v1alpha1
