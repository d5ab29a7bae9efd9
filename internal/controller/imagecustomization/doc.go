// Package imagecustomization is the image-customization-controller's PreprovisioningImage
// controller: for each PreprovisioningImage it builds a per-host agent image (the CoreOS live ISO
// or initramfs with the host's Ignition config: agent settings and its network data as
// NetworkManager keyfiles) and publishes its URL in status, with metal3's Ready and Error
// conditions and reasons.
//
// What a reconcile does, in order (decide.go):
//
//  1. An architecture without a base image, or no accepted format that can be built, is a
//     ConfigurationError.
//  2. The image is not built before GracePeriod (60 s) has passed since the PreprovisioningImage
//     was created (seed 001: time for whoever creates it to finish its changes), nor, for a host
//     labelled with an InfraEnv, before the ignition-override-uri annotation is set. Both say so
//     in the Ready condition's message.
//  3. The network data Secret (spec.networkDataName) must exist: MissingNetworkData otherwise,
//     retried with a delay that grows with the time since the error, up to 10 minutes (metal3's).
//  4. The image is prepared (imagebuild): bad network data or override is ImageBuildInvalid with a
//     message naming the field; an override that cannot be fetched now is retried, with a delay
//     that grows from when the fetch began to fail. Any other error is the controller's own
//     (nmcli failing to run): retried with backoff, Error False, and an image that is not Ready
//     says in Ready's message that its build fails.
//  5. When the prepared image's URL differs from a Ready status's URL (new content, or the image
//     cache was lost), Ready is cleared first and the new image published on the next pass, as
//     metal3 does, so that nothing is told Ready for an image that is going away. An image whose
//     URL did not change (a Secret update that did not touch its data) only updates the status.
//
// Every error clears the status's URL and, once the status is written, stops serving the image
// it named (its configuration may be the one that is now missing or invalid).
//
// The image's sha256 goes into the preprovisioningimage.metalforge.io/sha256sum annotation (the
// API has no status field for it), at once for small images and when the background checksum is
// done for large ISOs. Deleting a PreprovisioningImage stops serving its image once every other
// finalizer (the host's, which keeps using the image while the host is deleted) is gone.
package imagecustomization
