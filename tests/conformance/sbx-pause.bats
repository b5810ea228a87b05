#!/usr/bin/env bats
# sbx-pause on the backend under test: suspend and resume, stop and
# restart over the same files, what exec does meanwhile, the state's
# segments; and what builds on them: sbx-create --reuse, sbx-exec
# --resume, sbx-kill --final-sync. (../sbx-pause.bats holds what only the
# local backend shows: its cgroup, its init, its idle timer.)

load conformance

setup_file() { conf_setup_file; }
teardown_file() { conf_teardown_file; }
setup() {
	conf_setup
	S=$BATS_TEST_TMPDIR/s.json
	P=$BATS_TEST_TMPDIR/p
}
teardown() {
	if [ -n "${LOOP:-}" ]; then
		kill -KILL "$LOOP" 2>/dev/null || true
		wait "$LOOP" 2>/dev/null || true
	fi
	if [ -f "$S" ]; then sbx-kill -q -s "$S" >/dev/null 2>&1 || true; fi
}

# A counter in the sandbox, one line a tick on its stdout, which is the
# host's file c; its sbx-exec runs in the background as LOOP. Its
# command line holds a mark, to find it with ps.
start_counter() {
	sx sh -c 'i=0; while :; do i=$((i+1)); echo $i; sleep 0.05; done # sbx-counter' \
	    >"$BATS_TEST_TMPDIR/c" &
	LOOP=$!
	wait_for [ -s "$BATS_TEST_TMPDIR/c" ]
}
count() { wc -l <"$BATS_TEST_TMPDIR/c"; }
# A counter that the next sx can count beside it: the one above, but on
# qemu, whose keeper runs one command at a time (the next waits), one
# left running in the background by an sx that ends.
start_counter_beside() {
	if [ "$BACKEND" != qemu ]; then
		start_counter
		return
	fi
	sx sh -c 'while :; do sleep 0.05; done >/dev/null 2>&1 & # sbx-counter'
}
# How many counters run in the sandbox (the pattern does not match itself).
COUNTERS='cat /proc/[0-9]*/cmdline 2>/dev/null | tr "\0" " " | grep -c "[s]bx-counter"'

# Run a command until it succeeds (bounded: 60 s).
wait_for() {
	local i
	for ((i = 0; i < 600; i++)); do
		"$@" && return 0
		sleep 0.1
	done
	echo "never: $*" >&2
	return 1
}

# Whether the counter stood still across a look 0.5 s apart: what was on
# its way to the host has arrived.
still() {
	local a
	a=$(count)
	sleep 0.5
	[ "$(count)" = "$a" ]
}
grew() { [ "$(count)" -gt "$1" ]; }

# The refusal of a pause mode the backend lacks: exit 2, one line,
# nothing changed.
refused_mode() {
	run --separate-stderr sbx-pause -m "$1" -s "$S"
	assert_failure 2
	assert_output ''
	assert_equal "$stderr" "sbx-pause: backend '$BACKEND' cannot $2 (--mode $1)"
	assert_equal "$(ls_line "$(sid)" | jq -r .status)" running
	assert_equal "$(jq -r .status "$S")" running
}

@test "$B: sbx-pause --semantics says what pause does and which modes there are" {
	run sbx-pause --semantics
	assert_success
	want=$(sbx-ls -B | jq -c --arg b "$BACKEND" 'select(.backend == $b) |
	    {backend, pause, modes: [if .caps.suspend then "suspend" else
	    empty end, if .caps.stop then "stop" else empty end,
	    if .caps.archive then "archive" else empty end]}')
	assert_output "$want"
}

@test "$B: sbx-pause: a paused sandbox makes no progress and continues after resume, or suspend is refused" {
	new_sandbox
	start_counter
	if ! has_cap suspend; then
		refused_mode suspend "suspend a sandbox"
		a=$(count)
		wait_for grew "$a"
		return
	fi
	run sbx-pause -m suspend -s "$S"
	assert_success
	assert_equal "$(jq -r .status <<<"$output")" paused
	assert_equal "$(jq -r .id <<<"$output")" "$(sid)"
	wait_for still
	a=$(count)
	sleep 1
	assert_equal "$(count)" "$a"
	assert_equal "$(ls_line "$(sid)" | jq -r .status)" paused
	assert_equal "$(jq -r .status "$S")" paused
	run sbx-pause --resume -s "$S"
	assert_success
	assert_equal "$(jq -r .status <<<"$output")" running
	wait_for grew "$a"
	assert_equal "$(ls_line "$(sid)" | jq -r .status)" running
}

@test "$B: sbx-pause: pausing a paused sandbox and resuming a running one are no-ops" {
	new_sandbox
	if ! has_cap suspend && ! has_cap stop; then
		run --separate-stderr sbx-pause -s "$S"
		assert_failure 2
		assert_equal "$stderr" "sbx-pause: backend '$BACKEND' cannot pause"
		return
	fi
	run sbx-pause --resume -s "$S"
	assert_success
	assert_equal "$(jq -r .status <<<"$output")" running
	sbx-pause -s "$S" >/dev/null
	st=$(jq -r .status "$S")
	run sbx-pause -s "$S"
	assert_success
	assert_equal "$(jq -r .status <<<"$output")" "$st"
	assert_equal "$(ls_line "$(sid)" | jq -r .status)" "$st"
	sbx-pause -r -s "$S" >/dev/null
	run sbx-pause -r "$(sid)"
	assert_success
	assert_equal "$(jq -r .status <<<"$output")" running
	run sx echo ok
	assert_output ok
}

@test "$B: sbx-exec on a paused sandbox fails fast with 125, or resumes it with --resume" {
	new_sandbox
	if ! has_cap suspend; then
		refused_mode suspend "suspend a sandbox"
		return
	fi
	sbx-pause -m suspend -s "$S" >/dev/null
	run --separate-stderr timeout 20 sbx-exec -s "$S" -- echo hi
	assert_failure 125
	assert_output ''
	assert_equal "$stderr" "sbx-exec: sandbox '$(sid)' is paused (sbx-exec --resume, or sbx-pause --resume)"
	assert_equal "$(ls_line "$(sid)" | jq -r .status)" paused
	run sbx-exec --resume -s "$S" -- echo hi
	assert_success
	assert_output hi
	assert_equal "$(ls_line "$(sid)" | jq -r .status)" running
}

@test "$B: sbx-exec --resume updates the state file as sbx-pause --resume does" {
	new_sandbox
	sbx-pause -s "$S" >/dev/null
	run sbx-exec -R -s "$S" -- echo hi
	assert_success
	assert_output hi
	jq_true '.status == "running" and (.segments | length == 2 and .[1][1] == null)' <"$S"
}

@test "$B: sbx-pause --mode stop ends the processes, keeps the files, and resume starts it again" {
	new_sandbox
	sx sh -c 'echo kept >/workspace/f'
	start_counter_beside
	if ! has_cap stop; then
		refused_mode stop "stop a sandbox and keep its files"
		return
	fi
	run sx sh -c "$COUNTERS"
	assert_output 1
	run sbx-pause --mode stop -s "$S"
	assert_success
	assert_equal "$(jq -r .status <<<"$output")" stopped
	assert_equal "$(ls_line "$(sid)" | jq -r .status)" stopped
	assert_equal "$(jq -r .status "$S")" stopped
	run --separate-stderr sbx-exec -s "$S" -- true
	assert_failure 125
	assert_equal "$stderr" "sbx-exec: sandbox '$(sid)' is stopped (sbx-exec --resume, or sbx-pause --resume)"
	run sbx-pause -r -s "$S"
	assert_success
	assert_equal "$(jq -r .status <<<"$output")" running
	assert_equal "$(jq -r .status "$S")" running
	run sx cat /workspace/f
	assert_output kept
	# No counter came back.
	run sx sh -c "$COUNTERS"
	assert_output 0
}

@test "$B: sbx-pause --archive stops and archives, keeps the files, and resume starts it again; or it is refused" {
	new_sandbox
	sx sh -c 'echo kept >/workspace/f'
	if ! has_cap archive; then
		refused_mode archive "archive a sandbox"
		run --separate-stderr sbx-pause --archive -s "$S"
		assert_failure 2
		assert_equal "$stderr" "sbx-pause: backend '$BACKEND' cannot archive a sandbox (--mode archive)"
		return
	fi
	run sbx-pause --archive -s "$S"
	assert_success
	assert_equal "$(jq -r .status <<<"$output")" stopped
	assert_equal "$(ls_line "$(sid)" | jq -r .status)" stopped
	assert_equal "$(jq -r .status "$S")" stopped
	# Archived again: nothing to do.
	run sbx-pause -m archive -s "$S"
	assert_success
	run sbx-pause -r -s "$S"
	assert_success
	assert_equal "$(jq -r .status "$S")" running
	run sx cat /workspace/f
	assert_output kept
}

# --memory=BOOL, E2B's name for a mode: refused as the mode is, the
# flag named as given.
refused_memory() {
	run --separate-stderr sbx-pause "--memory=$1" -s "$S"
	assert_failure 2
	assert_output ''
	assert_equal "$stderr" "sbx-pause: backend '$BACKEND' cannot $2 (--memory=$1)"
	assert_equal "$(jq -r .status "$S")" running
}

@test "$B: sbx-pause --memory=false stops (files kept, processes gone); --memory suspends (processes kept)" {
	new_sandbox
	sx sh -c 'echo kept >/workspace/f'
	start_counter_beside
	if ! has_cap suspend; then
		refused_memory true "suspend a sandbox"
	else
		run sbx-pause --memory -s "$S"
		assert_success
		assert_equal "$(jq -r .status <<<"$output")" paused
		sbx-pause -r -s "$S" >/dev/null
		run sx sh -c "$COUNTERS"
		assert_output 1
	fi
	if ! has_cap stop; then
		refused_memory false "stop a sandbox and keep its files"
		return
	fi
	run sx sh -c "$COUNTERS"
	assert_output 1
	run sbx-pause --memory=false -s "$S"
	assert_success
	assert_equal "$(jq -r .status <<<"$output")" stopped
	assert_equal "$(jq -r .status "$S")" stopped
	run sbx-pause -r -s "$S"
	assert_success
	run sx cat /workspace/f
	assert_output kept
	run sx sh -c "$COUNTERS"
	assert_output 0
}

@test "$B: sbx-pause closes the billable segment and resume opens one" {
	new_sandbox
	jq_true '.segments | length == 1 and .[0][1] == null' <"$S"
	run sbx-pause -s "$S"
	assert_success
	st=$(jq -r .status <<<"$output")
	jq_true --arg st "$st" '.status == $st and (.segments | length == 1 and .[0][1] != null)' <"$S"
	sbx-pause -r -s "$S" >/dev/null
	jq_true '.status == "running" and (.segments | length == 2 and .[1][1] == null)' <"$S"
}

@test "$B: sbx-kill kills a paused sandbox" {
	new_sandbox
	start_counter
	sbx-pause -s "$S" >/dev/null
	run sbx-kill -s "$S"
	assert_success
	assert_equal "$(jq -r .status <<<"$output")" killed
	assert_equal "$(ls_line "$(sid)")" ''
	assert_equal "$(jq -r .status "$S")" killed
	run sbx-exec -s "$S" -- true
	assert_failure 125
}

@test "$B: sbx-pause: bad input is refused with nothing changed" {
	run sbx-pause --mode freeze -I x
	assert_failure 2
	assert_output "sbx-pause: --mode must be suspend, stop or archive, not 'freeze'"
	run sbx-pause --mode stop --resume -I x
	assert_failure 2
	assert_output --partial "--mode is for pausing"
	run sbx-pause --memory=no -I x
	assert_failure 2
	assert_output "sbx-pause: --memory must be true or false, not 'no'"
	run sbx-pause --memory=false --resume -I x
	assert_failure 2
	assert_output --partial "--memory is for pausing"
	run sbx-pause --memory=false --mode stop -I x
	assert_failure 2
	assert_output "sbx-pause: give --mode or --memory, not both"
	run sbx-pause --memory=false --archive -I x
	assert_failure 2
	assert_output "sbx-pause: give --memory or --archive, not both"
	run sbx-pause --mode stop --archive -I x
	assert_failure 2
	assert_output "sbx-pause: give --mode or --archive, not both"
	run sbx-pause --archive --resume -I x
	assert_failure 2
	assert_output --partial "is for pausing"
	run --separate-stderr sbx-pause -I 000000000000
	assert_failure 3
	assert_output ''
	[[ $stderr == *"no sandbox"* ]]
	run sbx-pause -s "$BATS_TEST_TMPDIR/none.json"
	assert_failure 3
	assert_output --partial "no sandbox"
	[ ! -e "$BATS_TEST_TMPDIR/none.json" ]
}

@test "$B: sbx-create --reuse keeps a live sandbox, resumes a paused one, replaces a gone one" {
	run create --reuse -s "$S"
	assert_success
	id=$(jq -r .id <<<"$output")
	run create --reuse -s "$S"
	assert_success
	assert_equal "$(jq -r .id <<<"$output")" "$id"
	assert_equal "$(jq -r .replaced <<<"$output")" false
	sbx-pause -s "$S" >/dev/null
	run create --reuse -s "$S"
	assert_success
	assert_equal "$(jq -c '[.id, .resumed]' <<<"$output")" "[\"$id\",true]"
	assert_equal "$(ls_line "$id" | jq -r .status)" running
	assert_equal "$(jq -r .status "$S")" running
	# Gone behind the state file's back.
	sbx-kill -q -I "$id" >/dev/null
	run create --reuse -s "$S"
	assert_success
	new=$(jq -r .id <<<"$output")
	[ "$new" != "$id" ]
	assert_equal "$(jq -r .replaced <<<"$output")" true
	jq_true --arg id "$id" '.replaced[0].ref.id == $id and .replaced[0].status == "lost"' <"$S"
	# The budget spans the replacement: the old segments are kept.
	jq_true '(.segments | length) == 3 and .segments[2][1] == null and .segments[1][1] != null' <"$S"
	run sx echo ok
	assert_output ok
}

@test "$B: sbx-create --reuse without a state file is a usage error" {
	run create --reuse -s -
	assert_failure 2
	assert_output --partial "--reuse needs a state file"
	assert_equal "$(sbx-ls -j)" ''
}

# On a backend without sbx-sync (has_cap files): a push to the sandbox
# of state file $S is refused (2) with nothing written, and sbx-kill
# --final-sync keeps the sandbox, since its pull cannot be done (1).
# True then; false on a backend that has it.
refused_files() {
	has_cap files && return 1
	[ -f "$S" ] || new_sandbox
	run --separate-stderr sbx-sync push -s "$S" "$P"
	assert_failure 2
	assert_output ''
	[ "$stderr" = "sbx-sync: backend '$BACKEND' cannot move files (sbx-sync)" ]
	[ ! -e "$S.baseline" ]
	run --separate-stderr sbx-kill --final-sync "$P" -s "$S"
	assert_failure 1
	assert_output ''
	[[ $stderr == *"cannot move files"* ]]
	[[ $stderr == *"not killed: the final sync into '$P' failed"* ]]
	[ "$(jq -r .status "$S")" = running ]
	[ "$(sx echo alive)" = alive ]
}

@test "$B: sbx-create --reuse: a replacement sandbox gets a full push, and what is left of the old one goes" {
	mkdir "$P" && echo a >"$P/a" && echo b >"$P/b"
	create --reuse --timeout 1 -s "$S" >/dev/null
	old=$(sid)
	if refused_files; then return; fi
	sbx-sync push -s "$S" "$P" >/dev/null
	run sbx-sync push -s "$S" "$P"
	assert_equal "$(jq .files <<<"$output")" 0
	# Ended on its own, not killed: its idle timeout ran out (and
	# without keep, its server removed it).
	if has_cap keep; then
		wait_status "$old" expired
	else
		wait_unlisted "$old"
	fi
	create --reuse -s "$S" >/dev/null
	[ "$(sid)" != "$old" ]
	assert_equal "$(ls_line "$old")" ''
	run sbx-sync push -s "$S" "$P"
	assert_equal "$(jq .files <<<"$output")" 2
	run sx cat /workspace/b
	assert_output b
}

@test "$B: sbx-create --reuse: the stored ref has no flags; a killed sandbox starts afresh" {
	create -r -s "$S" >/dev/null
	sbx-kill -q -I "$(sid)" >/dev/null
	run create -r -s "$S"
	assert_success
	assert_equal "$(jq -r .replaced <<<"$output")" true
	jq_true '.ref | has("replaced") | not' <"$S"
	sbx-kill -s "$S" >/dev/null
	run create -r -s "$S"
	assert_success
	jq_true 'has("replaced") | not' <<<"$output"
	jq_true '(.segments | length) == 1 and (has("replaced") | not)' <"$S"
}

@test "$B: sbx-kill --final-sync pulls once more, then kills" {
	mkdir "$P" && echo a >"$P/a"
	new_sandbox
	if refused_files; then return; fi
	sbx-sync push -s "$S" "$P" >/dev/null
	sx sh -c 'echo last >/workspace/last && echo a2 >/workspace/a'
	run --separate-stderr sbx-kill --final-sync "$P" -s "$S"
	assert_success
	assert_equal "${#lines[@]}" 1
	assert_equal "$(jq -r .status <<<"$output")" killed
	assert_equal "$(cat "$P/last")" last
	assert_equal "$(cat "$P/a")" a2
	assert_equal "$(ls_line "$(sid)")" ''
}

@test "$B: sbx-kill --final-sync keeps the sandbox when the pull fails" {
	mkdir "$P" && echo a >"$P/a"
	new_sandbox
	if refused_files; then return; fi
	sbx-sync push -s "$S" "$P" >/dev/null
	echo host >"$P/a"
	sx sh -c 'echo sandbox >/workspace/a'
	run --separate-stderr sbx-kill --final-sync "$P" -s "$S"
	assert_failure 1
	assert_output ''
	[[ $stderr == *"not killed: the final sync into '$P' failed"* ]]
	assert_equal "$(ls_line "$(sid)" | jq -r .status)" running
	assert_equal "$(jq -r .status "$S")" running
	run sbx-kill --final-sync "$P" a b
	assert_failure 2
	assert_output "sbx-kill: --final-sync pulls into one project: name one sandbox"
}

@test "$B: sbx-kill --final-sync: stdout holds the kill line only; a gone sandbox is just gone" {
	mkdir "$P"
	new_sandbox
	if refused_files; then return; fi
	run --separate-stderr sbx-kill -F "$P" -s "$S"
	assert_success
	assert_equal "${#lines[@]}" 1
	assert_equal "$(jq -r .status <<<"$output")" killed
	[[ $stderr == *'"files":0'* ]]
	new_sandbox
	id=$(sid)
	sbx-kill -q -I "$id" >/dev/null
	run --separate-stderr sbx-kill -F "$P" -s "$S"
	assert_success
	assert_equal "$(jq -r .status <<<"$output")" gone
	[[ $stderr != *"not killed"* ]]
	# A bare id the backend does not know any more: exit 3, no pull.
	run --separate-stderr sbx-kill -F "$P" -I "$id"
	assert_failure 3
	assert_output ''
	[[ $stderr != *"not killed"* ]]
}
