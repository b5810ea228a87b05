#!/usr/bin/env bats
# sbx-exec: exit codes, argv, streams, the tty, --json, --timeout, the
# environment, the working directory, signals and finding the sandbox.

load helper

setup_file() { sbx_setup_file; }
teardown_file() { sbx_teardown_file; }
setup() {
	sbx_setup
	BG_PIDS=()
}

# Background processes by pid, then this test's sandboxes.
teardown() {
	local p f

	[ -f "$BATS_TEST_TMPDIR/bg.pids" ] &&
	    mapfile -t -O "${#BG_PIDS[@]}" BG_PIDS <"$BATS_TEST_TMPDIR/bg.pids"
	for p in "${BG_PIDS[@]}"; do
		kill -KILL "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	for f in "$BATS_TEST_TMPDIR"/*.json "$BATS_TEST_TMPDIR"/.sbx/state.json; do
		[ -f "$f" ] && sbx-kill -q -s "$f" >/dev/null 2>&1
	done
	return 0
}

# Run a shell command line on a real terminal (script(1) gives it a pty);
# the output with the terminal's CRs removed. script's stdin is a pipe
# that stays open: at EOF script would type the EOF character into the
# terminal, and with sbx-exec's terminal raw that is a byte for the command.
in_term() {
	local p rc=0

	rm -f term-in
	mkfifo term-in
	sleep 60 >term-in 3>&- &
	p=$!
	echo "$p" >>"$BATS_TEST_TMPDIR/bg.pids"
	script -qec "$1" /dev/null <term-in | tr -d '\r' || rc=$?
	kill "$p" 2>/dev/null
	wait "$p" 2>/dev/null
	rm -f "$BATS_TEST_TMPDIR/bg.pids"
	return "$rc"
}

# Try a command for up to 5 s until it succeeds.
retry() {
	local i

	for i in $(seq 50); do
		"$@" && return 0
		sleep 0.1
	done
	return 1
}

# Whether a sleep runs in this test's sandbox.
sleep_runs() {
	sbx-exec -s "$BATS_TEST_TMPDIR/s.json" -- pgrep -x sleep >/dev/null
}

no_sleep_runs() {
	! sleep_runs
}

# --- exit status -----------------------------------------------------------

@test "sbx-exec prints the command's output and exits with its status" {
	new_sandbox
	run --separate-stderr sbx-exec -s s.json -- sh -c 'echo hi; exit 7'
	assert_failure 7
	assert_output hi
	[ -z "$stderr" ]
}

@test "sbx-exec passes exit codes 0..255 through" {
	new_sandbox
	local n rc

	# The edges, and the codes sbx-exec uses itself.
	for n in 0 1 2 3 42 123 124 125 126 127 128 129 137 200 254 255; do
		rc=0
		sbx-exec -s s.json -- sh -c "exit $n" || rc=$?
		[ "$rc" -eq "$n" ] || fail "exit $n came back as $rc"
	done
}

@test "sbx-exec exits 128+N when the command is killed by signal N" {
	new_sandbox
	local s rc

	for s in 1 6 9 15; do
		rc=0
		sbx-exec -s s.json -- sh -c "kill -$s \$\$" || rc=$?
		[ "$rc" -eq $((128 + s)) ] || fail "signal $s gave $rc"
	done
}

@test "sbx-exec exits 127 with one line naming a command that is not found" {
	new_sandbox
	run -127 --separate-stderr sbx-exec -s s.json -- no-such-command-xyz arg
	assert_failure 127
	assert_output ''
	[ "$(printf '%s\n' "$stderr" | wc -l)" -eq 1 ]
	[[ "$stderr" == *no-such-command-xyz* ]]
}

@test "sbx-exec exits 126 for a file that is not executable" {
	new_sandbox
	run --separate-stderr sbx-exec -s s.json -- /etc/passwd
	assert_failure 126
	assert_output ''
	[[ "$stderr" == *"/etc/passwd"* ]]
}

@test "sbx-exec exits 125 when the workdir does not exist" {
	new_sandbox
	run --separate-stderr sbx-exec -s s.json -w /nonexistent -- echo ran
	assert_failure 125
	assert_output ''
	[[ "$stderr" == *"/nonexistent"* ]]
}

@test "sbx-exec exits 125 for a relative workdir" {
	new_sandbox
	run --separate-stderr sbx-exec -s s.json -w rel -- echo ran
	assert_failure 125
	assert_output ''
	[[ "$stderr" == *"'rel'"* ]]
}

@test "sbx-exec exits 125 for an unknown flag" {
	new_sandbox
	run --separate-stderr sbx-exec -s s.json --no-such-flag -- echo ran
	assert_failure 125
	assert_output ''
	[[ "$stderr" == "sbx-exec: "*no-such-flag* ]]
	[ "${#stderr_lines[@]}" -eq 1 ]
}

@test "sbx-exec exits 125 without a command" {
	new_sandbox
	run --separate-stderr sbx-exec -s s.json
	assert_failure 125
	assert_output ''
	[[ "$stderr" == *"no command"* ]]
}

@test "sbx-exec exits 125 for an invalid --timeout" {
	new_sandbox
	run --separate-stderr sbx-exec -s s.json --timeout abc -- echo ran
	assert_failure 125
	assert_output ''
	[[ "$stderr" == *"'abc'"* ]]
}

@test "sbx-exec refuses --json with --tty with 125" {
	new_sandbox
	run --separate-stderr sbx-exec -s s.json --json --tty -- echo ran
	assert_failure 125
	assert_output ''
	[[ "$stderr" == *json* && "$stderr" == *tty* ]]
}

@test "sbx-exec --help prints the usage on stdout and exits 0" {
	run --separate-stderr sbx-exec --help
	assert_success
	assert_line --index 0 --partial 'usage: sbx-exec'
	[ -z "$stderr" ]
}

@test "sbx-exec --version prints its name and version" {
	run --separate-stderr sbx-exec --version
	assert_success
	assert_output 'sbx-exec 0.1.0'
}

# --- finding the sandbox ---------------------------------------------------

@test "sbx-exec exits 125 with 'no sandbox' for a missing state file" {
	run --separate-stderr sbx-exec -s missing.json -- echo ran
	assert_failure 125
	assert_output ''
	[[ "$stderr" == *"no sandbox"* ]]
	[ ! -e missing.json ]
}

@test "sbx-exec exits 125 with 'no sandbox' for an unknown --id" {
	run --separate-stderr sbx-exec --id 0123456789ab -- echo ran
	assert_failure 125
	assert_output ''
	[[ "$stderr" == *"no sandbox"* ]]
}

@test "sbx-exec exits 125 with 'no sandbox' when nothing names a sandbox" {
	run --separate-stderr sbx-exec -- echo ran
	assert_failure 125
	assert_output ''
	[[ "$stderr" == *"no sandbox"* ]]
	[ ! -e .sbx ]
}

@test "sbx-exec exits 125 with 'no sandbox' for a killed sandbox" {
	new_sandbox
	sbx-kill -q -s s.json >/dev/null
	run --separate-stderr sbx-exec -s s.json -- echo ran
	assert_failure 125
	assert_output ''
	[[ "$stderr" == *"no sandbox"* ]]
}

@test "sbx-exec finds the sandbox by --id" {
	new_sandbox
	run sbx-exec --id "$(jq -r .ref.id s.json)" -- echo via-id
	assert_success
	assert_output via-id
}

@test "sbx-exec finds the sandbox by --id with its name" {
	new_sandbox --name exec-by-name
	run sbx-exec --id exec-by-name -- hostname
	assert_success
	assert_output exec-by-name
}

@test "sbx-exec finds the sandbox through SBX_STATE" {
	new_sandbox
	SBX_STATE=$BATS_TEST_TMPDIR/s.json run sbx-exec -- echo via-env
	assert_success
	assert_output via-env
}

@test "sbx-exec finds the sandbox in ./.sbx/state.json" {
	sbx-create -s .sbx/state.json >/dev/null
	run sbx-exec -- echo via-default
	assert_success
	assert_output via-default
}

# --- argv ------------------------------------------------------------------

@test "sbx-exec passes argv exactly, without a shell" {
	new_sandbox
	local args=("a b" "" '*' '$HOME' "it's \"q\"" $'l1\nl2' 'héllo ✓'
	    '$(id); `id` | x && y' '  lead' 'trail\')
	printf '%s\n' "${args[@]}" >want
	sbx-exec -s s.json -- printf '%s\n' "${args[@]}" >got
	cmp want got
}

# --- streams ---------------------------------------------------------------

@test "sbx-exec keeps stdout and stderr apart" {
	new_sandbox
	run --separate-stderr sbx-exec -s s.json -- sh -c 'echo out; echo err >&2'
	assert_success
	assert_output out
	[ "$stderr" = err ]
}

@test "sbx-exec -i forwards binary stdin and stdout byte-exact" {
	new_sandbox
	head -c 100000 /dev/urandom >f
	sbx-exec -s s.json -i -- cat <f >g
	cmp f g
}

@test "sbx-exec passes binary stderr byte-exact" {
	new_sandbox
	head -c 100000 /dev/urandom >f
	sbx-exec -s s.json -i -- sh -c 'cat >&2' <f >g 2>h
	cmp f h
	[ ! -s g ]
}

@test "sbx-exec without -i gives the command an empty stdin" {
	new_sandbox
	run sbx-exec -s s.json -- cat < <(echo host-data)
	assert_success
	assert_output ''
}

@test "sbx-exec without -i does not wait for a stdin pipe that never closes" {
	new_sandbox
	mkfifo in
	sleep 30 >in 3>&- &
	BG_PIDS+=($!)
	run timeout 10 sbx-exec -s s.json -- cat <in
	assert_success
	assert_output ''
}

@test "sbx-exec -i with stdin closed gives the command EOF" {
	new_sandbox
	# Closed inside the final shell: closed around `run`, bash would hand
	# the read end of its own capture pipe to the command as fd 0.
	run timeout 10 bash -c 'exec 0<&-; exec sbx-exec -s s.json -i -- cat'
	assert_success
	assert_output ''
}

# --- tty -------------------------------------------------------------------

@test "sbx-exec -t gives the command a pty" {
	new_sandbox
	run in_term 'sbx-exec -t -s s.json -- tty'
	assert_success
	assert_output --regexp '^/dev/pts/[0-9]+$'
}

@test "sbx-exec -t makes the command's stdin a terminal" {
	new_sandbox
	run in_term 'sbx-exec -t -s s.json -- sh -c "test -t 0 && echo is-tty"'
	assert_success
	assert_output is-tty
}

@test "sbx-exec -t passes the command's exit status" {
	new_sandbox
	run in_term 'sbx-exec -t -s s.json -- sh -c "exit 3"; echo rc=$?'
	assert_success
	assert_output rc=3
}

@test "sbx-exec -t restores the local terminal" {
	new_sandbox
	run in_term 'stty -g >before; sbx-exec -t -s s.json -- true;
	    stty -g >after; cmp before after && echo same'
	assert_success
	assert_output same
}

@test "sbx-exec -t restores the local terminal after the command fails" {
	new_sandbox
	run in_term 'stty -g >before; sbx-exec -t -s s.json -- sh -c "exit 5";
	    stty -g >after; cmp before after && echo same'
	assert_success
	assert_output same
}

@test "sbx-exec -t passes the window size" {
	new_sandbox
	run in_term 'stty cols 100 rows 30; sbx-exec -t -s s.json -- stty size'
	assert_success
	assert_output '30 100'
}

@test "sbx-exec -t sets TERM inside from the caller's TERM" {
	new_sandbox
	run in_term 'TERM=vt220 sbx-exec -t -s s.json -- sh -c "echo \$TERM"'
	assert_success
	assert_output vt220
}

# --- json ------------------------------------------------------------------

@test "sbx-exec --json prints one object with exactly the documented keys" {
	new_sandbox
	run --separate-stderr sbx-exec -s s.json --json -- true
	assert_success
	[ "${#lines[@]}" -eq 1 ]
	[ "$(jq -c keys <<<"$output")" = \
	    '["duration_ms","exit_code","signal","stderr","stderr_truncated","stdout","stdout_truncated","timed_out"]' ]
}

@test "sbx-exec --json captures both streams and the exit code" {
	new_sandbox
	run --separate-stderr sbx-exec -s s.json --json -- \
	    sh -c 'echo out; echo err >&2; exit 3'
	assert_failure 3
	[ -z "$stderr" ]
	[ "${#lines[@]}" -eq 1 ]
	jq -e '.exit_code == 3 and .signal == null and
	    .stdout == "out\n" and .stderr == "err\n" and
	    .stdout_truncated == false and .stderr_truncated == false and
	    .timed_out == false and (.duration_ms | type) == "number" and
	    .duration_ms >= 0' <<<"$output"
}

@test "sbx-exec --json reports the signal that killed the command" {
	new_sandbox
	run --separate-stderr sbx-exec -s s.json --json -- sh -c 'kill -9 $$'
	assert_failure 137
	jq -e '.exit_code == 137 and .signal == 9' <<<"$output"
}

@test "sbx-exec --json --max-output truncates each stream and says so" {
	new_sandbox
	run --separate-stderr sbx-exec -s s.json --json --max-output 10 -- \
	    sh -c 'echo 0123456789abcdef; echo 0123456789ABCDEF >&2'
	assert_success
	jq -e '.stdout == "0123456789" and .stderr == "0123456789" and
	    .stdout_truncated == true and .stderr_truncated == true' <<<"$output"
}

@test "sbx-exec --json turns invalid UTF-8 into U+FFFD" {
	new_sandbox
	sbx-exec -s s.json --json -- sh -c "printf 'a\\377b\\n'; printf '\\300x' >&2" >out
	[ "$(wc -l <out)" -eq 1 ]
	jq -e '.stdout == "a\ufffdb\n" and .stderr == "\ufffdx"' out
}

@test "sbx-exec --json reports a command that is not found as an object with exit_code 127" {
	new_sandbox
	run -127 --separate-stderr sbx-exec -s s.json --json -- no-such-command-xyz
	assert_failure 127
	[ "${#lines[@]}" -eq 1 ]
	jq -e '.exit_code == 127 and (.error | type) == "string" and
	    (.error | contains("no-such-command-xyz"))' <<<"$output"
	[[ "$stderr" == *no-such-command-xyz* ]]
}

@test "sbx-exec --json --timeout reports timed_out" {
	new_sandbox
	run --separate-stderr sbx-exec -s s.json --json --timeout 1 -- \
	    sh -c 'echo before; sleep 30'
	assert_failure 124
	jq -e '.exit_code == 124 and .timed_out == true and
	    .stdout == "before\n"' <<<"$output"
}

# --- timeout ---------------------------------------------------------------

@test "sbx-exec --timeout kills the command and exits 124" {
	new_sandbox
	run --separate-stderr sbx-exec -s s.json --timeout 1 -- sleep 30
	assert_failure 124
	[[ "$stderr" == *"timed out"* ]]
}

@test "sbx-exec --timeout kills every process the command started" {
	new_sandbox
	run sbx-exec -s s.json --timeout 1 -- \
	    sh -c 'setsid sleep 300 >/dev/null 2>&1 &
	    sleep 300 >/dev/null 2>&1 & sleep 300'
	assert_failure 124
	run sbx-exec -s s.json -- ps -eo comm=
	assert_success
	refute_line sleep
}

# --- what stays between execs ------------------------------------------------

@test "sbx-exec leaves a background process running for the next exec" {
	new_sandbox
	sbx-exec -s s.json -- sh -c 'setsid sleep 300 >/dev/null 2>&1 &'
	run sbx-exec -s s.json -- pgrep -x sleep
	assert_success
}

@test "sbx-exec sees a file written by an earlier exec" {
	new_sandbox
	sbx-exec -s s.json -- sh -c 'echo kept >/workspace/f'
	run sbx-exec -s s.json -- cat /workspace/f
	assert_success
	assert_output kept
}

# --- environment -------------------------------------------------------------

@test "sbx-exec does not pass the host environment" {
	new_sandbox
	SECRET_HOST_VAR=x run sbx-exec -s s.json -- env
	assert_success
	refute_output --partial SECRET_HOST_VAR
}

@test "sbx-exec gives the command PATH, HOME=/root and LANG" {
	new_sandbox
	run sbx-exec -s s.json -- env
	assert_success
	assert_line --regexp '^PATH=.*/bin'
	assert_line HOME=/root
	assert_line LANG=C.UTF-8
	refute_line --regexp '^TERM='
}

@test "sbx-exec -e K=V adds K to the command's environment" {
	new_sandbox
	run sbx-exec -s s.json -e GREETING='hello world' -- printenv GREETING
	assert_success
	assert_output 'hello world'
}

@test "sbx-exec -e K takes K's value from sbx-exec's environment" {
	new_sandbox
	FROM_HOST=host-value run sbx-exec -s s.json -e FROM_HOST -- printenv FROM_HOST
	assert_success
	assert_output host-value
}

@test "sbx-exec -e K fails with 125 when K is not set" {
	new_sandbox
	unset NOT_SET_ANYWHERE
	run --separate-stderr sbx-exec -s s.json -e NOT_SET_ANYWHERE -- echo ran
	assert_failure 125
	assert_output ''
	[[ "$stderr" == *NOT_SET_ANYWHERE* ]]
}

@test "sbx-exec gives every command the create-time --env" {
	new_sandbox --env A=1
	run sbx-exec -s s.json -- printenv A
	assert_success
	assert_output 1
	run sbx-exec -s s.json -- printenv A
	assert_success
	assert_output 1
}

@test "sbx-exec -e overrides a create-time --env value" {
	new_sandbox --env A=1
	run sbx-exec -s s.json -e A=2 -- env
	assert_success
	assert_line A=2
	refute_line A=1
}

# --- working directory -------------------------------------------------------

@test "sbx-exec runs in /workspace by default" {
	new_sandbox
	run sbx-exec -s s.json -- pwd
	assert_success
	assert_output /workspace
}

@test "sbx-exec -w sets the working directory" {
	new_sandbox
	run sbx-exec -s s.json -w /tmp -- pwd
	assert_success
	assert_output /tmp
}

@test "sbx-exec runs in the create-time --workdir by default" {
	new_sandbox --workdir /srv/app
	run sbx-exec -s s.json -- pwd
	assert_success
	assert_output /srv/app
}

# --- signals -----------------------------------------------------------------

@test "sbx-exec forwards SIGTERM to the command and exits with its status" {
	new_sandbox
	local p rc=0

	sbx-exec -s s.json -- \
	    sh -c 'trap "echo got; exit 9" TERM; echo ready; sleep 30 & wait' \
	    >out 2>&1 3>&- &
	p=$!
	BG_PIDS+=("$p")
	retry test -s out
	kill -TERM "$p"
	wait "$p" || rc=$?
	BG_PIDS=()
	[ "$rc" -eq 9 ]
	[ "$(cat out)" = $'ready\ngot' ]
}

@test "sbx-exec killed with SIGKILL takes the command with it" {
	new_sandbox
	local p

	sbx-exec -s s.json -- sleep 300 >/dev/null 2>&1 3>&- &
	p=$!
	BG_PIDS+=("$p")
	retry sleep_runs
	kill -KILL "$p"
	wait "$p" 2>/dev/null || true
	BG_PIDS=()
	retry no_sleep_runs
}

@test "sbx-exec -t passes a window size change on to the command" {
	new_sandbox
	# Resize the outer terminal while the command waits; the command
	# reports the size it sees when its SIGWINCH arrives.
	run timeout 30 script -qec "stty cols 80 rows 24; (sleep 1; stty cols 120 rows 40 </dev/tty) & sbx-exec -t -s s.json -- sh -c 'trap \"stty size; exit 0\" WINCH; sleep 20 & wait'" /dev/null </dev/null
	assert_success
	[[ "$output" == *"40 120"* ]]
}

@test "sbx-exec --id NAME --timeout also ends what left the command's session" {
	run sbx-create -s s.json --name "tmo-$BATS_TEST_NUMBER"
	assert_success
	run sbx-exec -I "tmo-$BATS_TEST_NUMBER" -T 1 -- sh -c 'setsid sleep 300 >/dev/null 2>&1 & sleep 300'
	assert_failure 124
	run sbx-exec -I "tmo-$BATS_TEST_NUMBER" -- sh -c 'ps -eo comm= | grep -c "^sleep$" || true'
	assert_output 0
}
