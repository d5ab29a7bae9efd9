// Package preprovisioningimage is the operator's built-in PreprovisioningImage controller (metal3's
// default image provider): it does not build anything, it hands out the fixed agent images the
// environment names (DEPLOY_ISO_URL, DEPLOY_RAMDISK_URL with DEPLOY_KERNEL_URL, and their
// per-architecture variants DEPLOY_ISO_URL_AARCH64 or DEPLOY_ISO_BY_ARCH=aarch64:http://…) and
// ignores the network data (it only records the version of its Secret, which the host controller
// checks). It runs with --build-preprov-image unless --external-preprov-image-builder says another
// controller (the image-customization-controller) serves the images, and only when an image is
// configured (as metal3 starts it).
//
// How a reconcile runs (preprovisioningimage_controller.go): fetch the image, read the network
// data Secret's version (networkData), decide the whole status in one pure function (decide.go:
// the first accepted format configured for the architecture; a ConfigurationError naming
// spec.architecture or spec.acceptFormats when there is none; MissingNetworkData, looked at again
// after a delay that grows with the time since the error, when the Secret is missing), then write
// the status in one merge patch, only when it changed, and emit a Warning Event when the image
// fails. Conditions Ready and Error carry metal3's reasons (ImageSuccess, ConfigurationError,
// MissingNetworkData) and the image's generation. Environment: images.go.
//
// Unlike metal3's generic controller it puts no finalizer on the images: it keeps nothing per
// image that would need discarding, so an image is deleted at once (one write fewer per host).
package preprovisioningimage
