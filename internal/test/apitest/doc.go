// Package apitest checks the metal3.io API against a real API server: every CRD installs, every
// kind round-trips unchanged, the samples apply, manifests written for metal3 apply unchanged and
// print metal3's columns, and enums and defaults are enforced by the schema.
package apitest
