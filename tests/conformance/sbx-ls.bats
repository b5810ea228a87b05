#!/usr/bin/env bats
# sbx-ls on the backend under test: the JSON Lines contract, filters, the
# table, names, and expiry.

load conformance

setup_file() { conf_setup_file; }
teardown_file() { conf_teardown_file; }
setup() { conf_setup; }
# Each test starts with no sandbox.
teardown() { sbx-ls -j 2>/dev/null | sbx-kill -q >/dev/null 2>&1 || true; }

# The image sbx-ls names for a sandbox made by create: its -i (on the
# backends of sbx's image store, local and qemu, as the store names it:
# docker.io/NAME:latest), or host.
created_image() {
	local i
	for ((i = 0; i < ${#CREATE[@]}; i++)); do
		if [ "${CREATE[i]}" = -i ]; then
			case $BACKEND in
			local | qemu) sbx-image inspect "${CREATE[i + 1]}" | jq_str .image ;;
			*) echo "${CREATE[i + 1]}" ;;
			esac
			return
		fi
	done
	echo host
}

# Fail unless field $2 of JSON object $1 passes jq test $3.
field() {
	[ "$(jq --arg k "$2" ".[\$k] | $3" <<<"$1")" = true ] ||
		fail "field $2 is not $3 in $1"
}

@test "$B: sbx-ls prints one JSON line per sandbox when stdout is not a terminal" {
	local a b
	a=$(mk) b=$(mk)
	run --separate-stderr sbx-ls
	assert_success
	[ "${#lines[@]}" -eq 2 ]
	jq_true . <<<"${lines[0]}" >/dev/null
	jq_true . <<<"${lines[1]}" >/dev/null
	[ "$(printf '%s\n' "${lines[@]}" | jq -r .id | sort)" = "$(printf '%s\n' "$a" "$b" | sort)" ]
	[ -z "$stderr" ]
}

@test "$B: sbx-ls gives every documented field with its type" {
	local ref id o k
	ref=$(create -l team=a -l tier=web --timeout 600)
	id=$(jq -r .id <<<"$ref")
	run sbx-ls
	assert_success
	[ "${#lines[@]}" -eq 1 ]
	o=${lines[0]}
	for k in backend id name status image workdir created_at \
	    created_at_epoch last_activity_at last_activity_epoch age idle \
	    timeout labels processes memory_bytes cpu_s dir; do
		[ "$(jq --arg k "$k" 'has($k)' <<<"$o")" = true ] ||
			fail "no field $k in $o"
	done
	[ "$(jq -r .backend <<<"$o")" = "$BACKEND" ]
	[ "$(jq -r .id <<<"$o")" = "$id" ]
	[ "$(jq -r .name <<<"$o")" = null ]
	[ "$(jq -r .status <<<"$o")" = running ]
	[ "$(jq -r .image <<<"$o")" = "$(created_image)" ]
	[ "$(jq -r .workdir <<<"$o")" = /workspace ]
	[ "$(jq -c .labels <<<"$o")" = '{"team":"a","tier":"web"}' ]
	[ "$(jq -r .timeout <<<"$o")" = 600 ]
	# The ref's directory, where the backend keeps one.
	[ "$(jq -c .dir <<<"$o")" = "$(jq -c '.dir // null' <<<"$ref")" ]
	local int='type == "number" and . == floor and . >= 0'
	local utc='type == "string" and test("^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$")'
	for k in created_at_epoch age timeout; do
		field "$o" "$k" "$int"
	done
	field "$o" created_at "$utc"
	[ "$(jq '(.created_at | fromdateiso8601) == .created_at_epoch' <<<"$o")" = true ]
	# Unknown to a backend that does not account for them: null.
	field "$o" processes "($int) or . == null"
	field "$o" memory_bytes "($int) or . == null"
	field "$o" cpu_s '(type == "number" and . >= 0) or . == null'
	if has_cap idle; then
		field "$o" last_activity_epoch "$int"
		field "$o" idle "$int"
		field "$o" last_activity_at "$utc"
		[ "$(jq '(.last_activity_at | fromdateiso8601) == .last_activity_epoch' <<<"$o")" = true ]
	else
		field "$o" last_activity_epoch '. == null'
		field "$o" idle '. == null'
		field "$o" last_activity_at '. == null'
	fi
}

@test "$B: sbx-ls --label keeps only the sandboxes with that label" {
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

@test "$B: sbx-ls with several --label lists only sandboxes matching all of them" {
	local a1 a2 b
	a1=$(mk -l team=a) a2=$(mk -l team=a -l tier=db) b=$(mk -l tier=db)
	run sbx-ls -l team=a -l tier=db
	assert_success
	[ "${#lines[@]}" -eq 1 ]
	[ "$(jq -r .id <<<"$output")" = "$a2" ]
}

@test "$B: sbx-ls draws a table with a header and one row per sandbox on a terminal" {
	local a b
	a=$(mk -l team=a) b=$(mk)
	run on_tty
	assert_success
	[ "${#lines[@]}" -eq 3 ]
	[[ ${lines[0]} == ID* ]]
	[[ ${lines[0]} == *STATUS* ]]
	[[ ${lines[0]} != *'{'* ]]
	[ "$(printf '%s\n' "${lines[@]:1}" | awk '{print $1}' | sort)" = "$(printf '%s\n' "${a:0:12}" "${b:0:12}" | sort)" ]
	[[ "$(printf '%s\n' "${lines[@]}" | grep "^${a:0:12}")" == *running* ]]
	[[ "$(printf '%s\n' "${lines[@]}" | grep "^${a:0:12}")" == *team=a* ]]
}

@test "$B: sbx-ls --json prints JSON Lines on a terminal" {
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

@test "$B: sbx-ls with no sandbox prints nothing down a pipe, the header alone on a terminal, and exits 0" {
	run --separate-stderr sbx-ls
	assert_success
	[ -z "$output" ]
	[ -z "$stderr" ]
	run on_tty
	assert_success
	[ "${#lines[@]}" -eq 1 ]
	[[ ${lines[0]} == ID*BACKEND*STATUS* ]]
}

@test "$B: sbx-ls shows a sandbox that outlived its idle timeout as expired" {
	new_sandbox --timeout 1
	local id
	id=$(sid)
	if ! has_cap keep; then
		wait_unlisted "$id"
		run --separate-stderr sx true
		assert_failure 125
		return
	fi
	wait_status "$id" expired
	run ls_line "$id"
	[ "$(jq -r .status <<<"$output")" = expired ]
	[ "$(jq -r .timeout <<<"$output")" = 1 ]
}

@test "$B: sbx-create --name shows in sbx-ls's name field and on the table" {
	local id
	if refused_name web-1; then return; fi
	id=$(mk --name web-1)
	run ls_line "$id"
	[ "$(jq -r .name <<<"$output")" = web-1 ]
	run on_tty
	[[ "$(printf '%s\n' "${lines[@]}" | grep "^${id:0:12}")" == *web-1* ]]
}

@test "$B: a sandbox name works as an id for sbx-exec --id" {
	local id
	if refused_name web-2; then return; fi
	id=$(mk -N web-2)
	# Daytona's name is the API's, not the hostname.
	if [ "$BACKEND" != daytona ]; then
		run --separate-stderr sbx-exec --id web-2 -- hostname
		assert_success
		[ "$output" = web-2 ]
	fi
	run sbx-exec -I web-2 -- sh -c 'echo ok'
	assert_success
	[ "$output" = ok ]
	[ "$(sbx-ls -j | jq -r 'select(.name == "web-2") | .id')" = "$id" ]
}

@test "$B: sbx-kill by name kills that sandbox and reports its id" {
	local id other
	if refused_name web-3; then return; fi
	id=$(mk -N web-3)
	other=$(mk)
	run --separate-stderr sbx-kill web-3
	assert_success
	[ "$(jq -r .status <<<"$output")" = killed ]
	[ "$(jq -r .id <<<"$output")" = "$id" ]
	[ -z "$(ls_line "$id")" ]
	[ "$(ls_line "$other" | jq -r .status)" = running ]
}

@test "$B: a killed sandbox's name can be used again" {
	local a b
	if refused_name web-4; then return; fi
	a=$(mk -N web-4)
	sbx-kill web-4 >/dev/null
	run --separate-stderr create -N web-4
	assert_success
	b=$(jq -r .id <<<"$output")
	[ "$b" != "$a" ]
	[ "$(ls_line "$b" | jq -r .name)" = web-4 ]
}

@test "$B: sbx-create with a name in use fails with exit 1 and creates nothing" {
	local a
	if refused_name dup; then return; fi
	a=$(create -N dup -s first.json | jq -r .id)
	run --separate-stderr create -N dup -s second.json
	assert_failure 1
	[[ $stderr == sbx-create:*dup* ]]
	[ -z "$output" ]
	[ ! -e second.json ]
	run sbx-ls
	[ "${#lines[@]}" -eq 1 ]
	[ "$(jq -r .id <<<"$output")" = "$a" ]
	[ "$(jq -r .name <<<"$output")" = dup ]
	[ "$(jq -r .status <<<"$output")" = running ]
}

@test "$B: sbx-ls with a bad --label exits 2 and prints nothing" {
	mk >/dev/null
	local bad
	for bad in novalue '=v' 'bad key=1'; do
		run --separate-stderr sbx-ls -l "$bad"
		assert_failure 2
		[ -z "$output" ]
		[[ $stderr == sbx-ls:*label* ]]
	done
}
