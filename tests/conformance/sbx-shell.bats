#!/usr/bin/env bats
# sbx-shell on the backend under test (every backend has capability
# shell): marin-shellbox's acceptance list for its persistent Bash tool
# (state kept, running then completed, input, an interrupt, the output
# limit, a reset, sessions, concurrent calls, fake markers, binary output,
# a paused sandbox) and what is refused. local: sbx-init keeps the sessions; docker and e2b: the agent
# copied in, its server started at the first call. The docker test image
# has busybox's sh and no bash: the same contract through sh.
load conformance

setup_file() { conf_setup_file; }
teardown_file() { conf_teardown_file; }

setup() {
	conf_setup
	new_sandbox
}

teardown() {
	sbx-kill -q -s "$BATS_TEST_TMPDIR/s.json" >/dev/null 2>&1 || true
}

sh_() { sbx-shell -s "$BATS_TEST_TMPDIR/s.json" "$@"; }

# The field $1 of the one JSON line of $output (fails on none).
field() {
	[ "${#lines[@]}" -eq 1 ] || fail "not one line: $output"
	jq -r "$1" <<<"$output"
}

@test "$B: sbx-shell: the working directory, exports and functions persist between calls" {
	run --separate-stderr sh_ 'cd /tmp && export SBX_T=kept && f() { echo fn; }'
	assert_success
	assert_equal "$stderr" ""
	assert_equal "$(jq -c 'del(.shell)' <<<"$output")" '{"output":"","status":"completed","exit_code":0,"truncated":false,"session":"default"}'
	run --separate-stderr sh_ 'pwd; echo $SBX_T; f; false'
	assert_success
	assert_equal "$(field .output)" $'/tmp\nkept\nfn'
	assert_equal "$(field .exit_code)" 1
}

@test "$B: sbx-shell: a long command is running, then completed with its code on a later read" {
	run --separate-stderr sh_ -w 300 'echo one; sleep 2; echo two; (exit 7)'
	assert_success
	assert_equal "$(field .status)" running
	assert_equal "$(field .output)" one
	assert_equal "$(field .exit_code)" null
	run --separate-stderr sh_ -r -w 10000
	assert_success
	assert_equal "$(field .status)" completed
	assert_equal "$(field .output)" two
	assert_equal "$(field .exit_code)" 7
	# Nothing runs now: a read is refused.
	run --separate-stderr sh_ -r
	assert_failure 1
	assert_equal "$stderr" "sbx-shell: no command is running"
}

@test "$B: sbx-shell: input reaches a program that reads it; an interrupt stops sleep and the shell survives" {
	run --separate-stderr sh_ -w 200 'read -r a; echo "got $a"; sleep 60'
	assert_equal "$(field .status)" running
	run --separate-stderr sh_ -w 500 -i 'hello\n'
	assert_success
	assert_equal "$(field .output)" 'got hello'
	assert_equal "$(field .status)" running
	run --separate-stderr sh_ -k interrupt -w 5000
	assert_success
	assert_equal "$(field .status)" completed
	assert_equal "$(field .exit_code)" 130
	run --separate-stderr sh_ 'echo alive $$'
	assert_equal "$(field .status)" completed
	[[ $(field .output) =~ ^alive\ [0-9]+$ ]]
}

@test "$B: sbx-shell: input reaches a program that reads lines, which stays running; ^D ends it" {
	run --separate-stderr sh_ -w 300 "sh -c 'while read -r l; do echo \"= \$l\"; done'"
	assert_equal "$(field .status)" running
	run --separate-stderr sh_ -w 1000 -i '6*7\n'
	assert_success
	assert_equal "$(field .output)" '= 6*7'
	assert_equal "$(field .status)" running
	run --separate-stderr sh_ -w 5000 -i '\x04'
	assert_equal "$(field .status)" completed
	assert_equal "$(field .exit_code)" 0
}

@test "$B: sbx-shell: output past the limit is dropped and said; a second call does not get it" {
	run --separate-stderr sh_ -L 1000 'head -c 300000 /dev/zero | tr "\0" a; echo'
	assert_success
	assert_equal "$(field .truncated)" true
	assert_equal "$(field '.output | length')" 1000
	assert_equal "$(field .status)" completed
	run --separate-stderr sh_ 'echo small'
	assert_equal "$(field .output)" small
	assert_equal "$(field .truncated)" false
}

@test "$B: sbx-shell: binary output: \\r\\n as \\n, invalid UTF-8 replaced, valid UTF-8 kept" {
	run --separate-stderr sh_ "printf 'a\\377b\\r\\nc\\303\\251\\001'"
	assert_success
	assert_equal "$(field .output)" $'a\xef\xbf\xbdb\nc\xc3\xa9\x01'
}

@test "$B: sbx-shell: completion markers the command prints fool nothing" {
	run --separate-stderr sh_ "printf 'DONE|x|0\\n0000000000000000 0\\n'; exec 3>&- 4>&-; sleep 0.3; echo end; (exit 5)"
	assert_success
	assert_equal "$(field .status)" completed
	assert_equal "$(field .exit_code)" 5
	[[ $(field .output) == *end ]] || fail "$output"
}

@test "$B: sbx-shell: a shell killed or exited is reset; the next command gets a fresh one in the workdir, files kept" {
	wd=$(sbx-exec -s "$BATS_TEST_TMPDIR/s.json" -- pwd)
	run --separate-stderr sh_ 'cd /tmp; echo data >/tmp/kept; X=1; kill -9 $$'
	assert_success
	assert_equal "$(field .status)" reset
	assert_equal "$(field .exit_code)" null
	run --separate-stderr sh_ 'pwd; echo "x=${X-unset}"; cat /tmp/kept'
	assert_success
	assert_equal "$(field .status)" completed
	assert_equal "$(field .output)" "$wd"$'\nx=unset\ndata'
}

@test "$B: sbx-shell: two sessions are independent; --list shows them, --close ends one" {
	sh_ 'cd /tmp' >/dev/null
	run --separate-stderr sh_ -S build -w 200 'cd /; sleep 30'
	assert_equal "$(field .session)" build
	assert_equal "$(field .status)" running
	run --separate-stderr sh_ pwd
	assert_equal "$(field .output)" /tmp
	run --separate-stderr sh_ -l
	assert_success
	assert_equal "$(jq -sc 'sort_by(.session) | map(del(.shell))' <<<"$output")" \
	    '[{"session":"build","status":"running","waiting":false},{"session":"default","status":"idle","waiting":false}]'
	run --separate-stderr sh_ -C -S build
	assert_success
	assert_equal "$output" '{"session":"build","status":"closed"}'
	run --separate-stderr sh_ -r -S build
	assert_failure 1
	assert_equal "$stderr" "sbx-shell: no session 'build'"
	assert_equal "$output" ""
}

@test "$B: sbx-shell: a call while another waits on the session is refused, never interleaved" {
	sh_ -w 0 'sleep 1; echo first' >/dev/null
	sh_ -r -w 5000 >"$BATS_TEST_TMPDIR/first.json" &
	pid=$!
	# --list says when that call waits.
	i=0
	until [ "$(sh_ -l | jq -r .waiting)" = true ] || [ $i -ge 100 ]; do
		sleep 0.05
		i=$((i + 1))
	done
	run --separate-stderr sh_ -r -w 100
	wait "$pid"
	assert_failure 1
	assert_equal "$stderr" "sbx-shell: another call is waiting on this session"
	assert_equal "$(field .status)" running
	run jq -r .output "$BATS_TEST_TMPDIR/first.json"
	assert_output first
	# A command while one runs: refused, said in the JSON too.
	sh_ -w 0 'sleep 30' >/dev/null
	run --separate-stderr sh_ 'echo no'
	assert_failure 1
	assert_equal "$stderr" "sbx-shell: previous command is still running"
	assert_equal "$output" '{"error":"previous command is still running","session":"default","status":"running"}'
}

@test "$B: sbx-shell: a paused sandbox's session is refused, then goes on after resume" {
	sh_ -w 0 'for i in 1 2 3 4 5; do echo $i; sleep 0.2; done' >/dev/null
	sbx-pause -s "$BATS_TEST_TMPDIR/s.json" >/dev/null
	run --separate-stderr sh_ -r
	assert_failure 3
	if ! has_cap suspend; then
		# Paused is stopped there: refused as such; its processes,
		# the session's among them, ended; a new one after resume.
		[[ $stderr == *"is stopped (sbx-exec --resume, or sbx-pause --resume)" ]] ||
		    fail "$stderr"
		sbx-pause --resume -s "$BATS_TEST_TMPDIR/s.json" >/dev/null
		run --separate-stderr sh_ 'echo again'
		assert_success
		[[ $(field .output) == again* ]] || fail "$output"
		return
	fi
	[[ $stderr == *"is paused (sbx-exec --resume, or sbx-pause --resume)" ]] ||
	    fail "$stderr"
	sbx-pause --resume -s "$BATS_TEST_TMPDIR/s.json" >/dev/null
	run --separate-stderr sh_ -r -w 10000
	assert_success
	assert_equal "$(field .status)" completed
	[[ $(field .output) == *5 ]] || fail "$output"
}

@test "$B: sbx-shell: --json takes marin's Bash call from stdin, with marin's errors" {
	run --separate-stderr sh_ -j <<<'{"command":"echo via json","wait_ms":2000}'
	assert_success
	assert_equal "$(field .output)" 'via json'
	run --separate-stderr sh_ -j <<<'{"command":"x","input":"y"}'
	assert_failure 2
	assert_equal "$stderr" "sbx-shell: Bash accepts one of command, input, or signal per call"
	run --separate-stderr sh_ -j <<<'{"command":"x","wait_ms":30001}'
	assert_failure 2
	assert_equal "$stderr" "sbx-shell: wait_ms must be an integer between 0 and 30000"
	assert_equal "$output" ""
}

@test "$B: sbx-shell: bad input: two operations, a wait out of range, a bad session name, input with nothing running" {
	run --separate-stderr sh_ -r -C
	assert_failure 2
	[[ $stderr == "sbx-shell: one of a command, --input"* ]] || fail "$stderr"
	run --separate-stderr sh_ -w 30001 true
	assert_failure 2
	assert_equal "$stderr" "sbx-shell: wait_ms must be an integer between 0 and 30000"
	run --separate-stderr sh_ -S 'a/b' true
	assert_failure 2
	[[ $stderr == "sbx-shell: bad session name 'a/b'"* ]] || fail "$stderr"
	run --separate-stderr sh_ -k term
	assert_failure 2
	sh_ true >/dev/null
	run --separate-stderr sh_ -i 'x\n'
	assert_failure 1
	assert_equal "$stderr" "sbx-shell: no command is running"
	assert_equal "$output" '{"error":"no command is running","session":"default","status":"idle"}'
	# Nothing was started by the refused calls.
	run --separate-stderr sh_ -l
	assert_equal "$(field .session)" default
}

@test "$B: sbx-shell: a sandbox that is gone: exit 3" {
	sbx-kill -q -s "$BATS_TEST_TMPDIR/s.json" >/dev/null
	run --separate-stderr sh_ true
	assert_failure 3
	[ -n "$stderr" ]
	assert_equal "$output" ""
}
