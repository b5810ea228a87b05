#!/usr/bin/env bats
# --disk and limits.disk: a quota on what a sandbox writes, enforced by the
# kernel (local: the sandbox's own ext4 image on a loop device), released by
# sbx-kill; bad sizes refused; rootless refused or not applied; sbxd's
# sandboxes get limits.disk as sbx-create's do.

load lib/helper
load lib/sbxd

setup_file() { sbx_setup_file; }
teardown_file() { sbx_teardown_file; }
setup() {
	sbx_setup
	unset SBX_LIMITS_DISK
	ROOTLESS_DIR=
	SMALL=
	CREATE_PID=
	SBXD_PID=
	SBXD_DIR=
}

teardown() {
	if [ -n "$SBXD_PID" ]; then
		sbxd_api GET /sandboxes 2>/dev/null | jq -r '.[].sandboxID' 2>/dev/null |
		    while read -r id; do sbxd_api DELETE "/sandboxes/$id"; done >/dev/null 2>&1 || true
		sbxd_stop
	fi
	[ -z "$SBXD_DIR" ] || rm -rf "$SBXD_DIR"
	if [ -n "$CREATE_PID" ]; then
		kill -KILL "$CREATE_PID" 2>/dev/null || true
		wait "$CREATE_PID" 2>/dev/null || true
	fi
	[ -f "$BATS_TEST_TMPDIR/s.json" ] &&
	    sbx-kill -q -s "$BATS_TEST_TMPDIR/s.json" >/dev/null 2>&1 || true
	if [ -n "$SMALL" ]; then
		umount "$SMALL"
		rmdir "$SMALL"
	fi
	[ -n "$ROOTLESS_DIR" ] || return 0
	as_nobody sh -c 'sbx-ls -j | sbx-kill -q' >/dev/null 2>&1 || true
	rm -rf "$ROOTLESS_DIR"
}

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

# KiB the store holds on the host's disk (what its files take, holes not).
store_kib() {
	du -sk "$SBX_LOCAL_DIR" | cut -f1
}

# The loop devices and mounts that name path $1.
loops_of() {
	losetup -a | grep -F "$1" || true
}
mounts_of() {
	grep -F "$1" /proc/self/mountinfo || true
}

# A store of its own, on a tmpfs of size $1 (not made yet: its parent's
# free space is the one that counts).
small_store() {
	SMALL=$(mktemp -d /tmp/sbx-small.XXXXXX)
	chmod 711 "$SMALL"
	mount -t tmpfs -o "size=$1,mode=0711" tmpfs "$SMALL"
	export SBX_LOCAL_DIR=$SMALL/local
}

sandbox_ids() {
	find "$SBX_LOCAL_DIR" -mindepth 1 -maxdepth 1 -regextype egrep \
	    -regex '.*/[0-9a-f]{12}' -printf '%f\n' | sort
}

@test "--disk 64M: writing 100 MiB stops with ENOSPC near 64 MiB, and the host holds at most 64 MiB of it" {
	new_sandbox --disk 64M
	local before after
	before=$(store_kib)
	run --separate-stderr sx sh -c \
	    'dd if=/dev/zero of=/workspace/big bs=1M count=100 2>&1; echo "rc=$?"; stat -c %s /workspace/big'
	assert_success
	assert_line --partial "No space left on device"
	assert_line rc=1
	local size=${lines[-1]}
	# About the quota: the filesystem's own metadata comes out of it.
	[ "$size" -ge $((56 << 20)) ] && [ "$size" -le $((64 << 20)) ] ||
	    fail "wrote $size bytes"
	after=$(store_kib)
	[ $((after - before)) -le $((64 * 1024)) ] ||
	    fail "the store grew by $((after - before)) KiB"
	# The sandbox still works, and what it deletes makes room again.
	run sx sh -c 'rm /workspace/big && echo ok >/workspace/f && cat /workspace/f'
	assert_success
	assert_output ok
}

@test "--disk 64M: 50,000 files stop at the inode limit (one per 16 KiB)" {
	new_sandbox --disk 64M
	run sx sh -c 'mkdir /workspace/many && cd /workspace/many &&
	    i=0; while [ $i -lt 50000 ]; do
		if ! (: >"$i") 2>/dev/null; then break; fi; i=$((i + 1)); done
	    echo "$i"; : >x'
	assert_failure
	assert_line --partial "No space left on device"
	local made=${lines[0]}
	[ "$made" -ge 3000 ] && [ "$made" -le 4096 ] || fail "made $made files"
}

@test "limits.disk applies without --disk, and its default is 10G" {
	export SBX_LIMITS_DISK=32M
	new_sandbox
	[ "$(jq -r .disk "$(jq -r .ref.dir s.json)/meta.json")" = $((32 << 20)) ]
	run sx sh -c 'dd if=/dev/zero of=/workspace/big bs=1M count=40 2>&1; echo "rc=$?"'
	assert_line --partial "No space left on device"
	assert_line rc=1
	sbx-kill -q -s s.json >/dev/null
	unset SBX_LIMITS_DISK
	new_sandbox
	run sx stat -f -c '%b %S %c' /workspace
	assert_success
	read -r blocks bsize inodes <<<"$output"
	local bytes=$((blocks * bsize))
	[ "$bytes" -gt $((95 * (10 << 30) / 100)) ] && [ "$bytes" -le $((10 << 30)) ] ||
	    fail "a disk of $bytes bytes"
	[ "$inodes" = $(((10 << 30) / 16384)) ]
}

@test "a new disk is the template's copy: upper/ and work/ already on it, no backup superblocks, small directories inline, its data at the start of the image" {
	new_sandbox --disk 1G
	local img
	img="$(jq -r .ref.dir s.json)/disk.img"
	run debugfs -R 'ls -p /' "$img"
	assert_success
	assert_output --partial '/upper/'
	assert_output --partial '/work/'
	run dumpe2fs -h "$img"
	assert_success
	assert_line --regexp '^Filesystem features:.* sparse_super2( |$)'
	# The overlay's work/work, made at each mount, takes no block.
	assert_line --regexp '^Filesystem features:.* inline_data( |$)'
	# What the image holds: the metadata packed at its start, so a copy
	# of the template is a few calls (one data extent per group of
	# blocks with backup superblocks: 17 for 10G without this).
	run python3 -c '
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY); d = n = 0
try:
    while True:
        d = os.lseek(fd, d, os.SEEK_DATA); d = os.lseek(fd, d, os.SEEK_HOLE); n += 1
except OSError:
    pass
print(n)' "$img"
	assert_success
	[ -n "$output" ] && [ "$output" -le 6 ] || fail "the image has $output data extents"
}

@test "the disk's ext4 is mounted with no cache of attribute blocks, no barriers, no inode table zeroing or bitmap prefetch" {
	new_sandbox --disk 1G
	local dev
	dev=$(loops_of "$(jq -r .ref.dir s.json)/disk.img" | cut -d: -f1)
	[ -n "$dev" ] || fail "no loop device for the disk"
	run cat "/proc/fs/ext4/${dev#/dev/}/options"
	assert_success
	# nombcache: 8 KiB of hash table and a shrinker less a sandbox.
	assert_line nombcache
	assert_line nobarrier
	assert_line noinit_itable
	assert_line no_prefetch_block_bitmaps
}

@test "--disk 0 and limits.disk 0: no quota, no image, no loop device" {
	new_sandbox --disk 0
	local dir
	dir=$(jq -r .ref.dir s.json)
	[ ! -e "$dir/disk.img" ]
	assert_equal "$(loops_of "$dir/")" ""
	sbx-kill -q -s s.json >/dev/null
	SBX_LIMITS_DISK=0 new_sandbox
	dir=$(jq -r .ref.dir s.json)
	[ ! -e "$dir/disk.img" ]
	assert_equal "$(loops_of "$dir/")" ""
	[ "$(jq -r .disk "$dir/meta.json")" = 0 ]
}

@test "sbx-kill leaves no loop device, mount or image of the sandbox" {
	new_sandbox --disk 64M
	local dir
	dir=$(jq -r .ref.dir s.json)
	sx sh -c 'echo x >/workspace/f'
	[ -f "$dir/disk.img" ]
	[ -n "$(loops_of "$dir/disk.img")" ]
	run sbx-kill -s s.json
	assert_success
	[ ! -e "$dir" ]
	# In the trash until its remover has waited for the loop device.
	trash_emptied
	assert_equal "$(loops_of "$dir/")" ""
	assert_equal "$(loops_of "$SBX_LOCAL_DIR/.trash/")" ""
	assert_equal "$(mounts_of "$dir/")" ""
	assert_equal "$(mounts_of "$SBX_LOCAL_DIR/.trash/")" ""
}

@test "sbx-gc leaves no loop device, mount or image of what it collects" {
	new_sandbox --disk 64M
	local dir
	dir=$(jq -r .ref.dir s.json)
	sx sh -c 'echo x >/workspace/f'
	[ -n "$(loops_of "$dir/disk.img")" ]
	run sbx-gc -g 0 -o 0
	assert_success
	[ ! -e "$dir" ]
	assert_equal "$(loops_of "$dir/")" ""
	assert_equal "$(mounts_of "$dir/")" ""
}

@test "stopped and resumed, a sandbox keeps its disk's files and quota; stopped, it holds no loop device" {
	new_sandbox --disk 64M
	local dir
	dir=$(jq -r .ref.dir s.json)
	sx sh -c 'echo kept >/workspace/f'
	sbx-pause -q -m stop -s s.json >/dev/null
	assert_equal "$(loops_of "$dir/")" ""
	sbx-pause -q --resume -s s.json >/dev/null
	run sx sh -c 'cat /workspace/f; dd if=/dev/zero of=/workspace/big bs=1M count=100 2>&1'
	assert_line --index 0 kept
	assert_line --partial "No space left on device"
}

@test "sbx-create killed -9 mid-create leaves no mount on the host; sbx-gc cleans the rest: no loop device, image or directory" {
	local delay id size=16
	for delay in 0.005 0.01 0.02 0.03 0.05 0.08 0.1; do
		# A size of its own: the template is made too (mkfs).
		size=$((size + 1))
		sbx-create -T 60 --disk "${size}M" -s k.json >/dev/null 2>&1 &
		CREATE_PID=$!
		sleep "$delay"
		kill -KILL "$CREATE_PID" 2>/dev/null || true
		wait "$CREATE_PID" 2>/dev/null || true
		CREATE_PID=
		rm -f k.json
	done
	# Nothing is mounted on the host. What is left, an hour later, is
	# sbx-gc's: the dead creations, and any sandbox that came up without
	# its meta.json (it holds its disk's loop device until it ends).
	assert_equal "$(mounts_of "$SBX_LOCAL_DIR/")" ""
	for id in $(sandbox_ids); do
		touch -d '1 hour ago' "$SBX_LOCAL_DIR/$id"
	done
	run sbx-gc -g 0 -o 0
	assert_success
	assert_equal "$(loops_of "$SBX_LOCAL_DIR/")" ""
	assert_equal "$(mounts_of "$SBX_LOCAL_DIR/")" ""
	assert_equal "$(sandbox_ids)" ""
	# no half-made template either
	run find "$SBX_LOCAL_DIR/.disk" -type f ! -name 'ext4-*.img'
	assert_output ""
}

@test "bad --disk and limits.disk values are exit 2 with one line, and create nothing" {
	local v before
	sbx-create --disk 0 -s warm.json >/dev/null
	sbx-kill -q -s warm.json >/dev/null
	before=$(store_paths)
	for v in 0x -1 -64M 1k 15M 9T 1P 64X ''; do
		run --separate-stderr sbx-create -s s.json --disk "$v"
		assert_failure 2
		assert_output ""
		assert_equal "$stderr" "sbx-create: invalid disk size '$v' (0, or 16M to 8T)"
		[ ! -e s.json ]
	done
	SBX_LIMITS_DISK=lots run --separate-stderr sbx-create -s s.json
	assert_failure 2
	assert_equal "$stderr" "sbx-create: invalid limits.disk 'lots' in the configuration (0, or 16M to 8T)"
	[ ! -e s.json ]
	assert_equal "$(store_paths)" "$before"
}

@test "--disk larger than the store's free space is exit 2 with one line naming both, and creates nothing" {
	small_store 64m
	run --separate-stderr sbx-create -s s.json --disk 100M
	assert_failure 2
	assert_output ""
	[[ $stderr =~ ^"sbx-create: --disk of 100 MiB is more than the "6[0-4]" MiB free on '$SMALL'"$ ]] ||
	    fail "stderr: $stderr"
	[ ! -e s.json ]
	assert_equal "$(find "$SMALL" -mindepth 1)" ""
}

@test "limits.disk larger than the store's free space is cut to what is free less a margin (-v says so): the sandbox's writes past it are ENOSPC" {
	small_store 96m
	run --separate-stderr sbx-create -v -s s.json
	assert_success
	[[ $stderr == *"sbx-create: limits.disk cut from 10240 MiB to "*" MiB: "*" MiB free on '$SMALL'"* ]] ||
	    fail "stderr: $stderr"
	local disk
	disk=$(jq -r .disk "$(jq -r .ref.dir s.json)/meta.json")
	[ "$disk" -ge $((16 << 20)) ] && [ "$disk" -le $((80 << 20)) ] ||
	    fail "a disk of $disk bytes"
	run sx sh -c 'dd if=/dev/zero of=/workspace/big bs=1M count=100 2>&1; echo "rc=$?"'
	assert_line --partial "No space left on device"
	assert_line rc=1
	run sx sh -c 'rm /workspace/big && echo ok >/workspace/f && cat /workspace/f'
	assert_output ok
}

@test "a store with no room for even a small disk: limits.disk is refused, exit 1 with one line; limits.disk 0 creates" {
	small_store 24m
	run --separate-stderr sbx-create -s s.json
	assert_failure 1
	assert_output ""
	[[ $stderr =~ ^"sbx-create: no room for a disk on '$SMALL' (limits.disk; 0 for none): "[0-9]+" MiB free: No space left on device"$ ]] ||
	    fail "stderr: $stderr"
	[ ! -e s.json ]
	assert_equal "$(find "$SMALL" -mindepth 1)" ""
	SBX_LIMITS_DISK=0 run --separate-stderr sbx-create -s s.json
	assert_success
	[ "$(jq -r .disk "$(jq -r .ref.dir s.json)/meta.json")" = 0 ]
}

@test "rootless: --disk is exit 2 and says why; limits.disk is not applied, and -v says so" {
	rootless_dir
	run --separate-stderr as_nobody sbx-create -s "$ROOTLESS_DIR/d.json" --disk 64M
	assert_failure 2
	assert_output ""
	assert_equal "$stderr" "sbx-create: --disk needs root: a rootless sandbox cannot have a disk quota"
	[ ! -e "$ROOTLESS_DIR/d.json" ]
	[ -z "$(find "$ROOTLESS_DIR/sb" -mindepth 1 -maxdepth 1 -regextype egrep \
	    -regex '.*/[0-9a-f]{12}' 2>/dev/null)" ]
	run --separate-stderr as_nobody sbx-create -v -s "$ROOTLESS_DIR/s.json"
	assert_success
	[[ "$stderr" == *"sbx-create: limits.disk not applied: a rootless sandbox cannot have a disk quota"* ]]
	local dir
	dir=$(jq -r .dir <<<"$output")
	[ ! -e "$dir/disk.img" ]
	run as_nobody sbx-exec -s "$ROOTLESS_DIR/s.json" -- sh -c 'echo hi >/workspace/f'
	assert_success
}

# stdout of a Start stream on stdin
stdout_of() {
	jq -r 'select(.event.data.stdout) | .event.data.stdout' | base64 -d
}

@test "sbxd's sandboxes get limits.disk: writing past it is ENOSPC inside, and diskSizeMB says its size" {
	SBX_LIMITS_DISK=32M sbxd_start
	local out id tok lid
	out=$(sbxd_create)
	id=$(jq -r .sandboxID <<<"$out")
	tok=$(jq -r '.envdAccessToken // empty' <<<"$out")
	[ ${#id} = 20 ] || fail "no sandbox: $out"
	run sbxd_api GET "/sandboxes/$id"
	assert_success
	assert_equal "$(jq -r .diskSizeMB <<<"$output")" 32
	run sbx-ls -j
	assert_success
	lid=$(jq -r --arg id "$id" 'select(.labels.sbxd == $id) | .id' <<<"$output")
	[ -n "$lid" ]
	[ "$(jq -r .disk "$SBX_LOCAL_DIR/$lid/meta.json")" = $((32 << 20)) ]
	[ -n "$(loops_of "$SBX_LOCAL_DIR/$lid/disk.img")" ]
	out=$(sbxd_run "$id" "$tok" '{"process":{"cmd":"sh","args":["-c","dd if=/dev/zero of=/home/user/big bs=1M count=40 2>&1; echo rc=$?"]}}' | stdout_of)
	[[ $out == *"No space left on device"* ]] || fail "dd said: $out"
	[[ $out == *rc=1* ]] || fail "dd said: $out"
}

@test "sbxd with a malformed limits.disk exits 2 at start, with one line naming it" {
	SBXD_DIR=$(mktemp -d /tmp/sbxd-test.XXXXXX)
	printf 'e2b_%s\n' 0123456789abcdef0123456789abcdef >"$SBXD_DIR/key"
	chmod 600 "$SBXD_DIR/key"
	run --separate-stderr env SBX_LIMITS_DISK=lots timeout 20 sbxd \
	    -l "127.0.0.1:$(sbxd_free_port)" -k "$SBXD_DIR/key" -S "$SBXD_DIR/store"
	assert_equal "$status" 2
	assert_equal "$stderr" "sbxd: invalid limits.disk 'lots' in the configuration (0, or 16M to 8T)"
}
