# Shared by ironic-up.sh and ironic-down.sh (sourced, not run). See ironic-up.sh for the layout.

CACHE=${IRONIC_CACHE_DIR:-$REPO/.cache/ironic}
ROOT=$CACHE/root
# Bump when the root's content (packages, apt settings) changes: an older root is rebuilt.
ROOT_STAMP=.metalforge-root-v1
ROOT_PACKAGES="ironic-api ironic-conductor genisoimage"
MIRROR=${IRONIC_DEBIAN_MIRROR:-http://deb.debian.org/debian}
INSTANCE=${IRONIC_INSTANCE:-default}
# IRONIC_USE_MARIADB=true (metal3's ironic-image name): the instance keeps its database in its own
# MariaDB server (installed into the root on first use) instead of sqlite.
USE_MARIADB=false
case ${IRONIC_USE_MARIADB:-false} in true | 1 | yes) USE_MARIADB=true ;; esac
MARIADB_STAMP=.metalforge-mariadb-v1
[[ $INSTANCE =~ ^[A-Za-z0-9_.-]+$ ]] || { echo "ironic: bad IRONIC_INSTANCE '$INSTANCE'" >&2; exit 1; }
STATE_IN_ROOT=/var/lib/ironic/$INSTANCE
STATE=$ROOT$STATE_IN_ROOT
HELPER=$CACHE/bin/metalforge-deployimage
APT_OPTS=(-o Acquire::Check-Valid-Until=false -o Acquire::Retries=3 -o Dpkg::Use-Pty=0)

log() { echo "ironic: $*" >&2; }

# EXIT_MIRROR_UNREACHABLE: the Debian mirror could not be reached (tests skip on it).
EXIT_MIRROR_UNREACHABLE=3
NET_ERRORS='Failed getting release file|Could not resolve|Temporary failure resolving|Could not connect|Unable to connect|Connection refused|Network is unreachable|Connection timed out'

# die_download exits 3 when a log shows the mirror was unreachable, 1 otherwise.
die_download() {
	local logf=$1 msg=$2
	if grep -Eq "$NET_ERRORS" "$logf"; then
		log "ERROR: $msg: the Debian mirror ($MIRROR) is unreachable, see $logf"
		exit $EXIT_MIRROR_UNREACHABLE
	fi
	die "$msg, see $logf"
}
die() {
	log "ERROR: $*"
	exit 1
}

# in_root runs a command chrooted into the root, in a private mount namespace that carries /proc,
# /sys and /dev/shm: they vanish with the namespace, so nothing stays mounted under the work tree.
in_root() {
	local exec_=
	[[ ${IN_ROOT_EXEC:-0} == 1 ]] && exec_=exec
	$exec_ unshare --mount --propagation private -- bash -c '
		r=$1; shift
		mount -t proc proc "$r/proc"
		mount -t sysfs sysfs "$r/sys"
		mkdir -p "$r/dev/shm" && mount -t tmpfs -o mode=1777 shm "$r/dev/shm"
		exec chroot "$r" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
			DEBIAN_FRONTEND=noninteractive "$@"' _ "$ROOT" "$@"
}

# unmount_under lazily unmounts anything left mounted below a path (e.g. by an interrupted
# debootstrap in an older script version), so that removing the path cannot touch the host.
unmount_under() {
	local path=$1 m
	while read -r m; do
		umount -l "$m" 2>/dev/null || true
	done < <(awk -v p="$path" '$2 == p || index($2, p "/") == 1 { print $2 }' /proc/mounts | sort -r)
}

ironic_version() {
	cat "$ROOT/.ironic-version" 2>/dev/null || echo unknown
}

# prepare_root builds the sid root once. A root without the stamp is half-made (an interrupted
# run) and is rebuilt from scratch.
prepare_root() {
	[[ $(id -u) == 0 ]] || die "must run as root (debootstrap, chroot and mount namespaces)"
	mkdir -p "$CACHE"
	exec 8>"$CACHE/root.lock"
	flock 8
	if [[ -f $ROOT/$ROOT_STAMP ]]; then
		exec 8>&-
		return
	fi
	local start=$SECONDS partial=$CACHE/root.partial
	if [[ -e $ROOT ]]; then
		log "removing a half-made or outdated root at $ROOT"
		unmount_under "$ROOT"
		rm -rf --one-file-system "$ROOT"
	fi
	unmount_under "$partial"
	rm -rf --one-file-system "$partial"
	if ! command -v debootstrap >/dev/null; then
		log "installing debootstrap"
		apt-get update -qq >&2 || exit $EXIT_MIRROR_UNREACHABLE
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >&2
	fi
	log "debootstrap --variant=minbase sid into $partial"
	unshare --mount --propagation private -- \
		debootstrap --variant=minbase --components=main sid "$partial" "$MIRROR" \
		>"$CACHE/debootstrap.log" 2>&1 || {
		tail -n 20 "$CACHE/debootstrap.log" >&2
		die_download "$CACHE/debootstrap.log" "debootstrap failed"
	}
	log "debootstrap done in $((SECONDS - start)) s"
	# apt/dpkg settings: the sid Release file may be past Valid-Until; no docs, no recommends,
	# unsafe-io (a throwaway root), and never start services from maintainer scripts.
	cat >"$partial/etc/apt/apt.conf.d/99metalforge" <<-'EOF'
		Acquire::Check-Valid-Until "false";
		Acquire::Retries "3";
		APT::Install-Recommends "false";
		APT::Install-Suggests "false";
	EOF
	cat >"$partial/etc/dpkg/dpkg.cfg.d/99metalforge" <<-'EOF'
		force-unsafe-io
		path-exclude=/usr/share/doc/*
		path-exclude=/usr/share/man/*
		path-exclude=/usr/share/locale/*
		path-exclude=/usr/share/info/*
	EOF
	# Byte-compiling ~280 packages' Python modules is most of the install time on two cores: divert
	# py3compile to a no-op. Python compiles what Ironic imports on its first start instead.
	chroot "$partial" dpkg-divert --quiet --local --divert /usr/bin/py3compile.real --no-rename --add /usr/bin/py3compile
	printf '#!/bin/sh\nexit 0\n' >"$partial/usr/bin/py3compile"
	chmod +x "$partial/usr/bin/py3compile"
	printf '#!/bin/sh\nexit 101\n' >"$partial/usr/sbin/policy-rc.d"
	chmod +x "$partial/usr/sbin/policy-rc.d"
	cp /etc/resolv.conf "$partial/etc/resolv.conf" 2>/dev/null || true
	mv "$partial" "$ROOT"
	local t=$SECONDS
	log "apt-get install $ROOT_PACKAGES"
	if ! in_root apt-get "${APT_OPTS[@]}" update >"$CACHE/apt.log" 2>&1 ||
		! in_root apt-get "${APT_OPTS[@]}" install -y --no-install-recommends $ROOT_PACKAGES >>"$CACHE/apt.log" 2>&1; then
		tail -n 30 "$CACHE/apt.log" >&2
		die_download "$CACHE/apt.log" "apt-get install failed (the root stays half-made and is rebuilt next time)"
	fi
	in_root apt-get clean >/dev/null 2>&1 || true
	log "packages installed in $((SECONDS - t)) s"
	in_root dpkg-query -W -f '${Version}' ironic-common | sed 's/^[0-9]*://; s/-.*//' >"$ROOT/.ironic-version"
	for tool in ironic ironic-dbsync mkisofs; do
		in_root sh -c "command -v $tool" >/dev/null || die "$tool missing in the root after install"
	done
	check_sushy_registries
	date -u +%FT%TZ >"$ROOT/$ROOT_STAMP"
	log "root ready in $((SECONDS - start)) s: Ironic $(ironic_version)"
	exec 8>&-
}

# check_sushy_registries makes sure sushy finds its packaged standard registries directory. sushy
# lists it (importlib.resources ... iterdir) before it reads any registry the BMC serves, so without
# it every registry lookup fails, the BIOS attribute registry included: Ironic then logs "Cannot
# get BIOS Registry attributes ... sushy/standard_registries" and caches BIOS settings without their
# types, bounds and allowed values (FirmwareSchemas come out empty). Debian trixie's python3-sushy
# (5.5.0-2) does not ship the directory; sid's (5.13.0-3) does. With it missing, an empty directory
# is enough for the attribute registry (the standard message registries it should hold only
# translate BMC error messages). See docs/ironic-notes.md.
check_sushy_registries() {
	local dir
	dir=$(ls -d "$ROOT"/usr/lib/python3/dist-packages/sushy 2>/dev/null) || die "sushy missing in the root after install"
	if [ ! -d "$dir/standard_registries" ]; then
		log "WARNING: $dir/standard_registries is missing (a packaging gap): creating it empty so that BIOS attribute registries reach Ironic"
		mkdir -p "$dir/standard_registries"
	fi
}

# prepare_mariadb installs MariaDB's server into the root once (IRONIC_USE_MARIADB). Ironic's
# Python side needs nothing more: PyMySQL comes with oslo.db.
prepare_mariadb() {
	[[ -f $ROOT/$MARIADB_STAMP ]] && return
	exec 8>"$CACHE/root.lock"
	flock 8
	if [[ ! -f $ROOT/$MARIADB_STAMP ]]; then
		local t=$SECONDS
		log "apt-get install mariadb-server (IRONIC_USE_MARIADB)"
		if ! in_root apt-get "${APT_OPTS[@]}" update >>"$CACHE/apt.log" 2>&1 ||
			! in_root apt-get "${APT_OPTS[@]}" install -y --no-install-recommends mariadb-server >>"$CACHE/apt.log" 2>&1; then
			tail -n 30 "$CACHE/apt.log" >&2
			die_download "$CACHE/apt.log" "installing mariadb-server failed"
		fi
		in_root apt-get clean >/dev/null 2>&1 || true
		date -u +%FT%TZ >"$ROOT/$MARIADB_STAMP"
		log "mariadb-server installed in $((SECONDS - t)) s"
	fi
	exec 8>&-
}

# start_mariadb starts the instance's MariaDB on a unix socket in its state directory (no TCP),
# creating its data directory on first use, and makes sure the ironic database exists.
start_mariadb() {
	local s=$STATE_IN_ROOT i
	if [[ ! -d $STATE/mysql/mysql ]]; then
		mkdir -p "$STATE/mysql"
		in_root mariadb-install-db --user=root --datadir="$s/mysql" --auth-root-authentication-method=socket \
			--skip-test-db >>"$STATE/mariadb.log" 2>&1 || die "mariadb-install-db failed, see $STATE/mariadb.log"
	fi
	# A throwaway database for tests and benchmarks: flushing the log once a second instead of at
	# every commit is what a rack of nodes writing at once needs on a small disk.
	# innodb_snapshot_isolation=OFF: MariaDB 11.6.2 turned it on, and then a write to a node row that
	# another transaction changed since this one's snapshot fails with error 1020 "Record has changed
	# since last read". Ironic 39 does not retry that on node updates, and a deploy worker that gets
	# it dies quietly, leaving its node in `deploying` for good (about 1 in 100 deploys with 500 at
	# once; see docs/ironic-notes.md). OFF is the locking-read behaviour Ironic is written for.
	setsid bash -c "$(declare -f in_root); ROOT='$ROOT'; IN_ROOT_EXEC=1 in_root mariadbd --user=root \
		--datadir='$s/mysql' --socket='$s/mysql.sock' --pid-file='$s/mariadbd.pid' --skip-networking \
		--log-error='$s/mariadb.log' --innodb-flush-log-at-trx-commit=2 --max-connections=500 \
		--innodb-snapshot-isolation=OFF" \
		</dev/null >>"$STATE/mariadb.log" 2>&1 8>&- 9>&- &
	echo $! >"$STATE/mariadb.pid"
	for i in $(seq 1 150); do
		[[ -S $STATE/mysql.sock ]] && in_root mariadb --socket="$s/mysql.sock" -e 'SELECT 1' >/dev/null 2>&1 && break
		pid_alive "$STATE/mariadb.pid" || die "MariaDB did not start, see $STATE/mariadb.log"
		sleep 0.2
	done
	in_root mariadb --socket="$s/mysql.sock" -e 'CREATE DATABASE IF NOT EXISTS ironic CHARACTER SET utf8mb4' ||
		die "MariaDB did not start, see $STATE/mariadb.log"
}

# mariadb_wipe drops the ironic database (ironic-up.sh --wipe-db).
mariadb_wipe() {
	in_root mariadb --socket="$STATE_IN_ROOT/mysql.sock" -e 'DROP DATABASE IF EXISTS ironic; CREATE DATABASE ironic CHARACTER SET utf8mb4'
}

# build_helper builds the project's image builder / static HTTP server (hack/deployimage).
build_helper() {
	command -v go >/dev/null || die "go is needed to build hack/deployimage"
	mkdir -p "$CACHE/bin"
	# Test packages start Ironic instances concurrently: each builds to its own file and renames it
	# into place (atomic), so none sees another's half-written or already-moved binary.
	(cd "$REPO" && go build -trimpath -o "$HELPER.tmp.$$" ./hack/deployimage) || die "building hack/deployimage failed"
	mv "$HELPER.tmp.$$" "$HELPER"
}

pid_alive() {
	local f=$1
	[[ -f $f ]] && kill -0 "$(cat "$f")" 2>/dev/null
}

instance_running() {
	pid_alive "$STATE/ironic.pid" && pid_alive "$STATE/httpd.pid" &&
		"$HELPER" wait --timeout 2s "$(grep '^IRONIC_URL=' "$STATE/env" 2>/dev/null | cut -d= -f2-)/v1" >/dev/null 2>&1
}

# stop_group stops the process group recorded in a pid file (the processes were started with
# setsid, so the pid is also the group id), TERM first, KILL after a grace period.
stop_group() {
	local f=$1 pid i
	[[ -f $f ]] || return 0
	pid=$(cat "$f")
	if kill -0 "$pid" 2>/dev/null; then
		kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
		for i in $(seq 1 100); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.2
		done
	fi
	kill -KILL -- "-$pid" 2>/dev/null || true
	rm -f "$f"
}

stop_instance() {
	stop_group "$STATE/ironic.pid"
	stop_group "$STATE/httpd.pid"
	stop_group "$STATE/mariadb.pid"
}

# choose_ports: environment first, then the ports this instance used before, then defaults
# (6385/6388 for the default instance, free ports for the others).
choose_ports() {
	local saved_api="" saved_http=""
	if [[ -f $STATE/ports ]]; then
		read -r saved_api saved_http <"$STATE/ports" || true
	fi
	if [[ $INSTANCE == default ]]; then
		IRONIC_PORT=${IRONIC_PORT:-${saved_api:-6385}}
		IRONIC_HTTP_PORT=${IRONIC_HTTP_PORT:-${saved_http:-6388}}
	else
		local http_given=${IRONIC_HTTP_PORT:+yes}
		IRONIC_PORT=${IRONIC_PORT:-${saved_api:-$("$HELPER" freeport)}}
		IRONIC_HTTP_PORT=${IRONIC_HTTP_PORT:-${saved_http:-$("$HELPER" freeport)}}
		# Two free ports asked for one after the other can be the same port (the first is
		# closed before the second is chosen), and such a pair was saved before this check.
		while [[ -z $http_given && $IRONIC_HTTP_PORT == "$IRONIC_PORT" ]]; do
			IRONIC_HTTP_PORT=$("$HELPER" freeport)
		done
	fi
	[[ $IRONIC_PORT != "$IRONIC_HTTP_PORT" ]] || die "IRONIC_PORT and IRONIC_HTTP_PORT are both $IRONIC_PORT"
	for p in "$IRONIC_PORT" "$IRONIC_HTTP_PORT"; do
		"$HELPER" freeport --check "$p" || die "port $p is in use (set IRONIC_PORT / IRONIC_HTTP_PORT, or IRONIC_INSTANCE)"
	done
	echo "$IRONIC_PORT $IRONIC_HTTP_PORT" >"$STATE/ports"
}

write_config() {
	local s=$STATE_IN_ROOT debug=false connection pool=
	[[ ${IRONIC_DEBUG:-0} == 1 ]] && debug=true
	connection="sqlite:///$s/ironic.sqlite"
	if [[ $USE_MARIADB == true ]]; then
		connection="mysql+pymysql://root@localhost/ironic?unix_socket=$s/mysql.sock&charset=utf8mb4"
		# The conductor's ~300 worker threads share the pool; oslo.db's default (5 + 50 overflow)
		# makes them queue for a connection when hundreds of nodes work at once.
		pool=$'max_pool_size = 50\nmax_overflow = 100'
	fi
	cat >"$STATE/ironic.conf" <<-EOF
		# Written by hack/ironic-up.sh for instance $INSTANCE; rewritten on every start.
		[DEFAULT]
		auth_strategy = noauth
		debug = $debug
		log_file = $s/ironic.log
		use_stderr = false
		host = metalforge-$INSTANCE
		rpc_transport = none
		enabled_hardware_types = redfish
		enabled_boot_interfaces = redfish-virtual-media,redfish-https
		default_boot_interface = redfish-virtual-media
		enabled_power_interfaces = redfish
		enabled_management_interfaces = redfish
		enabled_inspect_interfaces = agent,redfish,no-inspect
		default_inspect_interface = agent
		enabled_deploy_interfaces = direct,ramdisk,custom-agent
		default_deploy_interface = direct
		enabled_bios_interfaces = redfish,no-bios
		enabled_firmware_interfaces = redfish,no-firmware
		enabled_raid_interfaces = redfish,agent,no-raid
		enabled_vendor_interfaces = redfish,no-vendor
		enabled_network_interfaces = noop
		default_network_interface = noop
		tempdir = $s/tmp

		[api]
		host_ip = 127.0.0.1
		port = $IRONIC_PORT

		[database]
		connection = $connection
		# A rack working at once on a small machine makes writers wait on sqlite's lock for longer
		# than Ironic's 10 s default, after which it fails the node's operation
		# ("TemporaryFailure ... OperationalError"). Waiting longer is slower but not an error.
		# (sqlite only; IRONIC_USE_MARIADB=true has no such lock.)
		sqlite_max_wait_for_retry = 60
		$pool

		[conductor]
		automated_clean = true
		# A restarted conductor fails the nodes a dead one left in a working state (cleaning,
		# deleting, deploying, ...), but at most periodic_max_workers (default 8) per state: the
		# rest stay there with no conductor, for good (the fault campaign's first N=100 run: 78 hosts
		# stuck deprovisioning after Ironic was killed mid-cleaning). 128 is the most that still
		# starts with the default worker pool (8 + 2 x 128 + 2 < 285). docs/ironic-notes.md.
		periodic_max_workers = 128
		deploy_kernel = http://127.0.0.1:$IRONIC_HTTP_PORT/metalforge/agent.kernel
		deploy_ramdisk = http://127.0.0.1:$IRONIC_HTTP_PORT/metalforge/agent.initramfs
		bootloader = http://127.0.0.1:$IRONIC_HTTP_PORT/metalforge/esp.img

		[deploy]
		# Fast track, metal3's ironic-image default: a host whose agent is still up goes on to
		# cleaning or deployment without another ramdisk boot (a quarter less Ironic CPU, see
		# docs/ironic-notes.md). IRONIC_FAST_TRACK=false turns it off.
		fast_track = ${IRONIC_FAST_TRACK:-true}
		# Automated cleaning wipes metadata only, as metal3's image and the Ironic runner configure it.
		erase_devices_metadata_priority = 10
		erase_devices_priority = 0
		http_url = http://127.0.0.1:$IRONIC_HTTP_PORT
		http_root = $s/httpboot
		iso_master_path = $s/master_iso_images
		default_boot_mode = uefi

		[pxe]
		images_path = $s/images
		instance_master_path = $s/master_images
		tftp_root = $s/tftpboot
		tftp_master_path = $s/tftpboot/master_images

		[agent]
		require_tls = false
		deploy_logs_local_path = $s/deploy-logs

		[service_catalog]
		endpoint_override = http://127.0.0.1:$IRONIC_PORT

		[dhcp]
		dhcp_provider = none

		[oslo_concurrency]
		lock_path = $s/lock

		# Polling intervals for the simulator's speed (Ironic's defaults are 30-300 s, made for
		# real BMCs): RAID and firmware task polling, firmware validation and post-update reboot.
		[redfish]
		raid_config_status_interval = 5
		raid_config_fail_interval = 5
		firmware_update_status_interval = 5
		firmware_update_fail_interval = 5
		firmware_update_validation_interval = 5
		firmware_update_bmc_version_check_interval = 5
		firmware_update_reboot_delay = 5
		firmware_update_nic_starting_wait = 5
		firmware_update_resource_validation_timeout = 120
	EOF
	mkdir -p "$STATE/tmp"
	if [[ -n ${IRONIC_EXTRA_CONF:-} ]]; then
		{
			echo
			echo "# from IRONIC_EXTRA_CONF=$IRONIC_EXTRA_CONF"
			cat "$IRONIC_EXTRA_CONF"
		} >>"$STATE/ironic.conf"
	fi
}

start_http() {
	setsid "$HELPER" serve --root "$STATE/httpboot" --listen "127.0.0.1:$IRONIC_HTTP_PORT" \
		</dev/null >>"$STATE/httpd.log" 2>&1 8>&- 9>&- &
	echo $! >"$STATE/httpd.pid"
	"$HELPER" wait --timeout 10s "http://127.0.0.1:$IRONIC_HTTP_PORT/metalforge/agent.iso" >/dev/null ||
		die "the image HTTP server did not start, see $STATE/httpd.log"
}

# write_pbkdf2_memo writes a sitecustomize.py that memoizes hashlib.pbkdf2_hmac, for
# IRONIC_PBKDF2_MEMO=1. Ironic 39's redfish driver derives a PBKDF2-SHA512 key with 600000 rounds
# from the BMC password on every Redfish session lookup (SessionCache.__init__, 0.5-0.7 CPU-s each,
# several per node per operation and per power sync): with many nodes on few cores that, not the
# work, bounds Ironic (docs/ironic-notes.md). The function is pure, so caching its result changes
# nothing but the CPU spent; the cache is keyed by a SHA-256 of the password, in memory only.
# Benchmarks, the fault campaign and the operator test suites (internal/provisioner/ironic, test/e2e,
# test/e2e/images) use it; a stock Ironic does not do this, and test/ironic and test/cbo run stock.
write_pbkdf2_memo() {
	mkdir -p "$STATE/pymemo"
	cat >"$STATE/pymemo/sitecustomize.py" <<-'EOF'
		# Written by hack/ironic-common.sh for IRONIC_PBKDF2_MEMO=1 (not stock Ironic).
		import hashlib
		import threading

		_derive = hashlib.pbkdf2_hmac
		_memo = {}
		_lock = threading.Lock()


		def pbkdf2_hmac(hash_name, password, salt, iterations, dklen=None):
		    key = (hash_name, hashlib.sha256(bytes(password)).digest(), bytes(salt), iterations, dklen)
		    with _lock:
		        value = _memo.get(key)
		    if value is None:
		        value = _derive(hash_name, password, salt, iterations, dklen)
		        with _lock:
		            _memo[key] = value
		    return value


		hashlib.pbkdf2_hmac = pbkdf2_hmac
	EOF
}

start_ironic() {
	log "starting Ironic instance $INSTANCE on 127.0.0.1:$IRONIC_PORT (log $STATE/ironic.log)"
	local cmd="ironic --config-file '$STATE_IN_ROOT/ironic.conf'"
	if [[ ${IRONIC_PBKDF2_MEMO:-0} == 1 ]]; then
		log "IRONIC_PBKDF2_MEMO=1: Ironic's PBKDF2 key derivations are memoized (not stock Ironic)"
		write_pbkdf2_memo
		cmd="env PYTHONPATH='$STATE_IN_ROOT/pymemo' $cmd"
	fi
	# Every step execs, so the recorded pid is Ironic's master process, which is also the leader of
	# the process group holding its workers and the commands it runs (mkisofs, qemu-img).
	setsid bash -c "$(declare -f in_root); ROOT='$ROOT'; IN_ROOT_EXEC=1 in_root $cmd" \
		</dev/null >>"$STATE/ironic.stderr" 2>&1 8>&- 9>&- &
	echo $! >"$STATE/ironic.pid"
}

# wait_ironic waits until the API answers and the conductor has registered the redfish driver
# (before that, creating a node fails with "no conductor"). Sets API_MAX.
wait_ironic() {
	local start=$SECONDS
	"$HELPER" wait --timeout 120s --pid "$(cat "$STATE/ironic.pid")" --want redfish \
		"http://127.0.0.1:$IRONIC_PORT/v1/drivers" >/dev/null || {
		tail -n 20 "$STATE/ironic.stderr" "$STATE/ironic.log" >&2 2>/dev/null || true
		die "Ironic did not come up, see $STATE/ironic.log"
	}
	API_MAX=$("$HELPER" apiversion "http://127.0.0.1:$IRONIC_PORT/")
	log "Ironic $(ironic_version) up in $((SECONDS - start)) s, API max $API_MAX"
}
