#!/usr/bin/env bats
# sbx-pause on the local backend, where only its internals show it: the
# freezer's cgroup, the sandbox's init, its directory, its idle clock.
# What every backend does is in conformance/sbx-pause.bats.

load lib/helper

setup_file() { sbx_setup_file; }
teardown_file() { sbx_teardown_file; }
setup() {
	sbx_setup
	# upper() looks at the upper layer on the host's disk: no quota's image.
	export SBX_LIMITS_DISK=0
}
teardown() {
	if [ -n "${LOOP:-}" ]; then
		kill -KILL "$LOOP" 2>/dev/null || true
		wait "$LOOP" 2>/dev/null || true
	fi
	sbx-kill -q -s "$BATS_TEST_TMPDIR/s.json" >/dev/null 2>&1 || true
}

# The sandbox's /workspace seen from the host (its overlay's upper layer).
upper() { echo "$(jq -r .ref.dir "$BATS_TEST_TMPDIR/s.json")/upper/workspace"; }

# A counter loop in the sandbox, writing to /workspace/c.
start_counter() {
	sx sh -c 'i=0; while :; do i=$((i+1)); echo $i >/workspace/c.tmp; mv /workspace/c.tmp /workspace/c; done' &
	LOOP=$!
	local k
	for ((k = 0; k < 200; k++)); do
		[ -s "$(upper)/c" ] && return 0
		sleep 0.05
	done
	return 1
}

# The sandbox's cgroup (cgroup v2, under the local backend's sbx/).
cg() { echo "/sys/fs/cgroup/unified/sbx/$(sid)"; }

@test "a paused sandbox uses no CPU: its cgroup is frozen" {
	new_sandbox
	start_counter
	sbx-pause -s "$BATS_TEST_TMPDIR/s.json" >/dev/null
	a=$(awk '/usage_usec/ {print $2}' "$(cg)/cpu.stat")
	sleep 1
	b=$(awk '/usage_usec/ {print $2}' "$(cg)/cpu.stat")
	assert_equal "$a" "$b"
	assert_equal "$(cat "$(cg)/cgroup.freeze")" 1
	sbx-pause -r -s "$BATS_TEST_TMPDIR/s.json" >/dev/null
	assert_equal "$(cat "$(cg)/cgroup.freeze")" 0
}

@test "--mode stop ends the sandbox's init and empties its cgroup; resume starts a new init" {
	new_sandbox
	start_counter
	pid=$(init_pid)
	sbx-pause --mode stop -s "$BATS_TEST_TMPDIR/s.json" >/dev/null
	dead "$pid"
	[ -z "$(cat "$(cg)/cgroup.procs" 2>/dev/null)" ]
	sbx-pause -r -s "$BATS_TEST_TMPDIR/s.json" >/dev/null
	new=$(init_pid)
	[ "$new" != "$pid" ]
	alive "$new"
}

@test "the idle timeout does not run while paused" {
	new_sandbox --timeout 2
	sbx-pause -s "$BATS_TEST_TMPDIR/s.json" >/dev/null
	sleep 3
	sbx-pause -r -s "$BATS_TEST_TMPDIR/s.json" >/dev/null
	run sx echo alive
	assert_success
	assert_output alive
	# It still ends when idle for its timeout after the resume.
	wait_status "$(sid)" expired
}

@test "sbx-kill of a paused sandbox ends its init and removes its directory" {
	new_sandbox
	start_counter
	pid=$(init_pid)
	sbx-pause -s "$BATS_TEST_TMPDIR/s.json" >/dev/null
	run sbx-kill -s "$BATS_TEST_TMPDIR/s.json"
	assert_success
	[ ! -e "$SBX_LOCAL_DIR/$(sid)" ]
	# Its end and its cgroups are the kill's remover's (cgroup.kill
	# reaches frozen processes too): done when the trash is empty.
	trash_emptied
	dead "$pid"
	[ ! -e "$(cg)" ]
}

@test "an empty state file (a crash's, unsynced) names no sandbox: sbx-exec says so (125), sbx-create --reuse makes one there" {
	S=$BATS_TEST_TMPDIR/s.json
	: >"$S"
	run --separate-stderr sbx-exec -s "$S" -- true
	assert_failure 125
	assert_equal "$stderr" "sbx-exec: '$S' is empty"
	run --separate-stderr sbx-create --reuse -s "$S"
	assert_success
	[ -z "$stderr" ]
	jq_true '.schema == 1 and .status == "running"' <"$S"
	run sx echo ok
	assert_output ok
}

@test "sbx-create --reuse replaces a sandbox whose init died, and removes its directory" {
	S=$BATS_TEST_TMPDIR/s.json
	sbx-create --reuse -s "$S" >/dev/null
	id=$(sid)
	# Gone as a reboot would leave it: its init killed.
	kill -9 "$(init_pid)"
	wait_status "$id" dead
	run sbx-create --reuse -s "$S"
	assert_success
	assert_equal "$(jq -r .replaced <<<"$output")" true
	jq_true --arg id "$id" '.replaced[0].ref.id == $id and .replaced[0].status == "lost"' <"$S"
	[ ! -e "$SBX_LOCAL_DIR/$id" ]
	run sx echo ok
	assert_output ok
}
