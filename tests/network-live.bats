#!/usr/bin/env bats
# A live sandbox given what it was created without: sbx-net -n allow turns
# the network of a -n deny sandbox on (a sbx-netd started into its network
# namespace), -n deny cuts it again, and --inject-header adds header
# injection with a CA made then and put into its trust store. Real
# traffic to the tests' outside world (lib/networld.bash), plus the
# injection server of network-inject.bats.

load lib/helper
load lib/networld

setup_file() {
	sbx_setup_file
	networld_start
	export SBX_NETWORK_CA_FILE=$NETWORLD_CA
	export SBX_TEST_KEY=sbxlive-$RANDOM$RANDOM$RANDOM-value
	NETWORLD_D=$(networld_addr d.test)
	export NETWORLD_D
	# the server's e.test end, which no test here uses, wants a leaf
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
	    -nodes -keyout "$NETWORLD_DIR/untrusted.key" \
	    -out "$NETWORLD_DIR/untrusted.pem" -days 2 -subj /CN=e.test \
	    >/dev/null 2>&1 || return 1
	chmod 644 "$NETWORLD_DIR/untrusted.key"
	ip netns exec "$NETWORLD_NS" /usr/bin/python3 \
	    "$BATS_TEST_DIRNAME/lib/inject-server.py" "$NETWORLD_DIR" \
	    "$NETWORLD_D" "$(networld_addr e.test)" </dev/null \
	    >"$NETWORLD_DIR/inject.err" 2>&1 3>&- &
	echo "$!" >"$NETWORLD_DIR/inject.pid"
	local i
	for ((i = 0; i < 200; i++)); do
		[ -e "$NETWORLD_DIR/inject-ready" ] && return 0
		sleep 0.05
	done
	cat "$NETWORLD_DIR/inject.err" >&2
	return 1
}
teardown_file() {
	if [ -s "$NETWORLD_DIR/inject.pid" ]; then
		kill "$(cat "$NETWORLD_DIR/inject.pid")" 2>/dev/null || true
	fi
	sbx_teardown_file
	networld_stop
}
setup() {
	sbx_setup
	ROOTLESS_DIR=
}

teardown() {
	[ -n "$ROOTLESS_DIR" ] || return 0
	nobody sh -c 'sbx-ls -j | sbx-kill -q' >/dev/null 2>&1 || true
	rm -rf "$ROOTLESS_DIR"
}

# Run as uid 65534 in a directory it owns, with a store of its own.
nobody() {
	(cd "$ROOTLESS_DIR" && setpriv --reuid=65534 --regid=65534 --clear-groups \
	    env -i HOME="$ROOTLESS_DIR" SBX_LOCAL_DIR="$ROOTLESS_DIR/sb" \
	    SBX_NETWORK_DNS="$SBX_NETWORK_DNS" SBX_NETWORK_CA_FILE="$NETWORLD_CA" \
	    SBX_TEST_KEY="$SBX_TEST_KEY" PATH="$SBX_BIN:/usr/bin:/bin" "$@")
}

sdir() {
	jq -r .ref.dir "${1:-$BATS_TEST_TMPDIR/s.json}"
}

meta() {
	jq -r ".$1" "$(sdir)/meta.json"
}

field_is() {
	local got
	[ -n "$output" ] || { echo "no output"; return 1; }
	got=$(jq -r "$1" <<<"$output") || { echo "not JSON: $output"; return 1; }
	[ "$got" = "$2" ] || { echo "$1 is '$got', not '$2', in: $output"; return 1; }
}

world_conns() {
	grep -c "^tcp $1 $2 " "$NETWORLD_LOG" || true
}

# The sandbox cannot reach a.test's HTTP server: the command fails and the
# world sees no connection.
cut_off() {
	local before
	before=$(world_conns "$NETWORLD_A" 80)
	run sx curl -sS --max-time 5 "http://$NETWORLD_A/"
	assert_failure
	refute_output --partial '"server"'
	[ "$(world_conns "$NETWORLD_A" 80)" = "$before" ] || {
		echo "the world saw a connection to $NETWORLD_A:80"
		return 1
	}
}

# sbx-netd's pid is alive and is sbx-netd.
is_netd() {
	[[ $1 =~ ^[0-9]+$ ]] || { echo "no net_pid: '$1'"; return 1; }
	alive "$1"
	[ "$(basename "$(readlink "/proc/$1/exe")")" = sbx-netd ]
}

wait_dead() {
	local i
	for ((i = 0; i < 200; i++)); do
		dead "$1" && return 0
		sleep 0.05
	done
	echo "process $1 is still alive"
	return 1
}

@test "-n deny, then sbx-net -n allow: the world is reachable; -n deny again: it is not" {
	new_sandbox -n deny
	cut_off
	[ ! -e "$(sdir)/net.json" ]
	run --separate-stderr sbx-net -s s.json -n allow
	assert_success
	[ "$output" = '{"allow_out":[],"deny_out":[]}' ]
	[ "$(meta network)" = allow ]
	is_netd "$(meta net_pid)"
	run sx curl -sS --max-time 5 http://a.test/
	assert_success
	field_is .server a.test
	run --separate-stderr sbx-net -s s.json -n deny
	assert_success
	[ "$output" = '{"allow_out":[],"deny_out":[]}' ]
	[ "$(meta network)" = deny ]
	cut_off
	# on again, with rules this time
	run --separate-stderr sbx-net -s s.json -n allow --deny-out all --allow-out a.test
	assert_success
	[ "$output" = '{"allow_out":["a.test"],"deny_out":["all"]}' ]
	run sx curl -sS --max-time 5 http://a.test/
	assert_success
	field_is .server a.test
	run sx curl -sS --max-time 5 http://c.test/
	assert_failure
}

@test "sbx-net -n allow with rules on a deny sandbox: they hold from the first connection" {
	new_sandbox -n deny
	run --separate-stderr sbx-net -s s.json -n allow --deny-out all --allow-out c.test
	assert_success
	cut_off
	run sx curl -sS --max-time 5 http://c.test/
	assert_success
	field_is .server c.test
}

@test "deny to allow with injection: the server sees the header over HTTPS, curl trusts the CA" {
	new_sandbox -n deny
	run --separate-stderr sbx-net -s s.json -n allow --inject-header 'd.test:x-api-key=env:SBX_TEST_KEY'
	assert_success
	run sx curl -sS --max-time 5 https://d.test:8443/live
	assert_success
	field_is '.headers["x-api-key"]' "$SBX_TEST_KEY"
	run sx sh -c 'echo "$SSL_CERT_FILE $REQUESTS_CA_BUNDLE $NODE_EXTRA_CA_CERTS"'
	assert_output "/etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/sbx-ca.pem"
	# the hashed file too, for OpenSSL's capath users
	run sx sh -c 'cmp "/etc/ssl/certs/$(openssl x509 -noout -subject_hash -in /etc/ssl/certs/sbx-ca.pem).0" /etc/ssl/certs/sbx-ca.pem && echo same'
	assert_output same
	cmp <(sx cat /etc/ssl/certs/sbx-ca.pem) "$(sdir)/ca.crt"
	# the value nowhere the sandbox or the state show
	run sx sh -c 'env; cat /proc/*/environ 2>/dev/null | tr "\0" "\n"'
	refute_output --partial "$SBX_TEST_KEY"
	! grep -rqF "$SBX_TEST_KEY" "$(sdir)/net.json" "$(sdir)/meta.json" s.json
}

@test "an allow sandbox made without injection gets it live: HTTPS and HTTP see the header" {
	new_sandbox -n allow
	[ ! -e "$(sdir)/ca.crt" ]
	run sx curl -sS --max-time 5 http://d.test:8080/before
	assert_success
	field_is '.headers["x-api-key"]' null
	run --separate-stderr sbx-net -s s.json --inject-header 'd.test:x-api-key=env:SBX_TEST_KEY'
	assert_success
	run sx curl -sS --max-time 5 https://d.test:8443/s
	assert_success
	field_is '.headers["x-api-key"]' "$SBX_TEST_KEY"
	run sx curl -sS --max-time 5 http://d.test:8080/h
	assert_success
	field_is '.headers["x-api-key"]' "$SBX_TEST_KEY"
	run sx python3 -c 'import ssl, urllib.request, json
ctx = ssl.create_default_context(capath="/etc/ssl/certs")
print(json.load(urllib.request.urlopen("https://d.test:8443/", context=ctx))["headers"]["x-api-key"])'
	assert_success
	assert_output "$SBX_TEST_KEY"
}

@test "an image sandbox gets the CA live in its own /etc/ssl/certs, owned by its root" {
	local img=$BATS_TEST_TMPDIR/img a
	mkdir -p "$img/bin" "$img/etc/ssl/certs"
	cp /bin/busybox "$img/bin/"
	for a in sh ls cat stat; do ln -s busybox "$img/bin/$a"; done
	printf 'BUNDLE\n' >"$img/etc/ssl/certs/ca-certificates.crt"
	new_sandbox -n allow --image "$img"
	# looked at before: the overlay has it in its cache
	[ "$(sx cat /etc/ssl/certs/ca-certificates.crt)" = BUNDLE ]
	run --separate-stderr sbx-net -s s.json --inject-header 'd.test:x-api-key=env:SBX_TEST_KEY'
	assert_success
	run sx stat -c '%u %a %n' /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/sbx-ca.pem
	assert_success
	assert_output "0 644 /etc/ssl/certs/ca-certificates.crt
0 644 /etc/ssl/certs/sbx-ca.pem"
	cmp <(sx cat /etc/ssl/certs/ca-certificates.crt) <(cat "$img/etc/ssl/certs/ca-certificates.crt" "$(sdir)/ca.crt")
	# the image is untouched
	[ "$(cat "$img/etc/ssl/certs/ca-certificates.crt")" = BUNDLE ]
}

@test "kill after a live network: no sbx-netd, no directory" {
	local net dir
	new_sandbox -n deny
	sbx-net -s s.json -n allow --inject-header 'd.test:x-api-key=env:SBX_TEST_KEY' >/dev/null
	net=$(meta net_pid)
	is_netd "$net"
	dir=$(sdir)
	sbx-kill -q -s s.json >/dev/null
	wait_dead "$net"
	[ ! -e "$dir" ]
}

@test "pause -m stop and resume after a live network: a new sbx-netd, the network and the CA kept" {
	local net
	new_sandbox -n deny
	sbx-net -s s.json -n allow --inject-header 'd.test:x-api-key=env:SBX_TEST_KEY' >/dev/null
	net=$(meta net_pid)
	sbx-pause -q -m stop -s s.json
	wait_dead "$net"
	sbx-pause -q -r -s s.json
	is_netd "$(meta net_pid)"
	[ "$(meta net_pid)" != "$net" ]
	run sx curl -sS --max-time 5 https://d.test:8443/again
	assert_success
	field_is '.headers["x-api-key"]' "$SBX_TEST_KEY"
}

@test "a paused sandbox is not given a network: exit 1, one line, nothing made" {
	new_sandbox -n deny
	sbx-pause -q -s s.json
	run --separate-stderr sbx-net -s s.json -n allow
	assert_failure 1
	[ "$stderr" = "sbx-net: sandbox '$(jq -r .ref.id s.json)' is paused: resume it to give it a network or header injection" ]
	[ -z "$output" ]
	[ ! -e "$(sdir)/net.json" ]
	[ "$(meta network)" = deny ]
	sbx-pause -q -r -s s.json
}

@test "bad input to sbx-net -n: exit 2, one line, nothing changed" {
	new_sandbox -n deny
	run --separate-stderr sbx-net -s s.json -n maybe
	assert_failure 2
	[ "${stderr%%$'\n'*}" = "sbx-net: invalid network 'maybe' (want allow or deny)" ]
	run --separate-stderr sbx-net -s s.json -n deny --allow-out a.test
	assert_failure 2
	[ "${stderr%%$'\n'*}" = "sbx-net: -n deny takes no rules" ]
	run --separate-stderr sbx-net -s s.json -n allow --allow-out 10.0.0.0/8x
	assert_failure 2
	[ "$stderr" = "sbx-net: invalid rule '10.0.0.0/8x': bad prefix length" ]
	run --separate-stderr sbx-net -s s.json -n allow --inject-header 'd.test:x-k=env:SBX_NO_SUCH_VAR'
	assert_failure 2
	[ "$stderr" = "sbx-net: --inject-header 'd.test:x-k=env:SBX_NO_SUCH_VAR': SBX_NO_SUCH_VAR is not set" ]
	[ ! -e "$(sdir)/net.json" ]
	[ "$(meta network)" = deny ]
}

@test "rootless: a deny sandbox given a network and injection live reaches the world, the header added" {
	local net
	ROOTLESS_DIR=$(mktemp -d /tmp/sbx-rootless.XXXXXX)
	chown 65534:65534 "$ROOTLESS_DIR"
	chmod 755 "$ROOTLESS_DIR"
	run nobody sbx-create -n deny -s "$ROOTLESS_DIR/s.json"
	assert_success
	run nobody sbx-exec -s "$ROOTLESS_DIR/s.json" -- curl -sS --max-time 5 http://a.test/
	assert_failure
	run --separate-stderr nobody sbx-net -s "$ROOTLESS_DIR/s.json" -n allow \
	    --inject-header 'd.test:x-api-key=env:SBX_TEST_KEY'
	assert_success
	run nobody sbx-exec -s "$ROOTLESS_DIR/s.json" -- curl -sS --max-time 5 https://d.test:8443/r
	assert_success
	field_is '.headers["x-api-key"]' "$SBX_TEST_KEY"
	net=$(jq -r .net_pid "$(jq -r .ref.dir "$ROOTLESS_DIR/s.json")/meta.json")
	[ "$(stat -c %u "/proc/$net")" = 65534 ]
	run nobody sbx-kill -q -s "$ROOTLESS_DIR/s.json"
	assert_success
	wait_dead "$net"
}
