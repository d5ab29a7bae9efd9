// Package imagestore keeps the image-customization-controller's images: for each
// PreprovisioningImage, a small record saying which base file the image is made of and which
// bytes replace or follow part of it (the host's Ignition archive), persisted in the work
// directory so that a restart serves the same images at the same URLs at once.
//
// # Names
//
// An image's URL path is a name derived from the image's content and the PreprovisioningImage's
// UID with an HMAC keyed by a secret kept in the work directory (<work>/key, 32 random bytes,
// mode 0600). So a URL
//
//   - stays the same across restarts as long as the content does (the key and content are the
//     same), which matters because hosts are rebooted into a new image when its URL changes;
//   - changes when the content does (network data, Ignition override, base image), so no cache
//     between the controller and a BMC (Ironic's own image cache included) serves stale bytes;
//   - cannot be guessed from the host's name or content without the key: images embed the agent's
//     configuration, and the server has no listing.
//
// Losing the work directory loses the key: every URL changes, which is what the controller
// detects as cache loss (Fresh) and answers by clearing Ready on the images it built and
// building them again.
package imagestore
