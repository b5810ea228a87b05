#!/usr/bin/env bats
# One address space, with e2b beside local, against a private sbxd on
# loopback: e2b.endpoint says where the API is, sbx-ls without -b lists
# e2b when a key and an endpoint are configured, and an id or prefix finds
# an e2b sandbox without -b, at the endpoint it is on.
load ../../lib/helper
load ../../lib/sbxd

setup_file() {
	sbx_setup_file
	sbxd_start
	export E2B_API_KEY=$SBXD_KEY
}

teardown_file() {
	sbxd_stop
	sbx_teardown_file
	rm -rf "${SBXD_DIR:-/nonexistent}"
}

setup() {
	sbx_setup_backends
	# Whatever asks E2B's own domain asks a closed port on loopback.
	export E2B_DOMAIN=localhost:$(sbxd_free_port)
	# No engine: docker is skipped.
	export DOCKER_HOST=unix://$BATS_TEST_TMPDIR/no-engine.sock
}

teardown() {
	local id
	for id in $(cat "$BATS_TEST_TMPDIR/e2b.ids" 2>/dev/null); do
		sbxd_api DELETE "/sandboxes/$id" >/dev/null || true
	done
	sbx-ls -b local -j 2>/dev/null | sbx-kill -q -b local >/dev/null 2>&1 || true
}

# An e2b sandbox at sbxd, made with -E; prints its id.
new_e2b() {
	local id
	id=$(sbx-create -s - -b e2b -E "$SBXD_URL" "$@" | jq_str .id) || return 1
	echo "$id" >>"$BATS_TEST_TMPDIR/e2b.ids"
	echo "$id"
}

@test "e2b-ls: e2b.endpoint in the config file is where sbx-ls -b e2b and sbx-create -b e2b go" {
	local a b
	a=$(new_e2b)
	printf 'e2b.endpoint = %s\n' "$SBXD_URL" >config/sbx/config
	run --separate-stderr sbx-ls -b e2b
	assert_success
	jq_true --arg a "$a" --arg u "$SBXD_URL" 'select(.id == $a) |
	    .endpoint == $u' <<<"$output"
	run --separate-stderr sbx-create -s - -b e2b
	assert_success
	b=$(jq_str .id <<<"$output")
	echo "$b" >>e2b.ids
	jq_true --arg u "$SBXD_URL" '.endpoint == $u' <<<"$output"
	# $E2B_API_URL above the file, $SBX_E2B_ENDPOINT above both.
	E2B_API_URL=http://127.0.0.1:1 run --separate-stderr sbx-ls -b e2b
	assert_failure
	[[ $stderr == *127.0.0.1:1* ]]
	E2B_API_URL=http://127.0.0.1:1 SBX_E2B_ENDPOINT=$SBXD_URL \
	    run --separate-stderr sbx-ls -b e2b
	assert_success
	[ "$(jq -r .id <<<"$output" | sort)" = "$(printf '%s\n' "$a" "$b" | sort)" ]
}

@test "e2b-ls: sbx-ls without -b lists local and e2b with a key and an endpoint, e2b's IDLE as -" {
	local l e
	l=$(sbx-create -s - | jq_str .id)
	e=$(new_e2b)
	printf 'e2b.endpoint = %s\n' "$SBXD_URL" >config/sbx/config
	run --separate-stderr sbx-ls
	assert_success
	[ -z "$stderr" ]
	# (sbxd's own sandboxes are local ones of this store too.)
	jq_true -s --arg l "$l" --arg e "$e" 'map({(.id): .backend}) | add |
	    .[$l] == "local" and .[$e] == "e2b"' <<<"$output"
	[ "$(jq -r 'select(.backend == "e2b") | .id' <<<"$output")" = "$e" ]
	run on_tty
	assert_success
	read -r -a f <<<"$(printf '%s\n' "${lines[@]}" | grep "^${e:0:12}")"
	[ "${f[1]}" = e2b ]
	[ "${f[5]}" = - ]
}

@test "e2b-ls: with a key and no endpoint configured, sbx-ls without -b lists local alone, silently" {
	local l
	l=$(sbx-create -s - | jq_str .id)
	new_e2b >/dev/null
	run --separate-stderr sbx-ls
	assert_success
	[ -z "$stderr" ]
	jq_true -s --arg l "$l" 'map(.backend) | unique == ["local"]' <<<"$output"
	jq_true -s --arg l "$l" 'map(.id) | index($l) != null' <<<"$output"
}

@test "e2b-ls: an id or a prefix finds an e2b sandbox without -b, at the endpoint it is on" {
	local e
	e=$(new_e2b)
	printf 'e2b.endpoint = %s\n' "$SBXD_URL" >config/sbx/config
	run --separate-stderr sbx-exec -I "${e:0:6}" -- echo prefix
	assert_success
	[ "$output" = prefix ]
	run --separate-stderr sbx-exec -I "$e" -- echo full
	assert_success
	[ "$output" = full ]
	run --separate-stderr sbx-pause "${e:0:6}"
	assert_success
	jq_true --arg e "$e" '.backend == "e2b" and .id == $e and
	    .status == "paused"' <<<"$output"
	run --separate-stderr sbx-kill "${e:0:6}"
	assert_success
	jq_true --arg e "$e" '.backend == "e2b" and .id == $e and
	    .status == "killed"' <<<"$output"
}
