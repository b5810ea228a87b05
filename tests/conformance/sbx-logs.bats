#!/usr/bin/env bats
# sbx-logs and sbx-exec -d on the backend under test: every exec in the
# host's log, detached commands that run on and whose end and output are
# read back, following, unknown sandboxes, usage errors, and a sandbox that
# forges files where its detached commands keep theirs.

load conformance

setup_file() { conf_setup_file; }
teardown_file() { conf_teardown_file; }

setup() {
	conf_setup
	BG_PIDS=()
}

teardown() {
	local p

	for p in "${BG_PIDS[@]}"; do
		kill -KILL "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	[ -f "$BATS_TEST_TMPDIR/s.json" ] &&
	    sbx-kill -q -s "$BATS_TEST_TMPDIR/s.json" >/dev/null 2>&1
	return 0
}

# A command that prints one, waits (60 s at most) for /tmp/gate-$1, prints
# two and exits 7.
gated() {
	echo "echo one; i=0; while [ ! -e /tmp/gate-$1 ] && [ \$i -lt 600 ]; do sleep 0.1; i=\$((i + 1)); done; echo two; exit 7"
}

# Run "$@" until it succeeds, 60 s at most.
until_ok() {
	local i
	for ((i = 0; i < 240; i++)); do
		"$@" && return 0
		sleep 0.25
	done
	echo "never true: $*" >&2
	return 1
}

# sbx-logs's line for command $1, as one compact object.
line_of() {
	sbx-logs -s s.json | jq -c --arg id "$1" 'select(.id == $id)'
}

ended() {
	[ "$(line_of "$1" | jq -r .ended)" = true ]
}

@test "$B: every exec is logged: argv, env names (never values), exit code, duration, bytes" {
	new_sandbox
	run sbx-exec -j -s s.json -e SBX_T_SECRET=hunter2 -- sh -c 'printf abc; printf de >&2; exit 3'
	assert_failure 3
	run sbx-exec -s s.json -- sh -c 'printf abcd'
	assert_success
	run --separate-stderr sbx-logs -s s.json
	assert_success
	[ "$(wc -l <<<"$output")" -eq 2 ]
	head -1 <<<"$output" | jq_true '.argv == ["sh","-c","printf abc; printf de >&2; exit 3"]
	    and .env == ["SBX_T_SECRET"] and .detached == false and .ended == true
	    and .exit_code == 3 and .signal == null and .timed_out == false
	    and (.duration_ms | type) == "number" and .bytes_out == 3 and .bytes_err == 2
	    and (.id | test("^[0-9a-f]{16}$")) and (.time | test("^[0-9-]{10}T[0-9:]{8}Z$"))'
	# Without -j, local, and docker's agent (not under gVisor), hand the
	# caller's stdout to the command: the bytes never pass through
	# sbx-exec.
	if [ "$B" = local ] || [ "$B" = docker ]; then
		tail -1 <<<"$output" | jq_true '.exit_code == 0 and .bytes_out == null'
	else
		tail -1 <<<"$output" | jq_true '.exit_code == 0 and .bytes_out == 4 and .bytes_err == 0'
	fi
	refute_output --partial hunter2
	run grep -r hunter2 "$SBX_LOG_DIR"
	assert_failure 1
	# -n: the last ones.
	run sbx-logs -s s.json -n 1
	assert_success
	[ "$(wc -l <<<"$output")" -eq 1 ]
	jq_true '.exit_code == 0' <<<"$output"
}

@test "$B: sbx-exec -d returns at once with an id; the command runs on past later execs; its end and output are read back" {
	new_sandbox
	run --separate-stderr sbx-exec -d -s s.json -- sh -c "$(gated a)"
	assert_success
	assert_output --regexp '^[0-9a-f]{16}$'
	cid=$output
	# Running (its gate is shut): logged, not ended.
	line_of "$cid" | jq_true '.detached == true and .ended == false and .exit_code == null and .argv[0] == "sh"'
	until_ok bash -c "sbx-logs -s s.json -o $cid | grep -qx one"
	# A later exec opens the gate: the command was not killed by it.
	sbx-exec -s s.json -- touch /tmp/gate-a
	until_ok ended "$cid"
	line_of "$cid" | jq_true '.exit_code == 7 and .bytes_out == 8 and (.duration_ms | type) == "number"'
	run sbx-logs -s s.json -o "$cid"
	assert_success
	assert_output $'one\ntwo'
	run sbx-logs -s s.json -o last
	assert_output $'one\ntwo'
	# --json: an object.
	run sbx-exec -d -j -s s.json -- true
	assert_success
	jq_true '(.id | test("^[0-9a-f]{16}$")) and .detached == true' <<<"$output"
}

@test "$B: sbx-logs -f prints a line a later exec appends; -f -o follows the output to the command's end" {
	new_sandbox
	sbx-exec -s s.json -- true
	sbx-logs -f -s s.json >f.out 2>f.err &
	BG_PIDS+=($!)
	until_ok grep -q '"argv":\["true"\]' f.out
	sbx-exec -s s.json -- echo marker-logs-f >/dev/null
	until_ok grep -q marker-logs-f f.out
	[ "$(wc -l <f.out)" -eq 2 ]

	cid=$(sbx-exec -d -s s.json -- sh -c "$(gated f)")
	sbx-logs -f -s s.json -o "$cid" >o.out 2>o.err &
	pid=$!
	BG_PIDS+=($pid)
	until_ok grep -qx one o.out
	sbx-exec -s s.json -- touch /tmp/gate-f
	# It ends by itself when the command has.
	until_ok bash -c "! kill -0 $pid 2>/dev/null"
	wait "$pid"
	[ "$(cat o.out)" = $'one\ntwo' ]
	# The first follower printed the detached start, then its end.
	until_ok bash -c "grep -c '\"id\":\"$cid\"' f.out | grep -qx 2"
	grep "\"id\":\"$cid\"" f.out | tail -1 | jq_true '.ended == true and .exit_code == 7'
}

@test "$B: sbx-logs of an unknown sandbox exits 3; a killed sandbox's log goes with it" {
	run --separate-stderr sbx-logs -b "$BACKEND" -I nosuch-sandbox-0000
	assert_failure 3
	[ -n "$stderr" ]
	assert_output ''
	new_sandbox
	sbx-exec -s s.json -- true
	id=$(sid)
	[ -s "$SBX_LOG_DIR/$BACKEND/$id.jsonl" ]
	run sbx-logs "$id"
	assert_success
	jq_true '.argv == ["true"]' <<<"$output"
	sbx-kill -s s.json >/dev/null
	[ ! -e "$SBX_LOG_DIR/$BACKEND/$id.jsonl" ]
	run --separate-stderr sbx-logs "$id"
	assert_failure 3
	assert_output ''
}

@test "$B: flags that cannot go together are usage errors, and nothing is logged" {
	new_sandbox
	for f in -t -i '-T 5' '-M 10'; do
		# shellcheck disable=SC2086
		run --separate-stderr sbx-exec -d $f -s s.json -- true
		assert_failure 125
		[ "$stderr" = "sbx-exec: --detach does not go with $(case $f in
		    -t) echo --tty ;; -i) echo --interactive ;;
		    -T*) echo --timeout ;; *) echo --max-output ;; esac)" ]
		assert_output ''
	done
	[ ! -e "$SBX_LOG_DIR/$BACKEND/$(sid).jsonl" ]
	sbx-exec -s s.json -- true
	cid=$(sbx-logs -s s.json | jq_str .id)
	run -2 sbx-logs -s s.json -o nothex
	run -2 sbx-logs -s s.json -o 0123456789abcdef
	assert_output --partial "no command '0123456789abcdef'"
	run -2 sbx-logs -s s.json -o "$cid"
	assert_output --partial "was not detached"
	run -2 sbx-logs -s s.json -o last
	run -2 sbx-logs -s s.json -o "$cid" -n 1
	run -2 sbx-logs -s s.json a b
	run -2 sbx-logs -s s.json -n x
	run -2 sbx-logs --nosuch
	[ "$(wc -l <"$SBX_LOG_DIR/$BACKEND/$(sid).jsonl")" -eq 1 ]
}

@test "$B: a sandbox writing into /tmp/.sbx/cmd cannot add a line to sbx-logs, nor end another command" {
	new_sandbox
	a=$(sbx-exec -d -s s.json -- sh -c "$(gated h)")
	b=$(sbx-exec -d -s s.json -- sh -c "$(gated h)")
	fake=aaaaaaaaaaaaaaaa
	# A command of its own invention; a status of a's that speaks for b
	# on its second line and smuggles JSON into its first. (Through -e:
	# argv is logged, the values of -e never are.)
	sbx-exec -s s.json -e "F=$fake" -e "A=$a" \
	    -e "P=0 1 5\",\"argv\":[\"forged\"]
$b 0 1 1" -- sh -c 'mkdir -p /tmp/.sbx/cmd/$F &&
	    echo "0 1 1" >/tmp/.sbx/cmd/$F/status &&
	    echo "$P" >/tmp/.sbx/cmd/$F/out &&
	    echo "$P" >/tmp/.sbx/cmd/$A/status'
	run sbx-exec -s s.json -e "F=$fake" -- sh -c 'cat /tmp/.sbx/cmd/$F/out'
	assert_output --partial forged
	run sbx-logs -s s.json
	assert_success
	[ "$(wc -l <<<"$output")" -eq 4 ]
	refute_output --partial forged
	refute_output --partial "$fake"
	[ "$(jq -r .id <<<"$output" | sort)" = "$(jq -r .id "$SBX_LOG_DIR/$BACKEND/$(sid).jsonl" | sort)" ]
	line_of "$a" | jq_true '.ended == false'
	line_of "$b" | jq_true '.ended == false'
	run -2 sbx-logs -s s.json -o "$fake"
	# Its commands' own ends still come through.
	sbx-exec -s s.json -- touch /tmp/gate-h
	until_ok ended "$b"
	until_ok ended "$a"
	line_of "$b" | jq_true '.exit_code == 7'
}

@test "$B: sbx-gc removes the logs of sandboxes its backend no longer lists, and keeps the others" {
	new_sandbox
	sbx-exec -s s.json -- true
	mkdir -p "$SBX_LOG_DIR/$BACKEND"
	echo '{}' >"$SBX_LOG_DIR/$BACKEND/gone0000sandbox.jsonl"
	touch -d '1 hour ago' "$SBX_LOG_DIR/$BACKEND/gone0000sandbox.jsonl"
	run sbx-gc
	assert_success
	[ ! -e "$SBX_LOG_DIR/$BACKEND/gone0000sandbox.jsonl" ]
	[ -s "$SBX_LOG_DIR/$BACKEND/$(sid).jsonl" ]
	run sbx-logs -s s.json
	jq_true '.argv == ["true"]' <<<"$output"
}
