// Package render computes the objects of the provisioning stack from the Provisioning spec, the
// images file and the platform: the metal3 Deployment (Ironic, its HTTP server, and what the
// provisioning network mode needs), the baremetal-operator Deployment, the metal3-state Service,
// the webhook Services and configurations, and the image-customization-controller. It is pure:
// no API server, no clock, the same input gives the same objects, so the controller can compare
// them with what runs and write only what differs.
//
// Each part of the stack is one component in its own file (metal3.go, bmo.go, service.go, icc.go),
// run in order by Render on a shared Stack. A component may add objects and adjust the Deployments
// of the components before it: the image-customization-controller (icc.go, when the images file
// names its image) adds its Deployment, Service and config Secret and turns on
// --build-preprov-image in the baremetal-operator; without it, it lists its objects as absent so
// that they are removed.
//
// Every container's command, arguments and environment are what this project's binaries read:
// the baremetal-operator's flags and metal3 environment variables (internal/provisioner/ironic),
// the Ironic runner's (cmd/ironic-runner: metal3 ironic-image style variables) and the
// image-customization-controller's (cmd/image-customization-controller). The machine OS images
// init containers keep OpenShift's contract of that image (/bin/copy-metal).
package render
