// Package render computes the objects of the provisioning stack from the Provisioning spec, the
// images file and the platform: the metal3 Deployment (Ironic, its HTTP server, and what the
// provisioning network mode needs), the baremetal-operator Deployment, the metal3-state Service,
// and the webhook Services and configurations. It is pure: no API server, no clock, the same input
// gives the same objects, so the controller can compare them with what runs and write only what
// differs.
//
// Each part of the stack is one component in its own file (metal3.go, bmo.go, service.go), run in
// order by Render on a shared Stack. A component may add objects and adjust the Deployments of the
// components before it. The image-customization-controller (cmd/image-customization-controller, not
// in the stack yet) is meant to be one more file: its Deployment and Service, and
// --build-preprov-image on the baremetal-operator.
//
// Every container's command, arguments and environment are what this project's binaries read:
// the baremetal-operator's flags and metal3 environment variables (internal/provisioner/ironic),
// and the Ironic runner's (cmd/ironic-runner: metal3 ironic-image style variables). The machine
// OS images init container keeps OpenShift's contract of that image (/bin/copy-metal).
package render
