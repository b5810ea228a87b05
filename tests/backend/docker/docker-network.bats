#!/usr/bin/env bats
# The docker backend's network against a private engine (lib/dockerd.bash)
# and the tests' outside world (lib/networld.bash): with rules, a container
# on NetworkMode none whose only way out is sbx-netd; without, Docker's
# bridge.  No packet leaves this machine: the bridge is routed to the world
# alone (as scripts/bench/net does).

load ../../lib/helper
load ../../lib/dockerd
load ../../lib/networld

NET_IMAGE=sbx-test-net:latest

setup_file() {
	sbx_setup_file
	networld_start
	sbx_dockerd_start
	sbx_docker_image
	net_image
	bridge_to_world
	own_resolver_or_stop
	# Header injection: sbx-netd trusts the world's CA upstream, and the
	# throwaway value the tests inject and then look for.
	export SBX_NETWORK_CA_FILE=$NETWORLD_CA
	export SBX_TEST_KEY=sbxinj-$RANDOM$RANDOM$RANDOM-value
}

teardown_file() {
	local t
	t=$(cat "$BATS_FILE_TMPDIR/table" 2>/dev/null) || t=
	if [ -n "$t" ]; then
		ip rule del iif "$SBX_TEST_DOCKERD_BRIDGE" lookup "$t" 2>/dev/null || true
		ip route flush table "$t" 2>/dev/null || true
	fi
	sbx_teardown_file
	sbx_dockerd_stop
	networld_stop
}

setup() {
	sbx_setup
	export SBX_BACKEND=docker
	HOST_PIDS=()
}

teardown() {
	local p c
	for p in "${HOST_PIDS[@]}"; do
		kill "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	# sbx-kill first: it stops sbx-netd and removes its directory.
	sbx-ls -b docker -j 2>/dev/null | sbx-kill -q >/dev/null 2>&1 || true
	for c in $(containers); do
		api "/containers/$c?force=1" -X DELETE
	done
}

# The busybox image with curl and openssl (and the libraries they need),
# the world's CA at /etc/ca.pem and, as a trust store, a symlink to it at
# /etc/ssl/certs/ca-certificates.crt; a static /usr/bin/probe (probe.c
# below).
net_image() {
	local root=$SBX_TEST_DOCKERD_DIR/net-root c f
	docker image inspect "$NET_IMAGE" >/dev/null 2>&1 && return 0
	mkdir -p "$root/usr/bin" "$root/etc/ssl/certs"
	cp /usr/bin/curl /usr/bin/openssl "$root/usr/bin/" &&
	    cp "$NETWORLD_CA" "$root/etc/ca.pem" &&
	    ln -s ../../ca.pem "$root/etc/ssl/certs/ca-certificates.crt" ||
	    return 1
	for f in $({ ldd /usr/bin/curl; ldd /usr/bin/openssl; } | awk '$2 == "=>" { print $3 } $1 ~ /^\// { print $1 }' | sort -u); do
		cp -L --parents "$f" "$root" || return 1
	done
	printf '%s\n' "$PROBE" >"$SBX_TEST_DOCKERD_DIR/probe.c"
	cc -O2 -static -o "$root/usr/bin/probe" "$SBX_TEST_DOCKERD_DIR/probe.c" ||
	    return 1
	c=$(docker create "$SBX_TEST_IMAGE") &&
	    tar -C "$root" -cf - . | docker cp - "$c:/" &&
	    docker commit "$c" "$NET_IMAGE" >/dev/null &&
	    docker rm "$c" >/dev/null
}

# The bridge may reach the world and nothing further: forwarding for the
# bridge and the world's veth only, and the bridge's packets routed by a
# table whose only route is the world's (the host's own addresses are
# delivered before any table: that is Docker's bridge).
bridge_to_world() {
	local subnet t=$((43000 + $$ % 1000))
	subnet=$(ip -4 -o addr show dev "$SBX_TEST_DOCKERD_BRIDGE" |
	    awk '{ print $4 }' | sed 's/\.[0-9]*\//.0\//')
	echo "$t" >"$BATS_FILE_TMPDIR/table"
	ip route add "$NETWORLD_NET" via "$NETWORLD_DNS_ADDR" dev "$NETWORLD_VETH" table "$t" &&
	    ip route add unreachable default table "$t" &&
	    ip rule add iif "$SBX_TEST_DOCKERD_BRIDGE" lookup "$t" &&
	    ip -n "$NETWORLD_NS" route add "$subnet" via "$NETWORLD_HOST" &&
	    sysctl -qw "net.ipv4.conf.$SBX_TEST_DOCKERD_BRIDGE.forwarding=1" &&
	    sysctl -qw "net.ipv4.conf.$NETWORLD_VETH.forwarding=1"
}

# Before any test sends a packet: sbx-netd of a container with rules asks
# the world's resolver (else a name looked up inside would go to the
# host's, off this machine).  Nothing here sends a packet.
own_resolver_or_stop() {
	local s=$BATS_FILE_TMPDIR/probe.json dir dns
	sbx-create -b docker -i "$SBX_TEST_IMAGE" -n allow --deny-out all \
	    -s "$s" >/dev/null || {
		echo "docker-network.bats: sbx-create with rules failed; no test run" >&2
		return 1
	}
	dir=$SBX_LOCAL_DIR/.docker-net/$(jq -r .ref.id "$s")
	dns=$(jq -c .dns "$dir/net.json" 2>/dev/null) || dns=
	sbx-kill -q -s "$s" >/dev/null
	[ "$dns" = "[\"$NETWORLD_DNS\"]" ] || {
		echo "docker-network.bats: sbx-netd's resolvers are '$dns', not" \
		    "the world's; no test run" >&2
		return 1
	}
}

api() {
	curl -s --unix-socket "${DOCKER_HOST#unix://}" "http://d$1" "${@:2}"
}

containers() {
	api '/containers/json?all=1' | jq -r '.[].Id'
}

# A sandbox of the net image, its state in s.json.
dk() {
	sbx-create -b docker -i "$NET_IMAGE" -s "$BATS_TEST_TMPDIR/s.json" "$@" \
	    >/dev/null
}

# The network directory of this test's sandbox, and a field of its
# meta.json.
ndir() {
	echo "$SBX_LOCAL_DIR/.docker-net/$(sid)"
}
nmeta() {
	jq -r ".$1" "$(ndir)/meta.json"
}

scurl() {
	sx curl -sS --max-time 5 --cacert /etc/ca.pem "$@"
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

log_lines() {
	sbx-net log -s "$BATS_TEST_TMPDIR/s.json" | jq -c "select($1)"
}

wait_log() {
	local n=$1 filter=$2 i
	for ((i = 0; i < 200; i++)); do
		[ "$(log_lines "$filter" | wc -l)" -ge "$n" ] && return 0
		sleep 0.05
	done
	echo "fewer than $n log lines match $filter:"
	sbx-net log -s "$BATS_TEST_TMPDIR/s.json"
	return 1
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

# A server on the host that greets and hangs up, on $1 and a free port;
# sets PORT.
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

start_server() {
	local i
	rm -f "$BATS_TEST_TMPDIR/port"
	python3 -c "$SERVER" "$BATS_TEST_TMPDIR/port" "$1" >/dev/null 2>&1 3>&- &
	HOST_PIDS+=("$!")
	for ((i = 0; i < 200; i++)); do
		[ -s "$BATS_TEST_TMPDIR/port" ] && break
		sleep 0.05
	done
	PORT=$(cat "$BATS_TEST_TMPDIR/port")
}

# probe ADDR: what leaves without TCP. An ICMP echo on a raw socket, one on
# a ping socket (Docker opens net.ipv4.ping_group_range), a UDP datagram to
# the world's echo (9999); one line each: a reply, none, or the error.
PROBE='#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static unsigned short
sum(const unsigned char *p, int n)
{
	unsigned long s = 0;
	int i;

	for (i = 0; i < n; i += 2)
		s += (unsigned)p[i] << 8 | p[i + 1];
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (unsigned short)~s;
}

static void
try(const char *what, int fd, const struct sockaddr_in *to, int icmp)
{
	unsigned char b[512] = {0};
	struct pollfd p = {fd, POLLIN, 0};
	unsigned short c;

	if (fd < 0) {
		printf("%s: socket: %s\n", what, strerror(errno));
		return;
	}
	if (icmp) {
		b[0] = 8;
		b[5] = 1;
		c = sum(b, 16);
		b[2] = c >> 8;
		b[3] = c & 255;
	} else
		memcpy(b, "probe", 5);
	if (sendto(fd, b, 16, 0, (const struct sockaddr *)to, sizeof *to) < 0) {
		printf("%s: sendto: %s\n", what, strerror(errno));
		return;
	}
	printf("%s: %s\n", what, poll(&p, 1, 1500) == 1 &&
	    recv(fd, b, sizeof b, 0) > 0 ? "reply" : "no reply");
}

int
main(int argc, char **argv)
{
	struct sockaddr_in to = {.sin_family = AF_INET};

	if (argc != 2 || inet_pton(AF_INET, argv[1], &to.sin_addr) != 1)
		return 2;
	try("raw", socket(AF_INET, SOCK_RAW, IPPROTO_ICMP), &to, 1);
	try("ping", socket(AF_INET, SOCK_DGRAM, IPPROTO_ICMP), &to, 1);
	to.sin_port = htons(9999);
	try("udp", socket(AF_INET, SOCK_DGRAM, 0), &to, 0);
	return 0;
}'

# The ICMP echo requests the world has received (its netns's counter).
world_icmp_count() {
	ip netns exec "$NETWORLD_NS" awk '$1 == "Icmp:" && !h { for (i = 2; i <= NF; i++) if ($i == "InEchos") c = i; h = 1; next }
	    $1 == "Icmp:" { print $c }' /proc/net/snmp
}

# --- rules ----------------------------------------------------------------------

@test "docker rules: the container is on network none, lo only, its sbx-netd beside it, its directory 0700 in the local store" {
	dk -n allow --deny-out all --allow-out a.test
	id=$(sid)
	api "/containers/$id/json" >c.json
	jq_true --arg d "$SBX_LOCAL_DIR/.docker-net" '.HostConfig.NetworkMode == "none" and
	    .Config.Labels["io.sbx.net"] == $d' <c.json
	run sx ls /sys/class/net
	assert_output lo
	run sx ip -o -4 addr show dev lo
	assert_output --partial " 10.0.2.100/32 "
	[ "$(stat -c %a "$(ndir)")" = 700 ]
	run stat -c '%n %a' "$(ndir)"/meta.json "$(ndir)"/net.json "$(ndir)"/net.log
	assert_output "$(ndir)/meta.json 600
$(ndir)/net.json 600
$(ndir)/net.log 600"
	[ "$(nmeta pid)" = "$(jq -r .State.Pid c.json)" ]
	pid=$(nmeta net_pid)
	alive "$pid"
	grep -qF "$(ndir)" "/proc/$pid/cmdline"
	[ "$(readlink "/proc/$pid/ns/net")" = "$(readlink /proc/self/ns/net)" ]
	jq_true --arg id "$id" '.id == $id and .allow_out == ["a.test"] and
	    .deny_out == ["all"]' <"$(ndir)/net.json"
}

@test "docker rules: HTTPS to an allowed host works, a denied one does not, and the log says which" {
	dk -n allow --deny-out all --allow-out a.test
	run scurl https://a.test/
	assert_success
	field_is .server a.test
	field_is .sni a.test
	before=$(world_conns "$NETWORLD_C" 443)
	run scurl https://c.test/
	assert_failure
	refute_output --partial '"server"'
	[ "$(world_conns "$NETWORLD_C" 443)" = "$before" ]
	wait_log 1 '.proto == "tcp" and .host == "c.test"'
	run log_lines '.proto == "tcp"'
	[ "${#lines[@]}" -eq 2 ]
	jq_true --arg a "$NETWORLD_A" --arg id "$(sid)" '.sandbox == $id and
	    .dest == $a and .port == 443 and .host == "a.test" and
	    .verdict == "allow" and .bytes_out > 0 and .bytes_in > 0' <<<"${lines[0]}"
	jq_true --arg c "$NETWORLD_C" '.dest == $c and .port == 443 and
	    .host == "c.test" and .verdict == "deny" and .bytes_out == 0' \
	    <<<"${lines[1]}"
	run log_lines '.proto == "dns" and .host == "a.test"'
	[ -n "$output" ]
	jq_true --arg d "$NETWORLD_DNS_ADDR" '.dest == $d and .port == 53' <<<"${lines[0]}"
}

@test "docker rules: the host's loopback and its own addresses are unreachable, the world is not" {
	start_server 0.0.0.0
	addrs=$(ip -4 -o addr show scope global | awk '{ sub("/.*", "", $4); print $4 }')
	[[ $addrs == *"$NETWORLD_HOST"* ]]
	for a in 127.0.0.1 $addrs; do
		run busybox nc -w 3 "$a" "$PORT" </dev/null
		assert_output "hello from host"
	done
	# Rules that allow all but c.test: the host stays out of reach.
	dk -n allow --deny-out c.test
	for a in 127.0.0.1 $addrs; do
		run sx nc -w 3 "$a" "$PORT"
		refute_output --partial "hello from host"
	done
	run scurl https://b.a.test/
	assert_success
	field_is .server b.a.test
}

@test "docker rules: no raw socket, ping socket or UDP gets a packet out, not even with NET_RAW (UDP: sbx-netd denies it)" {
	# The probe can fail: from a container with NET_RAW on the bridge,
	# all three reach the world.
	run --separate-stderr docker run --rm --network bridge --cap-drop ALL \
	    --cap-add NET_RAW "$NET_IMAGE" probe "$NETWORLD_A"
	assert_output "raw: reply
ping: reply
udp: reply"
	before=$(world_icmp_count)
	[ "$before" -ge 2 ]
	udp_before=$(grep -c "^udp $NETWORLD_A 9999 " "$NETWORLD_LOG" || true)
	dk -n allow --deny-out all --allow-out a.test
	run sx probe "$NETWORLD_A"
	# UDP goes to sbx-netd, which denies it: the container has rules
	assert_output "raw: socket: Operation not permitted
ping: sendto: Operation not permitted
udp: no reply"
	run log_lines '.proto == "udp"'
	jq_true --arg a "$NETWORLD_A" '.dest == $a and .port == 9999 and
	    .verdict == "deny"' <<<"$output"
	# A container in its network namespace with NET_RAW (Docker's
	# default set has it; sbx drops it): the ruleset drops the packets.
	run --separate-stderr docker run --rm --network "container:$(sid)" --cap-drop ALL \
	    --cap-add NET_RAW "$NET_IMAGE" probe "$NETWORLD_A"
	assert_output "raw: sendto: Operation not permitted
ping: sendto: Operation not permitted
udp: no reply"
	[ "$(world_icmp_count)" = "$before" ]
	[ "$(grep -c "^udp $NETWORLD_A 9999 " "$NETWORLD_LOG" || true)" = "$udp_before" ]
}

@test "docker rules: the container cannot change its network (no NET_ADMIN)" {
	dk -n allow --deny-out all
	run sx ip route del default
	assert_failure
	assert_output --partial "Operation not permitted"
	run sx ip addr add 198.18.9.9/32 dev lo
	assert_failure
	run sx ip route
	assert_output --partial "default dev lo"
}

@test "docker rules: sbx-net prints and replaces the rules of a live container, for its next connection" {
	dk -n allow --deny-out all --allow-out a.test
	run --separate-stderr sbx-net -s s.json
	assert_success
	assert_output '{"allow_out":["a.test"],"deny_out":["all"]}'
	run scurl https://c.test/
	assert_failure
	run --separate-stderr sbx-net -s s.json --allow-out c.test --deny-out all
	assert_success
	assert_output '{"allow_out":["c.test"],"deny_out":["all"]}'
	run scurl https://c.test/
	assert_success
	field_is .server c.test
	run scurl https://a.test/
	assert_failure
	jq_true '.allow_out == ["c.test"]' <"$(ndir)/net.json"
}

@test "docker rules: sbx-kill leaves no sbx-netd, no directory, no container" {
	dk -n allow --deny-out all --allow-out a.test
	dir=$(ndir)
	pid=$(nmeta net_pid)
	alive "$pid"
	run sbx-kill -s s.json
	assert_success
	wait_dead "$pid"
	[ ! -e "$dir" ]
	[ -z "$(containers)" ]
}

@test "docker rules: sbx-kill --keep stops sbx-netd and keeps the log until the container goes" {
	dk -n allow --deny-out all --allow-out a.test
	dir=$(ndir)
	pid=$(nmeta net_pid)
	scurl https://a.test/ >/dev/null
	sbx-kill -k -s s.json >/dev/null
	wait_dead "$pid"
	wait_log 1 '.proto == "tcp" and .host == "a.test"'
	sbx-kill -I "$(sid)" >/dev/null
	[ ! -e "$dir" ]
}

@test "docker rules: stopped and resumed, the container gets a new sbx-netd and keeps its rules" {
	dk -n allow --deny-out all --allow-out a.test
	sbx-net -s s.json --allow-out b.a.test --deny-out all >/dev/null
	old=$(nmeta net_pid)
	sbx-pause -m stop -s s.json >/dev/null
	wait_dead "$old"
	sbx-pause --resume -s s.json >/dev/null
	new=$(nmeta net_pid)
	[ "$new" != "$old" ]
	alive "$new"
	[ "$(nmeta pid)" = "$(api "/containers/$(sid)/json" | jq -r .State.Pid)" ]
	run scurl https://b.a.test/
	assert_success
	field_is .server b.a.test
	run scurl https://a.test/
	assert_failure
}

@test "docker rules: runsc cannot enforce them: exit 2, nothing created" {
	mkdir -p "$SBX_LOCAL_DIR/.docker-net"
	run --separate-stderr sbx-create -b docker -i "$NET_IMAGE" --runtime runsc \
	    -n allow --deny-out all -s s.json
	assert_failure 2
	assert_output ''
	[ "$stderr" = "sbx-create: runtime 'runsc' has a network stack of its own: sbx cannot enforce network rules there" ]
	[ ! -e s.json ]
	[ -z "$(containers)" ]
	run ls -A "$SBX_LOCAL_DIR/.docker-net"
	assert_output ''
}

@test "docker rules: a bad rule is exit 2 before anything is created" {
	run --separate-stderr sbx-create -b docker -i "$NET_IMAGE" -n allow \
	    --allow-out 10.0.0.0/33 -s s.json
	assert_failure 2
	assert_output ''
	[[ $stderr == "sbx-create: invalid rule '10.0.0.0/33'"* ]]
	[ ! -e s.json ]
	[ -z "$(containers)" ]
}

# --- no rules: Docker's bridge ---------------------------------------------------

@test "docker bridge: without rules the container is on Docker's bridge and reaches the world, and the host's addresses" {
	dk -n allow
	api "/containers/$(sid)/json" >c.json
	jq_true '.HostConfig.NetworkMode == "default" and
	    (.Config.Labels["io.sbx.net"] | not)' <c.json
	run sx curl -sS --max-time 5 --cacert /etc/ca.pem \
	    --resolve "a.test:443:$NETWORLD_A" https://a.test/
	assert_success
	field_is .server a.test
	# As sbx(7) says: the bridge is no fence around the host.
	start_server 0.0.0.0
	run sx nc -w 3 "$NETWORLD_HOST" "$PORT"
	assert_output "hello from host"
	[ ! -e "$SBX_LOCAL_DIR/.docker-net/$(sid)" ]
}

@test "docker bridge: sbx-net on it, or on network deny, is exit 2 and says why" {
	dk -n allow
	run --separate-stderr sbx-net -s s.json --deny-out all
	assert_failure 2
	assert_output ''
	[ "$stderr" = "sbx-net: sandbox '$(sid)' uses Docker's bridge: rules need --allow-out or --deny-out at sbx-create" ]
	run --separate-stderr sbx-net log -s s.json
	assert_failure 2
	sbx-kill -s s.json >/dev/null
	dk -n deny
	run --separate-stderr sbx-net -s s.json
	assert_failure 2
	[ "$stderr" = "sbx-net: sandbox '$(sid)' has network deny: rules need --network allow" ]
}

# --- header injection ------------------------------------------------------------

# A container of the net image injecting x-api-key: $SBX_TEST_KEY into
# requests to a.test (extra arguments go to sbx-create).
dk_inject() {
	dk -n allow --inject-header 'a.test:x-api-key=env:SBX_TEST_KEY' "$@"
}

# The container's TLS clients verify a.test's certificate, which sbx-netd
# signs with the sandbox's CA: curl with its default trust (the bundle),
# openssl with the hashed directory alone (capath).
ca_trusted() {
	run sx curl -sS --max-time 5 https://a.test/s
	assert_success
	field_is .tls true
	field_is .sni a.test
	field_is '.headers["x-api-key"]' "$SBX_TEST_KEY"
	run sx sh -c 'openssl s_client -connect a.test:443 -servername a.test \
	    -CApath /etc/ssl/certs -no-CAfile -verify_return_error </dev/null \
	    2>/dev/null | grep -E "^(issuer=|Verify return code)"'
	assert_output "issuer=CN = sbx sandbox $(sid | cut -c1-12) CA
Verify return code: 0 (ok)"
}

@test "docker inject: HTTP and HTTPS get the header, the container's own value replaced; its TLS clients trust the sandbox's CA" {
	dk_inject
	api "/containers/$(sid)/json" >c.json
	jq_true '.HostConfig.NetworkMode == "none"' <c.json
	run sx curl -sS --max-time 5 -H 'X-Api-Key: mine' -H 'x-other: kept' http://a.test/h
	assert_success
	field_is .tls false
	field_is '.headers["x-api-key"]' "$SBX_TEST_KEY"
	field_is '.headers["x-other"]' kept
	ca_trusted
	# a host without injection is tunnelled: the world's certificate,
	# which the image's bundle (kept, with the CA after it) trusts
	run sx curl -sS --max-time 5 -H 'x-api-key: mine' https://c.test/
	assert_success
	field_is .server c.test
	field_is '.headers["x-api-key"]' mine
	wait_log 2 '.proto == "tcp" and .port == 443 and .host == "a.test"'
	run log_lines '.proto == "tcp" and .port == 443 and .host == "a.test"'
	[ "$(jq -r .verdict <<<"$output" | sort | uniq -c | awk '{ print $1, $2 }')" = "2 inject" ]
}

@test "docker inject: the trust store in the container: the image's bundle and the CA, sbx-ca.pem, its hash link, root's, 0644; the variables in Env" {
	dk_inject
	pem=$(cat "$(ndir)/ca.crt")
	hash=$(openssl x509 -noout -subject_hash -in "$(ndir)/ca.crt")
	run sx stat -c '%n %F %u %g %a' /etc/ssl/certs/ca-certificates.crt \
	    /etc/ssl/certs/sbx-ca.pem /etc/ca.pem
	assert_output "/etc/ssl/certs/ca-certificates.crt regular file 0 0 644
/etc/ssl/certs/sbx-ca.pem regular file 0 0 644
/etc/ca.pem regular file 0 0 644"
	run sx readlink "/etc/ssl/certs/$hash.0"
	assert_output sbx-ca.pem
	run sx cat /etc/ssl/certs/ca-certificates.crt
	assert_output "$(cat "$NETWORLD_CA")
$pem"
	run sx cat /etc/ssl/certs/sbx-ca.pem
	assert_output "$pem"
	# the image's file the symlink pointed at is untouched
	run sx cat /etc/ca.pem
	assert_output "$(cat "$NETWORLD_CA")"
	api "/containers/$(sid)/json" >c.json
	run jq -r '.Config.Env[] | select(test("^(SSL_CERT_FILE|REQUESTS_CA_BUNDLE|NODE_EXTRA_CA_CERTS)="))' c.json
	assert_output "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
REQUESTS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt
NODE_EXTRA_CA_CERTS=/etc/ssl/certs/sbx-ca.pem"
	run sx sh -c 'echo "$SSL_CERT_FILE $REQUESTS_CA_BUNDLE $NODE_EXTRA_CA_CERTS"'
	assert_output "/etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/sbx-ca.pem"
}

@test "docker inject: --env replaces a CA variable (one of its name in Env); without injection there are none" {
	dk_inject -e SSL_CERT_FILE=/etc/ca.pem
	api "/containers/$(sid)/json" >c.json
	run jq -r '.Config.Env[] | select(startswith("SSL_CERT_FILE="))' c.json
	assert_output SSL_CERT_FILE=/etc/ca.pem
	run sx sh -c 'echo "$SSL_CERT_FILE $REQUESTS_CA_BUNDLE"'
	assert_output "/etc/ca.pem /etc/ssl/certs/ca-certificates.crt"
	sbx-kill -s s.json >/dev/null
	dk -n allow --deny-out c.test
	api "/containers/$(sid)/json" >c.json
	run jq -r '.Config.Env[] | select(test("^(SSL_CERT_FILE|REQUESTS_CA_BUNDLE|NODE_EXTRA_CA_CERTS)="))' c.json
	assert_output ''
	[ ! -e "$(ndir)/ca.crt" ]
	run sx ls /etc/ssl/certs
	assert_output ca-certificates.crt
}

@test "docker inject: an image without /etc/ssl/certs gets one, 0755, and /etc keeps its mode and owner" {
	run --separate-stderr docker run --rm --network none "$SBX_TEST_IMAGE" \
	    sh -c 'stat -c "%a %u %g" /etc; ls /etc/ssl 2>&1'
	assert_output "755 0 0
ls: /etc/ssl: No such file or directory"
	sbx-create -b docker -i "$SBX_TEST_IMAGE" -n allow \
	    --inject-header 'a.test:x-api-key=env:SBX_TEST_KEY' -s s.json >/dev/null
	hash=$(openssl x509 -noout -subject_hash -in "$(ndir)/ca.crt")
	run sx stat -c '%n %F %u %g %a' /etc /etc/ssl /etc/ssl/certs \
	    /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/sbx-ca.pem
	assert_output "/etc directory 0 0 755
/etc/ssl directory 0 0 755
/etc/ssl/certs directory 0 0 755
/etc/ssl/certs/ca-certificates.crt regular file 0 0 644
/etc/ssl/certs/sbx-ca.pem regular file 0 0 644"
	run sx cat /etc/ssl/certs/ca-certificates.crt
	assert_output "$(cat "$(ndir)/ca.crt")"
	run sx readlink "/etc/ssl/certs/$hash.0"
	assert_output sbx-ca.pem
	# and it injects: busybox nc over plain HTTP (its static getaddrinfo
	# would want glibc's NSS modules for a name)
	run sx sh -c 'printf "GET /w HTTP/1.0\r\nHost: a.test\r\n\r\n" |
	    nc -w 5 "$0" 80 | sed "1,/^\r\$/d"' "$NETWORLD_A"
	assert_success
	field_is '.headers["x-api-key"]' "$SBX_TEST_KEY"
}

@test "docker inject: the value is nowhere: the container's env, /proc, files, docker inspect, state, host argv" {
	dk_inject -e FOO=bar
	dir=$(ndir)
	pat="${SBX_TEST_KEY:0:6}[${SBX_TEST_KEY:6:1}]${SBX_TEST_KEY:7}"
	run sx curl -sS --max-time 5 http://a.test/
	field_is '.headers["x-api-key"]' "$SBX_TEST_KEY"
	run sx sh -c 'env | grep -c KEY; cat /proc/[0-9]*/environ 2>/dev/null | tr "\0" "\n" | grep -cE "$0"; cat /proc/[0-9]*/cmdline 2>/dev/null | tr "\0" "\n" | grep -cE "$0"' "$pat"
	assert_output "0
0
0"
	# every file of the container (a small image), the CA's among them
	run sx sh -c 'find / \( -path /proc -o -path /sys -o -path /dev \) \
	    -prune -o -type f -print >/tmp/files
	    grep -c "^/etc/ssl/certs/sbx-ca.pem\$" /tmp/files
	    find / \( -path /proc -o -path /sys -o -path /dev \) -prune -o \
	    -type f -exec grep -lE "$0" {} +; echo done' "$pat"
	assert_output "1
done"
	# the engine's whole inspect (Env, Cmd, Entrypoint, Labels, ...)
	api "/containers/$(sid)/json" >c.json
	jq_true '.Config.Env | index("FOO=bar")' <c.json
	run grep -cE "$pat" c.json
	assert_output 0
	run docker inspect "$(sid)"
	assert_success
	refute_output --regexp "$pat"
	run grep -rlE "$pat" "$BATS_TEST_TMPDIR/s.json" "$dir/net.json" \
	    "$dir/net.log" "$dir/netd.err" "$dir/meta.json" "$dir/ca.crt"
	assert_failure 1
	assert_output ""
	run sh -c 'sbx-ls -b docker -j && cat /proc/[0-9]*/cmdline 2>/dev/null | tr "\0" "\n" | grep -cE "$0"' "$pat"
	assert_line --index 0 --partial "\"id\":\"$(sid)\""
	assert_line --index 1 0
	refute_output --partial "$SBX_TEST_KEY"
	run grep -cE "$pat" "/proc/$(nmeta net_pid)/environ"
	assert_output 0
	[ "$(stat -c %a "$dir/net.secret.json")" = 600 ]
	grep -qE "$pat" "$dir/net.secret.json"
}

@test "docker inject: stopped and resumed, a new sbx-netd with the same CA, still trusted, still injecting" {
	dk_inject
	old=$(nmeta net_pid)
	sum=$(sha256sum <"$(ndir)/ca.crt")
	sbx-pause -m stop -s s.json >/dev/null
	wait_dead "$old"
	sbx-pause --resume -s s.json >/dev/null
	new=$(nmeta net_pid)
	[ "$new" != "$old" ]
	alive "$new"
	[ "$(sha256sum <"$(ndir)/ca.crt")" = "$sum" ]
	run sx grep -c 'BEGIN CERTIFICATE' /etc/ssl/certs/ca-certificates.crt
	assert_output 2
	ca_trusted
	run sx curl -sS --max-time 5 http://a.test/h
	field_is '.headers["x-api-key"]' "$SBX_TEST_KEY"
}

@test "docker inject: runsc cannot: exit 2, nothing created" {
	mkdir -p "$SBX_LOCAL_DIR/.docker-net"
	run --separate-stderr sbx-create -b docker -i "$NET_IMAGE" --runtime runsc \
	    -n allow --inject-header 'a.test:x-api-key=env:SBX_TEST_KEY' -s s.json
	assert_failure 2
	assert_output ''
	[ "$stderr" = "sbx-create: runtime 'runsc' has a network stack of its own: sbx cannot enforce network rules there" ]
	[ ! -e s.json ]
	[ -z "$(containers)" ]
	run ls -A "$SBX_LOCAL_DIR/.docker-net"
	assert_output ''
}

# --- published ports -------------------------------------------------------------

# A free port on the host's 127.0.0.1.
free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# serve PORT: busybox httpd on the container's 127.0.0.1:PORT, whose
# /hello says "hi from PORT"; back once it answers there.
serve() {
	sx sh -c '
		mkdir -p /tmp/w$1 && echo "hi from $1" >/tmp/w$1/hello &&
		httpd -p 127.0.0.1:$1 -h /tmp/w$1 || exit 1
		for i in $(seq 100); do
			wget -q -O /dev/null http://127.0.0.1:$1/hello && exit 0
			sleep 0.05
		done
		exit 1' sh "$1"
}

# The URL sbx-port prints for PORT.
url() {
	sbx-port -s "$BATS_TEST_TMPDIR/s.json" "$1" | jq_str .url
}

@test "docker ports: --port takes the container off the bridge; its server answers at the URL sbx-port prints, one tcp-in line; the world through sbx-netd" {
	dk -n allow --port 8000
	api "/containers/$(sid)/json" >c.json
	jq_true --arg d "$SBX_LOCAL_DIR/.docker-net" '.HostConfig.NetworkMode == "none" and
	    .Config.Labels["io.sbx.net"] == $d' <c.json
	serve 8000
	u=$(url 8000)
	[[ $u =~ ^http://127\.0\.0\.1:[0-9]+$ ]]
	run curl -sS --max-time 5 "$u/hello"
	assert_success
	assert_output "hi from 8000"
	wait_log 1 '.proto == "tcp-in"'
	run log_lines '.proto == "tcp-in"'
	run jq -c '[.proto, .dest, .port, .verdict, (.bytes_in > 0), (.bytes_out > 0)]' <<<"$output"
	assert_output '["tcp-in","127.0.0.1",8000,"allow",true,true]'
	# Network allow: no rules, every destination.
	run scurl https://a.test/
	assert_success
	field_is .server a.test
}

@test "docker ports: HOSTPORT:PORT is kept, listens on the host's 127.0.0.1 only, and sbx-port lists it" {
	hp=$(free_port)
	dk -n allow --port "$hp:8000" --port 8001
	serve 8000
	run sh -c "ss -Hltn 'sport = :$hp' | awk '{print \$4}'"
	assert_output "127.0.0.1:$hp"
	run curl -sS --max-time 5 "http://127.0.0.1:$hp/hello"
	assert_output "hi from 8000"
	run sbx-port -s s.json
	assert_success
	[ "${#lines[@]}" = 2 ]
	[ "${lines[0]}" = "{\"port\":8000,\"host\":\"127.0.0.1\",\"host_port\":$hp,\"url\":\"http://127.0.0.1:$hp\"}" ]
	[[ ${lines[1]} =~ ^\{\"port\":8001,\"host\":\"127.0.0.1\",\"host_port\":[0-9]+,\"url\":\"http://127.0.0.1:[0-9]+\"\}$ ]]
}

@test "docker ports: -n deny with --port: the port answers, the container has no way out, and sbx-net refuses it" {
	dk -n deny --port 8000
	api "/containers/$(sid)/json" >c.json
	jq_true '.HostConfig.NetworkMode == "none"' <c.json
	jq_true '.network == "deny"' <"$(ndir)/net.json"
	serve 8000
	run curl -sS --max-time 5 "$(url 8000)/hello"
	assert_output "hi from 8000"
	run scurl https://a.test/
	assert_failure
	run sx sh -c 'wc -l </proc/net/route'
	assert_output 1
	run --separate-stderr sbx-net -s s.json
	assert_failure 2
	[ "$stderr" = "sbx-net: sandbox '$(sid)' has network deny: rules need --network allow" ]
}

@test "docker ports: sbx-port publishes another port live, on a HOSTPORT too" {
	hp=$(free_port)
	dk -n allow --deny-out all
	serve 8100
	serve 8101
	run sbx-port -s s.json
	assert_success
	assert_output ''
	u=$(url 8100)
	run curl -sS --max-time 5 "$u/hello"
	assert_output "hi from 8100"
	[ "$(url 8100)" = "$u" ]
	run sbx-port -s s.json "$hp:8101"
	assert_output "{\"port\":8101,\"host\":\"127.0.0.1\",\"host_port\":$hp,\"url\":\"http://127.0.0.1:$hp\"}"
	run curl -sS --max-time 5 "http://127.0.0.1:$hp/hello"
	assert_output "hi from 8101"
}

@test "docker ports: sbx-kill closes them and ends sbx-netd" {
	hp=$(free_port)
	dk -n deny --port "$hp:8000"
	net=$(nmeta net_pid)
	alive "$net"
	ss -Hltn "sport = :$hp" | grep -q .
	sbx-kill -q -s s.json >/dev/null
	wait_dead "$net"
	run ss -Hltn "sport = :$hp"
	assert_output ''
	[ -z "$(containers)" ]
}

@test "docker ports: on a bridge container, or network deny without --port, sbx-port is exit 2 and says why" {
	dk -n allow
	run --separate-stderr sbx-port -s s.json 8000
	assert_failure 2
	assert_output ''
	[ "$stderr" = "sbx-port: sandbox '$(sid)' uses Docker's bridge: publish its ports with --port at sbx-create" ]
	run --separate-stderr sbx-port -s s.json
	assert_failure 2
	sbx-kill -s s.json >/dev/null
	dk -n deny
	run --separate-stderr sbx-port -s s.json 8000
	assert_failure 2
	[ "$stderr" = "sbx-port: sandbox '$(sid)' has network deny and no published port: publish its ports with --port at sbx-create" ]
}
