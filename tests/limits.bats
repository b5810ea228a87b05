#!/usr/bin/env bats
# Limits and refusals: memory, pids and cpu limits enforced through cgroups,
# the idle timeout, bad input refused with nothing created, rootfs images
# and rootless use.

load lib/helper

setup_file() { sbx_setup_file; }
teardown_file() { sbx_teardown_file; }
setup() {
	sbx_setup
	ROOTLESS_DIR=
}

teardown() {
	[ -n "$ROOTLESS_DIR" ] || return 0
	# Sandboxes of uid 65534 are in its own store: kill them as it.
	as_nobody sh -c 'sbx-ls -j | sbx-kill -q' >/dev/null 2>&1 || true
	rm -rf "$ROOTLESS_DIR"
}

# The host's python3 (not a slow shim).
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

# Every sandbox cgroup id on the host (other suites' included).
cg_ids() {
	find /sys/fs/cgroup/*/sbx -mindepth 1 -maxdepth 1 -type d -printf '%f\n' \
	    2>/dev/null | sort -u
}

# Remember what exists, to show later that a refused create made nothing.
snapshot() {
	store_paths >"$BATS_TEST_TMPDIR/store.before"
	cg_ids >"$BATS_TEST_TMPDIR/cg.before"
}

# True when a sandbox cgroup exists and holds no process.
empty_cgroup() {
	ls -d /sys/fs/cgroup/*/sbx/"$1" >/dev/null 2>&1 &&
	    [ -z "$(cat /sys/fs/cgroup/*/sbx/"$1"/cgroup.procs 2>/dev/null)" ]
}

# Cgroups that appeared since the snapshot and are a refused create's
# leftovers: still there, empty, and no sandbox directory anywhere (other
# suites create sandboxes meanwhile; theirs have processes or a directory).
leaked_cgroups() {
	local id
	comm -13 "$BATS_TEST_TMPDIR/cg.before" <(cg_ids) | while read -r id; do
		empty_cgroup "$id" || continue
		sleep 0.2
		empty_cgroup "$id" || continue
		[ -z "$(find /tmp /var/lib/sbx -maxdepth 6 -type d -name "$id" \
		    -print -quit 2>/dev/null)" ] || continue
		echo "$id"
	done
}

store_unchanged() {
	local now
	now=$(store_paths)
	if [ "$now" != "$(cat "$BATS_TEST_TMPDIR/store.before")" ]; then
		echo "the store changed:"
		diff "$BATS_TEST_TMPDIR/store.before" - <<<"$now"
		return 1
	fi
}

no_cgroup_leaked() {
	local ids
	ids=$(leaked_cgroups)
	if [ -n "$ids" ]; then
		echo "cgroups left behind: $ids"
		return 1
	fi
}

nothing_created() {
	store_unchanged && no_cgroup_leaked
}

# One diagnostic line "sbx-create: ..." naming $1 (then at most the usage).
one_message_naming() {
	local first=${stderr_lines[0]-}
	[[ "$first" == "sbx-create: "* ]] || {
		echo "stderr does not start with 'sbx-create: ': $stderr"
		return 1
	}
	[[ "$first" == *"$1"* ]] || {
		echo "message does not name '$1': $first"
		return 1
	}
	[ "$(grep -c '^sbx-create: ' <<<"$stderr")" -eq 1 ] || {
		echo "more than one message: $stderr"
		return 1
	}
}

# Run as uid 65534 in a directory it owns, with a store of its own.
as_nobody() {
	(cd "$ROOTLESS_DIR" && setpriv --reuid=65534 --regid=65534 \
	    --clear-groups env -i HOME="$ROOTLESS_DIR" \
	    SBX_LOCAL_DIR="$ROOTLESS_DIR/sb" PATH="$SBX_BIN:/usr/bin:/bin" "$@")
}

rootless_dir() {
	ROOTLESS_DIR=$(mktemp -d /tmp/sbx-rootless.XXXXXX)
	chown 65534:65534 "$ROOTLESS_DIR"
	chmod 755 "$ROOTLESS_DIR"
}

# A rootfs of busybox only, with one file of its own.
make_image() {
	local a
	mkdir -p "$1/bin" "$1/etc"
	cp /bin/busybox "$1/bin/"
	for a in sh ls cat echo id mkdir readlink stat touch rm ps; do
		ln -s busybox "$1/bin/$a"
	done
	echo original >"$1/etc/motd"
}

image_listing() {
	(cd "$1" && find . -printf '%p %y %m %U %G %s %T@ %C@ %l\n' | sort &&
	    find . -type f -exec sha256sum {} + | sort)
}

# --- memory -------------------------------------------------------------------

@test "--memory 64M sets the memory cgroup limit" {
	new_sandbox --memory 64M
	[ "$(cat /sys/fs/cgroup/memory/sbx/"$(sid)"/memory.limit_in_bytes)" = 67108864 ]
	[ "$(jq -r .memory "$(jq -r .ref.dir s.json)/meta.json")" = 67108864 ]
}

@test "--memory 64M: a memory hog is OOM-killed inside; the sandbox and the host are fine" {
	new_sandbox --memory 64M
	local init
	init=$(init_pid)
	run sx python3 -c 'b = bytearray(300 << 20); print("survived")'
	[ "$status" -eq 137 ]
	refute_output --partial survived
	run sx sh -c 'head -c 300M /dev/zero | tail > /dev/null'
	assert_failure
	assert_output --partial Killed
	grep -Eq '^oom_kill [1-9]' /sys/fs/cgroup/memory/sbx/"$(sid)"/memory.oom_control
	alive "$init"
	run sx echo still here
	assert_success
	assert_output "still here"
	# The host can still have what the sandbox could not.
	run "$PY" -c 'b = bytearray(300 << 20); print("ok")'
	assert_success
	assert_output ok
}

# --- pids ---------------------------------------------------------------------

@test "--pids 40: forks fail past 40 processes and the sandbox still answers" {
	new_sandbox --pids 40
	local cg
	cg=/sys/fs/cgroup/pids/sbx/$(sid)
	[ "$(cat "$cg/pids.max")" = 40 ]
	run sx python3 -c '
import os, time
kids, err = [], None
for i in range(200):
    try:
        p = os.fork()
    except OSError as e:
        err = e.strerror
        continue
    if p == 0:
        time.sleep(2)
        os._exit(0)
    kids.append(p)
print(len(kids), err)
for p in kids:
    os.waitpid(p, 0)'
	assert_success
	assert_output --partial "Resource temporarily unavailable"
	[ "$(cut -d' ' -f1 <<<"$output")" -lt 40 ]
	[ "$(cat "$cg/pids.peak")" -le 40 ]
	run sx echo alive
	assert_success
	assert_output alive
	sbx-kill -q -s s.json >/dev/null
}

@test "--pids 40: a fork bomb stops at the limit and --timeout ends it" {
	new_sandbox --pids 40
	local cg
	cg=/sys/fs/cgroup/pids/sbx/$(sid)
	# exec: the command itself stays until the timeout, which must end
	# the bomb with it.
	run sbx-exec -s s.json -T 4 -- sh -c \
	    'bomb() { bomb | bomb & }; bomb; exec sleep 60'
	[ "$status" -eq 124 ]
	[ "$(cat "$cg/pids.peak")" -le 40 ]
	grep -Eq '^max [1-9]' "$cg/pids.events"
	run sx echo alive
	assert_success
	assert_output alive
	sbx-kill -q -s s.json >/dev/null
}

@test "no --pids: a fork bomb stops at the default 1024 processes and still ends at -T" {
	# Half a CPU, so that the bomb leaves the machine alone.
	new_sandbox --cpus 0.5
	local cg
	cg=/sys/fs/cgroup/pids/sbx/$(sid)
	assert_equal "$(cat "$cg/pids.max")" 1024
	# 20 s for the bomb to reach the limit (8 s were too few once, on a
	# busy 2-core machine at half a CPU); the command would end by
	# itself at 60 s: -T must end it first.
	run sbx-exec -s s.json -T 20 -- sh -c \
	    'bomb() { bomb | bomb & }; bomb; exec sleep 60'
	[ "$status" -eq 124 ]
	grep -Eq '^max [1-9]' "$cg/pids.events" ||
	    fail "the bomb never reached the limit: $(cat "$cg/pids.events")"
	[ "$(cat "$cg/cgroup.procs")" = "$(init_pid)" ]
	run sx echo alive
	assert_success
	assert_output alive
	sbx-kill -q -s s.json >/dev/null
}

@test "--timeout leaves no descendant behind" {
	new_sandbox
	run sbx-exec -s s.json -T 1 -- sh -c \
	    'sleep 1003 & setsid sleep 1004 & (sleep 1005 &) ; wait'
	[ "$status" -eq 124 ]
	[ -z "$(ls /sys/fs/cgroup/unified/sbx/"$(sid)"/*/cgroup.procs 2>/dev/null)" ]
	[ "$(cat /sys/fs/cgroup/pids/sbx/"$(sid)"/cgroup.procs)" = "$(init_pid)" ]
	run sx ps -eo args=
	refute_output --partial "sleep 100"
}

@test "--timeout also ends what a command leaves running in the background" {
	new_sandbox
	local i p pid id
	id=$(sid)
	# sh returns at once; its sleep would go on.
	run sbx-exec -s s.json -T 2 -- sh -c 'sleep 1006 >/dev/null 2>&1 &'
	assert_success
	for i in $(seq 40); do
		pid=
		for p in $(cat /sys/fs/cgroup/pids/sbx/"$id"/cgroup.procs); do
			if [ "$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)" = \
			    "sleep 1006 " ]; then
				pid=$p
			fi
		done
		if [ -z "$pid" ]; then
			break
		fi
		sleep 0.25
	done
	if [ -n "$pid" ]; then
		echo "'sleep 1006' of a --timeout 2 command still runs after 10 s (host pid $pid)"
		return 1
	fi
}

# --- cpu ----------------------------------------------------------------------

@test "--cpus 0.5 sets a 50000/100000 CFS quota" {
	new_sandbox --cpus 0.5
	local cg
	cg=/sys/fs/cgroup/cpu/sbx/$(sid)
	[ "$(cat "$cg/cpu.cfs_quota_us")" = 50000 ]
	[ "$(cat "$cg/cpu.cfs_period_us")" = 100000 ]
	grep -qx "$(init_pid)" "$cg/cgroup.procs"
	sbx-kill -q -s s.json >/dev/null
	# Its cgroups go with the kill's remover, done when the trash is empty.
	trash_emptied
	[ ! -d "$cg" ]
}

# --- limits by default --------------------------------------------------------

# A limit of sandbox $1's cgroup, cgroup v1 or v2: memory (bytes or max),
# pids (n or max), cpu ("QUOTA PERIOD", or "max" for none).
cg_limit() {
	local id=$1 v1=/sys/fs/cgroup v2=/sys/fs/cgroup/unified/sbx/$1 q
	[ -d "$v2" ] || v2=/sys/fs/cgroup/sbx/$1
	case $2 in
	memory)
		if [ -e "$v1/memory/sbx/$id/memory.limit_in_bytes" ]; then
			q=$(cat "$v1/memory/sbx/$id/memory.limit_in_bytes")
			# v1 says "none" as the largest page-aligned value.
			[ "$q" -ge $((1 << 62)) ] && q=max
			echo "$q"
		else
			cat "$v2/memory.max"
		fi ;;
	pids)
		if [ -e "$v1/pids/sbx/$id/pids.max" ]; then
			cat "$v1/pids/sbx/$id/pids.max"
		else
			cat "$v2/pids.max"
		fi ;;
	cpu)
		if [ -e "$v1/cpu/sbx/$id/cpu.cfs_quota_us" ]; then
			q=$(cat "$v1/cpu/sbx/$id/cpu.cfs_quota_us")
			[ "$q" = -1 ] && q=max
			echo "$q $(cat "$v1/cpu/sbx/$id/cpu.cfs_period_us")"
		elif [ -e "$v2/cpu.max" ]; then
			cat "$v2/cpu.max"
		else
			echo max	# no cpu cgroup at all: no limit
		fi ;;
	esac
}

# /dev/shm's size inside sandbox s.json, in bytes.
shm_size() {
	sx df -B1 --output=size /dev/shm | tail -n 1 | tr -d ' '
}

@test "no flags: 512 MiB of memory, 1024 pids, 2 CPUs, a 256 MiB /dev/shm" {
	new_sandbox
	local id
	id=$(sid)
	assert_equal "$(cg_limit "$id" memory)" 536870912
	assert_equal "$(cg_limit "$id" pids)" 1024
	assert_equal "$(cg_limit "$id" cpu)" "200000 100000"
	run shm_size
	assert_success
	assert_output 268435456
}

@test "no flags: sbx-ls shows the limits the sandbox got" {
	new_sandbox
	run ls_line "$(sid)"
	assert_success
	assert_equal "$(jq -c .limits <<<"$output")" \
	    '{"memory":536870912,"cpus":2,"pids":1024,"shm":268435456}'
}

@test "limits.* in the configuration and SBX_LIMITS_* replace the defaults; a flag wins over both" {
	printf 'limits.memory = 256M\nlimits.pids = 300\nlimits.cpus = 1.5\n' >.sbxrc
	new_sandbox
	local id
	id=$(sid)
	assert_equal "$(cg_limit "$id" memory)" 268435456
	assert_equal "$(cg_limit "$id" pids)" 300
	assert_equal "$(cg_limit "$id" cpu)" "150000 100000"
	assert_equal "$(shm_size)" 134217728
	sbx-kill -q -s s.json >/dev/null
	SBX_LIMITS_MEMORY=128M SBX_LIMITS_PIDS=200 new_sandbox --cpus 0.5
	id=$(sid)
	assert_equal "$(cg_limit "$id" memory)" 134217728
	assert_equal "$(cg_limit "$id" pids)" 200
	assert_equal "$(cg_limit "$id" cpu)" "50000 100000"
	sbx-kill -q -s s.json >/dev/null
	SBX_LIMITS_MEMORY=128M new_sandbox --memory 64M --pids 50
	id=$(sid)
	assert_equal "$(cg_limit "$id" memory)" 67108864
	assert_equal "$(cg_limit "$id" pids)" 50
}

@test "0 is no limit: --memory 0 --cpus 0 --pids 0, and limits.* = 0; /dev/shm as without limits" {
	new_sandbox --memory 0 --cpus 0 --pids 0
	local id
	id=$(sid)
	assert_equal "$(cg_limit "$id" memory)" max
	assert_equal "$(cg_limit "$id" pids)" max
	assert_equal "$(cg_limit "$id" cpu)" max
	# tmpfs's own size, half the host's memory: more than any default.
	[ "$(shm_size)" -gt $((1 << 30)) ]
	assert_equal "$(ls_line "$id" | jq -c .limits)" \
	    '{"memory":null,"cpus":null,"pids":null,"shm":null}'
	sbx-kill -q -s s.json >/dev/null
	printf 'limits.memory = 0\nlimits.pids = 0\nlimits.cpus = 0\n' >.sbxrc
	new_sandbox
	id=$(sid)
	assert_equal "$(cg_limit "$id" memory)" max
	assert_equal "$(cg_limit "$id" pids)" max
	assert_equal "$(cg_limit "$id" cpu)" max
}

@test "bad limits.* or SBX_LIMITS_* are refused with exit 2, one message naming the key, and nothing created" {
	local kv key val
	snapshot
	for kv in memory=12Q memory=1M memory=-1 cpus=abc cpus=0.0001 cpus=5000 \
	    pids=1 pids=-5 pids=lots; do
		key=${kv%%=*} val=${kv#*=}
		printf 'limits.%s = %s\n' "$key" "$val" >.sbxrc
		refused_cleanly "limits.$key '$val'"
		rm .sbxrc
		export "SBX_LIMITS_${key^^}=$val"
		refused_cleanly "SBX_LIMITS_${key^^}"
		unset "SBX_LIMITS_${key^^}"
	done
	no_cgroup_leaked
}

@test "a full /dev/shm is ENOSPC within the default memory limit; the sandbox goes on" {
	new_sandbox
	run sx sh -c 'head -c 400M /dev/zero > /dev/shm/big; echo "rc=$?"; ls -l /dev/shm/big'
	assert_output --partial "No space left on device"
	assert_output --partial "rc=1"
	run sx sh -c 'rm /dev/shm/big && echo still here'
	assert_success
	assert_output "still here"
}

# --- refusals -----------------------------------------------------------------

# sbx-create with the arguments after $1 exits 2, prints one message
# naming $1, and creates nothing.
refused_cleanly() {
	local want=$1
	shift
	store_paths >"$BATS_TEST_TMPDIR/store.before"
	run --separate-stderr sbx-create -s "$BATS_TEST_TMPDIR/s.json" "$@"
	if [ "$status" -ne 2 ]; then
		echo "sbx-create $*: exit $status, not 2"
		return 1
	fi
	if [ -n "$output" ]; then
		echo "sbx-create $*: wrote to stdout: $output"
		return 1
	fi
	one_message_naming "$want" || {
		echo "(sbx-create $*)"
		return 1
	}
	store_unchanged
	if [ -e "$BATS_TEST_TMPDIR/s.json" ]; then
		echo "sbx-create $*: wrote the state file"
		return 1
	fi
}

@test "bad values are refused with exit 2, one message naming them, and nothing created" {
	snapshot
	refused_cleanly 12Q --memory 12Q
	refused_cleanly 1M --memory 1M
	refused_cleanly 0.0001 --cpus 0.0001
	refused_cleanly abc --cpus abc
	refused_cleanly 1 --pids 1
	refused_cleanly 0M --memory 0M
	refused_cleanly -1 --timeout -1
	refused_cleanly maybe --network maybe
	refused_cleanly noequals --label noequals
	refused_cleanly "bad key=1" --label "bad key=1"
	refused_cleanly a/b --name a/b
	refused_cleanly --bogus --bogus
	no_cgroup_leaked
}

@test "an image without /bin/sh is refused with exit 2 and nothing created" {
	mkdir -p img/etc img/usr/bin
	snapshot
	run --separate-stderr sbx-create -s s.json --image "$PWD/img"
	[ "$status" -eq 2 ]
	one_message_naming "$PWD/img"
	[[ "$stderr" == *"/bin/sh"* ]]
	nothing_created
	[ ! -e s.json ]
}

@test "a malformed state file: exit 6, the file unchanged, no sandbox" {
	printf '{"schema": 1, "ref": {"id": "x"' >s.json
	cp s.json s.json.orig
	snapshot
	run --separate-stderr sbx-create -s s.json
	[ "$status" -eq 6 ]
	[[ "${stderr_lines[0]}" == "sbx-create: "*s.json* ]]
	cmp s.json s.json.orig
	nothing_created
}

@test "a state file that tracks a running sandbox is not overwritten: exit 1" {
	new_sandbox
	cp s.json s.json.orig
	snapshot
	run --separate-stderr sbx-create -s s.json
	[ "$status" -eq 1 ]
	[[ "${stderr_lines[0]}" == "sbx-create: "*s.json* ]]
	[[ "$stderr" == *running* ]]
	cmp s.json s.json.orig
	nothing_created
	run sx true
	assert_success
}

# --- idle timeout -------------------------------------------------------------

@test "--timeout 2 with no exec: the sandbox expires, its init is gone, exec fails with 125" {
	new_sandbox --timeout 2
	local init id
	init=$(init_pid)
	id=$(sid)
	wait_status "$(sid)" expired
	dead "$init"
	[ -z "$(cat /sys/fs/cgroup/pids/sbx/"$id"/cgroup.procs 2>/dev/null)" ]
	run --separate-stderr sbx-exec -s s.json -- true
	[ "$status" -eq 125 ]
	[[ "$stderr" == *expired* ]]
}

@test "--timeout 2: a running exec keeps the sandbox from expiring" {
	new_sandbox --timeout 2
	local init
	init=$(init_pid)
	run sx sleep 5
	assert_success
	alive "$init"
	[ "$(sbx-ls -j | jq -r --arg id "$(sid)" 'select(.id == $id) | .status')" = running ]
	run sx echo again
	assert_success
	assert_output again
	sbx-kill -q -s s.json >/dev/null
}

# --- images -------------------------------------------------------------------

@test "--image DIR: busybox runs, writes land in upper/, the image is never modified" {
	# Its upper layer is on the host's disk only without a quota (tests/disk.bats
	# has the disk's).
	export SBX_LIMITS_DISK=0
	make_image "$PWD/img"
	local before
	before=$(image_listing img)
	new_sandbox --image "$PWD/img"
	run sbx-exec -s s.json -w / -- sh -c 'readlink /bin/sh; id -u; cat /etc/motd'
	assert_success
	assert_line --index 0 busybox
	assert_line --index 1 0
	assert_line --index 2 original
	# the image is idmapped: its files are sandbox root's
	run sbx-exec -s s.json -w / -- stat -c %u /bin/busybox
	assert_output 0
	run sbx-exec -s s.json -w / -- sh -c \
	    'echo new > /newfile && echo changed > /etc/motd && cat /etc/motd /newfile &&
	     rm /bin/ls && mkdir /opt'
	assert_success
	assert_output "changed
new"
	[ ! -e img/newfile ]
	[ ! -e img/opt ]
	[ "$(cat img/etc/motd)" = original ]
	assert_equal "$(image_listing img)" "$before"
	local up
	up=$(jq -r .ref.dir s.json)/upper
	[ "$(cat "$up/newfile")" = new ]
	[ "$(cat "$up/etc/motd")" = changed ]
	sbx-kill -q -s s.json >/dev/null
	assert_equal "$(image_listing img)" "$before"
}

@test "--image DIR: commands run in the default workdir /workspace, created writable" {
	make_image "$PWD/img"
	new_sandbox --image "$PWD/img"
	run sbx-exec -s s.json -- sh -c 'pwd; echo x > f && cat f'
	assert_success
	assert_output "/workspace
x"
	[ ! -e img/workspace ]
}

@test "--image DIR: /tmp is world-writable and sticky (1777)" {
	make_image "$PWD/img"
	new_sandbox --image "$PWD/img"
	run sbx-exec -s s.json -w / -- stat -c %a /tmp
	assert_success
	assert_output 1777
}

@test "--image DIR: /dev/shm is a directory of /dev's tmpfs, of /dev/shm's size, writable; /dev read-only" {
	make_image "$PWD/img"
	new_sandbox --image "$PWD/img" --memory 256M
	run sbx-exec -s s.json -w / -- sh -c 'grep " /dev/shm " /proc/self/mountinfo'
	assert_success
	# mountinfo's 4th field: the mount's root in its filesystem, /dev's
	# (one superblock less a sandbox than a tmpfs of its own).
	assert_equal "$(cut -d' ' -f4 <<<"$output")" /shm
	assert_equal "$(cut -d' ' -f6 <<<"$output")" rw,nosuid,nodev,relatime
	# Half the memory limit, as /dev/shm's own tmpfs had.
	assert_output --partial ' rw,size=131072k,'
	run sbx-exec -s s.json -w / -- sh -c 'echo x >/dev/shm/f && cat /dev/shm/f && touch /dev/x'
	assert_failure
	assert_line x
	assert_output --partial "Read-only file system"
}

# --- rootless -----------------------------------------------------------------

@test "rootless: uid 65534 can create, exec and kill; it is root inside, mapped to 65534" {
	rootless_dir
	run --separate-stderr as_nobody sbx-create -s "$ROOTLESS_DIR/s.json"
	assert_success
	local dir pid
	dir=$(jq -r .dir <<<"$output")
	[[ "$dir" == "$ROOTLESS_DIR/sb/"* ]]
	pid=$(jq -r .pid "$dir/meta.json")
	[ "$(stat -c %u "/proc/$pid")" = 65534 ]
	run as_nobody sbx-exec -s "$ROOTLESS_DIR/s.json" -- id -u
	assert_success
	assert_output 0
	run as_nobody sbx-exec -s "$ROOTLESS_DIR/s.json" -- cat /proc/self/uid_map
	assert_success
	[ "$(tr -s ' \t' ' ' <<<"$output" | sed 's/^ //')" = "0 65534 1" ]
	run as_nobody sbx-exec -s "$ROOTLESS_DIR/s.json" -- sh -c 'echo hi > /workspace/f'
	assert_success
	[ "$(stat -c %u "$dir/upper/workspace/f")" = 65534 ]
	run as_nobody sbx-kill -s "$ROOTLESS_DIR/s.json"
	assert_success
	[ ! -e "$dir" ]
	# Where the kill could use cgroup.kill, the end is its remover's.
	SBX_LOCAL_DIR=$ROOTLESS_DIR/sb trash_emptied
	dead "$pid"
}

@test "rootless: --memory fails with exit 2 (cgroups not delegated) and creates nothing" {
	rootless_dir
	run --separate-stderr as_nobody sbx-create -s "$ROOTLESS_DIR/m.json" --memory 64M
	[ "$status" -eq 2 ]
	[[ "${stderr_lines[0]}" == "sbx-create: "*memory* ]]
	[ -z "$output" ]
	[ ! -e "$ROOTLESS_DIR/m.json" ]
	[ -z "$(find "$ROOTLESS_DIR/sb" -mindepth 1 -maxdepth 1 -regextype egrep \
	    -regex '.*/[0-9a-f]{12}' 2>/dev/null)" ]
}

@test "rootless: no flags still creates (the defaults need cgroups it lacks); -v says so, one line each" {
	rootless_dir
	run --separate-stderr as_nobody sbx-create -v -s "$ROOTLESS_DIR/s.json"
	assert_success
	[ "$(grep -c 'default .* limit is not applied' <<<"$stderr")" -eq 3 ]
	[[ "$stderr" == *"sbx-create: no writable memory cgroup"*"default memory limit is not applied"* ]]
	run as_nobody sbx-ls -j
	assert_success
	assert_equal "$(jq -c .limits <<<"$output")" \
	    '{"memory":null,"cpus":null,"pids":null,"shm":null}'
	run --separate-stderr as_nobody sbx-create -s "$ROOTLESS_DIR/q.json"
	assert_success
	assert_equal "$stderr" ""
}
