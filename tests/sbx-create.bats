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

@test "sbx-create -e NAME takes the value from the environment and never writes it down" {
	export SBX_TEST_SECRET=s3cr3t-value-91
	run --separate-stderr sbx-create -s s.json -e SBX_TEST_SECRET -e PLAIN=1
	assert_success
	run sbx-exec -s s.json -- sh -c 'echo "$SBX_TEST_SECRET $PLAIN"'
	assert_output "s3cr3t-value-91 1"
	# Not in the state file, the sandbox directory or the agent's argv.
	run grep -rl s3cr3t-value-91 s.json "$SBX_LOCAL_DIR"
	assert_failure
	run grep -c s3cr3t-value-91 "/proc/$(init_pid)/cmdline"
	assert_output 0
}

@test "sbx-create -e with a name that is not set fails with exit 2 and creates nothing" {
	unset SBX_NOT_SET_ANYWHERE
	before=$(ls "$SBX_LOCAL_DIR" | grep -vc '^\.' || true)
	run --separate-stderr sbx-create -s s.json -e SBX_NOT_SET_ANYWHERE
	assert_failure 2
	[[ "$stderr" == "sbx-create: "*SBX_NOT_SET_ANYWHERE* ]]
	[ ! -e s.json ]
	[ "$(ls "$SBX_LOCAL_DIR" | grep -vc '^\.' || true)" = "$before" ]
}

@test "sbx-create makes the state file's directory and honours SBX_STATE" {
	SBX_STATE=$BATS_TEST_TMPDIR/deep/er/s.json run sbx-create
	assert_success
	[ "$(jq -r .status deep/er/s.json)" = running ]
	SBX_STATE=$BATS_TEST_TMPDIR/deep/er/s.json run sbx-exec -- true
	assert_success
}

@test "sbx-create reads its default timeout from SBX_TIMEOUT and from .sbxrc" {
	SBX_TIMEOUT=123 run sbx-create -s a.json
	assert_success
	[ "$(jq -r .timeout a.json)" = 123 ]
	printf '# project settings\ntimeout = 77\n' > .sbxrc
	run sbx-create -s b.json
	assert_success
	[ "$(jq -r .timeout b.json)" = 77 ]
	run sbx-create -s c.json --timeout 5
	[ "$(jq -r .timeout c.json)" = 5 ]
}

@test "sbx-create --name sets the hostname and a state file records the workdir" {
	run sbx-create -s s.json --name web-1 --workdir /srv/app
	assert_success
	[ "$(jq -r .workdir s.json)" = /srv/app ]
	run sbx-exec -s s.json -- sh -c 'hostname; pwd'
	assert_output $'web-1\n/srv/app'
}

@test "sbx-create with an invalid workdir fails with exit 2 and creates nothing" {
	before=$(ls "$SBX_LOCAL_DIR" | grep -vc '^\.' || true)
	run --separate-stderr sbx-create -s s.json --workdir relative/dir
	assert_failure 2
	[[ "$stderr" == "sbx-create: "*"relative/dir"* ]]
	[ ! -e s.json ]
	[ "$(ls "$SBX_LOCAL_DIR" | grep -vc '^\.' || true)" = "$before" ]
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
