#!/usr/bin/env bats
# The daytona backend against Daytona's real cloud: only with an API key in
# the environment make check (or bats) was started with. Without one, the
# test is skipped and nothing is sent anywhere. The conformance run's
# daytona backend exports a key of its own private sbxd, but only in its
# own processes: this file reads the one it inherited, here, before
# anything else runs.
load ../../lib/helper

LIVE_KEY=${DAYTONA_API_KEY:-}

setup_file() {
	[ -n "$LIVE_KEY" ] || return 0
	sbx_setup_file
}

teardown_file() {
	[ -n "$LIVE_KEY" ] || return 0
	sbx_teardown_file
}

setup() {
	if [ -z "$LIVE_KEY" ]; then
		skip "DAYTONA_API_KEY not set: no live test against Daytona's cloud"
	fi
	sbx_setup
	# Daytona's cloud, never a URL meant for another server; and no
	# configuration of the user's.
	unset DAYTONA_API_URL SBX_DAYTONA_ENDPOINT
	export DAYTONA_API_KEY=$LIVE_KEY
	export XDG_CONFIG_HOME=$BATS_TEST_TMPDIR/config
}

# Whatever happened, the sandbox goes (its auto-stop and auto-delete end
# it anyway).
teardown() {
	[ -n "$LIVE_KEY" ] || return 0
	if [ -f "$BATS_TEST_TMPDIR/s.json" ]; then
		sbx-kill -q -s "$BATS_TEST_TMPDIR/s.json" >/dev/null 2>&1 || true
	fi
}

@test "live: create a sandbox on Daytona's cloud, exec in it, push and pull files, stop and start it, kill it" {
	run --separate-stderr sbx-create -b daytona -T 600 -l sbx-test=live -s s.json
	assert_success
	id=$(jq -r .id <<<"$output")
	[ -n "$id" ]
	[ "$id" != null ]
	# The key is nowhere in what sbx wrote or printed.
	run grep -rF -e "$LIVE_KEY" s.json
	assert_failure
	run --separate-stderr sbx-exec -s s.json -- sh -c 'echo out; echo err >&2; exit 3'
	assert_failure 3
	assert_output out
	assert_equal "$stderr" err
	run sbx-exec -i -s s.json -- wc -c < <(printf 'hello')
	assert_success
	assert_output --regexp '^ *5$'
	mkdir p
	echo live >p/f
	run sbx-sync push -s s.json p
	assert_success
	run sbx-exec -s s.json -- cat f
	assert_output live
	run sbx-ls -b daytona --json
	assert_success
	assert_equal "$(jq -r --arg id "$id" 'select(.id == $id) | .labels["sbx-test"]' <<<"$output")" live
	run sbx-pause -s s.json
	assert_success
	assert_equal "$(jq -r .status <<<"$output")" stopped
	run sbx-pause -r -s s.json
	assert_success
	run sbx-exec -s s.json -- cat f
	assert_output live
	run --separate-stderr sbx-kill -s s.json
	assert_success
	assert_equal "$(jq -r .status <<<"$output")" killed
}
