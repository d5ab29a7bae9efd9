// Package secrets makes the credentials and certificates the provisioning stack runs with: the
// Ironic API password with its htpasswd, a self-signed CA with Ironic's serving certificate, the
// webhook servers' certificates, and the copy of the cluster's pull secret the
// image-customization-controller reads. Everything here is pure (no API server): the controller
// decides from these functions whether a Secret must be created, kept or renewed, and writes it.
//
// Rules, from the cluster baremetal operator's experience:
//   - a password is generated once and never again (Ironic's clients hold it; a new one would
//     lock every running operator out until it restarts);
//   - a certificate is renewed before it expires (30 days before) or when the names it must carry
//     change (a new provisioning IP); the CA is kept as long as it is valid for another year, so
//     clients that trust it keep working across a renewal of the serving certificate.
//
// Keys are ECDSA P-256: generated in microseconds (the envtest suites make many), and accepted by
// every TLS stack the stack talks to (Go, Python's ssl, BMCs fetching virtual media).
package secrets
