#!/usr/bin/env bats
# The e2b backend against E2B's real cloud: only with an API key in the
# environment make check (or bats) was started with. Without one, the
# test is skipped and nothing is sent anywhere. The other e2b files export
# a key of their own private sbxd, but only in their own processes: this
# file reads the one it inherited, here, before anything else runs.
load ../../lib/helper

LIVE_KEY=${E2B_API_KEY:-}

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
		skip "E2B_API_KEY not set: no live test against E2B's cloud"
	fi
	sbx_setup
	# E2B's cloud (E2B_DOMAIN's, e2b.app by default), never a URL
	# meant for another server; and no configuration of the user's.
	unset E2B_API_URL E2B_SANDBOX_URL
	export E2B_API_KEY=$LIVE_KEY
	export XDG_CONFIG_HOME=$BATS_TEST_TMPDIR/config
}

# Whatever happened, the sandbox goes (and its timeout ends it anyway).
teardown() {
	[ -n "$LIVE_KEY" ] || return 0
	if [ -f "$BATS_TEST_TMPDIR/s.json" ]; then
		sbx-kill -q -s "$BATS_TEST_TMPDIR/s.json" >/dev/null 2>&1 || true
	fi
}

@test "live: create a sandbox on E2B's cloud, exec in it (stdin, exit status, a pty), kill it" {
	run --separate-stderr sbx-create -b e2b -T 120 -l sbx-test=live -s s.json
	assert_success
	id=$(jq -r .id <<<"$output")
	[ -n "$id" ]
	[ "$id" != null ]
	assert_equal "$(jq -r .ref.id s.json)" "$id"
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
	run bash -c 'sbx-exec -t -s s.json -- sh -c "test -t 0 && stty size" </dev/null | tr -d "\r"'
	assert_success
	assert_output '24 80'
	run sbx-ls -b e2b --json
	assert_success
	assert_equal "$(jq -r --arg id "$id" 'select(.id == $id) | .labels["sbx-test"]' <<<"$output")" live
	run --separate-stderr sbx-kill -s s.json
	assert_success
	assert_equal "$(jq -r .status <<<"$output")" killed
	run --separate-stderr sbx-exec -s s.json -- true
	assert_failure 125
	[[ $stderr == *"no sandbox"* ]]
}
