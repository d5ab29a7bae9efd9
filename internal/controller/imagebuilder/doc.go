// Package imagebuilder is what every controller that builds PreprovisioningImages shares: the
// operator's built-in one (internal/controller/preprovisioningimage, fixed URLs) and the
// image-customization-controller (internal/controller/imagecustomization, per-host images).
// Both write metal3's Ready and Error conditions the same way (status.go; the host controller
// reads them: an image is usable when Ready is True for its generation), read the network data
// Secret the same way (networkdata.go) and release metal3's image finalizer the same way
// (finalizer.go).
package imagebuilder
