# networld.bash - an "outside world" on this machine for the network tests:
# no packet of a test ever leaves the host.  In a bats file:
#
#   load lib/networld
#   setup_file()    { networld_start; }
#   teardown_file() { networld_stop; }
#
# (a script: networld_start, then `trap networld_stop EXIT`).  Needs root,
# ip (iproute2), flock, openssl and python3.
#
# Several worlds can live at once (two test runs on one machine): each takes
# a free slot K (0 ... 63) of 198.18.0.0/15, the benchmark range, under a
# lock.  Slot 0, the first one, is:
#   - a network namespace sbxwPID joined to the host by a veth pair sbxwPIDh
#     (host end 198.18.0.1/30, $NETWORLD_HOST) - eth0 in the world
#     (198.18.0.2/30: the DNS server, $NETWORLD_DNS = 198.18.0.2:53);
#   - IPv6 on the veth pair alone: 2001:db8:5b8:1K::1/64 on the host's end
#     ($NETWORLD_HOST6), 2001:db8:5b8:1K::2/64 on the world's, where a UDP
#     echo answers ($NETWORLD_UDP6): a documentation prefix, on-link, so
#     nothing of it is routed anywhere else;
#   - on the world's lo, 198.18.1.1 ... 198.18.1.9 (the names below), the
#     link-local 169.254.77.1 and the private 10.77.0.1 (slot K: 198.18.4K.0/30,
#     198.18.(4K+1).N, 169.254.77.(K+1), 10.77.0.(K+1)), each /32;
#   - host routes through the world's end for 198.18.1.0/24 and those two /32,
#     so a test that a link-local or private address is denied can never reach
#     anything real even if the deny failed; and an unreachable route for the
#     rest of the slot's 198.18.0.0/22, so a typo cannot go out either.
# Before anything is made, the host must have none of the slot's addresses or
# routes (else the next slot is tried).
#
# One python3 process in the world (networld-server.py: its header says what
# it answers) serves, on each name's address, HTTP (80), HTTPS (443, one
# certificate for every name from a CA made here), a server-speaks-first TCP
# "hello" (22) and a UDP echo (9999); and DNS (53) on the world's end, with
# an A record for each name, NXDOMAIN for any other.  It logs one line per
# connection, datagram and query to $NETWORLD_LOG ("tcp ADDR PORT PEER",
# "udp ADDR PORT PEER", "dns NAME QTYPE PEER").
#
# Exported: NETWORLD_DIR, NETWORLD_NS, NETWORLD_CA (the CA's PEM),
# NETWORLD_LOG, NETWORLD_HOST, NETWORLD_HOST6, NETWORLD_UDP6,
# NETWORLD_DNS_ADDR, NETWORLD_DNS (ADDR:53) and SBX_NETWORK_DNS (the same:
# sbx's resolvers), NETWORLD_NET (the /24 of the names' addresses),
# NETWORLD_HTTP, NETWORLD_HTTPS, NETWORLD_HELLO,
# NETWORLD_UDP (ports), and the addresses of the names: NETWORLD_A (a.test),
# NETWORLD_BA (b.a.test), NETWORLD_C (c.test), NETWORLD_HELLO_ADDR
# (hello.test), NETWORLD_X (x.example.test), NETWORLD_LINKLOCAL
# (linklocal.test), NETWORLD_PRIVATE (private.test).  The table is
# $NETWORLD_DIR/names (NAME ADDR lines); networld_addr NAME prints one.
#
# The server is stopped by its pid; the netns, veth and routes, which carry
# this process's pid or the slot, are deleted by name.

# NAME and the last byte of its address in the slot's /24 (or "ll"/"pv").
NETWORLD_NAMES='a.test 1
b.a.test 2
c.test 3
hello.test 4
x.example.test 5
d.test 6
e.test 7
f.test 8
g.test 9
linklocal.test ll
private.test pv'

_networld_die() {
	echo "networld: $*" >&2
	networld_stop
	return 1
}

networld_addr() {
	awk -v n="$1" '$1 == n { print $2; f = 1 } END { exit !f }' \
	    "$NETWORLD_DIR/names"
}

# True when nothing on the host uses prefix $1.
_networld_free() {
	[ -z "$(ip -o addr show to "$1")" ] && [ -z "$(ip route show root "$1")" ]
}

networld_start() {
	local py=/usr/bin/python3 p a line fd lk conf here k ll pv
	[ -x "$py" ] || py=$(command -v python3)
	here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
	[ "$(id -u)" = 0 ] || { echo "networld: needs root" >&2; return 1; }

	NETWORLD_NS=sbxw$BASHPID
	NETWORLD_VETH=sbxw${BASHPID}h
	[ ! -e "/run/netns/$NETWORLD_NS" ] ||
	    { echo "networld: netns $NETWORLD_NS exists" >&2; return 1; }
	NETWORLD_DIR=$(mktemp -d /tmp/sbx-networld.XXXXXX)
	chmod 755 "$NETWORLD_DIR"
	export NETWORLD_DIR NETWORLD_NS NETWORLD_VETH

	# A CA, and one leaf for every name (readable by all: rootless tests).
	(
		cd "$NETWORLD_DIR" || exit 1
		openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
		    -nodes -keyout ca.key -out ca.pem -days 2 \
		    -subj "/CN=sbx networld test CA $$" \
		    -addext basicConstraints=critical,CA:TRUE \
		    -addext keyUsage=critical,keyCertSign,cRLSign &&
		openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
		    -nodes -keyout leaf.key -out leaf.csr -subj /CN=a.test &&
		{
			printf 'basicConstraints=CA:FALSE\n'
			printf 'keyUsage=critical,digitalSignature\n'
			printf 'extendedKeyUsage=serverAuth\n'
			printf 'subjectKeyIdentifier=hash\n'
			printf 'authorityKeyIdentifier=keyid:always\n'
			printf 'subjectAltName=%s\n' "$(awk '{ printf "%sDNS:%s", s, $1; s = "," }' \
			    <<<"$NETWORLD_NAMES")"
		} >leaf.ext &&
		openssl x509 -req -in leaf.csr -CA ca.pem -CAkey ca.key \
		    -CAcreateserial -days 2 -extfile leaf.ext -out leaf.pem &&
		chmod 644 ca.pem leaf.pem leaf.key
	) >"$NETWORLD_DIR/openssl.log" 2>&1 ||
	    { cat "$NETWORLD_DIR/openssl.log" >&2; _networld_die "openssl failed"; return 1; }
	export NETWORLD_CA=$NETWORLD_DIR/ca.pem

	# A free slot, held under the lock until its routes exist.
	exec {lk}>>/tmp/sbx-networld.lock
	flock -w 30 "$lk" || { exec {lk}>&-; _networld_die "the lock"; return 1; }
	for ((k = 0; k < 64; k++)); do
		ll=169.254.77.$((k + 1)) pv=10.77.0.$((k + 1))
		_networld_free "198.18.$((4 * k)).0/22" && _networld_free "$ll/32" &&
		    _networld_free "$pv/32" && _networld_free "2001:db8:5b8:1$k::/64" && break
	done
	if ((k == 64)); then
		exec {lk}>&-
		_networld_die "no free slot in 198.18.0.0/15"
		return 1
	fi
	export NETWORLD_HOST=198.18.$((4 * k)).1 NETWORLD_DNS_ADDR=198.18.$((4 * k)).2
	# 1K: written as the kernel and Python print it back
	export NETWORLD_HOST6=2001:db8:5b8:1$k::1 NETWORLD_UDP6=2001:db8:5b8:1$k::2
	export NETWORLD_NET=198.18.$((4 * k + 1)).0/24
	awk -v net="198.18.$((4 * k + 1))." -v ll="$ll" -v pv="$pv" '
	    { print $1, $2 == "ll" ? ll : $2 == "pv" ? pv : net $2 }' \
	    <<<"$NETWORLD_NAMES" >"$NETWORLD_DIR/names"

	ip netns add "$NETWORLD_NS" || { exec {lk}>&-; _networld_die "ip netns add failed"; return 1; }
	{
		ip link add "$NETWORLD_VETH" type veth peer name eth0 netns "$NETWORLD_NS" &&
		sysctl -qw "net.ipv6.conf.$NETWORLD_VETH.accept_ra=0" &&
		sysctl -qw "net.ipv6.conf.$NETWORLD_VETH.autoconf=0" &&
		ip netns exec "$NETWORLD_NS" sysctl -qw net.ipv6.conf.eth0.accept_ra=0 &&
		ip addr add "$NETWORLD_HOST/30" dev "$NETWORLD_VETH" &&
		ip -6 addr add "$NETWORLD_HOST6/64" dev "$NETWORLD_VETH" nodad &&
		ip -n "$NETWORLD_NS" -6 addr add "$NETWORLD_UDP6/64" dev eth0 nodad &&
		ip link set "$NETWORLD_VETH" up &&
		ip -n "$NETWORLD_NS" addr add "$NETWORLD_DNS_ADDR/30" dev eth0 &&
		ip -n "$NETWORLD_NS" link set eth0 up &&
		ip -n "$NETWORLD_NS" link set lo up
	} || { exec {lk}>&-; _networld_die "the veth pair failed"; return 1; }
	while read -r _ a; do
		ip -n "$NETWORLD_NS" addr add "$a/32" dev lo ||
		    { exec {lk}>&-; _networld_die "ip addr add $a failed"; return 1; }
	done <"$NETWORLD_DIR/names"
	p=198.18.$((4 * k)).0/22
	ip route add unreachable "$p" ||
	    { exec {lk}>&-; _networld_die "ip route add unreachable $p failed"; return 1; }
	echo "$p" >"$NETWORLD_DIR/unreachable"
	for p in "$NETWORLD_NET" "$ll/32" "$pv/32"; do
		ip route add "$p" via "$NETWORLD_DNS_ADDR" dev "$NETWORLD_VETH" ||
		    { exec {lk}>&-; _networld_die "ip route add $p failed"; return 1; }
	done
	exec {lk}>&-

	export NETWORLD_DNS=$NETWORLD_DNS_ADDR:53
	export SBX_NETWORK_DNS=$NETWORLD_DNS
	export NETWORLD_HTTP=80 NETWORLD_HTTPS=443 NETWORLD_HELLO=22 NETWORLD_UDP=9999
	NETWORLD_A=$(networld_addr a.test)
	NETWORLD_BA=$(networld_addr b.a.test)
	NETWORLD_C=$(networld_addr c.test)
	NETWORLD_HELLO_ADDR=$(networld_addr hello.test)
	NETWORLD_X=$(networld_addr x.example.test)
	NETWORLD_LINKLOCAL=$ll NETWORLD_PRIVATE=$pv
	export NETWORLD_A NETWORLD_BA NETWORLD_C NETWORLD_HELLO_ADDR NETWORLD_X
	export NETWORLD_LINKLOCAL NETWORLD_PRIVATE
	export NETWORLD_LOG=$NETWORLD_DIR/conn.log
	: >"$NETWORLD_LOG"
	conf=$(awk -v d="$NETWORLD_DIR" -v dns="$NETWORLD_DNS_ADDR" -v udp6="$NETWORLD_UDP6" '
	    BEGIN { printf "{\"names\": {" }
	    { printf "%s\"%s\": \"%s\"", s, $1, $2; s = ", " }
	    END { printf "}, \"dns\": \"%s\", \"http\": 80, \"https\": 443, ", dns
	          printf "\"hello\": 22, \"udp\": 9999, \"cert\": \"%s/leaf.pem\", ", d
	          printf "\"udp6\": \"%s\", ", udp6
	          printf "\"key\": \"%s/leaf.key\", \"log\": \"%s/conn.log\", ", d, d
	          printf "\"ready\": \"%s/ready\"}\n", d }' "$NETWORLD_DIR/names")
	printf '%s\n' "$conf" >"$NETWORLD_DIR/server.json"
	mkfifo "$NETWORLD_DIR/ready"
	# Opened read-write, so neither side blocks in open(2).
	exec {fd}<>"$NETWORLD_DIR/ready"
	# ip netns exec execs the command: $! is the server itself.
	ip netns exec "$NETWORLD_NS" "$py" "$here/networld-server.py" \
	    "$NETWORLD_DIR/server.json" </dev/null >"$NETWORLD_DIR/server.err" 2>&1 3>&- &
	echo "$!" >"$NETWORLD_DIR/server.pid"
	line=
	read -r -t 15 -u "$fd" line
	exec {fd}<&-
	if [ "$line" != ready ]; then
		cat "$NETWORLD_DIR/server.err" >&2
		_networld_die "the world's server did not start"
		return 1
	fi
	networld_check || { _networld_die "the world does not answer from the host"; return 1; }
}

# From the host: HTTP and HTTPS by name (the CA verifies the leaf), the
# hello server, and the DNS server's answer for a.test and a missing name.
networld_check() {
	local out
	out=$(curl -sS --max-time 5 --resolve "a.test:80:$NETWORLD_A" http://a.test/) &&
	    [[ $out == *'"server": "a.test"'* ]] ||
	    { echo "networld: HTTP from the host: $out" >&2; return 1; }
	out=$(curl -sS --max-time 5 --cacert "$NETWORLD_CA" \
	    --resolve "b.a.test:443:$NETWORLD_BA" https://b.a.test/) &&
	    [[ $out == *'"sni": "b.a.test"'* ]] ||
	    { echo "networld: HTTPS from the host: $out" >&2; return 1; }
	out=$(networld_py_client hello "$NETWORLD_HELLO_ADDR" 22) &&
	    [ "$out" = "hello from hello.test" ] ||
	    { echo "networld: hello from the host: $out" >&2; return 1; }
	out=$(networld_py_client dns "$NETWORLD_DNS_ADDR" 53 a.test nope.test) &&
	    [ "$out" = "a.test $NETWORLD_A
nope.test NXDOMAIN" ] ||
	    { echo "networld: DNS from the host: $out" >&2; return 1; }
}

# Small clients for checks from the host (tests use their own inside).
NETWORLD_CLIENT='import socket, struct, sys
mode, addr, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
if mode == "hello":
    s = socket.create_connection((addr, port), timeout=3)
    print(s.recv(100).decode().strip())
else:
    for n, name in enumerate(sys.argv[4:]):
        q = struct.pack(">HHHHHH", n + 1, 0x0100, 1, 0, 0, 0)
        q += b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0"
        q += struct.pack(">HH", 1, 1)
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(3)
        s.sendto(q, (addr, port))
        r = s.recv(512)
        if r[3] & 15:
            print(name, "NXDOMAIN" if r[3] & 15 == 3 else "rcode %d" % (r[3] & 15))
        else:
            print(name, socket.inet_ntoa(r[-4:]))'

networld_py_client() {
	local py=/usr/bin/python3
	[ -x "$py" ] || py=python3
	"$py" -c "$NETWORLD_CLIENT" "$@"
}

# Everything networld_start made, whatever it got to (every step may fail:
# it carries on, under set -e too).
networld_stop() {
	local pid i
	[ -n "${NETWORLD_DIR:-}" ] && [ -d "$NETWORLD_DIR" ] || return 0
	if [ -s "$NETWORLD_DIR/server.pid" ]; then
		pid=$(cat "$NETWORLD_DIR/server.pid")
		kill "$pid" 2>/dev/null || true
		for ((i = 0; i < 100; i++)); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.05
		done
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	if [ -s "$NETWORLD_DIR/unreachable" ]; then
		ip route del unreachable "$(cat "$NETWORLD_DIR/unreachable")" 2>/dev/null || true
	fi
	# The veth's routes go with it; deleting the netns deletes its end.
	[ -z "${NETWORLD_VETH:-}" ] || ip link del "$NETWORLD_VETH" 2>/dev/null || true
	[ -z "${NETWORLD_NS:-}" ] || ip netns del "$NETWORLD_NS" 2>/dev/null || true
	rm -rf "$NETWORLD_DIR"
	NETWORLD_DIR=
	return 0
}
