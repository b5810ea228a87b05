#!/usr/bin/env bats
# sbx-create, what only the local backend does: its ref and its store.
# What every backend does is in conformance/sbx-create.bats.

load lib/helper

setup_file() { sbx_setup_file; }
teardown_file() { sbx_teardown_file; }
setup() { sbx_setup; }
teardown() { sbx-ls -j 2>/dev/null | sbx-kill -q >/dev/null 2>&1 || true; }

@test "a local ref has a 12-digit id and names the sandbox directory in the store" {
	run --separate-stderr sbx-create -s s.json
	assert_success
	[ "$(jq -c 'keys_unsorted' <<<"$output")" = '["backend","id","dir"]' ]
	[[ "$(jq -r .id <<<"$output")" =~ ^[0-9a-f]{12}$ ]]
	[ "$(jq -r .dir <<<"$output")" = "$SBX_LOCAL_DIR/$(jq -r .id <<<"$output")" ]
	[ -d "$(jq -r .dir <<<"$output")" ]
}

@test "sbx-create -e NAME's value is neither in the sandbox directory nor in the agent's argv" {
	export SBX_TEST_SECRET=s3cr3t-value-91
	run --separate-stderr sbx-create -s s.json -e SBX_TEST_SECRET
	assert_success
	run sbx-exec -s s.json -- sh -c 'echo "$SBX_TEST_SECRET"'
	assert_output "s3cr3t-value-91"
	run grep -rl s3cr3t-value-91 "$(jq -r .ref.dir s.json)"
	assert_failure
	run grep -c s3cr3t-value-91 "/proc/$(init_pid)/cmdline"
	assert_output 0
}

@test "sbx-create refuses a store that sandbox users cannot search" {
	d=$(mktemp -d /tmp/sbx-closed.XXXXXX)
	chmod 700 "$d"
	SBX_LOCAL_DIR=$d/store run --separate-stderr sbx-create -s s.json
	rm -rf "$d"
	assert_failure 1
	[[ "$stderr" == *"not searchable"* ]]
	[ ! -e s.json ]
}
