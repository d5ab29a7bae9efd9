// Package ironicrunner is the entry point of the Ironic image the cluster-baremetal-operator
// deploys: each container of the metal3 pod runs cmd/ironic-runner with one mode, configured by
// the environment variables metal3's ironic-image reads (PROVISIONING_IP, HTTP_PORT,
// IRONIC_HTPASSWD, IRONIC_CERT_FILE, ...), so that the rendered Deployment stays familiar to anyone
// who has run metal3.
//
//   - ironic: writes ironic.conf (single process, sqlite, TLS and HTTP basic auth when given),
//     creates the database schema on first start, and execs Ironic;
//   - httpd: serves the shared html directory (agent images, the ISOs Ironic builds for virtual
//     media) over HTTP and, with VMEDIA_TLS_PORT, HTTPS; no directory listings;
//   - dnsmasq: writes the DHCP/TFTP configuration of a Managed provisioning network and execs
//     dnsmasq (which the image must contain);
//   - static-ip set|refresh: puts the provisioning IP on the provisioning interface once, or keeps
//     it there (with `ip`, which the image must contain).
//
// What each mode writes is built by pure functions (Config, IronicConf, DnsmasqConf,
// StaticIPArgs) with table tests; only Run touches the system.
package ironicrunner
