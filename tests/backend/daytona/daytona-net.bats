#!/usr/bin/env bats
# Network rules on the daytona backend: Daytona has an allow-list
# (networkAllowList, domainAllowList), at create and by network-settings.
# sbx-create and sbx-net turn --allow-out with --deny-out all into it, and
# refuse what it cannot say (exit 2, nothing made or changed); sbxd serves
# the lists as the rules of its local sandbox's network helper (the
# net.json sbx-netd enforces: tests/network*.bats show the traffic).
# Against a private sbxd on loopback.
load ../../lib/helper
load ../../lib/sbxd

setup_file() {
	sbx_setup_file
	sbxd_start
	export DAYTONA_API_URL=$SBXD_URL/api DAYTONA_API_KEY=$SBXD_KEY
}

teardown_file() {
	sbxd_stop
	sbx_teardown_file
	rm -rf "${SBXD_DIR:-/nonexistent}"
}

setup() {
	sbx_setup
	unset SBX_DAYTONA_ENDPOINT
	export XDG_CONFIG_HOME=$BATS_TEST_TMPDIR/config
	S=$BATS_TEST_TMPDIR/s.json
}

teardown() {
	[ -f "$S" ] && sbx-kill -q -s "$S" >/dev/null 2>&1 || true
}

# The net.json of the local sandbox behind Daytona sandbox $1.
net_json() {
	local dir
	dir=$(sbx-ls -b local -j | jq -r --arg id "$1" 'select(.labels.sbxd == $id) | .dir')
	[ -d "$dir" ] || { echo "no local sandbox for $1" >&2; return 1; }
	cat "$dir/net.json"
}

count() { dapi GET /api/sandbox | jq length; }

# The sandbox of $S's default route (IPv4), if it has one: with a way out,
# its network helper's (traffic to any address goes to it).
default_route() {
	sbx-exec -s "$S" -- cat /proc/net/route | awk 'NR > 1 && $2 == "00000000" { print $1 }'
}

@test "daytona: -n deny (the default) is networkBlockAll: the sandbox has no route out; -n allow gives it one" {
	local id
	sbx-create -b daytona -s "$S" >/dev/null
	id=$(jq -r .ref.id "$S")
	run dapi GET "/api/sandbox/$id"
	jq_true '.networkBlockAll == true' <<<"$output"
	run default_route
	assert_success
	assert_output ''
	sbx-kill -q -s "$S" >/dev/null
	sbx-create -b daytona -n allow -s "$S" >/dev/null
	id=$(jq -r .ref.id "$S")
	run dapi GET "/api/sandbox/$id"
	jq_true '.networkBlockAll == false' <<<"$output"
	run default_route
	assert_success
	[ -n "$output" ] || fail "no way out"
}

@test "daytona: --allow-out with --deny-out all is Daytona's allow-list, and the sandbox's network helper enforces it" {
	local id
	sbx-create -b daytona -n allow --allow-out 10.1.2.0/24 --allow-out 192.0.2.7 \
	    --allow-out example.test --allow-out '*.example.org' --deny-out all -s "$S" >/dev/null
	id=$(jq -r .ref.id "$S")
	run dapi GET "/api/sandbox/$id"
	jq_true '.networkBlockAll == false and
	    .networkAllowList == "10.1.2.0/24,192.0.2.7/32" and
	    .domainAllowList == "example.test,*.example.org"' <<<"$output"
	run net_json "$id"
	assert_success
	jq_true '.allow_out == ["10.1.2.0/24", "192.0.2.7/32", "example.test", "*.example.org"] and
	    .deny_out == ["0.0.0.0/0"]' <<<"$output"
	run sbx-net -s "$S"
	assert_success
	jq_true '.allow_out == ["10.1.2.0/24", "192.0.2.7/32", "example.test", "*.example.org"] and
	    .deny_out == ["all"]' <<<"$output"
}

@test "daytona: sbx-net replaces the allow-list through network-settings, and the network helper follows" {
	local id
	sbx-create -b daytona -n allow --allow-out 10.1.0.0/16 --deny-out all -s "$S" >/dev/null
	id=$(jq -r .ref.id "$S")
	run sbx-net -s "$S" --allow-out example.test --allow-out 192.0.2.1 --deny-out all
	assert_success
	jq_true '.allow_out == ["192.0.2.1/32", "example.test"] and .deny_out == ["all"]' <<<"$output"
	run net_json "$id"
	jq_true '.allow_out == ["192.0.2.1/32", "example.test"] and .deny_out == ["0.0.0.0/0"]' <<<"$output"
	grep -q "POST /api/sandbox/$id/network-settings 200" "$SBXD_DIR/log"
	# --clear: an open network.
	run sbx-net -s "$S" --clear
	assert_success
	jq_true '.allow_out == [] and .deny_out == []' <<<"$output"
	run net_json "$id"
	jq_true '.allow_out == [] and .deny_out == []' <<<"$output"
	# What Daytona cannot say: exit 2, one line, the rules as they were.
	run --separate-stderr sbx-net -s "$S" --deny-out 10.0.0.0/8
	assert_failure 2
	[[ "$stderr" == "sbx-net: Daytona's network rules are an allow-list: --deny-out takes only 'all' on daytona, not '10.0.0.0/8'" ]] ||
	    fail "$stderr"
	run --separate-stderr sbx-net -s "$S" --inject-header example.test:X-A=env:HOME
	assert_failure 2
	run sbx-net -s "$S"
	jq_true '.allow_out == [] and .deny_out == []' <<<"$output"
	# -n deny: blocked; rules then need -n allow.
	run sbx-net -s "$S" -n deny
	assert_success
	jq_true '.allow_out == [] and .deny_out == ["all"]' <<<"$output"
	run dapi GET "/api/sandbox/$id"
	jq_true '.networkBlockAll == true' <<<"$output"
	# Its helper stays, denying every connection.
	run net_json "$id"
	jq_true '.allow_out == [] and .deny_out == ["all"]' <<<"$output"
	run --separate-stderr sbx-net -s "$S" --allow-out 10.0.0.0/8 --deny-out all
	assert_failure 2
	[[ "$stderr" == *"has network deny: rules need --network allow" ]] || fail "$stderr"
	run sbx-net -s "$S" -n allow --allow-out 10.0.0.0/8 --deny-out all
	assert_success
	jq_true '.allow_out == ["10.0.0.0/8"] and .deny_out == ["all"]' <<<"$output"
	run net_json "$id"
	jq_true '.allow_out == ["10.0.0.0/8"] and .deny_out == ["0.0.0.0/0"]' <<<"$output"
}

@test "daytona: --deny-out all alone blocks all; --allow-out all with it leaves the network open" {
	local id
	sbx-create -b daytona -n allow --deny-out all -s "$S" >/dev/null
	id=$(jq -r .ref.id "$S")
	run dapi GET "/api/sandbox/$id"
	jq_true '.networkBlockAll == true and (has("networkAllowList") | not)' <<<"$output"
	sbx-kill -q -s "$S" >/dev/null
	sbx-create -b daytona -n allow --allow-out all --deny-out all -s "$S" >/dev/null
	id=$(jq -r .ref.id "$S")
	run dapi GET "/api/sandbox/$id"
	jq_true '.networkBlockAll == false and (has("networkAllowList") | not) and
	    (has("domainAllowList") | not)' <<<"$output"
}

@test "daytona: rules Daytona cannot say are exit 2, one line, with nothing made" {
	local n want
	n=$(count)
	while IFS='|' read -r want args; do
		# shellcheck disable=SC2086
		run --separate-stderr sbx-create -b daytona -n allow $args -s "$S"
		assert_failure 2
		assert_output ''
		[ "${#stderr_lines[@]}" -eq 1 ] || fail "$stderr"
		[[ "$stderr" == "sbx-create: "*"$want"* ]] || fail "$args: $stderr"
		[ ! -e "$S" ]
	done <<'EOF'
--allow-out goes with --deny-out all on daytona|--allow-out 10.0.0.0/8
takes only 'all' on daytona, not '10.0.0.0/8'|--deny-out 10.0.0.0/8
takes only 'all' on daytona, not 'example.test'|--allow-out 10.0.0.0/8 --deny-out all --deny-out example.test
IPv4 addresses and CIDRs, not 'fd00::/8'|--allow-out fd00::/8 --deny-out all
cannot inject headers|--inject-header example.test:X-A=env:HOME
cannot send through an egress proxy|--egress-proxy socks5://127.0.0.1:1
EOF
	[ "$(count)" -eq "$n" ]
}

@test "daytona API: networkAllowList takes IPv4 CIDRs and domainAllowList names, else 400; networkBlockAll wins" {
	local id
	run dapi POST /api/sandbox '{"networkAllowList":"10.0.0.0/8,example.test"}'
	jq_true '.statusCode == 400 and (.message | test("networkAllowList.*example.test"))' <<<"$output"
	run dapi POST /api/sandbox '{"domainAllowList":"example.test, 10.0.0.0/8"}'
	jq_true '.statusCode == 400 and (.message | test("domainAllowList.*10.0.0.0/8"))' <<<"$output"
	run dapi POST /api/sandbox '{"networkAllowList":"fd00::/8"}'
	jq_true '.statusCode == 400' <<<"$output"
	run dapi POST /api/sandbox '{"networkAllowList":7}'
	jq_true '.statusCode == 400 and .message == "networkAllowList must be a string"' <<<"$output"
	run dapi POST /api/sandbox '{"networkBlockAll":true,"networkAllowList":"10.0.0.0/8","labels":{"t":"net"}}'
	id=$(jq -r .id <<<"$output")
	[ -n "$id" ] && [ "$id" != null ] || fail "$output"
	run dapi GET "/api/sandbox/$id"
	jq_true '.networkBlockAll == true and (has("networkAllowList") | not)' <<<"$output"
	run net_json "$id"
	# No way out at all: no rules to hold.
	refute_output --partial 10.0.0.0/8
	# network-settings: what it leaves out stays; a bad entry is 400
	# with nothing changed.
	run dapi POST "/api/sandbox/$id/network-settings" '{"networkBlockAll":false,"domainAllowList":"example.test"}'
	jq_true '.networkBlockAll == false and .domainAllowList == "example.test" and (has("networkAllowList") | not)' <<<"$output"
	run dapi POST "/api/sandbox/$id/network-settings" '{"networkAllowList":"10.2.0.0/16"}'
	jq_true '.networkAllowList == "10.2.0.0/16" and .domainAllowList == "example.test"' <<<"$output"
	run dapi POST "/api/sandbox/$id/network-settings" '{"networkAllowList":"nope.test"}'
	jq_true '.statusCode == 400' <<<"$output"
	run dapi POST "/api/sandbox/$id/network-settings" '{"networkBlockAll":"yes"}'
	jq_true '.statusCode == 400 and .message == "networkBlockAll must be a boolean"' <<<"$output"
	run net_json "$id"
	jq_true '.allow_out == ["10.2.0.0/16", "example.test"] and .deny_out == ["0.0.0.0/0"]' <<<"$output"
	run dapi POST "/api/sandbox/nosuch/network-settings" '{"networkBlockAll":true}'
	jq_true '.statusCode == 404' <<<"$output"
	dapi DELETE "/api/sandbox/$id" >/dev/null
}
