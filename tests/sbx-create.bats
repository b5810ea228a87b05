#!/usr/bin/env bats
# sbx-create: the ref, the state file, and refusing bad input cleanly.

load helper

setup_file() { sbx_setup_file; }
teardown_file() { sbx_teardown_file; }
setup() { sbx_setup; }

@test "sbx-create prints the ref as one JSON line and writes the state file" {
	run --separate-stderr sbx-create -s .sbx/s.json --label owner=me --timeout 600
	assert_success
	[ "${#lines[@]}" -eq 1 ]
	[ "$(jq -r .backend <<<"$output")" = local ]
	[[ "$(jq -r .id <<<"$output")" =~ ^[0-9a-f]{12}$ ]]
	[ "$(jq -r .schema .sbx/s.json)" = 1 ]
	[ "$(jq -r .status .sbx/s.json)" = running ]
	[ "$(jq -r .labels.owner .sbx/s.json)" = me ]
	[ "$(jq -r .timeout .sbx/s.json)" = 600 ]
	[ "$(jq -c .ref .sbx/s.json)" = "$(jq -c . <<<"$output")" ]
	[ "$(jq -r '.segments[0][1]' .sbx/s.json)" = null ]
}
