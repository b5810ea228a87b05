#!/usr/bin/env bats
# The e2b backend's network rules, against a private sbxd whose sandboxes
# reach the outside world of lib/networld.bash (no packet leaves this
# machine): --allow-out/--deny-out as E2B's network at create (E2B's
# checks before any call), sbx-net through PUT /sandboxes/ID/network, and
# --egress-proxy as E2B's egressProxy. The keys travel in the environment.
load ../../lib/helper
load ../../lib/sbxd
load ../../lib/networld

setup_file() {
	sbx_setup_file
	# First: sbxd's sandboxes take the world's resolver (SBX_NETWORK_DNS).
	networld_start
	sbxd_start
	export E2B_API_KEY=$SBXD_KEY
	guard_dns
}

teardown_file() {
	sbxd_stop
	sbx_teardown_file
	networld_stop
	rm -rf "${SBXD_DIR:-/nonexistent}"
}

setup() {
	sbx_setup
	unset E2B_API_URL E2B_SANDBOX_URL E2B_DOMAIN SBX_EGRESS_PROXY_PASSWORD
	export XDG_CONFIG_HOME=$BATS_TEST_TMPDIR/config
	S=$BATS_TEST_TMPDIR/s.json
	PW=pw-$RANDOM-$RANDOM-secret
	HOST_PIDS=()
}

teardown() {
	local p
	[ -f "$S" ] && sbx-kill -q -s "$S" >/dev/null 2>&1 || true
	for p in "${HOST_PIDS[@]}"; do
		kill "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
}

# Before any packet: a sandbox of sbxd has the world's resolver, else a
# name looked up inside would go to the host's.
guard_dns() {
	local s=$BATS_FILE_TMPDIR/probe.json dir
	sbx-create -b e2b -E "$SBXD_URL" -n allow -s "$s" >/dev/null || return 1
	dir=$(local_dir "$(jq -r .ref.id "$s")")
	if [ "$(jq -c .dns "$dir/net.json")" != "[\"$NETWORLD_DNS\"]" ]; then
		sbx-kill -q -s "$s" >/dev/null 2>&1
		echo "e2b-net.bats: sbxd's sandboxes do not use the world's resolver; no test run" >&2
		return 1
	fi
	sbx-kill -q -s "$s" >/dev/null
}

# The local directory of sbxd's sandbox $1.
local_dir() {
	sbx-ls -b local -j | jq -r --arg id "$1" 'select(.labels.sbxd == $id) | .dir'
}

new_e2b() {
	sbx-create -b e2b -E "$SBXD_URL" -n allow -s "$S" "$@" >/dev/null
}

sid() { jq -r .ref.id "$S"; }

get() {
	sbx-exec -s "$S" -- curl -sS --max-time 5 "$@"
}

wait_file() {
	local i
	for ((i = 0; i < 200; i++)); do
		[ -s "$1" ] && return 0
		sleep 0.05
	done
	echo "$1 never appeared"
	return 1
}

# A SOCKS5 proxy in the world (user $1, password $2 when given); PROXY.
start_socks() {
	local here args
	here=$(cd "$BATS_TEST_DIRNAME/../../lib" && pwd)
	SOCKS_LOG=$BATS_TEST_TMPDIR/socks.log
	: >"$SOCKS_LOG"
	args=("$here/socks5-server.py" "$NETWORLD_DNS_ADDR" "$BATS_TEST_TMPDIR/socks.port" "$SOCKS_LOG")
	if [ -n "${1:-}" ]; then
		printf '%s\n%s\n' "$1" "$2" >"$BATS_TEST_TMPDIR/socks.cred"
		args+=("$BATS_TEST_TMPDIR/socks.cred")
	fi
	ip netns exec "$NETWORLD_NS" python3 "${args[@]}" >"$BATS_TEST_TMPDIR/socks.err" 2>&1 3>&- &
	HOST_PIDS+=("$!")
	wait_file "$BATS_TEST_TMPDIR/socks.port"
	PROXY=$NETWORLD_DNS_ADDR:$(cat "$BATS_TEST_TMPDIR/socks.port")
}

@test "sbx-create -b e2b --allow-out/--deny-out: E2B's network at create, and the sandbox is held to it" {
	new_e2b --allow-out a.test --deny-out all
	run sbxd_api GET "/sandboxes/$(sid)"
	assert_equal "$(jq -c .network <<<"$output")" '{"allowOut":["a.test"],"denyOut":["0.0.0.0/0"]}'
	run get http://a.test/
	assert_success
	assert_equal "$(jq -r .server <<<"$output")" a.test
	run get http://c.test/
	assert_failure
	refute_output --partial '"server"'
}

@test "sbx-create -b e2b checks E2B's rules before any call: exit 2, nothing created" {
	# Nothing listens there: a call would be exit 1.
	run sbx-create -b e2b -E http://127.0.0.1:1 -n allow --deny-out a.test -s "$S"
	assert_failure 2
	assert_output "sbx-create: backend 'e2b' denies addresses and CIDRs, not domains: --deny-out 'a.test'"
	run sbx-create -b e2b -E http://127.0.0.1:1 -n allow --allow-out a.test -s "$S"
	assert_failure 2
	assert_output "sbx-create: backend 'e2b' allows a domain only with --deny-out all (or 0.0.0.0/0)"
	run sbx-create -b e2b -E http://127.0.0.1:1 -n deny --allow-out 198.18.1.1 -s "$S"
	assert_failure 2
	assert_output "sbx-create: --allow-out and --deny-out need --network allow"
	[ ! -e "$S" ]
}

@test "sbx-net on e2b prints the rules, replaces them live (omitted cleared), and the verdicts change" {
	new_e2b --allow-out "$NETWORLD_A" --deny-out all
	run sbx-net -s "$S"
	assert_success
	assert_output "{\"allow_out\":[\"$NETWORLD_A\"],\"deny_out\":[\"0.0.0.0/0\"]}"
	run get http://a.test/
	assert_success
	run get http://c.test/
	assert_failure
	run sbx-net -s "$S" --allow-out c.test --deny-out all
	assert_success
	assert_output '{"allow_out":["c.test"],"deny_out":["0.0.0.0/0"]}'
	run sbxd_api GET "/sandboxes/$(sid)"
	assert_equal "$(jq -c .network <<<"$output")" '{"allowOut":["c.test"],"denyOut":["0.0.0.0/0"]}'
	run get http://c.test/
	assert_success
	assert_equal "$(jq -r .server <<<"$output")" c.test
	run get http://a.test/
	assert_failure
	run sbx-net -s "$S" --clear
	assert_success
	assert_output '{"allow_out":[],"deny_out":[]}'
	run get http://a.test/
	assert_success
}

@test "sbx-net on e2b checks E2B's rules before the call" {
	new_e2b
	run sbx-net -s "$S" --allow-out a.test
	assert_failure 2
	assert_output "sbx-net: backend 'e2b' allows a domain only with --deny-out all (or 0.0.0.0/0)"
	run sbx-net -s "$S"
	assert_output '{"allow_out":[],"deny_out":[]}'
}

@test "sbx-net log on e2b: exit 2, E2B keeps no network log" {
	new_e2b
	run sbx-net log -s "$S"
	assert_failure 2
	assert_output "sbx-net: backend 'e2b' keeps no network log"
}

@test "sbx-net on an e2b sandbox with network deny is exit 2" {
	sbx-create -b e2b -E "$SBXD_URL" -n deny -s "$S" >/dev/null
	run sbx-net -s "$S" --deny-out 10.0.0.0/8
	assert_failure 2
	assert_output "sbx-net: sandbox '$(sid)' has network deny: rules need --network allow"
}

@test "sbx-net -n allow on an e2b sandbox made with deny gives it a network (PUT); -n deny takes it again" {
	sbx-create -b e2b -E "$SBXD_URL" -n deny -s "$S" >/dev/null
	run get http://a.test/
	assert_failure
	run --separate-stderr sbx-net -s "$S" -n allow --allow-out a.test --deny-out all
	assert_success
	assert_output '{"allow_out":["a.test"],"deny_out":["0.0.0.0/0"]}'
	assert_equal "$(sbxd_api GET "/sandboxes/$(sid)" | jq -r .allowInternetAccess)" true
	run get http://a.test/
	assert_success
	assert_equal "$(jq -r .server <<<"$output")" a.test
	run get http://c.test/
	assert_failure
	run --separate-stderr sbx-net -s "$S" -n deny
	assert_success
	assert_equal "$(sbxd_api GET "/sandboxes/$(sid)" | jq -r .allowInternetAccess)" false
	run get http://a.test/
	assert_failure
	refute_output --partial '"server"'
}

@test "--egress-proxy on e2b: E2B's egressProxy, the traffic through it, and sbx-net keeps it" {
	start_socks alice "$PW"
	SBX_EGRESS_PROXY_PASSWORD=$PW new_e2b --egress-proxy "socks5://alice@$PROXY"
	run sbxd_api GET "/sandboxes/$(sid)"
	refute_output --partial "$PW"
	assert_equal "$(jq -c .network <<<"$output")" "{\"egressProxy\":{\"address\":\"$PROXY\",\"username\":\"alice\"}}"
	run get http://a.test/
	assert_success
	assert_equal "$(jq -r .peer <<<"$output")" "$NETWORLD_DNS_ADDR"
	run cat "$SOCKS_LOG"
	assert_output "auth ok alice
connect $NETWORLD_A 80"
	run grep -rF -- "$PW" "$S"
	assert_failure
	# PUT clears what it omits: sbx-net sends the proxy again, with the
	# password from where sbx-create took it.
	run sbx-net -s "$S" --deny-out "$NETWORLD_C"
	assert_failure 5
	assert_output "sbx-net: the sandbox's egress proxy needs its user's password again (set SBX_EGRESS_PROXY_PASSWORD or write it to '$XDG_CONFIG_HOME/sbx/credentials/egress-proxy')"
	SBX_EGRESS_PROXY_PASSWORD=$PW run sbx-net -s "$S" --deny-out "$NETWORLD_C"
	assert_success
	assert_output "{\"allow_out\":[],\"deny_out\":[\"$NETWORLD_C\"],\"egress_proxy\":\"socks5://alice@$PROXY\"}"
	run get http://a.test/
	assert_success
	assert_equal "$(jq -r .peer <<<"$output")" "$NETWORLD_DNS_ADDR"
	run get http://c.test/
	assert_failure
}

@test "--inject-header on e2b: E2B's network rules at create; requests carry the header, the value never comes back" {
	export SBX_TEST_KEY=key-$RANDOM-$RANDOM-secret
	new_e2b --allow-out a.test --deny-out all --inject-header 'a.test:x-api-key=env:SBX_TEST_KEY'
	run get -H 'x-api-key: mine' http://a.test/h
	assert_success
	assert_equal "$(jq -r '.headers["x-api-key"]' <<<"$output")" "$SBX_TEST_KEY"
	run sbxd_api GET "/sandboxes/$(sid)"
	assert_success
	refute_output --partial "$SBX_TEST_KEY"
	run sbx-exec -s "$S" -- sh -c 'env; cat /proc/*/environ 2>/dev/null'
	refute_output --partial "$SBX_TEST_KEY"
	run cat "$S"
	refute_output --partial "$SBX_TEST_KEY"
	# E2B's shape, checked before any call: a bad source creates nothing.
	unset SBX_TEST_KEY
	run --separate-stderr sbx-create -b e2b -E "$SBXD_URL" -n allow -s "$BATS_TEST_TMPDIR/t.json" \
		--inject-header 'a.test:x-api-key=env:SBX_TEST_KEY'
	assert_failure 2
	[ ! -e "$BATS_TEST_TMPDIR/t.json" ]
}

@test "sbx-net on an e2b sandbox whose server keeps the header values to itself (sbxd): exit 2, the header stays" {
	export SBX_TEST_KEY=key-$RANDOM-$RANDOM-secret
	new_e2b --allow-out a.test --deny-out all --inject-header 'a.test:x-api-key=env:SBX_TEST_KEY'
	run sbxd_api GET "/sandboxes/$(sid)"
	assert_equal "$(jq -c .network.rules <<<"$output")" '{"a.test":[{"transform":{"headers":{"x-api-key":null}}}]}'
	run sbx-net -s "$S" --allow-out a.test --allow-out c.test --deny-out all
	assert_failure 2
	assert_output "sbx-net: sandbox '$(sid)' injects headers whose values its server does not give back: sbx-net would clear them"
	run get http://a.test/
	assert_success
	assert_equal "$(jq -r '.headers["x-api-key"]' <<<"$output")" "$SBX_TEST_KEY"
}
