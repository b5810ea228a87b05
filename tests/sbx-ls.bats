#!/usr/bin/env bats
# sbx-ls: the JSON Lines contract, filters, the table, names and expiry.

load helper

setup_file() { sbx_setup_file; }
teardown_file() { sbx_teardown_file; }
setup() { sbx_setup; }
# Each test starts from an empty store.
teardown() { sbx-ls -j 2>/dev/null | sbx-kill -q >/dev/null 2>&1 || true; }

# Run sbx-ls on a terminal; the output without carriage returns.
on_tty() {
	script -qec "sbx-ls $*" /dev/null </dev/null | tr -d '\r'
}

@test "sbx-ls prints one JSON line per sandbox when stdout is not a terminal" {
	local a b
	a=$(mk) b=$(mk)
	run --separate-stderr sbx-ls
	assert_success
	[ "${#lines[@]}" -eq 2 ]
	jq -e . <<<"${lines[0]}" >/dev/null
	jq -e . <<<"${lines[1]}" >/dev/null
	[ "$(printf '%s\n' "${lines[@]}" | jq -r .id | sort)" = "$(printf '%s\n' "$a" "$b" | sort)" ]
	[ -z "$stderr" ]
}

@test "sbx-ls gives every documented field with its type" {
	local ref id
	ref=$(sbx-create -l team=a -l tier=web --timeout 600)
	id=$(jq -r .id <<<"$ref")
	run sbx-ls
	assert_success
	[ "${#lines[@]}" -eq 1 ]
	local o=${lines[0]} k
	for k in backend id name status image created_at created_at_epoch \
	    last_activity_at last_activity_epoch age idle timeout labels \
	    processes memory_bytes dir; do
		if [ "$(jq --arg k "$k" 'has($k)' <<<"$o")" != true ]; then
			echo "no field $k in $o" >&2
			return 1
		fi
	done
	[ "$(jq -r .backend <<<"$o")" = local ]
	[ "$(jq -r .id <<<"$o")" = "$id" ]
	[[ $id =~ ^[0-9a-f]{12}$ ]]
	[ "$(jq -r .name <<<"$o")" = null ]
	[ "$(jq -r .status <<<"$o")" = running ]
	[ "$(jq -r .image <<<"$o")" = host ]
	[ "$(jq -c .labels <<<"$o")" = '{"team":"a","tier":"web"}' ]
	[ "$(jq -r .timeout <<<"$o")" = 600 ]
	[ "$(jq -r .dir <<<"$o")" = "$(jq -r .dir <<<"$ref")" ]
	local n
	for n in created_at_epoch last_activity_epoch age idle timeout \
	    processes memory_bytes; do
		if [ "$(jq --arg n "$n" '.[$n] | type == "number" and . == floor and . >= 0' <<<"$o")" != true ]; then
			echo "$n is not a non-negative integer in $o" >&2
			return 1
		fi
	done
	[[ $(jq -r .created_at <<<"$o") =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$ ]]
	[[ $(jq -r .last_activity_at <<<"$o") =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$ ]]
	[ "$(jq '(.created_at | fromdateiso8601) == .created_at_epoch' <<<"$o")" = true ]
	[ "$(jq '(.last_activity_at | fromdateiso8601) == .last_activity_epoch' <<<"$o")" = true ]
	[ "$(jq '.memory_bytes > 0' <<<"$o")" = true ]
}

@test "sbx-ls --label keeps only the sandboxes with that label" {
	local a1 a2 b
	a1=$(mk -l team=a) a2=$(mk -l team=a -l tier=db) b=$(mk -l team=b)
	run sbx-ls --label team=a
	assert_success
	[ "${#lines[@]}" -eq 2 ]
	[ "$(printf '%s\n' "${lines[@]}" | jq -r .id | sort)" = "$(printf '%s\n' "$a1" "$a2" | sort)" ]
	run sbx-ls -l team=c
	assert_success
	[ -z "$output" ]
}

@test "sbx-ls with several --label lists only sandboxes matching all of them" {
	local a1 a2 b
	a1=$(mk -l team=a) a2=$(mk -l team=a -l tier=db) b=$(mk -l tier=db)
	run sbx-ls -l team=a -l tier=db
	assert_success
	[ "${#lines[@]}" -eq 1 ]
	[ "$(jq -r .id <<<"$output")" = "$a2" ]
}

@test "sbx-ls draws a table with a header and one row per sandbox on a terminal" {
	local a b
	a=$(mk -l team=a) b=$(mk)
	run on_tty
	assert_success
	[ "${#lines[@]}" -eq 3 ]
	[[ ${lines[0]} == ID* ]]
	[[ ${lines[0]} == *STATUS* ]]
	[[ ${lines[0]} != *'{'* ]]
	[ "$(printf '%s\n' "${lines[@]:1}" | awk '{print $1}' | sort)" = "$(printf '%s\n' "$a" "$b" | sort)" ]
	[[ "$(printf '%s\n' "${lines[@]}" | grep "^$a")" == *running* ]]
	[[ "$(printf '%s\n' "${lines[@]}" | grep "^$a")" == *team=a* ]]
}

@test "sbx-ls --json prints JSON Lines on a terminal" {
	local a
	a=$(mk)
	run on_tty --json
	assert_success
	[ "${#lines[@]}" -eq 1 ]
	[ "$(jq -r .id <<<"${lines[0]}")" = "$a" ]
	run on_tty -j
	assert_success
	[ "$(jq -r .id <<<"${lines[0]}")" = "$a" ]
}

@test "sbx-ls on an empty store prints nothing and exits 0" {
	mkdir empty
	local -x SBX_LOCAL_DIR=$BATS_TEST_TMPDIR/empty
	run --separate-stderr sbx-ls
	assert_success
	[ -z "$output" ]
	[ -z "$stderr" ]
	run on_tty
	assert_success
	[ -z "$output" ]
	SBX_LOCAL_DIR=$BATS_TEST_TMPDIR/does-not-exist
	run --separate-stderr sbx-ls
	assert_success
	[ -z "$output" ]
	[ -z "$stderr" ]
	[ ! -e does-not-exist ]
}

@test "sbx-ls counts a background process an exec left running" {
	new_sandbox
	local id
	id=$(jq -r .ref.id s.json)
	sbx-exec -s s.json -- sh -c 'sleep 300 >/dev/null 2>&1 &'
	run ls_line "$id"
	assert_success
	[ "$(jq '.processes | type == "number" and . == floor' <<<"$output")" = true ]
	[ "$(jq .processes <<<"$output")" -ge 1 ]
}

@test "sbx-ls shows a sandbox that outlived its idle timeout as expired" {
	new_sandbox --timeout 1
	local id
	id=$(jq -r .ref.id s.json)
	wait_status "$id" expired
	run ls_line "$id"
	[ "$(jq -r .status <<<"$output")" = expired ]
	[ "$(jq -r .timeout <<<"$output")" = 1 ]
}

@test "sbx-create --name shows in sbx-ls's name field and on the table" {
	local id
	id=$(mk --name web-1)
	run ls_line "$id"
	[ "$(jq -r .name <<<"$output")" = web-1 ]
	run on_tty
	[[ "$(printf '%s\n' "${lines[@]}" | grep "^$id")" == *web-1* ]]
}

@test "a sandbox name works as an id for sbx-exec --id" {
	local id
	id=$(mk -N web-2)
	run --separate-stderr sbx-exec --id web-2 -- hostname
	assert_success
	[ "$output" = web-2 ]
	run sbx-exec -I web-2 -- sh -c 'echo ok'
	assert_success
	[ "$output" = ok ]
}

@test "sbx-kill by name kills that sandbox and reports its id" {
	local id other
	id=$(mk -N web-3)
	other=$(mk)
	run --separate-stderr sbx-kill web-3
	assert_success
	[ "$(jq -r .status <<<"$output")" = killed ]
	[ "$(jq -r .id <<<"$output")" = "$id" ]
	[ ! -e "$SBX_LOCAL_DIR/$id" ]
	[ -z "$(ls_line "$id")" ]
	[ "$(ls_line "$other" | jq -r .status)" = running ]
}

@test "a killed sandbox's name can be used again" {
	local a b
	a=$(mk -N web-4)
	sbx-kill web-4 >/dev/null
	run --separate-stderr sbx-create -N web-4
	assert_success
	b=$(jq -r .id <<<"$output")
	[ "$b" != "$a" ]
	[ "$(ls_line "$b" | jq -r .name)" = web-4 ]
}

@test "sbx-create with a name in use fails with exit 1 and creates nothing" {
	local a
	a=$(sbx-create -N dup -s first.json | jq -r .id)
	run --separate-stderr sbx-create -N dup -s second.json
	assert_failure 1
	[[ $stderr == sbx-create:*dup* ]]
	[ -z "$output" ]
	[ ! -e second.json ]
	run sbx-ls
	[ "${#lines[@]}" -eq 1 ]
	[ "$(jq -r .id <<<"$output")" = "$a" ]
	[ "$(jq -r .name <<<"$output")" = dup ]
	[ "$(jq -r .status <<<"$output")" = running ]
	[ "$(find "$SBX_LOCAL_DIR" -mindepth 1 -maxdepth 1 -name '[0-9a-f]*' | wc -l)" -eq 1 ]
}

@test "sbx-ls with a bad --label exits 2 and prints nothing" {
	mk >/dev/null
	local bad
	for bad in novalue '=v' 'bad key=1'; do
		run --separate-stderr sbx-ls -l "$bad"
		assert_failure 2
		[ -z "$output" ]
		[[ $stderr == sbx-ls:*label* ]]
	done
}
