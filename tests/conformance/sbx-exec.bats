#!/usr/bin/env bats
# sbx-exec on the backend under test: exit codes, argv, streams, the tty,
# --json, --timeout, what stays between execs, the environment, the working
# directory, signals, finding the sandbox, and its usage errors.
#
# The sandbox's commands are the host's on local and busybox's on docker:
# the tests use only what both have (no pgrep, no printenv), and tell their
# own processes by their arguments (docker's keep-alive runs `sleep 2`).

load conformance

# One sandbox for the tests that only run commands in it, each leaving
# nothing another could see (their files and processes have names of their
# own): a sandbox per test would double the time on docker.
setup_file() {
	conf_setup_file
	SHARED=$BATS_FILE_TMPDIR/shared.json
	create -s "$SHARED" >/dev/null
	export SHARED
}

teardown_file() { conf_teardown_file; }

setup() {
	conf_setup
	BG_PIDS=()
}

# This test's state file, s.json, names the shared sandbox.
shared_sandbox() {
	cp "$SHARED" "$BATS_TEST_TMPDIR/s.json"
}

# Background processes by pid, then this test's own sandboxes.
teardown() {
	local p f

	[ -f "$BATS_TEST_TMPDIR/bg.pids" ] &&
	    mapfile -t -O "${#BG_PIDS[@]}" BG_PIDS <"$BATS_TEST_TMPDIR/bg.pids"
	for p in "${BG_PIDS[@]}"; do
		kill -KILL "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	for f in "$BATS_TEST_TMPDIR"/*.json "$BATS_TEST_TMPDIR"/.sbx/state.json; do
		[ -f "$f" ] && [ "$(sid "$f")" != "$(sid "$SHARED")" ] &&
		    sbx-kill -q -s "$f" >/dev/null 2>&1
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
	SHELL=/bin/bash script -qec "$1" /dev/null <term-in | tr -d '\r' || rc=$?
	kill "$p" 2>/dev/null
	wait "$p" 2>/dev/null
	rm -f "$BATS_TEST_TMPDIR/bg.pids"
	return "$rc"
}

# Try a command for up to 10 s until it succeeds.
retry() {
	local i

	for ((i = 0; i < 100; i++)); do
		"$@" && return 0
		sleep 0.1
	done
	return 1
}

# How many processes of this test's sandbox have the arguments "$*".
count_procs() {
	local out
	out=$(sx ps -e -o args=) || return 1
	grep -cxF -- "$*" <<<"$out" || true
}

runs() {
	[ "$(count_procs "$@")" -gt 0 ]
}

runs_not() {
	[ "$(count_procs "$@")" -eq 0 ]
}

# On a backend without capability $1, sbx-exec $2 is refused: 125, one
# line saying so, and the command does not run.
refused() {
	local what
	case $1 in
	pty) what='give a command a terminal (-t)' ;;
	stdin) what='forward standard input (-i)' ;;
	esac
	run -125 --separate-stderr sbx-exec -s s.json "$2" -- touch "/tmp/ran-$BATS_TEST_NUMBER"
	assert_output ''
	[ "$stderr" = "sbx-exec: backend '$BACKEND' cannot $what" ]
	run sx test -e "/tmp/ran-$BATS_TEST_NUMBER"
	assert_failure 1
}

# --- exit status -----------------------------------------------------------

@test "$B: sbx-exec prints the command's output and exits with its status" {
	shared_sandbox
	run --separate-stderr sbx-exec -s s.json -- sh -c 'echo hi; exit 7'
	assert_failure 7
	assert_output hi
	[ -z "$stderr" ]
}

@test "$B: sbx-exec passes exit codes 0..255 through" {
	shared_sandbox
	local n rc

	# The edges, and the codes sbx-exec uses itself.
	for n in 0 1 2 3 42 123 124 125 126 127 128 129 137 200 254 255; do
		rc=0
		sbx-exec -s s.json -- sh -c "exit $n" || rc=$?
		[ "$rc" -eq "$n" ] || fail "exit $n came back as $rc"
	done
}

@test "$B: sbx-exec exits 128+N when the command is killed by signal N" {
	shared_sandbox
	local s rc

	for s in 1 6 9 15; do
		rc=0
		sbx-exec -s s.json -- sh -c "kill -$s \$\$" || rc=$?
		[ "$rc" -eq $((128 + s)) ] || fail "signal $s gave $rc"
	done
}

@test "$B: sbx-exec exits 127 with one line naming a command that is not found" {
	shared_sandbox
	run -127 --separate-stderr sbx-exec -s s.json -- no-such-command-xyz arg
	assert_output ''
	[ "$stderr" = "sbx-exec: 'no-such-command-xyz': No such file or directory" ]
}

@test "$B: sbx-exec exits 126 for a file that is not executable" {
	shared_sandbox
	run -126 --separate-stderr sbx-exec -s s.json -- /etc/passwd
	assert_output ''
	[ "$stderr" = "sbx-exec: '/etc/passwd': Permission denied" ]
}

@test "$B: sbx-exec exits 125 when the workdir does not exist" {
	shared_sandbox
	run -125 --separate-stderr sbx-exec -s s.json -w /nonexistent -- echo ran
	assert_output ''
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == "sbx-exec: "*"/nonexistent"* ]]
}

@test "$B: sbx-exec exits 125 for a relative workdir" {
	shared_sandbox
	run -125 --separate-stderr sbx-exec -s s.json -w rel -- echo ran
	assert_output ''
	[ "$stderr" = "sbx-exec: workdir 'rel' is not absolute" ]
}

@test "$B: sbx-exec exits 125 for an unknown flag" {
	shared_sandbox
	run -125 --separate-stderr sbx-exec -s s.json --no-such-flag -- echo ran
	assert_output ''
	[[ "$stderr" == "sbx-exec: "*no-such-flag* ]]
	[ "${#stderr_lines[@]}" -eq 1 ]
}

@test "$B: sbx-exec exits 125 without a command" {
	shared_sandbox
	run -125 --separate-stderr sbx-exec -s s.json
	assert_output ''
	[ "$stderr" = "sbx-exec: no command given (see --help)" ]
}

@test "$B: sbx-exec exits 125 for an invalid --timeout" {
	shared_sandbox
	run -125 --separate-stderr sbx-exec -s s.json --timeout abc -- echo ran
	assert_output ''
	[ "$stderr" = "sbx-exec: --timeout: invalid duration 'abc' (want 90, 90s, 15m, 1h, 2d)" ]
}

@test "$B: sbx-exec --timeout takes a duration and says its limits" {
	shared_sandbox
	local d
	for d in 90 90s 15m 1h 2d 1h30m; do
		run --separate-stderr sbx-exec -s s.json --timeout "$d" -- echo ran
		[ "$status" -eq 0 ] || fail "--timeout $d: exit $status: $stderr"
		assert_output ran
	done
	run -125 --separate-stderr sbx-exec -s s.json --timeout 366d -- echo ran
	assert_output ''
	[ "$stderr" = "sbx-exec: --timeout: 366d is over the maximum, 365d" ]
	run -125 --separate-stderr sbx-exec -s s.json --timeout 0 -- echo ran
	assert_output ''
	[ "$stderr" = "sbx-exec: --timeout: 0 is under the minimum, 1s" ]
}

@test "$B: sbx-exec refuses --json with --tty with 125" {
	shared_sandbox
	run -125 --separate-stderr sbx-exec -s s.json --json --tty -- echo ran
	assert_output ''
	[ "$stderr" = "sbx-exec: --json and --tty do not go together" ]
}

@test "$B: sbx-exec --help prints the usage on stdout and exits 0" {
	run --separate-stderr sbx-exec --help
	assert_success
	assert_line --index 0 --partial 'usage: sbx-exec'
	[ -z "$stderr" ]
}

@test "$B: sbx-exec --version prints its name and version" {
	run --separate-stderr sbx-exec --version
	assert_success
	assert_output 'sbx-exec 0.1.0'
}

# --- finding the sandbox ---------------------------------------------------

@test "$B: sbx-exec exits 125 with 'no sandbox' for a missing state file" {
	run -125 --separate-stderr sbx-exec -s missing.json -- echo ran
	assert_output ''
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == "sbx-exec: no sandbox"* ]]
	[ ! -e missing.json ]
}

@test "$B: sbx-exec exits 125 with 'no sandbox' for an unknown --id" {
	run -125 --separate-stderr sbx-exec --id 0123456789ab -- echo ran
	assert_output ''
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == "sbx-exec: "*"no sandbox"*0123456789ab* ]]
}

@test "$B: sbx-exec exits 125 with 'no sandbox' when nothing names a sandbox" {
	run -125 --separate-stderr sbx-exec -- echo ran
	assert_output ''
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == "sbx-exec: no sandbox"* ]]
	[ ! -e .sbx ]
}

@test "$B: sbx-exec exits 125 with 'no sandbox' for a killed sandbox" {
	new_sandbox
	sbx-kill -q -s s.json >/dev/null
	run -125 --separate-stderr sbx-exec -s s.json -- echo ran
	assert_output ''
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == "sbx-exec: "*"no sandbox"* ]]
}

@test "$B: sbx-exec finds the sandbox by --id" {
	shared_sandbox
	sx sh -c 'echo via-id >/tmp/mark-id'
	run sbx-exec --id "$(sid)" -- cat /tmp/mark-id
	assert_success
	assert_output via-id
}

@test "$B: sbx-exec finds the sandbox by --id with its name" {
	if refused_name sbx-exec-by-name; then return; fi
	new_sandbox --name sbx-exec-by-name
	sx sh -c 'echo by-name >/tmp/mark'
	run sbx-exec --id sbx-exec-by-name -- cat /tmp/mark
	assert_success
	assert_output by-name
}

@test "$B: sbx-exec finds the sandbox through SBX_STATE" {
	shared_sandbox
	SBX_STATE=$BATS_TEST_TMPDIR/s.json run sbx-exec -- echo via-env
	assert_success
	assert_output via-env
}

@test "$B: sbx-exec finds the sandbox in ./.sbx/state.json" {
	mkdir .sbx
	cp "$SHARED" .sbx/state.json
	run sbx-exec -- echo via-default
	assert_success
	assert_output via-default
}

# --- argv ------------------------------------------------------------------

@test "$B: sbx-exec passes argv exactly, without a shell" {
	shared_sandbox
	local args=("a b" "" '*' '$HOME' "it's \"q\"" $'l1\nl2' 'héllo ✓'
	    '$(id); `id` | x && y' '  lead' 'trail\' '-n' '%s')
	printf '[%s]\n' "${args[@]}" >want
	sbx-exec -s s.json -- printf '[%s]\n' "${args[@]}" >got
	cmp want got
}

# --- streams ---------------------------------------------------------------

@test "$B: sbx-exec keeps stdout and stderr apart, each in order" {
	shared_sandbox
	run --separate-stderr sbx-exec -s s.json -- \
	    sh -c 'echo o1; echo e1 >&2; echo o2; echo e2 >&2'
	assert_success
	assert_output $'o1\no2'
	[ "$stderr" = $'e1\ne2' ]
}

# Random bytes: on daytona, none of \001 and \002, whose runs of three
# are Daytona's stream markers: its log stream cannot carry them
# (sbx(7); daytona-exec.bats shows what becomes of them).
random_bytes() {
	if [ "$BACKEND" = daytona ]; then
		echo "head -c $1 /dev/urandom | tr '\\001\\002' '\\003\\004'"
	else
		echo "head -c $1 /dev/urandom"
	fi
}

@test "$B: sbx-exec passes binary stdout and stderr byte-exact" {
	shared_sandbox
	sbx-exec -s s.json -- sh -c "$(random_bytes 300000) >/tmp/f
	    cat /tmp/f; cat /tmp/f >&2" >g 2>h
	[ "$(stat -c %s g)" -eq 300000 ]
	cmp g h
	[ "$(sx sh -c 'sha256sum </tmp/f')" = "$(sha256sum <g)" ]
}

@test "$B: sbx-exec -i forwards binary stdin byte-exact, or is refused (125)" {
	shared_sandbox
	if ! has_cap stdin; then refused stdin -i; return; fi
	sh -c "$(random_bytes 300000)" >f
	sbx-exec -s s.json -i -- cat <f >g
	cmp f g
}

@test "$B: sbx-exec -i passes stdin's end on, and the command reads what came before it" {
	shared_sandbox
	if ! has_cap stdin; then refused stdin -i; return; fi
	run bash -c "printf 'a\nb\n' | sbx-exec -s s.json -i -- sh -c 'cat; echo end'"
	assert_success
	assert_output $'a\nb\nend'
}

@test "$B: sbx-exec -i ends when the command stops reading, however much stdin is left" {
	shared_sandbox
	if ! has_cap stdin; then refused stdin -i; return; fi
	run timeout 20 bash -c "yes | sbx-exec -s s.json -i -- head -n 1"
	assert_success
	assert_output y
}

@test "$B: sbx-exec without -i gives the command an empty stdin" {
	shared_sandbox
	run sbx-exec -s s.json -- sh -c 'cat; echo done' < <(echo host-data)
	assert_success
	assert_output done
}

@test "$B: sbx-exec without -i does not wait for a stdin pipe that never closes" {
	shared_sandbox
	mkfifo in
	sleep 60 >in 3>&- &
	BG_PIDS+=($!)
	run timeout 20 sbx-exec -s s.json -- cat <in
	assert_success
	assert_output ''
}

@test "$B: sbx-exec -i with stdin closed gives the command EOF" {
	shared_sandbox
	if ! has_cap stdin; then refused stdin -i; return; fi
	# Closed inside the final shell: closed around `run`, bash would hand
	# the read end of its own capture pipe to the command as fd 0.
	run timeout 20 bash -c 'exec 0<&-; exec sbx-exec -s s.json -i -- cat'
	assert_success
	assert_output ''
}

# --- tty -------------------------------------------------------------------

@test "$B: sbx-exec -t makes the command's stdin, stdout and stderr a terminal, or is refused (125)" {
	shared_sandbox
	if has_cap pty; then
		# (Not a /dev/pts name: under gVisor the terminal is one of
		# the host's, which tty(1) cannot name.)
		run in_term 'sbx-exec -t -s s.json -- sh -c \
		    "test -t 0 && test -t 1 && test -t 2 && echo all-tty"'
		assert_success
		assert_output all-tty
	else
		refused pty -t
	fi
}

@test "$B: sbx-exec -t passes the command's exit status" {
	shared_sandbox
	if ! has_cap pty; then refused pty -t; return; fi
	run in_term 'sbx-exec -t -s s.json -- sh -c "exit 3"; echo rc=$?'
	assert_success
	assert_output rc=3
}

@test "$B: sbx-exec -t exits 127, 126 and 125 as it does without -t" {
	shared_sandbox
	if ! has_cap pty; then refused pty -t; return; fi
	local size

	# A terminal with a size, and one without (script's, by default).
	for size in 'stty rows 24 cols 80' true; do
		run in_term "$size; sbx-exec -t -s s.json -- no-such-command-xyz
		    echo rc=\$?"
		assert_success
		assert_line rc=127
		assert_output --partial no-such-command-xyz
		run in_term "$size; sbx-exec -t -s s.json -- /etc/passwd
		    echo rc=\$?"
		assert_success
		assert_line rc=126
		assert_output --partial /etc/passwd
		run in_term "$size; sbx-exec -t -s s.json -w /nonexistent -- true
		    echo rc=\$?"
		assert_success
		[ "${#lines[@]}" -eq 2 ]
		[[ "${lines[0]}" == "sbx-exec: "*/nonexistent* ]]
		[ "${lines[1]}" = rc=125 ]
	done
}

@test "$B: sbx-exec -t restores the local terminal" {
	shared_sandbox
	if ! has_cap pty; then refused pty -t; return; fi
	run in_term 'stty -g >before; sbx-exec -t -s s.json -- true;
	    stty -g >after; cmp before after && echo same'
	assert_success
	assert_output same
}

@test "$B: sbx-exec -t restores the local terminal after the command fails" {
	shared_sandbox
	if ! has_cap pty; then refused pty -t; return; fi
	run in_term 'stty -g >before; sbx-exec -t -s s.json -- sh -c "exit 5";
	    stty -g >after; cmp before after && echo same'
	assert_success
	assert_output same
}

@test "$B: sbx-exec -t passes the window size" {
	shared_sandbox
	if ! has_cap pty; then refused pty -t; return; fi
	run in_term 'stty cols 100 rows 30; sbx-exec -t -s s.json -- stty size'
	assert_success
	assert_output '30 100'
}

@test "$B: sbx-exec -t passes a window size change on to the command" {
	shared_sandbox
	if ! has_cap pty; then refused pty -t; return; fi
	local l

	# The command prints the size it sees at each SIGWINCH, and ends
	# when it is the new one. (Under gVisor a SIGWINCH may come while
	# the command still sees the size it had, before the one with the
	# new size.)
	sbx-exec -s s.json -i -- sh -c 'cat >/tmp/winch.sh' <<-'SH'
	trap 'stty size; [ "$(stty size)" = "24 120" ] && exit 0' WINCH
	touch /tmp/trap-set
	n=0
	while [ $n -lt 30 ]; do
		sleep 1 &
		wait
		n=$((n + 1))
	done
	exit 1
	SH
	# The outer terminal is resized once the command has set its trap:
	# one dimension, as stty would set each in turn, each a SIGWINCH.
	run in_term 'stty cols 80 rows 24
	    (for i in $(seq 200); do
		sbx-exec -s s.json -- test -e /tmp/trap-set && break
		sleep 0.1
	    done; stty cols 120 </dev/tty) &
	    sbx-exec -t -s s.json -- sh /tmp/winch.sh'
	assert_success
	[ "${lines[-1]}" = '24 120' ]
	for l in "${lines[@]}"; do
		[[ "$l" == '24 80' || "$l" == '24 120' ]] || fail "saw '$l'"
	done
}

@test "$B: sbx-exec -t sets TERM inside from the caller's TERM" {
	shared_sandbox
	if ! has_cap pty; then refused pty -t; return; fi
	run in_term 'TERM=vt220 sbx-exec -t -s s.json -- sh -c "echo \$TERM"'
	assert_success
	assert_output vt220
	run in_term 'TERM=vt220 sbx-exec -t -e TERM=dumb -s s.json -- \
	    sh -c "echo \$TERM"'
	assert_success
	assert_output dumb
}

@test "$B: sbx-exec -t sets TERM=xterm when the caller has none" {
	shared_sandbox
	if ! has_cap pty; then refused pty -t; return; fi
	run in_term 'env -u TERM sbx-exec -t -s s.json -- sh -c "echo \$TERM"'
	assert_success
	assert_output xterm
}

# --- json ------------------------------------------------------------------

@test "$B: sbx-exec --json prints one object with exactly the documented keys" {
	shared_sandbox
	run --separate-stderr sbx-exec -s s.json --json -- true
	assert_success
	[ "${#lines[@]}" -eq 1 ]
	[ "$(jq -c keys <<<"$output")" = \
	    '["duration_ms","exit_code","signal","stderr","stderr_truncated","stdout","stdout_truncated","timed_out"]' ]
}

@test "$B: sbx-exec --json captures both streams and the exit code" {
	shared_sandbox
	run --separate-stderr sbx-exec -s s.json --json -- \
	    sh -c 'echo out; echo err >&2; exit 3'
	assert_failure 3
	[ -z "$stderr" ]
	[ "${#lines[@]}" -eq 1 ]
	jq_true '.exit_code == 3 and .signal == null and
	    .stdout == "out\n" and .stderr == "err\n" and
	    .stdout_truncated == false and .stderr_truncated == false and
	    .timed_out == false and (.duration_ms | type) == "number" and
	    .duration_ms >= 0' <<<"$output"
}

@test "$B: sbx-exec --json reports the signal that killed the command" {
	shared_sandbox
	run --separate-stderr sbx-exec -s s.json --json -- sh -c 'kill -9 $$'
	assert_failure 137
	jq_true '.exit_code == 137 and .signal == 9' <<<"$output"
}

@test "$B: sbx-exec --json --max-output truncates each stream and says so" {
	shared_sandbox
	run --separate-stderr sbx-exec -s s.json --json --max-output 10 -- \
	    sh -c 'echo 0123456789abcdef; echo 0123456789ABCDEF >&2'
	assert_success
	jq_true '.stdout == "0123456789" and .stderr == "0123456789" and
	    .stdout_truncated == true and .stderr_truncated == true' <<<"$output"
}

@test "$B: sbx-exec --json turns invalid UTF-8 into U+FFFD" {
	shared_sandbox
	sbx-exec -s s.json --json -- sh -c "printf 'a\\377b\\n'; printf '\\300x' >&2" >out
	[ "$(wc -l <out)" -eq 1 ]
	jq_true '.stdout == "a\ufffdb\n" and .stderr == "\ufffdx"' <out
}

@test "$B: sbx-exec --json reports a command that is not found as an object with exit_code 127" {
	shared_sandbox
	run -127 --separate-stderr sbx-exec -s s.json --json -- no-such-command-xyz
	[ "${#lines[@]}" -eq 1 ]
	jq_true '.exit_code == 127 and (.error | type) == "string" and
	    (.error | contains("no-such-command-xyz"))' <<<"$output"
	[[ "$stderr" == "sbx-exec: "*no-such-command-xyz* ]]
}

@test "$B: sbx-exec --json --timeout reports timed_out" {
	shared_sandbox
	run -124 --separate-stderr sbx-exec -s s.json --json --timeout 1 -- \
	    sh -c 'echo before; sleep 30'
	[ "${#lines[@]}" -eq 1 ]
	jq_true '.exit_code == 124 and .timed_out == true and .signal == null and
	    .stdout == "before\n"' <<<"$output"
}

# --- timeout ---------------------------------------------------------------

@test "$B: sbx-exec --timeout kills the command and exits 124" {
	shared_sandbox
	run -124 --separate-stderr sbx-exec -s s.json --timeout 1 -- sleep 300
	assert_output ''
	[ "$stderr" = "sbx-exec: 'sleep' timed out after 1 s" ]
	runs_not sleep 300
}

@test "$B: sbx-exec --timeout kills every process the command started" {
	shared_sandbox
	run -124 sbx-exec -s s.json --timeout 1 -- sh -c \
	    'setsid sleep 301 >/dev/null 2>&1 & sleep 302 >/dev/null 2>&1 &
	    sleep 303'
	runs_not sleep 301
	runs_not sleep 302
	runs_not sleep 303
}

@test "$B: sbx-exec --id NAME --timeout also ends what left the command's session" {
	local name=sbx-exec-tmo
	if refused_name "$name"; then
		new_sandbox
		name=$(sid)
	else
		new_sandbox --name "$name"
	fi
	run -124 sbx-exec -I "$name" -T 1 -- \
	    sh -c 'setsid sleep 304 >/dev/null 2>&1 & sleep 305'
	runs_not sleep 304
	runs_not sleep 305
}

# --- what stays between execs ------------------------------------------------

@test "$B: sbx-exec leaves a background process running for the next exec" {
	shared_sandbox
	# The exec ends once its background process shows as the sleep (and
	# no longer as the shell that forked it).
	sx sh -c 'setsid sleep 306 >/dev/null 2>&1 & i=0
	    until ps -e -o args= | grep -qx "sleep 306"; do
		i=$((i + 1)); [ $i -lt 100 ] || exit 1; sleep 0.1
	    done'
	runs sleep 306
}

@test "$B: sbx-exec sees a file written by an earlier exec" {
	shared_sandbox
	sx sh -c 'echo kept >/workspace/f'
	run sx cat /workspace/f
	assert_success
	assert_output kept
}

# --- environment -------------------------------------------------------------

@test "$B: sbx-exec does not pass the host environment" {
	shared_sandbox
	SECRET_HOST_VAR=x run sbx-exec -s s.json -- env
	assert_success
	refute_output --partial SECRET_HOST_VAR
	refute_line "PWD=$PWD"
}

@test "$B: sbx-exec gives the command PATH, HOME=/root and LANG=C.UTF-8, and no TERM without -t" {
	shared_sandbox
	run sx env
	assert_success
	# PATH is the image's on docker (sbx-exec(1)): absolute directories
	# that find the commands. The test image sets no LANG.
	assert_line --regexp '^PATH=/[^:]*(:/[^:]*)*$'
	assert_line HOME=/root
	assert_line LANG=C.UTF-8
	refute_line --regexp '^TERM='
	run sx sh -c 'IFS=:; for d in $PATH; do [ -x "$d/sh" ] && exit 0; done
	    exit 1'
	assert_success
}

@test "$B: sbx-exec -e and create-time --env override LANG" {
	new_sandbox --env LANG=POSIX
	run sx env
	assert_success
	assert_line LANG=POSIX
	refute_line LANG=C.UTF-8
	run sbx-exec -s s.json -e LANG=C -- env
	assert_success
	assert_line LANG=C
	refute_line LANG=POSIX
	refute_line LANG=C.UTF-8
}

@test "$B: sbx-exec -e K=V adds K to the command's environment" {
	shared_sandbox
	run sbx-exec -s s.json -e GREETING='hello world' -e 'EQ=a=b' -- env
	assert_success
	assert_line 'GREETING=hello world'
	assert_line 'EQ=a=b'
}

@test "$B: sbx-exec -e K takes K's value from sbx-exec's environment" {
	shared_sandbox
	FROM_HOST=host-value run sbx-exec -s s.json -e FROM_HOST -- env
	assert_success
	assert_line FROM_HOST=host-value
}

@test "$B: sbx-exec -e K fails with 125 when K is not set" {
	shared_sandbox
	unset NOT_SET_ANYWHERE
	run -125 --separate-stderr sbx-exec -s s.json -e NOT_SET_ANYWHERE -- \
	    touch "/tmp/ran-$BATS_TEST_NUMBER"
	assert_output ''
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == "sbx-exec: "*NOT_SET_ANYWHERE* ]]
	run sx test -e "/tmp/ran-$BATS_TEST_NUMBER"
	assert_failure 1
}

@test "$B: sbx-exec gives every command the create-time --env" {
	new_sandbox --env A=1 --env 'B=x y'
	run sx env
	assert_success
	assert_line A=1
	assert_line 'B=x y'
	run sx env
	assert_success
	assert_line A=1
}

@test "$B: sbx-exec -e overrides a create-time --env value" {
	new_sandbox --env A=1
	run sbx-exec -s s.json -e A=2 -- env
	assert_success
	assert_line A=2
	refute_line A=1
	run sx env
	assert_line A=1
}

# --- working directory -------------------------------------------------------

@test "$B: sbx-exec runs in /workspace by default" {
	shared_sandbox
	run sx pwd
	assert_success
	assert_output /workspace
}

@test "$B: sbx-exec -w sets the working directory" {
	shared_sandbox
	run sbx-exec -s s.json -w /tmp -- pwd
	assert_success
	assert_output /tmp
}

@test "$B: sbx-exec runs in the create-time --workdir by default" {
	new_sandbox --workdir /srv/app
	run sx pwd
	assert_success
	assert_output /srv/app
}

# --- signals -----------------------------------------------------------------

@test "$B: sbx-exec forwards SIGTERM to the command and exits with its status" {
	shared_sandbox
	local p rc=0

	sbx-exec -s s.json -- \
	    sh -c 'trap "echo got; exit 9" TERM; echo ready; sleep 307 & wait' \
	    >out 2>&1 3>&- &
	p=$!
	BG_PIDS+=("$p")
	retry test -s out
	kill -TERM "$p"
	wait "$p" || rc=$?
	BG_PIDS=()
	[ "$rc" -eq 9 ] || fail "rc=$rc out=$(cat out)"
	[ "$(cat out)" = $'ready\ngot' ]
}

# A script's `cmd &` starts cmd with SIGINT and SIGQUIT ignored (bash
# without job control): here the sandbox's creator and sbx-exec both.
# And signals 32 and 33 (libc's own, which libc will not let a program
# set) ignored too, as some process managers leave them: sbx-create and
# sbx-exec start through a wrapper that asks the kernel's rt_sigaction
# directly (its number on x86_64: 13) and execs them.
ignoring() {
	local w=$BATS_TEST_TMPDIR/ign t
	if [ ! -d "$w" ]; then
		mkdir -p "$w"
		cat >"$w/ign.py" <<'EOF'
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
if os.uname().machine == "x86_64":
    ign = (ctypes.c_ulong * 4)(1, 0, 0, 0)  # SIG_IGN, no flags
    for s in (32, 33):
        if libc.syscall(13, s, ign, None, 8) != 0:
            sys.exit("rt_sigaction %d: %s" % (s, os.strerror(ctypes.get_errno())))
os.execv(sys.argv[1], sys.argv[1:])
EOF
		for t in sbx-create sbx-exec; do
			printf '#!/bin/sh\nexec python3 %s %s "$@"\n' "$w/ign.py" \
			    "$(command -v "$t")" >"$w/$t"
			chmod +x "$w/$t"
		done
	fi
	(trap '' INT QUIT && PATH=$w:$PATH && "$@")
}

@test "$B: sbx-exec's command starts with no signal ignored or blocked, though its callers ignored SIGINT and SIGQUIT" {
	local ign
	ign=$(ignoring grep '^SigIgn' /proc/self/status)
	[ "$ign" != "SigIgn:	0000000000000000" ] || fail "the trap ignored nothing: $ign"
	ignoring new_sandbox
	if [ "$(uname -m)" = x86_64 ]; then
		ign=$(python3 "$BATS_TEST_TMPDIR/ign/ign.py" /bin/grep '^SigIgn' /proc/self/status)
		(((0x${ign##*[[:space:]]} & 0x180000000) == 0x180000000)) ||
			fail "the wrapper ignored not 32 and 33: $ign"
	fi
	# What the command does: a shell that sends itself SIGINT dies of it.
	run --separate-stderr ignoring sbx-exec -s s.json -- \
	    sh -c 'kill -INT $$; echo survived SIGINT; kill -QUIT $$; echo survived SIGQUIT'
	[ "$status" -eq 130 ] || fail "status $status, output: $output"
	refute_output
	# What the kernel says, where /proc says it (gVisor's omits the masks).
	run --separate-stderr ignoring sbx-exec -s s.json -- cat /proc/self/status
	assert_success
	if [[ $output == *SigIgn* ]]; then
		run grep -E '^Sig(Ign|Blk)' <<<"$output"
		assert_output $'SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000'
	else
		[ "$B" = docker:runsc ] ||
		    fail "no SigIgn in the sandbox's /proc/self/status: $output"
	fi
}

@test "$B: kill -INT of an sbx-exec whose callers ignored SIGINT ends the command, with 128+N" {
	local p rc=0 want=130
	# envd sends SIGTERM for every signal but SIGKILL.
	[ "$BACKEND" = e2b ] && want=143
	ignoring new_sandbox
	# The subshell becomes sbx-exec: $! is its pid.
	(trap '' INT QUIT && exec sbx-exec -s s.json -- \
	    sh -c 'echo ready; exec sleep 312') >out 2>err 3>&- &
	p=$!
	BG_PIDS+=("$p")
	retry test -s out
	retry runs sleep 312
	kill -INT "$p"
	# Bounded: a command that ignores the signal would run on 312 s.
	retry eval '! kill -0 "$p" 2>/dev/null' ||
	    fail "sbx-exec still runs after kill -INT: out=$(cat out)"
	wait "$p" || rc=$?
	BG_PIDS=()
	[ "$rc" -eq "$want" ] || fail "rc=$rc out=$(cat out) err=$(cat err)"
	retry runs_not sleep 312
}

@test "$B: sbx-exec killed with SIGKILL takes the command with it" {
	shared_sandbox
	local p

	sbx-exec -s s.json -- sleep 308 >/dev/null 2>&1 3>&- &
	p=$!
	BG_PIDS+=("$p")
	retry runs sleep 308
	kill -KILL "$p"
	wait "$p" 2>/dev/null || true
	BG_PIDS=()
	retry runs_not sleep 308
}

# Run a long command in this test's sandbox in the background, wait until
# it runs, end the sandbox with "$@", and check sbx-exec ends too (bounded:
# 30 s), with 125 and one line of its own.
ended_under() {
	local p i rc=0

	rm -f out err
	sx sh -c 'echo started; exec sleep 309' >out 2>err 3>&- &
	p=$!
	BG_PIDS+=("$p")
	retry test -s out
	"$@" >/dev/null
	for ((i = 0; i < 300; i++)); do
		kill -0 "$p" 2>/dev/null || break
		sleep 0.1
	done
	kill -0 "$p" 2>/dev/null && fail "sbx-exec still runs after: $*"
	wait "$p" || rc=$?
	BG_PIDS=()
	[ "$rc" -eq 125 ] || fail "exit $rc after $*: $(cat err)"
	[ "$(cat out)" = started ] || fail "out: $(cat out) err: $(cat err)"
	[ "$(wc -l <err)" -eq 1 ]
	[[ "$(cat err)" == "sbx-exec: "* ]]
}

@test "$B: sbx-exec whose sandbox is killed or stopped under the command ends, with 125" {
	new_sandbox
	ended_under sbx-kill -s s.json
	new_sandbox
	if has_cap stop; then
		ended_under sbx-pause -m stop -s s.json
	else
		run sbx-pause -m stop -s s.json
		assert_failure 2
	fi
}

# --- the user (-u) -------------------------------------------------------------
# nobody (65534, group nogroup 65534, home /nonexistent) is in the host's
# passwd, the test image's and so the e2b backend's base template's.

# On daytona -u is refused: 125, one line, and nothing runs (Daytona's
# toolbox runs every command as the sandbox's user, with no way to become
# another).
refused_user() {
	[ "$BACKEND" = daytona ] || return 1
	local u
	for u in "$@"; do
		run -125 --separate-stderr sbx-exec -s s.json -u "$u" -- \
		    touch "/tmp/ran-$BATS_TEST_NUMBER"
		assert_output ''
		assert_equal "$stderr" "sbx-exec: the daytona backend cannot run a command as another user (-u '$u')"
	done
	run sx test -e "/tmp/ran-$BATS_TEST_NUMBER"
	assert_failure 1
}

@test "$B: sbx-exec -u NAME runs the command as that user: uid, gid, groups, HOME, and what it makes is its" {
	shared_sandbox
	if refused_user nobody; then return; fi
	local f=/tmp/by-nobody-$BATS_TEST_NUMBER
	run sbx-exec -s s.json -u nobody -- sh -c \
	    "id -u; id -g; id -G; echo \"\$HOME\"; touch $f; stat -c '%u:%g' $f; rm -f $f"
	assert_success
	assert_output $'65534\n65534\n65534\n/nonexistent\n65534:65534'
	# -e HOME wins over the user's home; without -u, root as ever.
	run sbx-exec -s s.json -u nobody -e HOME=/tmp -- sh -c 'echo "$HOME"'
	assert_output /tmp
	run sx id -u
	assert_output 0
}

@test "$B: sbx-exec -u UID:GID and NAME:GROUP run as those ids (a name alone on e2b, whose envd takes no ids)" {
	shared_sandbox
	if refused_user 1000:1001 nobody:root; then return; fi
	if [ "$BACKEND" = e2b ]; then
		for u in 1000:1000 1000 nobody:root; do
			run -125 --separate-stderr sbx-exec -s s.json -u "$u" -- \
			    touch "/tmp/ran-$BATS_TEST_NUMBER"
			assert_output ''
			assert_equal "$stderr" "sbx-exec: the e2b backend takes a user's name alone, not '$u' (envd has no uid or group)"
		done
		run sx test -e "/tmp/ran-$BATS_TEST_NUMBER"
		assert_failure 1
		return
	fi
	run sbx-exec -s s.json -u 1000:1001 -- sh -c 'id -u; id -g; id -G'
	assert_success
	assert_output $'1000\n1001\n1001'
	run sbx-exec -s s.json -u nobody:root -- sh -c 'id -u; id -g'
	assert_success
	assert_output $'65534\n0'
}

@test "$B: sbx-exec -u with a user the sandbox does not know fails with 125, one line, and runs nothing" {
	shared_sandbox
	if refused_user no-such-user; then return; fi
	run -125 --separate-stderr sbx-exec -s s.json -u no-such-user -- \
	    touch "/tmp/ran-$BATS_TEST_NUMBER"
	assert_output ''
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == "sbx-exec: "*"no-such-user"* ]] || fail "$stderr"
	# A group it does not know, where groups are taken (not on e2b).
	if [ "$BACKEND" != e2b ]; then
		run -125 --separate-stderr sbx-exec -s s.json \
		    -u nobody:no-such-group -- touch "/tmp/ran-$BATS_TEST_NUMBER"
		assert_output ''
		assert_equal "$stderr" "sbx-exec: no group 'no-such-group' in the sandbox's /etc/group"
	fi
	run sx test -e "/tmp/ran-$BATS_TEST_NUMBER"
	assert_failure 1
}

@test "$B: sbx-exec -u does not go with --detach or an empty user (125)" {
	shared_sandbox
	run -125 --separate-stderr sbx-exec -s s.json -d -u nobody -- true
	assert_equal "$stderr" "sbx-exec: --detach does not go with --user"
	run -125 --separate-stderr sbx-exec -s s.json -u '' -- true
	assert_equal "$stderr" "sbx-exec: invalid user '' (want name, uid, name:group or uid:gid)"
}
