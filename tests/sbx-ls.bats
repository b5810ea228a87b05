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
