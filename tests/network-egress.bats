#!/usr/bin/env bats
# sbx-create --egress-proxy on the local backend: allowed TCP goes through
# the user's SOCKS5 proxy (lib/socks5-server.py, run by the test in the
# outside world of lib/networld.bash, or on the host's loopback), denied
# TCP never reaches it, and the proxy's password is nowhere it must not be.

load lib/helper
load lib/networld

setup_file() {
	sbx_setup_file
	networld_start
}
teardown_file() {
	sbx_teardown_file
	networld_stop
}
setup() {
	sbx_setup
	HOST_PIDS=()
	export XDG_CONFIG_HOME=$BATS_TEST_TMPDIR/config
	unset SBX_EGRESS_PROXY_PASSWORD
	# A throwaway password: the tests look for it everywhere.
	PW=pw-$RANDOM-$RANDOM-secret
}
teardown() {
	local p
	for p in "${HOST_PIDS[@]}"; do
		kill "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
}

PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
S() { echo "$BATS_TEST_TMPDIR/s.json"; }

wait_file() {
	local i
	for ((i = 0; i < 200; i++)); do
		[ -s "$1" ] && return 0
		sleep 0.05
	done
	echo "$1 never appeared"
	return 1
}

# A SOCKS5 proxy on $1 (default: the world's DNS address, inside the
# world), with user $2 and password $3 when given (from a file, never
# argv). Sets PROXY (host:port) and SOCKS_LOG.
start_socks() {
	local addr=${1:-$NETWORLD_DNS_ADDR} here
	here=$(cd "$BATS_TEST_DIRNAME/lib" && pwd)
	SOCKS_LOG=$BATS_TEST_TMPDIR/socks.log
	: >"$SOCKS_LOG"
	rm -f "$BATS_TEST_TMPDIR/socks.port"
	local args=("$here/socks5-server.py" "$addr" "$BATS_TEST_TMPDIR/socks.port" "$SOCKS_LOG")
	if [ -n "${2:-}" ]; then
		printf '%s\n%s\n' "$2" "$3" >"$BATS_TEST_TMPDIR/socks.cred"
		args+=("$BATS_TEST_TMPDIR/socks.cred")
	fi
	if [ "$addr" = "$NETWORLD_DNS_ADDR" ]; then
		ip netns exec "$NETWORLD_NS" "$PY" "${args[@]}" >"$BATS_TEST_TMPDIR/socks.err" 2>&1 3>&- &
	else
		"$PY" "${args[@]}" >"$BATS_TEST_TMPDIR/socks.err" 2>&1 3>&- &
	fi
	HOST_PIDS+=("$!")
	wait_file "$BATS_TEST_TMPDIR/socks.port"
	PROXY=$addr:$(cat "$BATS_TEST_TMPDIR/socks.port")
}

get() {
	sbx-exec -s "$(S)" -- curl -sS --max-time 5 "$@"
}

# The sandbox's net.log lines that jq FILTER selects, waiting (10 s) for
# at least one: a connection's line comes when it ends.
wait_log() {
	local i out
	for ((i = 0; i < 200; i++)); do
		out=$(sbx-net log -s "$(S)" | jq -c "select($1)")
		[ -n "$out" ] && { echo "$out"; return 0; }
		sleep 0.05
	done
	echo "no log line matches $1:" >&2
	sbx-net log -s "$(S)" >&2
	return 1
}

# Fails when $PW is in any process's argv, or in file/dir $1...
# (the pattern from a file: a grep with it in argv would find itself).
pw_nowhere() {
	local f
	printf '%s\n' "$PW" >"$BATS_TEST_TMPDIR/pw.pattern"
	! cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\0' ' ' |
	    grep -qF -f "$BATS_TEST_TMPDIR/pw.pattern" ||
	    { echo "the password is in a process's argv"; return 1; }
	for f in "$@"; do
		[ -e "$f" ] || { echo "missing $f"; return 1; }
		! grep -rqF -f "$BATS_TEST_TMPDIR/pw.pattern" "$f" ||
		    { echo "the password is in $f"; return 1; }
	done
}

@test "--egress-proxy: an invalid URL is exit 2 and nothing is created" {
	run sbx-create -n allow --egress-proxy http://proxy.test:8080 -s "$(S)"
	assert_failure 2
	assert_output "sbx-create: invalid egress proxy 'http://proxy.test:8080': want socks5://[user@]host:port"
	[ ! -e "$(S)" ]
	run sbx-create -n allow --egress-proxy socks5://proxy.test -s "$(S)"
	assert_failure 2
	assert_output "sbx-create: invalid egress proxy 'socks5://proxy.test': want host:port"
	run sbx-create -n allow --egress-proxy socks5://proxy.test:0 -s "$(S)"
	assert_failure 2
	assert_output "sbx-create: invalid egress proxy 'socks5://proxy.test:0': want a port 1 to 65535"
	[ ! -e "$(S)" ]
}

@test "--egress-proxy: a password in the URL is refused, exit 2" {
	run sbx-create -n allow --egress-proxy "socks5://u:$PW@proxy.test:1080" -s "$(S)"
	assert_failure 2
	assert_output "sbx-create: invalid egress proxy 'socks5://u:$PW@proxy.test:1080': no password in the URL (it comes from SBX_EGRESS_PROXY_PASSWORD or the credentials file egress-proxy)"
	[ ! -e "$(S)" ]
}

@test "--egress-proxy needs --network allow" {
	run sbx-create -n deny --egress-proxy socks5://proxy.test:1080 -s "$(S)"
	assert_failure 2
	assert_output "sbx-create: --egress-proxy needs --network allow"
	[ ! -e "$(S)" ]
}

@test "--egress-proxy with a user and no password is exit 5, nothing created" {
	run sbx-create -n allow --egress-proxy socks5://u@proxy.test:1080 -s "$(S)"
	assert_failure 5
	assert_output "sbx-create: no password for the egress proxy's user 'u' (set SBX_EGRESS_PROXY_PASSWORD or write it to '$XDG_CONFIG_HOME/sbx/credentials/egress-proxy')"
	[ ! -e "$(S)" ]
}

@test "--egress-proxy with a password longer than SOCKS5's 255 bytes is exit 2" {
	SBX_EGRESS_PROXY_PASSWORD=$(printf 'x%.0s' {1..256}) run sbx-create -n allow \
	    --egress-proxy socks5://u@proxy.test:1080 -s "$(S)"
	assert_failure 2
	assert_output "sbx-create: the egress proxy's password is longer than SOCKS5's 255 bytes"
	[ ! -e "$(S)" ]
}

@test "allowed TCP goes through the SOCKS5 proxy: the server's peer is the proxy, which logged the CONNECT" {
	start_socks
	sbx-create -n allow --egress-proxy "socks5://$PROXY" -s "$(S)" >/dev/null
	run get http://a.test/
	assert_success
	[ "$(jq -r .peer <<<"$output")" = "$NETWORLD_DNS_ADDR" ]
	[ "$(jq -r .server <<<"$output")" = a.test ]
	run cat "$SOCKS_LOG"
	assert_output "connect $NETWORLD_A 80"
	run jq -c .egress_proxy "$(jq -r .ref.dir "$(S)")/net.json"
	assert_output "\"socks5://$PROXY\""
	run wait_log '.dest == "'"$NETWORLD_A"'" and .verdict == "allow"'
	assert_success
	[ "$(jq -r .error <<<"$output")" = null ]
	[ "$(jq -r .host <<<"$output")" = a.test ]
	run sbx-net -s "$(S)"
	assert_output "{\"allow_out\":[],\"deny_out\":[],\"egress_proxy\":\"socks5://$PROXY\"}"
}

@test "denied TCP never reaches the proxy" {
	start_socks
	sbx-create -n allow --deny-out "$NETWORLD_C" --egress-proxy "socks5://$PROXY" -s "$(S)" >/dev/null
	run get http://c.test/
	assert_failure
	run get http://a.test/
	assert_success
	run cat "$SOCKS_LOG"
	assert_output "connect $NETWORLD_A 80"
	run wait_log '.dest == "'"$NETWORLD_C"'"'
	assert_success
	[ "$(jq -r .verdict <<<"$output")" = deny ]
}

@test "a proxy on the host's loopback is the user's choice: reachable outside the rules" {
	start_socks 127.0.0.1
	sbx-create -n allow --egress-proxy "socks5://$PROXY" -s "$(S)" >/dev/null
	run get http://a.test/
	assert_success
	[ "$(jq -r .server <<<"$output")" = a.test ]
	run cat "$SOCKS_LOG"
	assert_output "connect $NETWORLD_A 80"
}

@test "user and password (RFC 1929) from SBX_EGRESS_PROXY_PASSWORD: accepted, and the password is nowhere" {
	start_socks "$NETWORLD_DNS_ADDR" alice "$PW"
	SBX_EGRESS_PROXY_PASSWORD=$PW sbx-create -n allow \
	    --egress-proxy "socks5://alice@$PROXY" -s "$(S)" >"$BATS_TEST_TMPDIR/ref.json"
	run get http://a.test/
	assert_success
	[ "$(jq -r .peer <<<"$output")" = "$NETWORLD_DNS_ADDR" ]
	run cat "$SOCKS_LOG"
	assert_output "auth ok alice
connect $NETWORLD_A 80"
	dir=$(jq -r .ref.dir "$(S)")
	wait_log '.dest == "'"$NETWORLD_A"'"' >/dev/null
	[ "$(stat -c %a "$dir/net.secret.json")" = 600 ]
	grep -qF -- "$PW" "$dir/net.secret.json"
	pw_nowhere "$(S)" "$BATS_TEST_TMPDIR/ref.json" "$dir/net.json" "$dir/net.log" "$dir/meta.json" "$dir/netd.err"
	# Nothing inside: the environment of a command and of init.
	run sbx-exec -s "$(S)" -- sh -c 'env; cat /proc/1/environ; cat /proc/1/cmdline'
	assert_success
	refute_output --partial "$PW"
	refute_output --partial SBX_EGRESS_PROXY_PASSWORD
	# Nor sbx-netd's environment on the host.
	! grep -qF -- "$PW" "/proc/$(jq -r .net_pid "$dir/meta.json")/environ"
	run sbx-net -s "$(S)"
	refute_output --partial "$PW"
}

@test "the password from the credentials file; a file others can read is warned about" {
	start_socks "$NETWORLD_DNS_ADDR" bob "$PW"
	mkdir -p "$XDG_CONFIG_HOME/sbx/credentials"
	printf '%s\n' "$PW" >"$XDG_CONFIG_HOME/sbx/credentials/egress-proxy"
	chmod 644 "$XDG_CONFIG_HOME/sbx/credentials/egress-proxy"
	run sbx-create -n allow --egress-proxy "socks5://bob@$PROXY" -s "$(S)"
	assert_success
	assert_line --index 0 "sbx-create: credentials file '$XDG_CONFIG_HOME/sbx/credentials/egress-proxy' is readable by others (want mode 0600)"
	run get http://a.test/
	assert_success
	run cat "$SOCKS_LOG"
	assert_output "auth ok bob
connect $NETWORLD_A 80"
}

@test "a refused password: the sandbox's connection fails, the log says socks5" {
	start_socks "$NETWORLD_DNS_ADDR" alice right-one
	SBX_EGRESS_PROXY_PASSWORD=$PW sbx-create -n allow \
	    --egress-proxy "socks5://alice@$PROXY" -s "$(S)" >/dev/null
	before=$(grep -c "^tcp $NETWORLD_A 80 " "$NETWORLD_LOG" || true)
	run get http://a.test/
	assert_failure
	refute_output --partial '"server"'
	[ "$(grep -c "^tcp $NETWORLD_A 80 " "$NETWORLD_LOG" || true)" = "$before" ]
	run cat "$SOCKS_LOG"
	assert_output "auth refused alice"
	run wait_log '.dest == "'"$NETWORLD_A"'"'
	assert_success
	[ "$(jq -r .verdict <<<"$output")" = allow ]
	[ "$(jq -r .error <<<"$output")" = "socks5: the proxy refused user 'alice'" ]
	[ "$(jq -r .bytes_out <<<"$output")" = 0 ]
	dir=$(jq -r .ref.dir "$(S)")
	pw_nowhere "$dir/net.log" "$dir/netd.err"
}

@test "a proxy that is not there: the connection is reset, the log says why" {
	start_socks
	kill "${HOST_PIDS[0]}"
	wait "${HOST_PIDS[0]}" 2>/dev/null || true
	sbx-create -n allow --egress-proxy "socks5://$PROXY" -s "$(S)" >/dev/null
	run get http://a.test/
	assert_failure
	run wait_log '.dest == "'"$NETWORLD_A"'"'
	assert_success
	[ "$(jq -r .error <<<"$output")" = "socks5: cannot connect to the proxy $PROXY: Connection refused" ]
}
