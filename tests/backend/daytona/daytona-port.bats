#!/usr/bin/env bats
# sbx-port on the daytona backend: Daytona gives every port of a sandbox a
# preview URL of its own and a token its requests carry; sbx-port prints
# them. Against a private sbxd on loopback (Daytona's API), which answers
# those hosts.
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

@test "sbx-port -b daytona PORT: the preview URL, its host and token; the URL with the token reaches the sandbox's server, without it not" {
	local host tok
	sbx-create -b daytona -s "$S" >/dev/null
	serve 8000
	run --separate-stderr sbx-port -s "$S" 8000
	assert_success
	assert_equal "$stderr" ""
	host=8000-$(sid).127.0.0.1:$SBXD_PORT
	jq_true --arg h "$host" '.port == 8000 and .host == $h and
	    .url == "http://" + $h and (.token | type == "string" and length > 8)' <<<"$output"
	tok=$(jq -r .token <<<"$output")
	run curl -sS -H "Host: $host" -H "x-daytona-preview-token: $tok" "$SBXD_URL/hello"
	assert_success
	assert_output "hi from 8000"
	run curl -s -o /dev/null -w '%{http_code}' -H "Host: $host" "$SBXD_URL/hello"
	assert_output 403
	# The token is in no state file.
	run grep -rF -e "$tok" "$S"
	assert_failure
}

@test "sbx-port -b daytona without a port, or with a host port: exit 2, nothing asked" {
	# Nothing listens there: a call would be exit 1.
	export DAYTONA_API_URL=http://127.0.0.1:1/api
	run sbx-port -b daytona -I sb1
	assert_failure 2
	assert_output "sbx-port: backend 'daytona' publishes no ports to list: every port of a sandbox answers at its own URL (name one: sbx-port PORT)"
	run sbx-port -b daytona -I sb1 9000:8000
	assert_failure 2
	assert_output "sbx-port: backend 'daytona' cannot publish ports (--port, sbx-port HOSTPORT:PORT)"
}

@test "sbx-port -b daytona of a sandbox that is gone: exit 3" {
	sbx-create -b daytona -s "$S" >/dev/null
	sbx-kill -q -s "$S" >/dev/null
	run --separate-stderr sbx-port -b daytona -I "$(sid)" 8000
	assert_failure 3
	assert_output ""
	[[ $stderr == *"no sandbox"* ]]
}
