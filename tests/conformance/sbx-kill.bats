#!/usr/bin/env bats
# sbx-kill on the backend under test: what it prints and writes, how it
# finds sandboxes, idempotence, and refusing bad input.

load conformance

setup_file() { conf_setup_file; }
teardown_file() { conf_teardown_file; }
setup() { conf_setup; }
# Whatever a test left; a second kill also removes what --keep kept.
teardown() { sbx-ls -j 2>/dev/null | sbx-kill -q >/dev/null 2>&1 || true; }

# The status sbx-ls gives sandbox $1 (empty when not listed).
ls_status() {
	sbx-ls -j | jq -r --arg id "$1" 'select(.id == $id) | .status'
}

# True when sandbox $1 is no longer listed.
unlisted() {
	local st
	st=$(ls_status "$1")
	[ -z "$st" ] || fail "sandbox $1 is still listed, $st"
}

@test "$B: sbx-kill --state marks the state file killed and closes the open segment" {
	new_sandbox
	[ "$(jq -r '.segments[-1][1]' s.json)" = null ]
	run sbx-kill --state s.json
	assert_success
	[ "$(jq -r .status s.json)" = killed ]
	[ "$(jq -r '.segments[-1][1] | type' s.json)" = number ]
	[ "$(jq '.segments[-1][1] | . == floor' s.json)" = true ]
	[ "$(jq '.segments[-1][1] >= .segments[-1][0]' s.json)" = true ]
	[ "$(jq -r .schema s.json)" = 1 ]
}

@test "$B: sbx-kill prints one JSON line with backend, id and status killed; the sandbox is gone" {
	new_sandbox
	local id
	id=$(sid)
	[ "$(ls_status "$id")" = running ]
	run --separate-stderr sbx-kill -s s.json
	assert_success
	[ "${#lines[@]}" -eq 1 ]
	[ "$(jq -r .backend <<<"$output")" = "$BACKEND" ]
	[ "$(jq -r .id <<<"$output")" = "$id" ]
	[ "$(jq -r .status <<<"$output")" = killed ]
	[ "$(jq -c 'keys_unsorted[:3]' <<<"$output")" = '["backend","id","status"]' ]
	[ -z "$stderr" ]
	unlisted "$id"
	run --separate-stderr sbx-exec -s s.json -- true
	assert_failure 125
}

@test "$B: sbx-kill of a killed sandbox exits 0, notes it on stderr and prints gone" {
	new_sandbox
	local id
	id=$(sid)
	sbx-kill -s s.json >/dev/null
	run --separate-stderr sbx-kill -s s.json
	assert_success
	[ "${#lines[@]}" -eq 1 ]
	[ "$(jq -r .id <<<"$output")" = "$id" ]
	[ "$(jq -r .status <<<"$output")" = gone ]
	[ "$stderr" = "sbx-kill: '$id' is already gone" ]
	[ "$(jq -r .status s.json)" = killed ]
	# By its ref on stdin (a line of sbx-ls), the same.
	run --separate-stderr sbx-kill <<<"{\"id\":\"$id\"}"
	assert_success
	[ "$(jq -r .status <<<"$output")" = gone ]
	[ "$stderr" = "sbx-kill: '$id' is already gone" ]
}

@test "$B: sbx-kill kills several ids given as operands" {
	local a b c
	a=$(mk) b=$(mk) c=$(mk)
	run --separate-stderr sbx-kill "$a" "$b"
	assert_success
	[ "${#lines[@]}" -eq 2 ]
	[ "$(jq -r .id <<<"${lines[0]}")" = "$a" ]
	[ "$(jq -r .id <<<"${lines[1]}")" = "$b" ]
	[ "$(jq -r .status <<<"${lines[0]}")" = killed ]
	[ "$(jq -r .status <<<"${lines[1]}")" = killed ]
	unlisted "$a"
	unlisted "$b"
	[ "$(ls_status "$c")" = running ]
}

@test "$B: sbx-kill --id kills that sandbox" {
	local a b
	a=$(mk) b=$(mk)
	run sbx-kill --id "$a" </dev/null
	assert_success
	[ "$(jq -r .id <<<"$output")" = "$a" ]
	[ "$(jq -r .status <<<"$output")" = killed ]
	unlisted "$a"
	[ "$(ls_status "$b")" = running ]
}

@test "$B: sbx-kill reads bare ids from stdin, one per line" {
	local a b c
	a=$(mk) b=$(mk) c=$(mk)
	run sbx-kill < <(printf '%s\n' "$a" "" "  $b  ")
	assert_success
	[ "${#lines[@]}" -eq 2 ]
	[ "$(jq -r .id <<<"${lines[0]}")" = "$a" ]
	[ "$(jq -r .id <<<"${lines[1]}")" = "$b" ]
	unlisted "$a"
	unlisted "$b"
	[ "$(ls_status "$c")" = running ]
}

@test "$B: sbx-kill reads JSON lines with an id from stdin: sbx-ls | sbx-kill" {
	local a b
	a=$(mk) b=$(mk)
	run bash -c 'sbx-ls | sbx-kill'
	assert_success
	[ "${#lines[@]}" -eq 2 ]
	[ "$(jq -r .status <<<"${lines[0]}")" = killed ]
	[ "$(jq -r .status <<<"${lines[1]}")" = killed ]
	[ "$(printf '%s\n' "${lines[@]}" | jq -r .id | sort)" = "$(printf '%s\n' "$a" "$b" | sort)" ]
	[ -z "$(sbx-ls)" ]
}

@test "$B: sbx-kill fed by sbx-ls | jq select kills only the selected sandboxes" {
	local a1 a2 b
	a1=$(mk -l team=a) a2=$(mk -l team=a) b=$(mk -l team=b)
	run bash -c "sbx-ls | jq -c 'select(.labels.team==\"a\")' | sbx-kill"
	assert_success
	[ "${#lines[@]}" -eq 2 ]
	[ "$(printf '%s\n' "${lines[@]}" | jq -r .id | sort)" = "$(printf '%s\n' "$a1" "$a2" | sort)" ]
	unlisted "$a1"
	unlisted "$a2"
	[ "$(ls_status "$b")" = running ]
}

@test "$B: sbx-kill of an id or name that does not exist exits 3 with one line, and kills the rest" {
	local a
	a=$(mk)
	run --separate-stderr sbx-kill 0123456789ab
	assert_failure 3
	assert_output ''
	[ "$stderr" = "sbx-kill: no sandbox '0123456789ab'" ]
	run --separate-stderr sbx-kill -I no-such-name </dev/null
	assert_failure 3
	assert_output ''
	[ "$stderr" = "sbx-kill: no sandbox 'no-such-name'" ]
	# A typo among good ids: those are killed, and the exit says 3.
	run --separate-stderr sbx-kill 0123456789ab "$a"
	assert_failure 3
	[ "$(jq -r .id,.status <<<"$output")" = "$a"$'\nkilled' ]
	[ "$stderr" = "sbx-kill: no sandbox '0123456789ab'" ]
	unlisted "$a"
	# A bare id that was killed is not known any more either.
	run --separate-stderr sbx-kill "$a"
	assert_failure 3
	[ "$stderr" = "sbx-kill: no sandbox '$a'" ]
}

@test "$B: sbx-kill with nothing naming a sandbox exits 3 with 'no sandbox'" {
	[ ! -e .sbx/state.json ]
	run --separate-stderr sbx-kill </dev/null
	assert_failure 3
	[[ $stderr == "sbx-kill: no sandbox"* ]]
	[ -z "$output" ]
	[ ! -e .sbx ]
}

@test "$B: sbx-kill with no ids uses ./.sbx/state.json" {
	local id
	id=$(create -s .sbx/state.json | jq -r .id)
	run sbx-kill </dev/null
	assert_success
	[ "$(jq -r .id <<<"$output")" = "$id" ]
	[ "$(jq -r .status .sbx/state.json)" = killed ]
	unlisted "$id"
}

@test "$B: sbx-kill with no ids uses \$SBX_STATE before stdin" {
	local a b
	new_sandbox
	a=$(sid)
	b=$(mk)
	run env SBX_STATE="$BATS_TEST_TMPDIR/s.json" sbx-kill < <(echo "$b")
	assert_success
	[ "${#lines[@]}" -eq 1 ]
	[ "$(jq -r .id <<<"$output")" = "$a" ]
	[ "$(jq -r .status s.json)" = killed ]
	[ "$(ls_status "$b")" = running ]
}

@test "$B: sbx-kill on a malformed state file exits 6 and leaves it unchanged" {
	printf '{"schema": 1, "ref": {"backend": "%s", "id": ' "$BACKEND" >bad.json
	cp bad.json before.json
	run --separate-stderr sbx-kill -s bad.json
	assert_failure 6
	[[ $stderr == sbx-kill:*bad.json* ]]
	[ -z "$output" ]
	cmp bad.json before.json
	[ -z "$(find . -name 'bad.json.tmp*')" ]
}

@test "$B: sbx-kill on a state file of another schema exits 6 and leaves it unchanged" {
	new_sandbox
	local id
	id=$(sid)
	jq '.schema = 99' s.json >other.json
	cp other.json before.json
	run --separate-stderr sbx-kill -s other.json
	assert_failure 6
	[[ $stderr == sbx-kill:*other.json* ]]
	[ -z "$output" ]
	cmp other.json before.json
	[ "$(ls_status "$id")" = running ]
}

@test "$B: sbx-kill --keep leaves the sandbox listed as killed, running nothing, until a second kill" {
	new_sandbox
	local id
	id=$(sid)
	sx sh -c 'echo kept >kept.txt; sleep 300 >/dev/null 2>&1 &'
	if ! has_cap keep; then
		run --separate-stderr sbx-kill --keep -s s.json
		assert_failure 2
		assert_output ''
		[ "$stderr" = "sbx-kill: cannot kill '$id': backend '$BACKEND' cannot keep a killed sandbox's files (--keep)" ]
		[ "$(jq -r .status s.json)" = running ]
		[ "$(ls_status "$id")" = running ]
		run sx cat kept.txt
		assert_output kept
		return
	fi
	run --separate-stderr sbx-kill --keep -s s.json
	assert_success
	[ "$(jq -r .status <<<"$output")" = killed ]
	[ "$(jq -r .status s.json)" = killed ]
	[ "$(ls_status "$id")" = killed ]
	run --separate-stderr sx true
	assert_failure 125
	[[ $stderr == "sbx-exec: "*"$id"* ]]
	run sbx-kill "$id"
	assert_success
	[ "$(jq -r .status <<<"$output")" = killed ]
	unlisted "$id"
}

@test "$B: sbx-kill kills a paused or stopped sandbox as a running one" {
	local mode a
	for mode in suspend stop; do
		if has_cap "$mode"; then
			a=$(mk)
			sbx-pause -m "$mode" "$a" >/dev/null
			[ "$(ls_status "$a")" != running ]
			run --separate-stderr sbx-kill "$a"
			assert_success
			[ "$(jq -r .status <<<"$output")" = killed ]
			[ -z "$stderr" ] || fail "$mode: $stderr"
			unlisted "$a"
		else
			run --separate-stderr sbx-pause -m "$mode" 0123456789ab
			assert_failure 2
			[[ $stderr == "sbx-pause: backend '$BACKEND' cannot "* ]]
		fi
	done
}

@test "$B: sbx-kill keeps going after a bad input line and kills the rest" {
	local a b
	a=$(mk) b=$(mk)
	run --separate-stderr sbx-kill < <(printf '%s\n' "$a" '{"name":"x"}' "{\"id\":\"$b\"}")
	assert_failure 6
	[ "${#lines[@]}" -eq 2 ]
	[ "$(jq -r .id <<<"${lines[0]}")" = "$a" ]
	[ "$(jq -r .id <<<"${lines[1]}")" = "$b" ]
	[[ $stderr == *'"id"'* ]]
	unlisted "$a"
	unlisted "$b"
}

@test "$B: sbx-kill cleans up a sandbox that expired" {
	new_sandbox --timeout 1
	local id
	id=$(sid)
	if ! has_cap keep; then
		# Its server removed it: gone is done.
		wait_unlisted "$id"
		run --separate-stderr sbx-kill -s s.json
		assert_success
		[ "$(jq -r .status <<<"$output")" = gone ]
		[ "$stderr" = "sbx-kill: '$id' is already gone" ]
		return
	fi
	wait_status "$id" expired
	run sbx-kill -s s.json
	assert_success
	[ "$(jq -r .status <<<"$output")" = killed ]
	[ "$(jq -r .status s.json)" = killed ]
	unlisted "$id"
}

@test "$B: a state file whose ref holds a credential is refused by every tool, unchanged" {
	printf '{"schema":1,"ref":{"backend":"%s","id":"000000000000","token":"t0ps3cret"},"status":"running"}\n' \
	    "$BACKEND" >bad.json
	cp bad.json before.json
	for t in sbx-kill sbx-pause sbx-cost; do
		run "$t" -s bad.json
		assert_failure 6
		assert_output --partial "the ref holds a credential ('token'); refs must be secret-free"
		refute_output --partial t0ps3cret
	done
	run sbx-exec -s bad.json -- true
	assert_failure 125
	refute_output --partial t0ps3cret
	cmp bad.json before.json
}

@test "$B: a state file of another backend than --backend says so, exit 2, unchanged" {
	local other=e2b
	[ "$BACKEND" = e2b ] && other=local
	printf '{"schema":1,"ref":{"backend":"%s","id":"abc"},"status":"running"}\n' \
	    "$other" >other.json
	cp other.json before.json
	for t in sbx-kill sbx-pause; do
		run "$t" -b "$BACKEND" -s other.json
		assert_failure 2
		assert_output "$t: state file 'other.json' is of backend '$other', not '$BACKEND'"
	done
	cmp other.json before.json
}
