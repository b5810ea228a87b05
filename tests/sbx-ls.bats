#!/usr/bin/env bats
# sbx-ls, what only the local backend does: its store, and the processes
# and memory it reads from a sandbox's cgroup. What every backend does is
# in conformance/sbx-ls.bats.

load lib/helper

setup_file() { sbx_setup_file; }
teardown_file() { sbx_teardown_file; }
setup() { sbx_setup; }
# Each test starts from an empty store.
teardown() { sbx-ls -j 2>/dev/null | sbx-kill -q >/dev/null 2>&1 || true; }

@test "sbx-ls on an empty or missing store prints nothing, exits 0 and creates nothing" {
	mkdir empty
	local -x SBX_LOCAL_DIR=$BATS_TEST_TMPDIR/empty
	run --separate-stderr sbx-ls
	assert_success
	[ -z "$output" ]
	[ -z "$stderr" ]
	SBX_LOCAL_DIR=$BATS_TEST_TMPDIR/does-not-exist
	run --separate-stderr sbx-ls
	assert_success
	[ -z "$output" ]
	[ -z "$stderr" ]
	[ ! -e does-not-exist ]
}

@test "sbx-ls counts the processes and memory of a local sandbox's cgroup" {
	new_sandbox
	local id
	id=$(jq -r .ref.id s.json)
	sbx-exec -s s.json -- sh -c 'sleep 300 >/dev/null 2>&1 &'
	run ls_line "$id"
	assert_success
	[ "$(jq '.processes | type == "number" and . == floor' <<<"$output")" = true ]
	[ "$(jq .processes <<<"$output")" -ge 1 ]
	[ "$(jq '.memory_bytes | type == "number" and . == floor and . > 0' <<<"$output")" = true ]
	[ "$(jq '.cpu_s | type == "number" and . >= 0' <<<"$output")" = true ]
}

@test "sbx-ls gives a local sandbox's directory in the store" {
	local ref id
	ref=$(sbx-create)
	id=$(jq -r .id <<<"$ref")
	[ "$(ls_line "$id" | jq -r .dir)" = "$SBX_LOCAL_DIR/$id" ]
	[ "$(ls_line "$id" | jq -r .image)" = host ]
}

@test "sbx-ls on a terminal prints the header over an empty list" {
	run on_tty
	assert_success
	[ "${#lines[@]}" -eq 1 ]
	[[ ${lines[0]} == ID*BACKEND*NAME*STATUS*IDLE* ]]
	run on_tty -b local
	assert_success
	[[ ${lines[0]} == ID*BACKEND* ]]
	# A pipe gets JSON Lines: nothing for nothing.
	run --separate-stderr sbx-ls
	assert_success
	[ -z "$output" ]
}

@test "sbx-ls's table has a BACKEND column and ids 12 wide" {
	local id
	id=$(sbx-create --name tbl | jq_str .id)
	run on_tty
	assert_success
	[ "${#lines[@]}" -eq 2 ]
	[[ ${lines[0]} == 'ID            BACKEND  NAME'* ]]
	[[ ${lines[1]} == "${id:0:12}  local    tbl "* ]]
}

@test "sbx-ls colours STATUS on a terminal, not with NO_COLOR, never down a pipe" {
	sbx-create >/dev/null
	run on_tty
	assert_success
	[[ ${lines[1]} == *$'\e[32mrunning'* ]]
	NO_COLOR=1 run on_tty
	assert_success
	[[ ${lines[1]} == *running* ]]
	[[ ${lines[1]} != *$'\e'* ]]
	# An empty NO_COLOR is no request (no-color.org).
	NO_COLOR= run on_tty
	[[ ${lines[1]} == *$'\e[32m'* ]]
	run sbx-ls
	assert_success
	[[ $output == *'"running"'* ]]
	[[ $output != *$'\e'* ]]
	run on_tty -j
	[[ $output == *'"running"'* ]]
	[[ $output != *$'\e'* ]]
}

@test "sbx-ls without -b lists local alone, silently, when no engine answers and e2b has no endpoint" {
	local id
	id=$(sbx-create | jq_str .id)
	local -x DOCKER_HOST=unix://$BATS_TEST_TMPDIR/no-engine.sock
	local -x E2B_API_KEY=e2b_0000 XDG_CONFIG_HOME=$BATS_TEST_TMPDIR/cfg
	unset E2B_API_URL SBX_E2B_ENDPOINT SBX_DOCKER_HOST
	run --separate-stderr sbx-ls
	assert_success
	[ -z "$stderr" ]
	[ "${#lines[@]}" -eq 1 ]
	jq_true --arg id "$id" '.id == $id and .backend == "local"' <<<"$output"
	run --separate-stderr sbx-ls -b local
	assert_success
	[ "${#lines[@]}" -eq 1 ]
}

@test "sbx-ls without -b warns about a configured backend that fails, lists the rest, exits with its status" {
	local id port
	id=$(sbx-create | jq_str .id)
	# A port nothing listens on, on loopback.
	port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	local -x E2B_API_KEY=e2b_0000 XDG_CONFIG_HOME=$BATS_TEST_TMPDIR/cfg
	local -x SBX_E2B_ENDPOINT=http://127.0.0.1:$port
	run --separate-stderr sbx-ls
	assert_failure 1
	[[ $stderr == "sbx-ls: cannot list the sandboxes of backend 'e2b': "* ]]
	jq_true --arg id "$id" '.id == $id' <<<"$output"
}

@test "-I takes a unique prefix of 4 or more characters in sbx-exec, sbx-pause, sbx-port, sbx-net, sbx-sync and sbx-kill" {
	local id p
	id=$(sbx-create -n allow | jq_str .id)
	p=${id:0:4}
	run --separate-stderr sbx-exec -I "$p" -- echo hi
	assert_success
	[ "$output" = hi ]
	run --separate-stderr sbx-pause -I "$p"
	assert_success
	jq_true --arg id "$id" '.id == $id and .status == "paused"' <<<"$output"
	run --separate-stderr sbx-pause -r "$p"
	assert_success
	jq_true --arg id "$id" '.id == $id and .status == "running"' <<<"$output"
	run --separate-stderr sbx-port -I "$p"
	assert_success
	run --separate-stderr sbx-net -I "$p"
	assert_success
	mkdir proj
	echo x >proj/f
	(cd proj && sbx-sync push -q -I "$p" .) || fail "sbx-sync push -I $p"
	[ "$(sbx-exec -I "$id" -- cat /workspace/f)" = x ]
	run --separate-stderr sbx-kill "$p"
	assert_success
	jq_true --arg id "$id" '.id == $id and .status == "killed"' <<<"$output"
}

@test "-I with fewer than 4 characters is no prefix" {
	local id
	id=$(sbx-create | jq_str .id)
	run --separate-stderr sbx-exec -I "${id:0:3}" -- true
	assert_failure
	[[ $stderr == *"'${id:0:3}'"* ]]
	run sbx-exec -I "$id" -- true
	assert_success
}
