// Package builder makes API objects for tests: a BareMetalHost with fluent options, and the
// Secrets a host references. Builders start from the smallest valid object, so a test states only
// what matters to it.
package builder
