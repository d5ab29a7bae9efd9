#!/usr/bin/env bash
# ironic-down.sh — stop the Ironic started by ironic-up.sh (and its image HTTP server).
#
#   hack/ironic-down.sh [--purge]
#
#   --purge  also delete the instance's state (database, http_root, logs); the root stays
#
# IRONIC_INSTANCE selects the instance (default "default"). Nothing stays mounted: ironic-up.sh runs
# Ironic in a private mount namespace, so its /proc etc. vanish with the process.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=hack/ironic-common.sh
source "$REPO/hack/ironic-common.sh"

PURGE=0
for arg in "$@"; do
	case "$arg" in
	--purge) PURGE=1 ;;
	*) die "unknown argument $arg" ;;
	esac
done

if [[ ! -d $STATE ]]; then
	log "instance $INSTANCE has no state; nothing to stop"
	exit 0
fi
exec 9>"$STATE/.lock"
flock 9
stop_instance
rm -f "$STATE/env"
log "stopped Ironic instance $INSTANCE"
if [[ $PURGE == 1 ]]; then
	rm -rf --one-file-system "$STATE"
	log "deleted $STATE"
fi
