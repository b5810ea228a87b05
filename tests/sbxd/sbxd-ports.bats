#!/usr/bin/env bats
# sbxd: requests for a sandbox's own ports (E2B's <port>-<id>.<domain>
# host, or the E2b-Sandbox-Port header) reach the server listening there.
load ../lib/helper
load ../lib/sbxd

setup_file() {
	sbx_setup_file
	sbxd_start
}

teardown_file() {
	sbxd_stop
	sbx_teardown_file
	rm -rf "$SBXD_DIR"
}

setup() {
	sbx_setup
}

# A new sandbox (JSON body $1); sets ID and TOK.
box() {
	local out
	out=$(sbxd_create "$@")
	ID=$(jq -r .sandboxID <<<"$out")
	TOK=$(jq -r '.envdAccessToken // empty' <<<"$out")
	[ ${#ID} = 20 ] || { echo "no sandbox: $out" >&2; return 1; }
}

# Start a python http.server on port $1 in the sandbox, in the
# background, serving a file "hello" that holds "hi from $1"; wait until
# it answers inside.
serve() {
	sbxd_run "$ID" "$TOK" '{"process":{"cmd":"/bin/sh","args":["-c","mkdir -p /tmp/w'"$1"' && cd /tmp/w'"$1"' && echo hi from '"$1"' >hello && (setsid python3 -m http.server '"$1"' --bind 127.0.0.1 >/dev/null 2>&1 &) && for i in $(seq 50); do python3 -c \"import socket; socket.create_connection((\\\"127.0.0.1\\\", '"$1"'))\" 2>/dev/null && exit 0; sleep 0.1; done; exit 1"]}}' >"$BATS_TEST_TMPDIR/run"
	grep -q '"status":"exit status 0"' "$BATS_TEST_TMPDIR/run" || {
		cat "$BATS_TEST_TMPDIR/run" >&2
		return 1
	}
}

@test "a request with Host <port>-<id>.<domain> reaches the sandbox's server on that port" {
	box
	serve 8000
	run curl -s -H "Host: 8000-$ID.e2b.local" "$SBXD_URL/hello"
	assert_success
	assert_output "hi from 8000"
}

@test "E2b-Sandbox-Id and E2b-Sandbox-Port: the same, with the status, headers and a query" {
	box
	serve 8001
	run curl -s -D "$BATS_TEST_TMPDIR/h" -H "E2b-Sandbox-Id: $ID" -H 'E2b-Sandbox-Port: 8001' "$SBXD_URL/hello?a=b%20c"
	assert_success
	assert_output "hi from 8001"
	run grep -ci $'^content-length: 13\r$' "$BATS_TEST_TMPDIR/h"
	assert_output 1
	run curl -s -o /dev/null -w '%{http_code}' -H "E2b-Sandbox-Id: $ID" -H 'E2b-Sandbox-Port: 8001' "$SBXD_URL/nothing-here"
	assert_output 404
}

@test "a port nothing listens on: 502, the sandbox's id and E2B's message" {
	box
	run curl -s -w ' %{http_code}' -H "Host: 8002-$ID.e2b.local" "$SBXD_URL/"
	assert_success
	assert_output "{\"sandboxId\":\"$ID\",\"message\":\"The sandbox is running but port is not open\",\"code\":502} 502"
}

@test "a sandbox without internet still answers on its ports, and nothing leaves it" {
	box '{"templateID":"base","timeout":300,"secure":true,"allow_internet_access":false}'
	serve 8003
	run curl -s -H "Host: 8003-$ID.e2b.local" "$SBXD_URL/hello"
	assert_output "hi from 8003"
}

@test "a POST body goes to the sandbox's server (a 501 from http.server, passed on)" {
	box
	serve 8004
	run curl -s -o /dev/null -w '%{http_code}' -X POST -d 'x=1' -H "Host: 8004-$ID.e2b.local" "$SBXD_URL/hello"
	assert_output 501
}

@test "allowPublicTraffic false: a port answers only with the sandbox's traffic access token" {
	local out traffic
	out=$(sbxd_create '{"templateID":"base","timeout":300,"secure":true,"network":{"allowPublicTraffic":false}}')
	ID=$(jq -r .sandboxID <<<"$out")
	TOK=$(jq -r .envdAccessToken <<<"$out")
	traffic=$(jq -r .trafficAccessToken <<<"$out")
	[ ${#traffic} = 40 ]
	[ "$traffic" != "$TOK" ]
	serve 8005
	run curl -s -w ' %{http_code}' -H "Host: 8005-$ID.e2b.local" "$SBXD_URL/hello"
	assert_output '{"code":403,"message":"Missing or invalid traffic access token"} 403'
	run curl -s -w ' %{http_code}' -H "Host: 8005-$ID.e2b.local" -H "e2b-traffic-access-token: $TOK" "$SBXD_URL/hello"
	assert_output '{"code":403,"message":"Missing or invalid traffic access token"} 403'
	run curl -s -H "Host: 8005-$ID.e2b.local" -H "e2b-traffic-access-token: $traffic" "$SBXD_URL/hello"
	assert_output "hi from 8005"
	# A public sandbox has no traffic token.
	out=$(sbxd_create '{"templateID":"base","timeout":300}')
	assert_equal "$(jq -r .trafficAccessToken <<<"$out")" null
}
