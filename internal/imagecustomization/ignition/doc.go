// Package ignition builds the Ignition config of a host's agent image: how a CoreOS live system
// becomes an ironic-python-agent host that finds Ironic and has the host's own network
// configuration, the way OpenShift's image-customization-controller writes it. It also merges an
// override config into it (the baremetal.openshift.io/ignition-override-uri annotation) and packs
// a config as the compressed cpio archive CoreOS reads from an ISO's Ignition embed area or from
// an initramfs appended to the live one.
//
// # Spec version
//
// Build emits Ignition spec 3.2.0, the version OpenShift's image-customization-controller emits.
// A live image reads its own spec version and every older 3.x one, so the oldest spec that has
// what the config needs boots on the most live images, and nothing here needs 3.3 or later. An
// override written for a newer 3.x spec is merged at that spec (our config is translated up to it
// with Ignition's own translations), since its author targets a live image that reads it; an
// override in spec 2.x or an experimental spec is refused.
//
// The types, parsing, validation, translation and merge semantics are Ignition's own
// (github.com/coreos/ignition/v2/config): the output is validated with the same code the live
// image runs. The cpio archive is written by github.com/cavaliergopher/cpio (newc format, the one
// the Linux initramfs unpacker reads) and compressed with gzip, as the assisted-image-service
// does; the live image's initramfs unpacker also reads xz, which coreos-installer uses.
package ignition
