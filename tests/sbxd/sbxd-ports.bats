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

# Start a server on port $1 in the sandbox that answers each GET with the
# Host header it got ("none" without one); wait until it answers inside.
serve_host() {
	local script
	script='cat >/tmp/host'"$1"'.py <<"PY"
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        b = (self.headers.get("Host") or "none").encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
PY
(setsid python3 /tmp/host'"$1"'.py '"$1"' >/dev/null 2>&1 &)
for i in $(seq 50); do
	python3 -c "import socket; socket.create_connection((\"127.0.0.1\", '"$1"'))" 2>/dev/null && exit 0
	sleep 0.1
done
exit 1'
	sbxd_run "$ID" "$TOK" "$(jq -cn --arg s "$script" '{process:{cmd:"/bin/sh",args:["-c",$s]}}')" >"$BATS_TEST_TMPDIR/run"
	grep -q '"status":"exit status 0"' "$BATS_TEST_TMPDIR/run" || {
		cat "$BATS_TEST_TMPDIR/run" >&2
		return 1
	}
}

put_net() {
	curl -s -o "$BATS_TEST_TMPDIR/body" -w '%{http_code}' -X PUT \
	    -H "X-API-Key: $SBXD_KEY" -H 'Content-Type: application/json' \
	    -d "$2" "$SBXD_URL/sandboxes/$1/network"
}

@test "without maskRequestHost, the sandbox's server sees the Host the request came with" {
	box
	serve_host 8006
	run curl -s -H "Host: 8006-$ID.e2b.local" "$SBXD_URL/"
	assert_output "8006-$ID.e2b.local"
}

@test "network.maskRequestHost: the Host the sandbox's server sees, \${PORT} its port; GET says it and a PUT keeps it" {
	box '{"templateID":"base","timeout":300,"secure":true,"network":{"maskRequestHost":"localhost:${PORT}"}}'
	serve_host 8007
	serve_host 8008
	run curl -s -H "Host: 8007-$ID.e2b.local" "$SBXD_URL/"
	assert_output "localhost:8007"
	run curl -s -H "E2b-Sandbox-Id: $ID" -H 'E2b-Sandbox-Port: 8008' "$SBXD_URL/"
	assert_output "localhost:8008"
	run sbxd_api GET "/sandboxes/$ID"
	assert_equal "$(jq -c .network <<<"$output")" '{"maskRequestHost":"localhost:${PORT}"}'
	# E2B's update does not take it: what the sandbox was made with stays.
	run put_net "$ID" '{"denyOut":["10.0.0.0/8"]}'
	assert_output 204
	run curl -s -H "Host: 8007-$ID.e2b.local" "$SBXD_URL/"
	assert_output "localhost:8007"
	run sbxd_api GET "/sandboxes/$ID"
	assert_equal "$(jq -c .network <<<"$output")" '{"denyOut":["10.0.0.0/8"],"maskRequestHost":"localhost:${PORT}"}'
	run put_net "$ID" '{"maskRequestHost":"x.test"}'
	assert_output 400
	assert_equal "$(jq -r .message "$BATS_TEST_TMPDIR/body")" "network.maskRequestHost is set at create only"
}

@test "a mask without \${PORT} is the Host as it is, kept in the sandbox's record" {
	box '{"templateID":"base","timeout":300,"secure":true,"network":{"maskRequestHost":"app.internal"}}'
	serve_host 8009
	run curl -s -H "Host: 8009-$ID.e2b.local" "$SBXD_URL/"
	assert_output "app.internal"
	# What the next sbxd adopts the sandbox with.
	run jq -r .network.maskRequestHost "$SBXD_DIR/store/$ID.json"
	assert_output "app.internal"
}

@test "a bad maskRequestHost is 400 with a clear message, and nothing is created" {
	local before body
	before=$(sbx-ls -j | wc -l)
	body=$(sbxd_api POST /sandboxes '{"templateID":"base","network":{"maskRequestHost":1}}')
	assert_equal "$(jq -r .code <<<"$body")" 400
	assert_equal "$(jq -r .message <<<"$body")" 'Error when parsing request: "network.maskRequestHost" must be a string of at most 255 bytes'
	body=$(sbxd_api POST /sandboxes '{"templateID":"base","network":{"maskRequestHost":"a.test\r\nX-Evil: 1"}}')
	assert_equal "$(jq -r .code <<<"$body")" 400
	assert_equal "$(jq -r .message <<<"$body")" 'network.maskRequestHost is not a host[:port] (with ${PORT} for the port)'
	body=$(sbxd_api POST /sandboxes '{"templateID":"base","network":{"maskRequestHost":"a b"}}')
	assert_equal "$(jq -r .message <<<"$body")" 'network.maskRequestHost is not a host[:port] (with ${PORT} for the port)'
	assert_equal "$(sbx-ls -j | wc -l)" "$before"
}
