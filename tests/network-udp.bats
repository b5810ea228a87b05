#!/usr/bin/env bats
# UDP other than DNS from a local sandbox with network allow: without rules
# it goes out as TCP does (sbx-netd relays each flow from the host), the
# protected destinations stay unreachable, with any rule or an egress proxy
# it is denied, a live rule change applies to the next flow, and each flow
# has a log line. Real traffic to the outside world of lib/networld.bash
# (its UDP echo server on every name's address): no packet leaves this
# machine.

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
	ROOTLESS_DIR=
}
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

# Run as uid 65534 in a directory it owns, with a store of its own; the
# world's resolver is passed on.
as_nobody() {
	(cd "$ROOTLESS_DIR" && setpriv --reuid=65534 --regid=65534 \
	    --clear-groups env -i HOME="$ROOTLESS_DIR" \
	    SBX_LOCAL_DIR="$ROOTLESS_DIR/sb" SBX_NETWORK_DNS="$SBX_NETWORK_DNS" \
	    PATH="$SBX_BIN:/usr/bin:/bin" "$@")
}

PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

# A UDP client: from one socket, N (default 1) datagrams "ping K" to
# ADDR:PORT, each answer printed with where it came from ("ping K from
# ADDR:PORT"); "error NAME" and exit 1 when one does not come in 2 s.
UDP='import socket, sys
addr, port = sys.argv[1], int(sys.argv[2])
n = int(sys.argv[3]) if len(sys.argv) > 3 else 1
fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
s = socket.socket(fam, socket.SOCK_DGRAM)
s.settimeout(2)
try:
    for k in range(n):
        s.sendto(b"ping %d" % k, (addr, port))
        data, peer = s.recvfrom(100)
        print(data.decode(), "from %s:%d" % peer[:2])
except OSError as e:
    print("error", type(e).__name__)
    sys.exit(1)'

# A UDP echo server on the host, on $1 and a free port; sets PORT.
ECHO='import os, socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[2], 0))
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(s.getsockname()[1]))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
while True:
    data, peer = s.recvfrom(100)
    s.sendto(data, peer)'

start_echo() {
	local i
	rm -f "$BATS_TEST_TMPDIR/port"
	"$PY" -c "$ECHO" "$BATS_TEST_TMPDIR/port" "$1" >/dev/null 2>&1 3>&- &
	HOST_PIDS+=("$!")
	for ((i = 0; i < 200; i++)); do
		[ -s "$BATS_TEST_TMPDIR/port" ] && break
		sleep 0.05
	done
	PORT=$(cat "$BATS_TEST_TMPDIR/port")
}

sdir() {
	jq -r .ref.dir "${1:-$BATS_TEST_TMPDIR/s.json}"
}

# How many datagrams to ADDR:PORT the world has seen so far.
world_udp() {
	grep -c "^udp $1 $2 " "$NETWORLD_LOG" || true
}

# `run sx` the client for a datagram that must not reach the world's
# ADDR:PORT: no answer, and the world saw nothing.
udp_denied() {
	local before
	before=$(world_udp "$1" "$2")
	run sx python3 -c "$UDP" "$1" "$2"
	assert_failure
	refute_output --partial ping
	[ "$(world_udp "$1" "$2")" = "$before" ] || {
		echo "the world saw a datagram to $1:$2"
		return 1
	}
}

# The log lines of this test's sandbox that jq FILTER selects.
log_lines() {
	jq -c "select($1)" "$(sdir)/net.log"
}

# Wait (bounded, 10 s) for at least N log lines that FILTER selects.
wait_log() {
	local i
	for ((i = 0; i < 200; i++)); do
		[ "$(log_lines "$2" | wc -l)" -ge "$1" ] && return 0
		sleep 0.05
	done
	echo "fewer than $1 log lines match $2:"
	cat "$(sdir)/net.log"
	return 1
}

# The line of a denied flow to ADDR:PORT has been written, once.
deny_logged() {
	wait_log 1 ".proto == \"udp\" and .dest == \"$1\" and .port == $2" || return 1
	run log_lines ".proto == \"udp\" and .dest == \"$1\" and .port == $2"
	[ "${#lines[@]}" -eq 1 ] || { echo "not one line: $output"; return 1; }
	[ "$(jq -c '[.verdict, .bytes_out, .bytes_in]' <<<"${lines[0]}")" = \
	    '["deny",0,0]' ] || { echo "not a deny line: ${lines[0]}"; return 1; }
}

@test "udp: an echo from the world, without rules, from the host's address" {
	local before
	before=$(world_udp "$NETWORLD_A" "$NETWORLD_UDP")
	new_sandbox -n allow
	run sx python3 -c "$UDP" "$NETWORLD_A" "$NETWORLD_UDP"
	assert_success
	assert_output "ping 0 from $NETWORLD_A:$NETWORLD_UDP"
	[ "$(world_udp "$NETWORLD_A" "$NETWORLD_UDP")" -gt "$before" ]
	# sbx-netd sent it, from the host's end of the world
	grep -q "^udp $NETWORLD_A $NETWORLD_UDP $NETWORLD_HOST\$" "$NETWORLD_LOG"
}

@test "udp: several datagrams of one flow, and flows at once to two addresses, answered from each" {
	new_sandbox -n allow
	run sx sh -c 'python3 -c "$0" "$1" "$3" 3 >/tmp/a &
	python3 -c "$0" "$2" "$3" 3 >/tmp/b &
	wait; cat /tmp/a /tmp/b' "$UDP" "$NETWORLD_A" "$NETWORLD_C" "$NETWORLD_UDP"
	assert_success
	assert_output "ping 0 from $NETWORLD_A:$NETWORLD_UDP
ping 1 from $NETWORLD_A:$NETWORLD_UDP
ping 2 from $NETWORLD_A:$NETWORLD_UDP
ping 0 from $NETWORLD_C:$NETWORLD_UDP
ping 1 from $NETWORLD_C:$NETWORLD_UDP
ping 2 from $NETWORLD_C:$NETWORLD_UDP"
}

@test "udp: two sockets of the sandbox to one destination each get their own answers" {
	new_sandbox -n allow
	run sx python3 -c 'import socket, sys
a, p = sys.argv[1], int(sys.argv[2])
s = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(2)]
for k in range(2):
    s[k].settimeout(2)
    s[k].sendto(b"from %d" % k, (a, p))
for r in range(2):
    for k in range(2):
        print(s[k].recv(100).decode())
        s[k].sendto(b"from %d" % k, (a, p))' "$NETWORLD_A" "$NETWORLD_UDP"
	assert_success
	assert_output "from 0
from 1
from 0
from 1"
}

@test "udp: the host's loopback, the host's addresses, link-local and private are refused; the world is not" {
	local addrs a
	start_echo 0.0.0.0
	# the world's end and the host's other addresses (not those of other
	# test worlds, which may come and go meanwhile)
	addrs=$(ip -4 -o addr show scope global | awk -v w="$NETWORLD_HOST" '
	    { sub("/.*", "", $4) } $4 == w || $4 !~ /^198\.1[89]\./ { print $4 }')
	[[ $addrs == *"$NETWORLD_HOST"* ]]
	run "$PY" -c "$UDP" 127.0.0.1 "$PORT"
	assert_output "ping 0 from 127.0.0.1:$PORT"
	new_sandbox -n allow
	# the sandbox's 127.0.0.1 is its own: nothing there
	run sx python3 -c "$UDP" 127.0.0.1 "$PORT"
	assert_failure
	refute_output --partial ping
	# and its own UDP stays inside: a server there answers on 127.0.0.1
	# and on the sandbox's address
	run sx sh -c 'python3 -c "$1" /tmp/port 0.0.0.0 >/dev/null 2>&1 &
	i=0
	while [ ! -s /tmp/port ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
	python3 -c "$0" 127.0.0.1 "$(cat /tmp/port)" &&
	python3 -c "$0" 10.0.2.100 "$(cat /tmp/port)"' "$UDP" "$ECHO"
	assert_success
	[ "${#lines[@]}" -eq 2 ]
	[[ ${lines[0]} == "ping 0 from 127.0.0.1:"* ]]
	[[ ${lines[1]} == "ping 0 from 10.0.2.100:"* ]]
	run "$PY" -c "$UDP" "$NETWORLD_HOST" "$PORT"
	assert_output "ping 0 from $NETWORLD_HOST:$PORT"
	for a in $addrs; do
		# an address that went away meanwhile (another test's bridge)
		"$PY" -c "$UDP" "$a" "$PORT" >/dev/null || continue
		run sx python3 -c "$UDP" "$a" "$PORT"
		assert_failure
		refute_output --partial ping
		deny_logged "$a" "$PORT"
	done
	udp_denied "$NETWORLD_LINKLOCAL" "$NETWORLD_UDP"
	deny_logged "$NETWORLD_LINKLOCAL" "$NETWORLD_UDP"
	udp_denied "$NETWORLD_PRIVATE" "$NETWORLD_UDP"
	deny_logged "$NETWORLD_PRIVATE" "$NETWORLD_UDP"
	# the same sandbox reaches the world
	run sx python3 -c "$UDP" "$NETWORLD_A" "$NETWORLD_UDP"
	assert_output "ping 0 from $NETWORLD_A:$NETWORLD_UDP"
}

@test "udp: IPv6: an echo from the world's v6 address; the host's v6 address, a private and a link-local one are denied and logged" {
	run "$PY" -c "$UDP" "$NETWORLD_UDP6" "$NETWORLD_UDP"
	assert_output "ping 0 from $NETWORLD_UDP6:$NETWORLD_UDP"
	new_sandbox -n allow
	run sx python3 -c "$UDP" "$NETWORLD_UDP6" "$NETWORLD_UDP" 2
	assert_success
	assert_output "ping 0 from $NETWORLD_UDP6:$NETWORLD_UDP
ping 1 from $NETWORLD_UDP6:$NETWORLD_UDP"
	grep -q "^udp $NETWORLD_UDP6 $NETWORLD_UDP $NETWORLD_HOST6\$" "$NETWORLD_LOG"
	udp_denied "$NETWORLD_HOST6" "$NETWORLD_UDP"
	deny_logged "$NETWORLD_HOST6" "$NETWORLD_UDP"
	run sx python3 -c "$UDP" fd77::1 9999
	assert_failure
	deny_logged fd77::1 9999
	run sx python3 -c "$UDP" fe80::1%lo 9999
	assert_failure
	deny_logged fe80::1 9999
}

@test "udp: with --allow-out or --deny-out, UDP other than DNS is denied, DNS still works" {
	local r
	for r in "--deny-out $NETWORLD_PRIVATE" "--allow-out $NETWORLD_A"; do
		# shellcheck disable=SC2086
		new_sandbox -n allow $r
		udp_denied "$NETWORLD_A" "$NETWORLD_UDP"
		deny_logged "$NETWORLD_A" "$NETWORLD_UDP"
		run log_lines '.proto == "udp"'
		[ "$(jq -r .error <<<"$output")" = "UDP other than DNS is denied when rules are given" ]
		run sx python3 -c 'import socket; print(socket.gethostbyname("a.test"))'
		assert_output "$NETWORLD_A"
		sbx-kill -q -s "$BATS_TEST_TMPDIR/s.json" >/dev/null
	done
}

@test "udp: with an egress proxy (TCP only), UDP is denied and the log says why" {
	new_sandbox -n allow --egress-proxy socks5://127.0.0.1:9
	udp_denied "$NETWORLD_A" "$NETWORLD_UDP"
	deny_logged "$NETWORLD_A" "$NETWORLD_UDP"
	run log_lines '.proto == "udp"'
	[ "$(jq -r .error <<<"$output")" = "UDP does not go through the egress proxy" ]
}

@test "udp: sbx-net changes apply to the next flow: a rule denies it, --clear allows it again" {
	new_sandbox -n allow
	run sx python3 -c "$UDP" "$NETWORLD_A" "$NETWORLD_UDP"
	assert_output "ping 0 from $NETWORLD_A:$NETWORLD_UDP"
	sbx-net -s "$BATS_TEST_TMPDIR/s.json" --deny-out "$NETWORLD_PRIVATE" >/dev/null
	udp_denied "$NETWORLD_A" "$NETWORLD_UDP"
	deny_logged "$NETWORLD_A" "$NETWORLD_UDP"
	sbx-net -s "$BATS_TEST_TMPDIR/s.json" --clear >/dev/null
	run sx python3 -c "$UDP" "$NETWORLD_A" "$NETWORLD_UDP"
	assert_success
	assert_output "ping 0 from $NETWORLD_A:$NETWORLD_UDP"
}

@test "udp: a flow's log line has its bytes both ways, written when it ends (here: sbx-netd stopped)" {
	local net id
	new_sandbox -n allow
	id=$(sid)
	run sx python3 -c "$UDP" "$NETWORLD_A" "$NETWORLD_UDP" 3
	assert_success
	[ "${#lines[@]}" -eq 3 ]
	# no line while the flow may go on
	[ -z "$(log_lines '.proto == "udp"')" ]
	net=$(jq -r .net_pid "$(sdir)/meta.json")
	kill -TERM "$net"
	wait_log 1 '.proto == "udp"'
	run log_lines '.proto == "udp"'
	[ "${#lines[@]}" -eq 1 ]
	[ "$(jq -c 'keys_unsorted' <<<"$output")" = \
	    '["time","sandbox","proto","dest","port","verdict","bytes_out","bytes_in","error"]' ]
	# "ping 0" ... "ping 2": 6 bytes each way, three times
	[ "$(jq -c '[.sandbox, .dest, .port, .verdict, .bytes_out, .bytes_in, .error]' <<<"$output")" = \
	    "[\"$id\",\"$NETWORLD_A\",$NETWORLD_UDP,\"allow\",18,18,\"cut: sbx-netd stopped\"]" ]
}

@test "udp: sbx-kill after UDP flows leaves no process in the sandbox's netns and no sbx-netd" {
	local net ns p i left
	new_sandbox -n allow
	run sx python3 -c "$UDP" "$NETWORLD_A" "$NETWORLD_UDP"
	assert_output "ping 0 from $NETWORLD_A:$NETWORLD_UDP"
	net=$(jq -r .net_pid "$(sdir)/meta.json")
	ns=$(readlink "/proc/$(init_pid)/ns/net")
	[[ $ns == net:\[* ]]
	sbx-kill -q -s "$BATS_TEST_TMPDIR/s.json" >/dev/null
	for ((p = 0; p < 200; p++)); do
		dead "$net" && break
		sleep 0.05
	done
	dead "$net"
	# its children in the netns (the connector, the binder) die with it
	for ((i = 0; i < 200; i++)); do
		left=
		for p in /proc/[0-9]*; do
			[ "$(readlink "$p/ns/net" 2>/dev/null)" != "$ns" ] ||
			    left="$left ${p#/proc/}"
		done
		[ -n "$left" ] || break
		sleep 0.05
	done
	[ -z "$left" ] || { echo "still in the sandbox's netns $ns:$left"; return 1; }
}

@test "udp: rootless, the world echoes and a private address is refused" {
	local before
	ROOTLESS_DIR=$(mktemp -d /tmp/sbx-rootless.XXXXXX)
	chown 65534:65534 "$ROOTLESS_DIR"
	chmod 755 "$ROOTLESS_DIR"
	run as_nobody sbx-create -n allow -s "$ROOTLESS_DIR/s.json"
	assert_success
	run as_nobody sbx-exec -s "$ROOTLESS_DIR/s.json" -- python3 -c "$UDP" "$NETWORLD_A" "$NETWORLD_UDP"
	assert_success
	assert_output "ping 0 from $NETWORLD_A:$NETWORLD_UDP"
	before=$(world_udp "$NETWORLD_PRIVATE" "$NETWORLD_UDP")
	run as_nobody sbx-exec -s "$ROOTLESS_DIR/s.json" -- python3 -c "$UDP" "$NETWORLD_PRIVATE" "$NETWORLD_UDP"
	assert_failure
	refute_output --partial ping
	[ "$(world_udp "$NETWORLD_PRIVATE" "$NETWORLD_UDP")" = "$before" ]
	run as_nobody sbx-kill -q -s "$ROOTLESS_DIR/s.json"
	assert_success
}
