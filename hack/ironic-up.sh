#!/usr/bin/env bash
# ironic-up.sh — prepare (once) and start a standalone Ironic from Debian sid on loopback.
#
# Prints only NAME=value lines on stdout, so that `export $(make -s ironic-up)` prepares a shell;
# progress goes to stderr. Idempotent: a second run while Ironic is up re-prints the values.
#
#   hack/ironic-up.sh [--wipe-db] [--prepare-only]
#
#   --wipe-db       stop Ironic if it runs, delete its database, start again on the same ports
#                   (for recovery tests; IRONIC_WIPE_DB=1 does the same)
#   --prepare-only  only build the root and the deploy images, start nothing
#
# Environment (all optional):
#   IRONIC_INSTANCE     name of an independent Ironic (own ports, database, logs); default "default"
#   IRONIC_PORT         API port; default 6385 for the default instance, a free port otherwise
#                       (once chosen, an instance keeps its ports across restarts)
#   IRONIC_HTTP_PORT    port of the image HTTP server ([deploy] http_url); default 6388 / free
#   IRONIC_DEBUG=1      debug logging in Ironic (also adds ipa-debug=1 to the agent's kernel params)
#   IRONIC_FAST_TRACK   [deploy] fast_track (default true, as metal3's ironic-image; see docs/ironic-notes.md)
#   IRONIC_PBKDF2_MEMO=1  memoize Ironic's per-call PBKDF2 key derivation (benchmarks and operator tests; see
#                       write_pbkdf2_memo in hack/ironic-common.sh)
#   IRONIC_USE_MARIADB=true  keep the database in a MariaDB server of the instance's own (installed
#                       into the root on first use) instead of sqlite, whose single writer lock fails
#                       inspections when hundreds of nodes work at once (metal3's ironic-image option)
#   IRONIC_EXTRA_CONF   a file appended to ironic.conf (later options win; e.g. short timeouts in tests)
#   IRONIC_CACHE_DIR    where the root and instances live; default <repo>/.cache/ironic
#   IRONIC_OWNER_PID    stop and delete the instance when this process exits (tests set it, so a
#                       killed test run leaves no Ironic behind)
#
# Layout: $IRONIC_CACHE_DIR/root is a debootstrapped sid with ironic-api + ironic-conductor; each
# instance keeps its state inside the root under /var/lib/ironic/<instance> (ironic.conf, sqlite,
# http_root, logs), so the chrooted Ironic sees it under that path and file:// URLs below
# /var/lib/ironic are allowed by Ironic's defaults.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=hack/ironic-common.sh
source "$REPO/hack/ironic-common.sh"

WIPE_DB=${IRONIC_WIPE_DB:-0}
PREPARE_ONLY=0
for arg in "$@"; do
	case "$arg" in
	--wipe-db) WIPE_DB=1 ;;
	--prepare-only) PREPARE_ONLY=1 ;;
	-h | --help)
		sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
		exit 0
		;;
	*) die "unknown argument $arg (try --help)" ;;
	esac
done

prepare_root
[[ $USE_MARIADB == true ]] && prepare_mariadb
build_helper

mkdir -p "$STATE"
exec 9>"$STATE/.lock"
flock 9

if [[ $PREPARE_ONLY == 1 ]]; then
	log "root ready at $ROOT ($(ironic_version))"
	exit 0
fi

if [[ $WIPE_DB == 0 ]] && instance_running && [[ -f $STATE/env ]]; then
	log "Ironic instance $INSTANCE already running (pid $(cat "$STATE/ironic.pid"))"
	cat "$STATE/env"
	exit 0
fi

# From here on (re)start the instance.
stop_instance
choose_ports
[[ $USE_MARIADB == true ]] && start_mariadb
if [[ $WIPE_DB == 1 ]]; then
	log "wiping the database of instance $INSTANCE"
	rm -f "$STATE/ironic.sqlite" "$STATE/ironic.sqlite-journal" "$STATE/ironic.sqlite-wal" "$STATE/ironic.sqlite-shm" "$STATE/schema-created"
	[[ $USE_MARIADB == true ]] && mariadb_wipe
fi
# httpboot/redfish exists before Ironic starts: Ironic 39 creates it on first use with a check then
# a mkdir (common/image_publisher.py), and when a rack starts inspecting at once a node that loses
# that race fails with "[Errno 17] File exists" (one node, once, at 500 hosts).
mkdir -p "$STATE/httpboot/metalforge" "$STATE/httpboot/redfish" "$STATE/lock" "$STATE/images" "$STATE/master_images" "$STATE/master_iso_images" "$STATE/tftpboot" "$STATE/deploy-logs"

API_URL="http://127.0.0.1:$IRONIC_PORT"
HTTP_URL="http://127.0.0.1:$IRONIC_HTTP_PORT"
IMAGES_URL="$HTTP_URL/metalforge"

# The project's own small deploy images; the ISO carries ipa-api-url of this instance.
"$HELPER" build --out "$STATE/httpboot/metalforge" --api-url "$API_URL" >&2

write_config
# sqlite: no database file means no schema; MariaDB: the marker is removed with the database.
needs_schema=false
if [[ $USE_MARIADB == true ]]; then
	[[ -f $STATE/schema-created ]] || needs_schema=true
else
	[[ -f $STATE/ironic.sqlite ]] || needs_schema=true
fi
if [[ $needs_schema == true ]]; then
	log "creating the database schema"
	in_root ironic-dbsync --config-file "$STATE_IN_ROOT/ironic.conf" create_schema >>"$STATE/ironic-dbsync.log" 2>&1 ||
		die "ironic-dbsync create_schema failed, see $STATE/ironic-dbsync.log"
	if [[ $USE_MARIADB != true ]]; then
		# Write-ahead logging lets the API's readers run while the conductor writes; with the
		# default rollback journal every write waits for all readers, and a rack of nodes working
		# at once spends its time in "database is locked" retries. The mode is stored in the file.
		in_root python3 -c "import sqlite3; sqlite3.connect('$STATE_IN_ROOT/ironic.sqlite').execute('PRAGMA journal_mode=WAL')" ||
			die "could not switch the database to write-ahead logging"
	fi
	touch "$STATE/schema-created"
fi

start_http
start_ironic
wait_ironic

{
	echo "IRONIC_ENDPOINT=$API_URL/v1/"
	echo "IRONIC_URL=$API_URL"
	echo "IRONIC_HTTP_URL=$HTTP_URL"
	echo "DEPLOY_KERNEL_URL=$IMAGES_URL/agent.kernel"
	echo "DEPLOY_RAMDISK_URL=$IMAGES_URL/agent.initramfs"
	echo "DEPLOY_ISO_URL=$IMAGES_URL/agent.iso"
	echo "DEPLOY_BOOTLOADER_URL=$IMAGES_URL/esp.img"
	echo "IRONIC_VERSION=$(ironic_version)"
	echo "IRONIC_API_MAX_VERSION=$API_MAX"
	echo "IRONIC_INSTANCE=$INSTANCE"
	echo "IRONIC_ROOT=$ROOT"
	echo "IRONIC_STATE_DIR=$STATE"
	echo "IRONIC_LOG=$STATE/ironic.log"
} >"$STATE/env.tmp"
mv "$STATE/env.tmp" "$STATE/env"
if [[ -n ${IRONIC_OWNER_PID:-} ]]; then
	setsid bash -c 'while kill -0 "$1" 2>/dev/null; do sleep 2; done; IRONIC_INSTANCE=$2 "$3" --purge' _ \
		"$IRONIC_OWNER_PID" "$INSTANCE" "$REPO/hack/ironic-down.sh" </dev/null >/dev/null 2>&1 8>&- 9>&- &
fi
cat "$STATE/env"
