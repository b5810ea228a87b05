#!/usr/bin/env bats
# sbx-kill, what only the local backend does: the sandbox directory, its
# cgroups and its processes go (or, with --keep, the files stay). What every
# backend does is in conformance/sbx-kill.bats.

load lib/helper

setup_file() { sbx_setup_file; }
teardown_file() { sbx_teardown_file; }
setup() { sbx_setup; }
# Whatever a test left running; a second kill also removes --keep dirs.
teardown() {
	if [ -e "$BATS_TEST_TMPDIR/holder" ]; then
		kill "$(cat "$BATS_TEST_TMPDIR/holder")" 2>/dev/null || true
	fi
	sbx-ls -j 2>/dev/null | sbx-kill -q >/dev/null 2>&1 || true
	# A store of a test's own.
	if [ -e "$BATS_TEST_TMPDIR/other-store" ]; then
		local other
		other=$(cat "$BATS_TEST_TMPDIR/other-store")
		SBX_LOCAL_DIR=$other sbx-ls -j 2>/dev/null |
		    SBX_LOCAL_DIR=$other sbx-kill -q >/dev/null 2>&1 || true
		SBX_LOCAL_DIR=$other trash_emptied 2>/dev/null || true
		rm -rf "$other"
	fi
}

# The cgroup directories of sandbox $1 that exist, one per line.
cgroups_of() {
	local d
	for d in /sys/fs/cgroup/*/sbx/"$1"; do
		if [ -e "$d" ]; then echo "$d"; fi
	done
}

# Host pids of every process in sandbox $1's cgroup tree.
pids_of() {
	find "/sys/fs/cgroup/unified/sbx/$1" -name cgroup.procs \
	    -exec cat {} + 2>/dev/null
}

# The status sbx-ls gives sandbox $1 (empty when not listed).
ls_status() {
	sbx-ls -j | jq -r --arg id "$1" 'select(.id == $id) | .status'
}

# True when sandbox $1 has no directory and no cgroup left.
cleaned_up() {
	local dir=$SBX_LOCAL_DIR/$1
	if [ -e "$dir" ]; then
		echo "$dir still exists" >&2
		return 1
	fi
	if [ -n "$(cgroups_of "$1")" ]; then
		echo "cgroups left: $(cgroups_of "$1")" >&2
		return 1
	fi
}

@test "sbx-kill removes the sandbox directory, its cgroups and its processes" {
	new_sandbox
	local id dir pid
	id=$(jq -r .ref.id s.json)
	dir=$(jq -r .ref.dir s.json)
	pid=$(init_pid)
	[ -d "$dir" ]
	[ -n "$(cgroups_of "$id")" ]
	alive "$pid"
	run sbx-kill -s s.json
	assert_success
	[ ! -e "$dir" ]
	[ -z "$(ls_status "$id")" ]
	# Its files went to the store's trash, which a remover of the kill's
	# own empties after it, once its processes and cgroups are gone
	# (the kill signalled them all and did not wait).
	trash_emptied
	cleaned_up "$id"
	if alive "$pid"; then
		echo "init $pid still alive" >&2
		return 1
	fi
}

@test "sbx-kill leaves a sandbox's files to the remover at work, which looks again when done" {
	local id dir holder
	new_sandbox
	id=$(sid)
	dir=$(jq -r .ref.dir s.json)
	# A remover at work holds the trash's lock: the kill starts none.
	holder=$(hold_trash)
	run sbx-kill -s s.json
	assert_success
	[ ! -e "$dir" ]
	[ -z "$(ls_status "$id")" ]
	[ -n "$(ls -A "$SBX_LOCAL_DIR/.trash")" ]
	release_trash "$holder" TERM
	# The next kill's remover takes it too, its cgroups first.
	new_sandbox
	run sbx-kill -s s.json
	assert_success
	trash_emptied
	cleaned_up "$id"
	cleaned_up "$(sid)"
}

@test "sbx-kill --keep keeps the directory and its files but no live process" {
	# Its upper layer is on the host's disk only without a quota (tests/disk.bats
	# has the disk's).
	export SBX_LIMITS_DISK=0
	new_sandbox
	local id dir pids p
	id=$(jq -r .ref.id s.json)
	dir=$(jq -r .ref.dir s.json)
	sbx-exec -s s.json -- sh -c 'echo kept >/workspace/kept.txt; sleep 300 >/dev/null 2>&1 &'
	pids=$(pids_of "$id")
	[ "$(wc -w <<<"$pids")" -ge 2 ]
	run sbx-kill --keep -s s.json
	assert_success
	[ "$(jq -r .status <<<"$output")" = killed ]
	[ -d "$dir" ]
	[ "$(cat "$dir/upper/workspace/kept.txt")" = kept ]
	for p in $pids; do
		if alive "$p"; then
			echo "pid $p still alive" >&2
			return 1
		fi
	done
	[ -z "$(cgroups_of "$id")" ]
	[ "$(jq -r .status s.json)" = killed ]
	[ "$(ls_status "$id")" != running ]
}

@test "a state file of another store's sandbox: not killed, not gone, not replaced; exit 1 naming that store" {
	local other id
	other=$(mktemp -d /tmp/sbx-other.XXXXXX)
	chmod 711 "$other"
	echo "$other" >"$BATS_TEST_TMPDIR/other-store"
	SBX_LOCAL_DIR=$other sbx-create -s s.json >/dev/null
	id=$(sid)
	cp s.json before.json
	run --separate-stderr sbx-kill -s s.json
	assert_failure 1
	assert_output ""
	[ "$stderr" = "sbx-kill: cannot kill '$id': sandbox '$id' is in the store '$other', not this one ('$SBX_LOCAL_DIR'): kill it with SBX_LOCAL_DIR=$other" ]
	cmp s.json before.json
	run sbx-exec -s s.json -- echo alive
	assert_success
	assert_output alive
	# Nor is its state file free for a new sandbox of this store.
	run --separate-stderr sbx-create -s s.json
	assert_failure 1
	[ "$stderr" = "sbx-create: state file 's.json' tracks running sandbox '$id'; kill it first" ]
	cmp s.json before.json
	[ -z "$(sbx-ls -j)" ]
	SBX_LOCAL_DIR=$other run sbx-kill -s s.json
	assert_success
	jq_true '.status == "killed"' <<<"$output"
	[ ! -e "$other/$id" ]
}

