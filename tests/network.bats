#!/usr/bin/env bats
# The local backend's network allow: a network namespace of the sandbox's
# own whose TCP goes through sbx-netd on the host, egress rules, DNS, the
# log, sbx-net, and what stays unreachable.  Real traffic, to an outside
# world made on this machine (lib/networld.bash): no packet leaves it.

load lib/helper
load lib/networld

setup_file() {
	sbx_setup_file
	networld_start
	own_network_or_stop
}
teardown_file() {
	sbx_teardown_file
	networld_stop
}
setup() {
	sbx_setup
	HOST_PIDS=()
	ROOTLESS_DIR=
}

# Everything a test started on the host, by pid; a rootless test's store.
teardown() {
	local p
	for p in "${HOST_PIDS[@]}"; do
		kill "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	[ -n "$ROOTLESS_DIR" ] || return 0
	as_nobody sh -c 'sbx-ls -j | sbx-kill -q' >/dev/null 2>&1 || true
	rm -rf "$ROOTLESS_DIR"
}

# Before any test sends a packet: a sandbox with allow must be in a network
# namespace of its own and sbx-netd told to use the world's resolver (its
# net.json), else a name looked up inside would be asked of the host's
# resolver, off this machine.  Nothing here sends a packet.
own_network_or_stop() {
	local s=$BATS_FILE_TMPDIR/probe.json dir pid dns
	sbx-create -n allow -s "$s" >/dev/null || {
		echo "network.bats: sbx-create -n allow failed; no test run" >&2
		return 1
	}
	dir=$(jq -r .ref.dir "$s")
	pid=$(jq -r .pid "$dir/meta.json")
	dns=$(jq -c .dns "$dir/net.json" 2>/dev/null) || dns=
	if [ "$(readlink "/proc/$pid/ns/net")" = "$(readlink /proc/self/ns/net)" ] ||
	    [ "$dns" != "[\"$NETWORLD_DNS\"]" ]; then
		sbx-kill -q -s "$s" >/dev/null 2>&1
		echo "network.bats: -n allow is not a network namespace of the" \
		    "sandbox's own with the world's resolver (net.json dns: '$dns');" \
		    "no test run, so that no query leaves this machine" >&2
		return 1
	fi
	sbx-kill -q -s "$s" >/dev/null
}

# The host's python3 (not a slow shim); inside, PATH finds /usr/bin/python3.
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

sdir() {
	jq -r .ref.dir "${1:-$BATS_TEST_TMPDIR/s.json}"
}

# A field of the sandbox's meta.json (pid, net_pid, net_starttime).
meta() {
	jq -r ".$1" "$(sdir "${2:-}")/meta.json"
}

# A sandbox with network allow (extra arguments go to sbx-create), with the
# world's CA at /tmp/ca.pem inside.
allow_sandbox() {
	new_sandbox -n allow "$@" &&
	    sbx-exec -i -s "$BATS_TEST_TMPDIR/s.json" -- sh -c 'cat >/tmp/ca.pem' \
	    <"$NETWORLD_CA"
}

# curl inside this test's sandbox, verifying TLS with the world's CA.
scurl() {
	sx curl -sS --max-time 5 --cacert /tmp/ca.pem "$@"
}

# The JSON in $output has $1 (a jq path) exactly equal to $2.  Fails on
# empty output (jq 1.6 would not).
field_is() {
	local got
	[ -n "$output" ] || { echo "no output"; return 1; }
	got=$(jq -r "$1" <<<"$output") || { echo "not JSON: $output"; return 1; }
	[ "$got" = "$2" ] || { echo "$1 is '$got', not '$2', in: $output"; return 1; }
}

# How many TCP connections to ADDR:PORT the world has accepted so far.
world_conns() {
	grep -c "^tcp $1 $2 " "$NETWORLD_LOG" || true
}

# `run sx CMD...` for something that must not reach the world's ADDR:PORT:
# it fails, no server answered, and the world saw no connection.
denied() {
	local addr=$1 port=$2 before
	shift 2
	before=$(world_conns "$addr" "$port")
	run sx "$@"
	assert_failure
	refute_output --partial '"server"'
	refute_output --partial 'hello from'
	[ "$(world_conns "$addr" "$port")" = "$before" ] || {
		echo "the world saw a connection to $addr:$port"
		return 1
	}
}

# A TCP client: prints the first line the server sends; exit 1 with
# "error NAME" when it cannot connect or the connection ends with nothing.
CONNECT='import socket, sys
try:
    s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5)
    data = s.recv(100)
except OSError as e:
    print("error", type(e).__name__)
    sys.exit(1)
if not data:
    print("error closed")
    sys.exit(1)
print(data.decode().strip())'

# A server on the host that greets and hangs up, on $1 (default
# 127.0.0.1) and a free port; sets PORT.
SERVER='import os, socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[2], 0))
s.listen(16)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(s.getsockname()[1]))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
while True:
    c, _ = s.accept()
    c.sendall(b"hello from host\n")
    c.close()'

# Wait (bounded, 10 s) until process $1 is gone.
wait_dead() {
	local i
	for ((i = 0; i < 200; i++)); do
		dead "$1" && return 0
		sleep 0.05
	done
	echo "process $1 is still alive"
	return 1
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

start_server() {
	rm -f "$BATS_TEST_TMPDIR/port"
	"$PY" -c "$SERVER" "$BATS_TEST_TMPDIR/port" "${1:-127.0.0.1}" >/dev/null 2>&1 3>&- &
	HOST_PIDS+=("$!")
	wait_file "$BATS_TEST_TMPDIR/port"
	PORT=$(cat "$BATS_TEST_TMPDIR/port")
}

# The log lines of sandbox S (default s.json) that jq FILTER selects, one
# compact JSON per line.
log_lines() {
	sbx-net log -s "${2:-$BATS_TEST_TMPDIR/s.json}" | jq -c "select($1)"
}

# Wait (bounded, 10 s) until at least N log lines match FILTER: a
# connection's line is written when it ends, just after the client's end.
wait_log() {
	local n=$1 filter=$2 i
	for ((i = 0; i < 200; i++)); do
		[ "$(log_lines "$filter" "${3:-}" | wc -l)" -ge "$n" ] && return 0
		sleep 0.05
	done
	echo "fewer than $n log lines match $filter:"
	sbx-net log -s "${3:-$BATS_TEST_TMPDIR/s.json}"
	return 1
}

# --- the world ----------------------------------------------------------------

@test "the tests' outside world answers from the host: HTTP, HTTPS with its CA, hello, DNS" {
	networld_check
	run networld_py_client dns "$NETWORLD_DNS_ADDR" 53 b.a.test c.test x.example.test
	assert_success
	assert_output "b.a.test $NETWORLD_BA
c.test $NETWORLD_C
x.example.test $NETWORLD_X"
}

# --- allow, no rules ----------------------------------------------------------

@test "allow: the sandbox has a network namespace of its own with lo only" {
	new_sandbox -n allow
	[ "$(readlink "/proc/$(init_pid)/ns/net")" != "$(readlink /proc/self/ns/net)" ]
	run sx ls /sys/class/net
	assert_success
	assert_output lo
	run sx ip -o -4 addr show dev lo
	assert_success
	assert_output --partial " 10.0.2.100/32 "
	refute_output --partial "$NETWORLD_HOST"
}

@test "allow: sbx-netd keeps neither the caller's working directory nor a descriptor of it" {
	w=$BATS_TEST_TMPDIR/work
	mkdir "$w"
	(cd "$w" && sbx-create -q -n allow -s "$BATS_TEST_TMPDIR/s.json")
	dir=$(jq -r .ref.dir "$BATS_TEST_TMPDIR/s.json")
	n=0
	for p in $(grep -lsF -- "$dir" /proc/[0-9]*/cmdline); do
		p=${p%/cmdline}
		[ "$(tr '\0' ' ' <"$p/cmdline" 2>/dev/null)" = "sbx-netd $dir - " ] || continue
		n=$((n + 1))
		assert_equal "$(readlink "$p/cwd")" /
		run find "$p/fd" -lname "$w*"
		assert_output ""
	done
	sbx-kill -q -s "$BATS_TEST_TMPDIR/s.json" >/dev/null
	[ "$n" -ge 1 ]
}

@test "allow: HTTP to a world server by name, resolved through sbx's DNS by the world's" {
	local before
	before=$(grep -c "^dns a.test 1 $NETWORLD_HOST\$" "$NETWORLD_LOG" || true)
	allow_sandbox
	run scurl http://a.test/hello
	assert_success
	field_is .server a.test
	field_is .host a.test
	field_is .path /hello
	field_is .tls false
	# the query reached the world's resolver, from the host (sbx-netd)
	[ "$(grep -c "^dns a.test 1 $NETWORLD_HOST\$" "$NETWORLD_LOG")" -gt "$before" ]
}

@test "allow: HTTPS to a world server by name, verified with the world's CA, SNI intact" {
	allow_sandbox
	run scurl https://b.a.test/
	assert_success
	field_is .server b.a.test
	field_is .sni b.a.test
	field_is .tls true
}

@test "allow: a name the world's DNS does not have does not resolve; one it has does" {
	new_sandbox -n allow
	run sx python3 -c 'import socket
print(socket.gethostbyname("x.example.test"))
try:
    print(socket.gethostbyname("nope.test"))
except socket.gaierror:
    print("no nope.test")'
	assert_success
	assert_output "$NETWORLD_X
no nope.test"
}

@test "allow: a server that speaks first (as SSH does) works without rules" {
	new_sandbox -n allow
	run sx python3 -c "$CONNECT" hello.test 22
	assert_success
	assert_output "hello from hello.test"
}

@test "allow: the first command after create is under the rules already: sbx-netd judges its first connections" {
	# No command may run before sbx-netd has the netns set up: the very
	# first one, run at once, has its denied connection refused by
	# sbx-netd's verdict (logged; nothing reaches the world) and its
	# allowed one through, each on the first try. By address, not name:
	# a resolver retries, a connect without a route fails at once.
	local before
	before=$(world_conns "$NETWORLD_C" 80)
	new_sandbox -n allow --deny-out all --allow-out a.test
	run sx sh -c 'curl -sS --max-time 5 -H "Host: c.test" "http://$1/"
		echo "c=$?"
		curl -sS --max-time 5 -H "Host: a.test" "http://$2/"
		echo "a=$?"' sh "$NETWORLD_C" "$NETWORLD_A"
	assert_line --partial '"server": "a.test"'
	assert_line 'a=0'
	refute_line 'c=0'
	[ "$(world_conns "$NETWORLD_C" 80)" = "$before" ]
	wait_log 2 '.proto == "tcp"'
	run log_lines '.proto == "tcp"'
	[ "${#lines[@]}" -eq 2 ]
	[ "$(jq -c '[.dest, .port, .host, .verdict]' <<<"${lines[0]}")" = "[\"$NETWORLD_C\",80,\"c.test\",\"deny\"]" ]
	[ "$(jq -c '[.dest, .port, .host, .verdict]' <<<"${lines[1]}")" = "[\"$NETWORLD_A\",80,\"a.test\",\"allow\"]" ]
}

@test "allow: the sandbox's own loopback works, server and client inside" {
	new_sandbox -n allow
	run sx sh -c 'python3 -c "
import socket
s = socket.socket()
s.bind((\"127.0.0.1\", 0))
s.listen(1)
open(\"/tmp/port\", \"w\").write(str(s.getsockname()[1]))
c, _ = s.accept()
c.sendall(b\"hello from inside\n\")
" >/dev/null 2>&1 &
	i=0
	while [ ! -s /tmp/port ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
	python3 -c "$0" 127.0.0.1 "$(cat /tmp/port)"' "$CONNECT"
	assert_success
	assert_output "hello from inside"
}

# A DNS query for a.test to each address given, over a connected UDP
# socket: "answer from ADDR PORT IP" (or "error NAME"); then "53 free"
# when no UDP socket of the netns has port 53 (a server of the sandbox's
# own could bind it).
DNSQ='import socket, struct, sys
for a in sys.argv[1:]:
    fam = socket.AF_INET6 if ":" in a else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.settimeout(5)
    try:
        s.connect((a, 53))
        s.send(struct.pack(">6H", 0x5b8, 0x100, 1, 0, 0, 0) +
            b"\x01a\x04test\x00" + struct.pack(">2H", 1, 1))
        d, src = s.recvfrom(512)
    except OSError as e:
        print("error", type(e).__name__)
        sys.exit(1)
    print("answer from", src[0], src[1], socket.inet_ntoa(d[-4:]))
held = [l for f in ("/proc/net/udp", "/proc/net/udp6")
    for l in open(f).readlines()[1:] if l.split()[1].endswith(":0035")]
print("53 free" if not held else "53 held: %s" % held)'

@test "allow: DNS answers come from the address asked, port 53, and leave port 53 to the sandbox" {
	local ns
	new_sandbox -n allow
	ns=$(sx awk '/^nameserver/ { print $2; exit }' /etc/resolv.conf)
	[ -n "$ns" ]
	run sx python3 -c "$DNSQ" "$ns" 127.0.0.1 2001:db8::53
	assert_success
	assert_line "answer from $ns 53 $NETWORLD_A"
	assert_line "answer from 127.0.0.1 53 $NETWORLD_A"
	assert_line "answer from 2001:db8::53 53 $NETWORLD_A"
	assert_line "53 free"
}

# sbx-netd's TCP listener, the one socket that listens in a fresh
# sandbox's netns: connected to straight, on each of the sandbox's own
# addresses; "PORT closed" for each connection that ends with nothing.
STRAIGHT='import socket
ports = [int(l.split()[1].split(":")[1], 16)
    for l in open("/proc/net/tcp6").readlines()[1:] if l.split()[3] == "0A"]
assert len(ports) == 1, ports
for a in ("127.0.0.1", "10.0.2.100", "::1"):
    try:
        d = socket.create_connection((a, ports[0]), timeout=5).recv(100)
    except ConnectionResetError:
        d = b""  # the reset may come before connect returns
    print(ports[0], "closed" if not d else "got data")'

@test "allow: a connection straight to sbx-netd's own port from inside is closed, unjudged, unlogged" {
	local port
	allow_sandbox --allow-out all
	run sx python3 -c "$STRAIGHT"
	assert_success
	assert_equal "${#lines[@]}" 3
	port=${lines[0]%% *}
	assert_equal "$(grep -c "^$port closed\$" <<<"$output")" 3
	# A connection after them, logged once it ends: theirs would be first.
	run scurl http://a.test/
	assert_success
	wait_log 1 '.proto == "tcp" and .host == "a.test"'
	run log_lines ".port == $port"
	assert_success
	assert_output ""
}

# --- allow: what stays unreachable ----------------------------------------------

@test "allow: the host's loopback is unreachable (a server there answers the host)" {
	start_server 127.0.0.1
	run "$PY" -c "$CONNECT" 127.0.0.1 "$PORT"
	assert_output "hello from host"
	new_sandbox -n allow
	run sx python3 -c "$CONNECT" 127.0.0.1 "$PORT"
	assert_failure
	refute_output --partial "hello from host"
	run sx python3 -c "$CONNECT" localhost "$PORT"
	assert_failure
	refute_output --partial "hello from host"
	# the same sandbox does reach the world
	run sx python3 -c "$CONNECT" hello.test 22
	assert_output "hello from hello.test"
}

@test "allow: the host's own addresses are unreachable (the world's end and every global one)" {
	local addrs a
	start_server 0.0.0.0
	addrs=$(ip -4 -o addr show scope global | awk '{ sub("/.*", "", $4); print $4 }')
	[[ $addrs == *"$NETWORLD_HOST"* ]]
	for a in $addrs; do
		run "$PY" -c "$CONNECT" "$a" "$PORT"
		assert_output "hello from host"
	done
	new_sandbox -n allow
	for a in $addrs; do
		run sx python3 -c "$CONNECT" "$a" "$PORT"
		assert_failure
		refute_output --partial "hello from host"
	done
	run sx python3 -c "$CONNECT" hello.test 22
	assert_output "hello from hello.test"
}

@test "allow: link-local 169.254.77.x is unreachable (the world answers the host there)" {
	run curl -sS --max-time 5 "http://$NETWORLD_LINKLOCAL/"
	assert_success
	field_is .server linklocal.test
	allow_sandbox
	denied "$NETWORLD_LINKLOCAL" 80 curl -sS --max-time 5 "http://$NETWORLD_LINKLOCAL/"
	denied "$NETWORLD_LINKLOCAL" 80 curl -sS --max-time 5 http://linklocal.test/
}

@test "allow: private 10.77.0.x is unreachable by default (the world answers the host there)" {
	run curl -sS --max-time 5 "http://$NETWORLD_PRIVATE/"
	assert_success
	field_is .server private.test
	allow_sandbox
	denied "$NETWORLD_PRIVATE" 80 curl -sS --max-time 5 "http://$NETWORLD_PRIVATE/"
	denied "$NETWORLD_PRIVATE" 443 curl -sS --max-time 5 --cacert /tmp/ca.pem https://private.test/
}

@test "allow: another sandbox's listening server is unreachable" {
	local port
	sbx-create -n allow -s b.json >/dev/null
	run sbx-exec -s b.json -- sh -c 'python3 -c "
import socket
s = socket.socket()
s.bind((\"0.0.0.0\", 0))
s.listen(16)
open(\"/tmp/port\", \"w\").write(str(s.getsockname()[1]))
while True:
    c, _ = s.accept()
    open(\"/tmp/accepted\", \"a\").write(\"1\")
    c.sendall(b\"hello from sandbox b\n\")
    c.close()
" >/dev/null 2>&1 &
	i=0
	while [ ! -s /tmp/port ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
	cat /tmp/port; echo
	python3 -c "$0" 127.0.0.1 "$(cat /tmp/port)" && rm /tmp/accepted' "$CONNECT"
	assert_success
	[ "${#lines[@]}" -eq 2 ]
	port=${lines[0]}
	[ "${lines[1]}" = "hello from sandbox b" ]
	new_sandbox -n allow
	run sx python3 -c "$CONNECT" 127.0.0.1 "$port"
	assert_failure
	refute_output --partial "sandbox b"
	run sx python3 -c "$CONNECT" 10.0.2.100 "$port"
	assert_failure
	refute_output --partial "sandbox b"
	run sbx-exec -s b.json -- sh -c 'cat /tmp/accepted 2>/dev/null; echo end'
	assert_output end
	sbx-kill -q -s b.json >/dev/null
}

@test "allow: the host's abstract unix sockets are unreachable" {
	local name=sbx-net-test-$$-$BATS_TEST_NUMBER
	"$PY" -c 'import os, socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind("\0" + sys.argv[1])
s.listen(4)
open(sys.argv[2], "w").write("1")
while True:
    c, _ = s.accept()
    c.sendall(b"hello from host\n")
    c.close()' "$name" "$BATS_TEST_TMPDIR/ready" >/dev/null 2>&1 3>&- &
	HOST_PIDS+=("$!")
	wait_file "$BATS_TEST_TMPDIR/ready"
	local client='import socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect("\0" + sys.argv[1])
    print(s.recv(100).decode().strip())
except OSError as e:
    print("error", type(e).__name__)
    sys.exit(1)'
	run "$PY" -c "$client" "$name"
	assert_output "hello from host"
	new_sandbox -n allow
	run sx python3 -c "$client" "$name"
	assert_failure
	assert_output "error ConnectionRefusedError"
}

@test "--allow-out 10.77.0.x opens that private address; link-local stays closed" {
	allow_sandbox --allow-out "$NETWORLD_PRIVATE"
	run scurl "http://$NETWORLD_PRIVATE/"
	assert_success
	field_is .server private.test
	denied "$NETWORLD_LINKLOCAL" 80 curl -sS --max-time 5 "http://$NETWORLD_LINKLOCAL/"
}

@test "a domain rule does not open a private address: --allow-out private.test" {
	allow_sandbox --allow-out private.test
	denied "$NETWORLD_PRIVATE" 80 curl -sS --max-time 5 http://private.test/
}

# --- rules --------------------------------------------------------------------

@test "--deny-out all --allow-out a.test: HTTPS (by SNI) and HTTP (by Host) to a.test go through" {
	allow_sandbox --deny-out all --allow-out a.test
	run scurl https://a.test/
	assert_success
	field_is .server a.test
	field_is .sni a.test
	run scurl http://a.test/
	assert_success
	field_is .server a.test
	field_is .host a.test
}

@test "--deny-out all --allow-out a.test: c.test is denied over HTTP and HTTPS" {
	allow_sandbox --deny-out all --allow-out a.test
	denied "$NETWORLD_C" 80 curl -sS --max-time 5 http://c.test/
	denied "$NETWORLD_C" 443 curl -sS --max-time 5 --cacert /tmp/ca.pem https://c.test/
	run scurl https://a.test/
	field_is .server a.test
}

@test "--deny-out all --allow-out a.test: a server-first protocol on a.test's own address is denied" {
	allow_sandbox --deny-out all --allow-out a.test
	denied "$NETWORLD_A" 22 python3 -c "$CONNECT" a.test 22
	run scurl https://a.test/
	field_is .server a.test
}

@test "--deny-out all --allow-out a.test: naming a.test while connecting to c.test's address is denied" {
	allow_sandbox --deny-out all --allow-out a.test
	# The name is the sandbox's word: the address must be one a.test
	# resolves to, or anyone could reach anything by naming a.test.
	denied "$NETWORLD_C" 443 curl -sS --max-time 5 --cacert /tmp/ca.pem \
		--resolve "a.test:443:$NETWORLD_C" https://a.test/
	denied "$NETWORLD_C" 80 curl -sS --max-time 5 -H 'Host: a.test' "http://$NETWORLD_C/"
	run sbx-net log -s s.json
	assert_success
	run jq -sc --arg c "$NETWORLD_C" '[.[] | select(.dest == $c) | [.host, .verdict, .error]] | unique' <<<"$output"
	assert_output '[["a.test","deny","destination is not a.test'"'"'s"]]'
	run scurl https://a.test/
	field_is .server a.test
}

@test "'*.a.test' matches b.a.test, not a.test" {
	allow_sandbox --deny-out all --allow-out '*.a.test'
	run scurl https://b.a.test/
	assert_success
	field_is .server b.a.test
	denied "$NETWORLD_A" 443 curl -sS --max-time 5 --cacert /tmp/ca.pem https://a.test/
}

@test "--deny-out IP denies what is on that address, by any name" {
	allow_sandbox --deny-out "$NETWORLD_A"
	denied "$NETWORLD_A" 443 curl -sS --max-time 5 --cacert /tmp/ca.pem https://a.test/
	denied "$NETWORLD_A" 80 curl -sS --max-time 5 "http://$NETWORLD_A/"
	run scurl https://c.test/
	field_is .server c.test
}

@test "an allowed host on a denied IP goes through: --deny-out IP --allow-out a.test" {
	allow_sandbox --deny-out "$NETWORLD_A" --allow-out a.test
	run scurl https://a.test/
	assert_success
	field_is .server a.test
	run scurl http://a.test/
	assert_success
	field_is .host a.test
	# the address itself stays denied to anything that does not name a.test
	denied "$NETWORLD_A" 22 python3 -c "$CONNECT" "$NETWORLD_A" 22
}

@test "allow wins over deny for the same address, CIDR or domain" {
	allow_sandbox --deny-out "$NETWORLD_C" --allow-out "$NETWORLD_C"
	run scurl http://c.test/
	assert_success
	field_is .server c.test
	sbx-kill -q -s s.json >/dev/null
	allow_sandbox --deny-out "$NETWORLD_NET" --allow-out "$NETWORLD_C"
	run scurl https://c.test/
	assert_success
	field_is .server c.test
	denied "$NETWORLD_A" 443 curl -sS --max-time 5 --cacert /tmp/ca.pem https://a.test/
	sbx-kill -q -s s.json >/dev/null
	allow_sandbox --deny-out c.test --allow-out c.test
	run scurl https://c.test/
	assert_success
	field_is .server c.test
}

# --- bad input ----------------------------------------------------------------

# sbx-create ARGS... must exit 2 with one line on stderr that starts with
# $1 (after "sbx-create: "), nothing on stdout, and create nothing.
refused() {
	local want=$1 before
	shift
	before=$(store_paths)
	run --separate-stderr sbx-create -s "$BATS_TEST_TMPDIR/s.json" "$@"
	[ "$status" -eq 2 ] || { echo "sbx-create $*: exit $status, not 2: $stderr"; return 1; }
	[ -z "$output" ] || { echo "sbx-create $*: wrote to stdout: $output"; return 1; }
	[ "${#stderr_lines[@]}" -eq 1 ] || { echo "not one line: $stderr"; return 1; }
	[[ ${stderr_lines[0]} == "sbx-create: $want"* ]] ||
	    { echo "the message is not 'sbx-create: $want...': $stderr"; return 1; }
	[ ! -e "$BATS_TEST_TMPDIR/s.json" ] || { echo "a state file was written"; return 1; }
	[ "$(store_paths)" = "$before" ] || { echo "the store changed"; return 1; }
}

@test "bad rules are refused with exit 2, one line, nothing created" {
	refused "invalid rule '1.2.3.4/33'" -n allow --allow-out 1.2.3.4/33
	refused "invalid rule 'a..b'" -n allow --allow-out 'a..b'
	refused "invalid rule '10.0.0.0/8x'" -n allow --deny-out 10.0.0.0/8x
	refused "invalid rule '*.'" -n allow --allow-out '*.'
}

@test "a rule with -n deny is refused with exit 2, one line, nothing created" {
	refused "" -n deny --allow-out a.test
	refused "" -n deny --deny-out all
	# the same rules with allow are fine: the refusal was the deny
	new_sandbox -n allow --allow-out a.test --deny-out all
}

# --- sbx-net ------------------------------------------------------------------

@test "sbx-net prints a sandbox's rules as JSON, in the order given" {
	new_sandbox -n allow --allow-out a.test --allow-out '*.a.test' --deny-out all
	run --separate-stderr sbx-net -s s.json
	assert_success
	[ "$(jq -c . <<<"$output")" = '{"allow_out":["a.test","*.a.test"],"deny_out":["all"]}' ]
	[ "${#lines[@]}" -eq 1 ]
	sbx-create -n allow -s plain.json >/dev/null
	run --separate-stderr sbx-net -s plain.json
	assert_success
	[ "$(jq -c . <<<"$output")" = '{"allow_out":[],"deny_out":[]}' ]
	sbx-kill -q -s plain.json >/dev/null
}

@test "sbx-net replaces the rules of a live sandbox: the next connection has the new verdict" {
	local init net
	allow_sandbox --deny-out all --allow-out a.test
	init=$(init_pid)
	net=$(meta net_pid)
	denied "$NETWORLD_C" 443 curl -sS --max-time 5 --cacert /tmp/ca.pem https://c.test/
	run --separate-stderr sbx-net -s s.json --deny-out all --allow-out c.test
	assert_success
	[ "$(jq -c . <<<"$output")" = '{"allow_out":["c.test"],"deny_out":["all"]}' ]
	run scurl https://c.test/
	assert_success
	field_is .server c.test
	denied "$NETWORLD_A" 443 curl -sS --max-time 5 --cacert /tmp/ca.pem https://a.test/
	# the same sandbox and the same sbx-netd: nothing was restarted
	[ "$(init_pid)" = "$init" ]
	[ "$(meta net_pid)" = "$net" ]
	alive "$net"
	[ "$(stat -c %a "$(sdir)/net.json")" = 600 ]
	[ "$(jq -c '[.allow_out, .deny_out]' "$(sdir)/net.json")" = '[["c.test"],["all"]]' ]
}

@test "sbx-net replaces every rule: an omitted --deny-out is cleared" {
	allow_sandbox --deny-out all --allow-out a.test
	run --separate-stderr sbx-net -s s.json --allow-out a.test
	assert_success
	[ "$(jq -c . <<<"$output")" = '{"allow_out":["a.test"],"deny_out":[]}' ]
	run scurl https://c.test/
	assert_success
	field_is .server c.test
}

@test "sbx-net --clear: no rules, everything not protected is reachable again" {
	allow_sandbox --deny-out all
	denied "$NETWORLD_A" 443 curl -sS --max-time 5 --cacert /tmp/ca.pem https://a.test/
	run --separate-stderr sbx-net -s s.json --clear
	assert_success
	[ "$(jq -c . <<<"$output")" = '{"allow_out":[],"deny_out":[]}' ]
	run --separate-stderr sbx-net -s s.json
	[ "$(jq -c . <<<"$output")" = '{"allow_out":[],"deny_out":[]}' ]
	run scurl https://a.test/
	assert_success
	field_is .server a.test
	denied "$NETWORLD_PRIVATE" 80 curl -sS --max-time 5 "http://$NETWORLD_PRIVATE/"
}

@test "sbx-net with a bad rule: exit 2, one line, the rules unchanged" {
	allow_sandbox --deny-out all --allow-out a.test
	cp "$(sdir)/net.json" net.json.before
	run --separate-stderr sbx-net -s s.json --allow-out 1.2.3.4/33
	[ "$status" -eq 2 ]
	[ -z "$output" ]
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ ${stderr_lines[0]} == "sbx-net: invalid rule '1.2.3.4/33'"* ]]
	cmp net.json.before "$(sdir)/net.json"
	run scurl https://a.test/
	field_is .server a.test
	denied "$NETWORLD_C" 443 curl -sS --max-time 5 --cacert /tmp/ca.pem https://c.test/
}

# --- the log ------------------------------------------------------------------

@test "sbx-net log: one line per connection, the fields in order, exact byte counts, dns lines" {
	local sizes id
	allow_sandbox --deny-out all --allow-out a.test
	id=$(sid)
	run sx curl -sS --max-time 5 -o /dev/null \
	    -w '%{size_request} %{size_header} %{size_download}' http://a.test/
	assert_success
	sizes=$output
	denied "$NETWORLD_C" 80 curl -sS --max-time 5 http://c.test/
	wait_log 2 '.proto == "tcp"'
	run log_lines '.proto == "tcp"'
	[ "${#lines[@]}" -eq 2 ]
	local allow=${lines[0]} deny=${lines[1]}
	# the allowed connection
	[ "$(jq -c keys_unsorted <<<"$allow")" = \
	    '["time","sandbox","proto","dest","port","host","verdict","bytes_out","bytes_in"]' ]
	[[ $(jq -r .time <<<"$allow") =~ ^20[0-9]{2}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z$ ]]
	[ "$(jq -c '[.sandbox, .proto, .dest, .port, .host, .verdict]' <<<"$allow")" = \
	    "[\"$id\",\"tcp\",\"$NETWORLD_A\",80,\"a.test\",\"allow\"]" ]
	read -r req hdr body <<<"$sizes"
	[ "$(jq -r .bytes_out <<<"$allow")" = "$req" ]
	[ "$(jq -r .bytes_in <<<"$allow")" = "$((hdr + body))" ]
	# the denied one
	[ "$(jq -c '[.sandbox, .proto, .dest, .port, .host, .verdict, .bytes_out, .bytes_in]' <<<"$deny")" = \
	    "[\"$id\",\"tcp\",\"$NETWORLD_C\",80,\"c.test\",\"deny\",0,0]" ]
	# the queries, to the resolver sbx was given
	run log_lines '.proto == "dns" and .host == "a.test"'
	[ "${#lines[@]}" -ge 1 ]
	[ "$(jq -c '[.sandbox, .dest, .port, .verdict]' <<<"${lines[0]}")" = \
	    "[\"$id\",\"$NETWORLD_DNS_ADDR\",53,\"allow\"]" ]
	run log_lines '.proto == "dns" and .host == "c.test"'
	[ "${#lines[@]}" -ge 1 ]
	# sbx-net log is the file, which is the sandbox's alone
	[ "$(sbx-net log -s s.json)" = "$(cat "$(sdir)/net.log")" ]
	[ "$(stat -c %a "$(sdir)/net.log")" = 600 ]
}

@test "sbx-net log: without rules, one allow line per connection, a deny line for a protected one" {
	allow_sandbox
	run scurl http://a.test/
	field_is .server a.test
	run scurl https://b.a.test/
	field_is .server b.a.test
	denied "$NETWORLD_LINKLOCAL" 80 curl -sS --max-time 5 "http://$NETWORLD_LINKLOCAL/"
	wait_log 3 '.proto == "tcp"'
	run log_lines '.proto == "tcp"'
	[ "${#lines[@]}" -eq 3 ]
	[ "$(jq -c '[.dest, .port, .host, .verdict]' <<<"${lines[0]}")" = "[\"$NETWORLD_A\",80,\"a.test\",\"allow\"]" ]
	[ "$(jq -c '[.dest, .port, .host, .verdict]' <<<"${lines[1]}")" = "[\"$NETWORLD_BA\",443,\"b.a.test\",\"allow\"]" ]
	[ "$(jq -c '[.dest, .port, .verdict, .bytes_out, .bytes_in]' <<<"${lines[2]}")" = \
	    "[\"$NETWORLD_LINKLOCAL\",80,\"deny\",0,0]" ]
}

@test "the log holds no request content: no header value, path or body" {
	allow_sandbox --deny-out all --allow-out a.test
	run scurl -H "X-Secret: sbxmark-header-$$" --data "sbxmark-body-$$" \
	    "http://a.test/sbxmark-path-$$?q=sbxmark-query-$$"
	field_is '.headers["x-secret"]' "sbxmark-header-$$"
	run scurl -H "Authorization: Bearer sbxmark-tls-$$" https://a.test/
	field_is '.headers.authorization' "Bearer sbxmark-tls-$$"
	wait_log 2 '.proto == "tcp"'
	run sbx-net log -s s.json
	assert_success
	refute_output --partial sbxmark
	# nor any file of sbx's in the sandbox's directory
	[ -s "$(sdir)/net.log" ]
	[ -z "$(find "$(sdir)" -maxdepth 1 -type f -exec grep -l sbxmark {} +)" ]
}

@test "sbx-net log -f prints new lines as they come" {
	allow_sandbox
	sbx-net log -f -s s.json >follow.out 2>&1 3>&- &
	HOST_PIDS+=("$!")
	run scurl http://c.test/
	field_is .server c.test
	local i
	for ((i = 0; i < 200; i++)); do
		grep -q "\"dest\":\"$NETWORLD_C\"" follow.out && break
		sleep 0.05
	done
	run jq -c 'select(.proto == "tcp") | [.dest, .host, .verdict]' follow.out
	assert_output "[\"$NETWORLD_C\",\"c.test\",\"allow\"]"
}

# --- lifetime -----------------------------------------------------------------

@test "a create that fails after sbx-netd started leaves no sbx-netd and no sandbox directory" {
	# sbx-netd starts before the agent's socket is made; a store whose
	# sandboxes' socket paths are too long fails there.
	local store i
	store=$SBX_LOCAL_DIR/$(printf 'x%.0s' {1..100})
	SBX_LOCAL_DIR=$store run --separate-stderr sbx-create -n allow -s s.json
	assert_failure 2
	[[ $stderr == *"too long for a socket path"* ]]
	[ ! -e s.json ]
	[ -d "$store" ]
	[ -z "$(find "$store" -mindepth 1 -maxdepth 1 -name '[0-9a-f]*')" ]
	# No process with the store in its argv (the pattern from a file, so
	# that grep's own argv does not hold it).
	echo "$store" >"$BATS_TEST_TMPDIR/store.pat"
	for i in $(seq 50); do
		[ -z "$(grep -lFf "$BATS_TEST_TMPDIR/store.pat" \
		    /proc/[0-9]*/cmdline 2>/dev/null)" ] && break
		sleep 0.1
	done
	[ "$i" -lt 50 ]
}

@test "sbx-kill leaves no sbx-netd and no network namespace" {
	local net start ns p
	new_sandbox -n allow
	net=$(meta net_pid)
	start=$(meta net_starttime)
	[[ $net =~ ^[0-9]+$ ]]
	alive "$net"
	[ "$(basename "$(readlink "/proc/$net/exe")")" = sbx-netd ]
	[ "$(sed 's/^.*) //' "/proc/$net/stat" | cut -d' ' -f20)" = "$start" ]
	ns=$(readlink "/proc/$(init_pid)/ns/net")
	[[ $ns == net:\[* ]]
	sbx-kill -q -s s.json >/dev/null
	wait_dead "$net"
	for p in /proc/[0-9]*; do
		[ "$(readlink "$p/ns/net" 2>/dev/null)" != "$ns" ] || {
			echo "pid ${p#/proc/} is still in the sandbox's netns $ns"
			return 1
		}
	done
	[ "$(grep -cF "$ns" /proc/self/mountinfo)" = 0 ]
}

@test "sbx-netd ends by itself when the sandbox's init is gone" {
	local net
	new_sandbox -n allow
	net=$(meta net_pid)
	alive "$net"
	kill -KILL "$(init_pid)"
	wait_dead "$net"
}

@test "pause and resume: connections work afterwards, through the same sbx-netd" {
	local net
	allow_sandbox --deny-out all --allow-out a.test
	net=$(meta net_pid)
	sbx-pause -q -s s.json
	alive "$net"
	sbx-pause -q -r -s s.json
	run scurl https://a.test/
	assert_success
	field_is .server a.test
	denied "$NETWORLD_C" 443 curl -sS --max-time 5 --cacert /tmp/ca.pem https://c.test/
	[ "$(meta net_pid)" = "$net" ]
}

@test "pause -m stop and resume: a new sbx-netd, the rules kept, connections work" {
	local net
	allow_sandbox --deny-out all --allow-out a.test
	net=$(meta net_pid)
	sbx-pause -q -m stop -s s.json
	wait_dead "$net"
	sbx-pause -q -r -s s.json
	[ "$(meta net_pid)" != "$net" ]
	alive "$(meta net_pid)"
	# /tmp may not survive a stop: give the CA again
	sbx-exec -i -s s.json -- sh -c 'cat >/tmp/ca.pem' <"$NETWORLD_CA"
	run scurl https://a.test/
	assert_success
	field_is .server a.test
	denied "$NETWORLD_C" 443 curl -sS --max-time 5 --cacert /tmp/ca.pem https://c.test/
	run --separate-stderr sbx-net -s s.json
	[ "$(jq -c . <<<"$output")" = '{"allow_out":["a.test"],"deny_out":["all"]}' ]
}

# --- rootless -----------------------------------------------------------------

# Run as uid 65534 in a directory it owns, with a store of its own; the
# world's resolver is passed on.
as_nobody() {
	(cd "$ROOTLESS_DIR" && setpriv --reuid=65534 --regid=65534 \
	    --clear-groups env -i HOME="$ROOTLESS_DIR" \
	    SBX_LOCAL_DIR="$ROOTLESS_DIR/sb" SBX_NETWORK_DNS="$SBX_NETWORK_DNS" \
	    PATH="$SBX_BIN:/usr/bin:/bin" "$@")
}

@test "rootless: allow reaches the world by name and not the host's loopback or addresses" {
	ROOTLESS_DIR=$(mktemp -d /tmp/sbx-rootless.XXXXXX)
	chown 65534:65534 "$ROOTLESS_DIR"
	chmod 755 "$ROOTLESS_DIR"
	start_server 0.0.0.0
	run as_nobody sbx-create -n allow -s "$ROOTLESS_DIR/s.json"
	assert_success
	run as_nobody sbx-exec -s "$ROOTLESS_DIR/s.json" -- curl -sS --max-time 5 http://a.test/
	assert_success
	field_is .server a.test
	run as_nobody sbx-exec -s "$ROOTLESS_DIR/s.json" -- python3 -c "$CONNECT" 127.0.0.1 "$PORT"
	assert_failure
	refute_output --partial "hello from host"
	run as_nobody sbx-exec -s "$ROOTLESS_DIR/s.json" -- python3 -c "$CONNECT" "$NETWORLD_HOST" "$PORT"
	assert_failure
	refute_output --partial "hello from host"
	run as_nobody sbx-kill -q -s "$ROOTLESS_DIR/s.json"
	assert_success
}
