#!/usr/bin/env bash
# host-packages.sh — install the Debian packages whose programs the tests run, when one is missing:
# xorriso and genisoimage (genisoimage, isoinfo), the independent readers and writers that
# internal/iso's tests check our ISO images against; cpio, with which the image customization
# tests read the Ignition archives back; and network-manager, whose nmcli writes NetworkManager
# keyfiles offline for the image-customization-controller (it runs nmcli; so does its demo; `make
# images` copies it into the controller's image);
# skopeo, which inspects the images `make images` builds (internal/images); and iproute2, whose ip
# sets up the network namespace of the cluster-baremetal-operator's end-to-end test (test/cbo).
# `make test` runs it first.
#
# Does nothing when every program is on PATH; otherwise needs root for apt-get and fails with the
# list of packages, so that the tests never silently skip in CI.
set -euo pipefail

# program:package
NEEDED=(xorriso:xorriso genisoimage:genisoimage isoinfo:genisoimage cpio:cpio nmcli:network-manager skopeo:skopeo ip:iproute2)

missing=()
for pair in "${NEEDED[@]}"; do
	command -v "${pair%%:*}" >/dev/null || missing+=("${pair#*:}")
done
[[ ${#missing[@]} == 0 ]] && exit 0

mapfile -t packages < <(printf '%s\n' "${missing[@]}" | sort -u)
if [[ $(id -u) != 0 ]]; then
	echo "host-packages: the tests need the Debian packages ${packages[*]}: run as root or apt-get install them" >&2
	exit 1
fi
echo "host-packages: apt-get install ${packages[*]}" >&2
apt-get update -qq >&2
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${packages[@]}" >&2
