// Package preflightvalidation is the PreflightValidation controller: before an upgrade, given
// the kernel the nodes will run (spec.kernelVersion), it checks every SpecialResource for a
// driver image for that kernel — rendering the SpecialResource's image for it, asking the
// registry, and building the image when it is missing and the SpecialResource has a source —
// and reports per SpecialResource in status.srStatuses. kernel-module-management's lesson:
// preflight renders for the target kernel and checks images, instead of parsing release images.
//
// Builds started here are the very builds the SpecialResource controller would start once a
// node runs the kernel (same name, same inputs), so the upgrade finds the image already in the
// registry: the rolling upgrade does not wait for builds.
//
// A SpecialResource is checked after the dependencies whose image it uses, with their images
// for the kernel as their own checks found them (the SpecialResource controller renders only
// once its dependencies are Ready, with the images their status records); while one is missing,
// or its image is used and not found yet, it waits (Unknown), naming them. A build the builder refuses for good (OpenShift builds cannot mount
// host paths or claims) is an Error, said once, and not asked for again until the
// SpecialResource or the PreflightValidation changes.
//
// The operator's ClusterOperator reports Upgradeable=False while a PreflightValidation is not
// Ready (package sroclusteroperator).
package preflightvalidation
