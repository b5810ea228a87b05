#!/usr/bin/env bats
# sbx-volume on the local backend, beyond what every backend does
# (tests/conformance/sbx-volume.bats): rm and a create --volume never
# cross (the volumes' lock).

load lib/helper

setup_file() { sbx_setup_file; }
teardown_file() { sbx_teardown_file; }
setup() { sbx_setup; }
teardown() {
	local f
	for f in "$BATS_TEST_TMPDIR"/*.json; do
		[ -e "$f" ] && sbx-kill -q -s "$f" >/dev/null 2>&1
	done
	true
}

@test "rm and --volume never cross: a create --volume waits for an rm, an rm for a create --volume" {
	local pid fd
	sbx-volume create cache >/dev/null
	# An rm at work (the lock exclusive): a create --volume waits.
	exec {fd}<>"$SBX_LOCAL_DIR/volumes/.lock"
	flock -x "$fd"
	sbx-create --volume cache:/cache -s t.json >t.out 2>t.err &
	pid=$!
	lock_waiter "$pid"
	[ ! -s t.out ]
	flock -u "$fd"
	wait "$pid"
	[ "$(jq_str .id <t.out)" = "$(sid t.json)" ]
	# A create --volume at work (shared): rm waits, then sees the new
	# sandbox and refuses.
	flock -s "$fd"
	sbx-volume rm cache >r.out 2>r.err &
	pid=$!
	lock_waiter "$pid"
	flock -u "$fd"
	exec {fd}>&-
	st=0
	wait "$pid" || st=$?
	[ "$st" = 1 ]
	[ "$(cat r.err)" = "sbx-volume: volume 'cache' is in use by $(sid t.json)" ]
	run sbx-volume ls -j
	assert_output --partial '"name":"cache"'
	# The lock's file is no volume.
	[ "$(sbx-volume ls -j | jq -r .name)" = cache ]
}
