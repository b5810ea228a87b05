#!/usr/bin/env bats
# sbx-pause: suspend and resume through the freezer, stop and restart over
# the same files, what exec does meanwhile, and the state's segments.

load helper

setup_file() { sbx_setup_file; }
teardown_file() { sbx_teardown_file; }
setup() { sbx_setup; }
teardown() {
	if [ -n "${LOOP:-}" ]; then kill "$LOOP" 2>/dev/null || true; fi
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
count() { cat "$(upper)/c"; }

@test "sbx-pause --semantics says what pause does on the backend" {
	run sbx-pause --semantics
	assert_success
	assert_output '{"backend":"local","pause":"suspend","modes":["suspend","stop"]}'
}

@test "a paused sandbox makes no progress and continues after resume" {
	new_sandbox
	start_counter
	run sbx-pause -s "$BATS_TEST_TMPDIR/s.json"
	assert_success
	assert_equal "$(jq -r .status <<<"$output")" paused
	assert_equal "$(jq -r .id <<<"$output")" "$(sid)"
	a=$(count)
	sleep 1
	b=$(count)
	assert_equal "$a" "$b"
	assert_equal "$(ls_line "$(sid)" | jq -r .status)" paused
	run sbx-pause --resume -s "$BATS_TEST_TMPDIR/s.json"
	assert_success
	assert_equal "$(jq -r .status <<<"$output")" running
	sleep 0.5
	c=$(count)
	[ "$c" -gt "$b" ]
}

@test "a paused sandbox uses no CPU" {
	new_sandbox
	start_counter
	sbx-pause -s "$BATS_TEST_TMPDIR/s.json" >/dev/null
	cg=/sys/fs/cgroup/unified/sbx/$(sid)
	a=$(awk '/usage_usec/ {print $2}' "$cg/cpu.stat")
	sleep 1
	b=$(awk '/usage_usec/ {print $2}' "$cg/cpu.stat")
	assert_equal "$a" "$b"
	assert_equal "$(cat "$cg/cgroup.freeze")" 1
}

@test "pausing a paused sandbox and resuming a running one are no-ops" {
	new_sandbox
	run sbx-pause --resume -s "$BATS_TEST_TMPDIR/s.json"
	assert_success
	sbx-pause -s "$BATS_TEST_TMPDIR/s.json" >/dev/null
	run sbx-pause -s "$BATS_TEST_TMPDIR/s.json"
	assert_success
	assert_equal "$(jq -r .status <<<"$output")" paused
	sbx-pause -r -s "$BATS_TEST_TMPDIR/s.json" >/dev/null
	run sbx-pause -r "$(sid)"
	assert_success
	run sx echo ok
	assert_output ok
}

@test "sbx-exec on a paused sandbox fails fast with 125, or resumes it with --resume" {
	new_sandbox
	sbx-pause -s "$BATS_TEST_TMPDIR/s.json" >/dev/null
	run timeout 5 sbx-exec -s "$BATS_TEST_TMPDIR/s.json" -- echo hi
	assert_failure 125
	assert_output "sbx-exec: sandbox '$(sid)' is paused (sbx-exec --resume, or sbx-pause --resume)"
	run sbx-exec --resume -s "$BATS_TEST_TMPDIR/s.json" -- echo hi
	assert_success
	assert_output hi
	assert_equal "$(ls_line "$(sid)" | jq -r .status)" running
}

@test "--mode stop ends the processes, keeps the files, and resume starts it again" {
	new_sandbox
	sx sh -c 'echo kept >/workspace/f'
	start_counter
	pid=$(init_pid)
	run sbx-pause --mode stop -s "$BATS_TEST_TMPDIR/s.json"
	assert_success
	assert_equal "$(jq -r .status <<<"$output")" stopped
	dead "$pid"
	[ -z "$(cat /sys/fs/cgroup/unified/sbx/"$(sid)"/cgroup.procs 2>/dev/null)" ]
	assert_equal "$(ls_line "$(sid)" | jq -r .status)" stopped
	assert_equal "$(jq -r .status "$BATS_TEST_TMPDIR/s.json")" stopped
	run sbx-exec -s "$BATS_TEST_TMPDIR/s.json" -- true
	assert_failure 125
	run sbx-pause -r -s "$BATS_TEST_TMPDIR/s.json"
	assert_success
	[ "$(init_pid)" != "$pid" ]
	run sx cat /workspace/f
	assert_output kept
	run sx sh -c 'ps -e -o comm= | grep -c "^sh$" || true'
	assert_output 1
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

@test "pause closes the billable segment and resume opens one" {
	new_sandbox
	jq -e '.segments | length == 1 and .[0][1] == null' "$BATS_TEST_TMPDIR/s.json"
	sbx-pause -s "$BATS_TEST_TMPDIR/s.json" >/dev/null
	jq -e '.status == "paused" and (.segments | length == 1 and .[0][1] != null)' "$BATS_TEST_TMPDIR/s.json"
	sbx-pause -r -s "$BATS_TEST_TMPDIR/s.json" >/dev/null
	jq -e '.status == "running" and (.segments | length == 2 and .[1][1] == null)' "$BATS_TEST_TMPDIR/s.json"
}

@test "sbx-kill kills a paused sandbox" {
	new_sandbox
	start_counter
	pid=$(init_pid)
	sbx-pause -s "$BATS_TEST_TMPDIR/s.json" >/dev/null
	run sbx-kill -s "$BATS_TEST_TMPDIR/s.json"
	assert_success
	dead "$pid"
	[ ! -e "$SBX_LOCAL_DIR/$(sid)" ]
}

@test "sbx-pause: bad input is refused with nothing changed" {
	run sbx-pause --mode freeze -I x
	assert_failure 2
	assert_output "sbx-pause: --mode must be suspend or stop, not 'freeze'"
	run sbx-pause --mode stop --resume -I x
	assert_failure 2
	run sbx-pause -I 000000000000
	assert_failure 3
	assert_output --partial "no sandbox"
	run sbx-pause -s "$BATS_TEST_TMPDIR/none.json"
	assert_failure 3
	[ ! -e "$BATS_TEST_TMPDIR/none.json" ]
}

@test "sbx-create --reuse keeps a live sandbox, resumes a paused one, replaces a gone one" {
	S=$BATS_TEST_TMPDIR/s.json
	run sbx-create --reuse -s "$S"
	assert_success
	id=$(jq -r .id <<<"$output")
	run sbx-create --reuse -s "$S"
	assert_success
	assert_equal "$(jq -r .id <<<"$output")" "$id"
	assert_equal "$(jq -r .replaced <<<"$output")" false
	sbx-pause -s "$S" >/dev/null
	run sbx-create --reuse -s "$S"
	assert_success
	assert_equal "$(jq -c '[.id, .resumed]' <<<"$output")" "[\"$id\",true]"
	assert_equal "$(ls_line "$id" | jq -r .status)" running
	# Gone: its init killed, as a reboot would.
	kill -9 "$(init_pid)"
	wait_status "$id" dead
	run sbx-create --reuse -s "$S"
	assert_success
	new=$(jq -r .id <<<"$output")
	[ "$new" != "$id" ]
	assert_equal "$(jq -r .replaced <<<"$output")" true
	jq -e --arg id "$id" '.replaced[0].ref.id == $id and .replaced[0].status == "lost"' "$S"
	# The budget spans the replacement: the old segments are kept.
	jq -e '(.segments | length) == 3 and .segments[2][1] == null and .segments[1][1] != null' "$S"
	[ ! -e "$SBX_LOCAL_DIR/$id" ]
	run sx echo ok
	assert_output ok
}

@test "sbx-create --reuse without a state file is a usage error" {
	run sbx-create --reuse
	assert_failure 2
	assert_output --partial "--reuse needs a state file"
}

@test "sbx-kill --final-sync pulls once more, then kills" {
	S=$BATS_TEST_TMPDIR/s.json
	P=$BATS_TEST_TMPDIR/p
	mkdir "$P" && echo a >"$P/a"
	new_sandbox
	sbx-sync push -s "$S" "$P" >/dev/null
	sx sh -c 'echo last >/workspace/last && echo a2 >/workspace/a'
	run --separate-stderr sbx-kill --final-sync "$P" -s "$S"
	assert_success
	assert_equal "$(jq -r .status <<<"${lines[-1]}")" killed
	assert_equal "$(cat "$P/last")" last
	assert_equal "$(cat "$P/a")" a2
	[ ! -e "$SBX_LOCAL_DIR/$(sid)" ]
}

@test "sbx-kill --final-sync keeps the sandbox when the pull fails" {
	S=$BATS_TEST_TMPDIR/s.json
	P=$BATS_TEST_TMPDIR/p
	mkdir "$P" && echo a >"$P/a"
	new_sandbox
	sbx-sync push -s "$S" "$P" >/dev/null
	echo host >"$P/a"
	sx sh -c 'echo sandbox >/workspace/a'
	run --separate-stderr sbx-kill --final-sync "$P" -s "$S"
	assert_failure 1
	[[ $stderr == *"not killed: the final sync into '$P' failed"* ]]
	assert_equal "$(ls_line "$(sid)" | jq -r .status)" running
	run sbx-kill --final-sync "$P" a b
	assert_failure 2
	assert_output "sbx-kill: --final-sync pulls into one project: name one sandbox"
}

@test "a replacement sandbox gets a full push" {
	S=$BATS_TEST_TMPDIR/s.json
	P=$BATS_TEST_TMPDIR/p
	mkdir "$P" && echo a >"$P/a" && echo b >"$P/b"
	sbx-create --reuse -s "$S" >/dev/null
	sbx-sync push -s "$S" "$P" >/dev/null
	run sbx-sync push -s "$S" "$P"
	assert_equal "$(jq .files <<<"$output")" 0
	kill -9 "$(init_pid)"
	wait_status "$(sid)" dead
	sbx-create --reuse -s "$S" >/dev/null
	run sbx-sync push -s "$S" "$P"
	assert_equal "$(jq .files <<<"$output")" 2
	run sx cat /workspace/b
	assert_output b
}

@test "sbx-exec --resume updates the state file as sbx-pause --resume does" {
	new_sandbox
	sbx-pause -s "$BATS_TEST_TMPDIR/s.json" >/dev/null
	run sbx-exec -R -s "$BATS_TEST_TMPDIR/s.json" -- echo hi
	assert_output hi
	jq -e '.status == "running" and (.segments | length == 2 and .[1][1] == null)' "$BATS_TEST_TMPDIR/s.json"
}

@test "sbx-create --reuse: the stored ref has no flags; a killed sandbox starts afresh" {
	S=$BATS_TEST_TMPDIR/s.json
	sbx-create -r -s "$S" >/dev/null
	kill -9 "$(init_pid)"
	wait_status "$(sid)" dead
	run sbx-create -r -s "$S"
	assert_equal "$(jq -r .replaced <<<"$output")" true
	jq -e '.ref | has("replaced") | not' "$S"
	sbx-kill -s "$S" >/dev/null
	run sbx-create -r -s "$S"
	assert_success
	jq -e 'has("replaced") | not' <<<"$output"
	jq -e '(.segments | length) == 1 and (has("replaced") | not)' "$S"
}

@test "sbx-kill --final-sync: stdout holds the kill line only; a gone sandbox is just gone" {
	S=$BATS_TEST_TMPDIR/s.json
	P=$BATS_TEST_TMPDIR/p
	mkdir "$P"
	new_sandbox
	run --separate-stderr sbx-kill -F "$P" -s "$S"
	assert_success
	assert_equal "${#lines[@]}" 1
	assert_equal "$(jq -r .status <<<"$output")" killed
	[[ $stderr == *'"files":0'* ]]
	new_sandbox
	id=$(sid)
	sbx-kill -q -I "$id" >/dev/null
	run --separate-stderr sbx-kill -F "$P" -I "$id"
	assert_success
	assert_equal "$(jq -r .status <<<"$output")" gone
	[[ $stderr != *"not killed"* ]]
}
