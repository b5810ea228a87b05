#!/usr/bin/env bats
# sbx-port on the e2b backend: E2B gives every port of a sandbox a host of
# its own, <port>-<id>.<domain> (the SDKs' getHost), so nothing is
# published; sbx-port prints that host and its URL. Against a private
# sbxd on loopback, which answers those hosts, and a scripted API for a
# detail that names its domain.
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
	sbx_setup
	unset E2B_API_URL E2B_SANDBOX_URL E2B_DOMAIN
	export XDG_CONFIG_HOME=$BATS_TEST_TMPDIR/config
	S=$BATS_TEST_TMPDIR/s.json
	FAKE_PID=
}

teardown() {
	if [ -n "$FAKE_PID" ]; then
		kill "$FAKE_PID" 2>/dev/null || true
		wait "$FAKE_PID" 2>/dev/null || true
	fi
	[ -f "$S" ] && sbx-kill -q -s "$S" >/dev/null 2>&1 || true
}

sid() { jq -r .ref.id "$S"; }

# A python http.server on port $1 in the sandbox, serving "hello" (which
# holds "hi from $1"); waits until it answers inside.
serve() {
	sbx-exec -s "$S" -- sh -c 'mkdir -p /tmp/w && cd /tmp/w && echo "hi from $1" >hello &&
	    (setsid python3 -m http.server "$1" --bind 127.0.0.1 >/dev/null 2>&1 &) &&
	    for i in $(seq 50); do
	        python3 -c "import socket,sys; socket.create_connection((\"127.0.0.1\", int(sys.argv[1])))" "$1" 2>/dev/null && exit 0
	        sleep 0.1
	    done; exit 1' sh "$1"
}

# A scripted API on 127.0.0.1 whose every answer is 200 and the JSON $1.
# Sets FAKE_URL and FAKE_PID.
fake_start() {
	local port i
	port=$(sbxd_free_port)
	python3 - "$port" "$1" >"$BATS_TEST_TMPDIR/fake.err" 2>&1 <<'PY' &
import http.server, sys
port, body = int(sys.argv[1]), sys.argv[2].encode()
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
http.server.HTTPServer(('127.0.0.1', port), H).serve_forever()
PY
	FAKE_PID=$!
	FAKE_URL=http://127.0.0.1:$port
	for ((i = 0; i < 100; i++)); do
		curl -s -o /dev/null "$FAKE_URL/" 2>/dev/null && return 0
		sleep 0.05
	done
	return 1
}

@test "sbx-port -b e2b PORT: the host <port>-<id>.<endpoint's host>, its http URL, and the URL reaches the sandbox's server" {
	local host
	sbx-create -b e2b -E "$SBXD_URL" -s "$S" >/dev/null
	serve 8000
	host=8000-$(sid).127.0.0.1:$SBXD_PORT
	run --separate-stderr sbx-port -s "$S" 8000
	assert_success
	assert_equal "$stderr" ""
	assert_output "{\"port\":8000,\"host\":\"$host\",\"url\":\"http://$host\"}"
	# The host, as a Host header to sbxd, and the URL itself (its name
	# resolved to sbxd's address).
	run curl -sS -H "Host: $host" "$SBXD_URL/hello"
	assert_success
	assert_output "hi from 8000"
	run curl -sS --resolve "8000-$(sid).127.0.0.1:$SBXD_PORT:127.0.0.1" "http://$host/hello"
	assert_success
	assert_output "hi from 8000"
	# Any port: nothing listens on 8001, and sbxd says so.
	run sbx-port -s "$S" 8001
	assert_success
	run curl -s -o /dev/null -w '%{http_code}' -H "Host: $(jq -r .host <<<"$output")" "$SBXD_URL/hello"
	assert_output 502
}

@test "sbx-port -b e2b: the domain the sandbox's detail names" {
	fake_start '{"sandboxID":"isb1","templateID":"base","domain":"e2b.test","metadata":{"io.sbx.managed":"1"}}'
	E2B_API_URL=$FAKE_URL run --separate-stderr sbx-port -b e2b -I isb1 3000
	assert_success
	assert_output '{"port":3000,"host":"3000-isb1.e2b.test","url":"http://3000-isb1.e2b.test"}'
	# Not one of sbx's: refused, as every tool refuses it.
	kill "$FAKE_PID"
	wait "$FAKE_PID" 2>/dev/null || true
	fake_start '{"sandboxID":"isb2","templateID":"base","domain":"e2b.test","metadata":{}}'
	E2B_API_URL=$FAKE_URL run --separate-stderr sbx-port -b e2b -I isb2 3000
	assert_failure 3
	assert_output ""
}

@test "sbx-port -b e2b without a port, or with a host port: exit 2, nothing asked" {
	# Nothing listens there: a call would be exit 1.
	export E2B_API_URL=http://127.0.0.1:1
	run sbx-port -b e2b -I isb1
	assert_failure 2
	assert_output "sbx-port: backend 'e2b' publishes no ports to list: every port of a sandbox answers at its own URL (name one: sbx-port PORT)"
	run sbx-port -b e2b -I isb1 9000:8000
	assert_failure 2
	assert_output "sbx-port: backend 'e2b' cannot publish ports (--port, sbx-port HOSTPORT:PORT)"
}

@test "sbx-create -b e2b --port: exit 2, sbx-port gives the URL; nothing created" {
	run sbx-create -b e2b -E http://127.0.0.1:1 --port 8000 -s "$S"
	assert_failure 2
	assert_output "sbx-create: backend 'e2b' publishes no ports (--port): every port of its sandboxes answers at a URL of its own, which sbx-port prints"
	[ ! -e "$S" ]
}
