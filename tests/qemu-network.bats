#!/usr/bin/env bats
# The qemu backend's network allow: the VM's NIC is QEMU's user-mode
# network, QEMU runs in a network namespace of its own that sbx-netd
# serves as it serves a local sandbox's, so the egress rules, the DNS and
# the log apply to the VM. Real traffic, to an outside world made on this
# machine (lib/networld.bash): no packet leaves it. One VM boots for most
# tests (~4 s under TCG). No -T for busybox's wget: it crashes with one.
load lib/helper
load lib/registry
load lib/qemu
load lib/networld

setup_file() {
	sbx_qemu_setup_file || return 1
	networld_start || return 1
	sbx_registry_start || return 1
	local r=$BATS_FILE_TMPDIR/root
	sbx_busybox_root "$r" || return 1
	# An HTTPS client that checks a chain (busybox's wget cannot).
	cc -static -O2 -o "$r/usr/bin/tls-get" "$BATS_TEST_DIRNAME/lib/tls-get.c" \
	    -lssl -lcrypto 2>"$BATS_FILE_TMPDIR/cc.log" || {
		cat "$BATS_FILE_TMPDIR/cc.log" >&2
		return 1
	}
	sbx_registry_push_image t/bb v1 '{"Env":["PATH=/usr/bin:/bin"]}' "$r" >/dev/null || return 1
	IMG=$SBX_TEST_REGISTRY/t/bb:v1
	export IMG
	sbx-image pull -q "$IMG" >/dev/null || return 1
	# The VM most tests share: a.test and the world's resolver allowed,
	# all else denied.
	sbx-create -b qemu --image "$IMG" --memory 200M -n allow \
	    --deny-out all --allow-out a.test --allow-out "$NETWORLD_DNS_ADDR" \
	    -s "$BATS_FILE_TMPDIR/vm.json" >/dev/null || return 1
	own_network_or_stop "$BATS_FILE_TMPDIR/vm.json"
}

teardown_file() {
	sbx-ls -b qemu -j 2>/dev/null | sbx-kill -q >/dev/null 2>&1 || true
	sbx_registry_stop
	networld_stop
	sbx_teardown_file
}

setup() {
	sbx_setup
	S=$BATS_FILE_TMPDIR/vm.json
	ROOTLESS_DIR=
}

# A rootless test's VMs, by their keepers' and QEMUs' pids, and its files.
teardown() {
	local k
	[ -n "$ROOTLESS_DIR" ] || return 0
	for k in "$ROOTLESS_DIR"/vms/*/keeper.pid; do
		[ -f "$k" ] || continue
		kill -9 $(awk '{print $1, $3}' "$k") 2>/dev/null || true
	done
	rm -rf "$ROOTLESS_DIR"
}

# Before any test sends a packet: the VM's QEMU must be in a network
# namespace of its own and sbx-netd told to use the world's resolver, else
# a name looked up inside would be asked of the host's resolver, off this
# machine. Nothing here sends a packet.
own_network_or_stop() {
	local dir qpid dns
	dir=$(jq -r .ref.dir "$1")
	qpid=$(awk '{print $3}' "$dir/keeper.pid")
	dns=$(jq -c .dns "$dir/net.json" 2>/dev/null) || dns=
	if [ -z "$qpid" ] || [ "$(readlink "/proc/$qpid/ns/net")" = "$(readlink /proc/self/ns/net)" ] ||
	    [ "$dns" != "[\"$NETWORLD_DNS\"]" ]; then
		sbx-kill -q -s "$1" >/dev/null 2>&1
		echo "qemu-network.bats: the VM's QEMU is not in a network namespace" \
		    "of its own with the world's resolver (net.json dns: '$dns');" \
		    "no test run, so that no query leaves this machine" >&2
		return 1
	fi
}

world_conns() {
	grep -c "^tcp $1 $2 " "$NETWORLD_LOG" || true
}

# The sandbox's net.log lines that jq FILTER selects.
log_lines() {
	sbx-net log -s "${2:-$S}" | jq -c "select($1)"
}

# Wait (bounded, 10 s) until at least N log lines match FILTER.
wait_log() {
	local n=$1 filter=$2 i
	for ((i = 0; i < 200; i++)); do
		[ "$(log_lines "$filter" "${3:-}" | wc -l)" -ge "$n" ] && return 0
		sleep 0.05
	done
	echo "fewer than $n log lines match $filter:"
	sbx-net log -s "${3:-$S}"
	return 1
}

@test "qemu allow: the VM has lo and eth0 on QEMU's user network; QEMU runs in a network namespace sbx-netd serves" {
	run --separate-stderr sbx-exec -s "$S" -- sh -c 'ls /sys/class/net; cat /etc/resolv.conf; ip -o -4 addr show dev eth0; ip route'
	assert_success
	assert_line lo
	assert_line eth0
	assert_line 'nameserver 10.0.2.3'
	assert_line --partial ' 10.0.2.15/24 '
	assert_line --partial 'default via 10.0.2.2 dev eth0'
	local dir npid qpid
	dir=$(jq -r .ref.dir "$S")
	qpid=$(awk '{print $3}' "$dir/keeper.pid")
	npid=$(jq -r .net_pid "$dir/meta.json")
	[ "$(jq -r .pid "$dir/meta.json")" = "$qpid" ]
	[ "$(cat "/proc/$npid/comm")" = sbx-netd ]
	# sbx-netd's listeners are in QEMU's namespace, not in ours
	[ "$(readlink "/proc/$qpid/ns/net")" != "$(readlink /proc/self/ns/net)" ]
	[ "$(readlink "/proc/$npid/ns/net")" = "$(readlink /proc/self/ns/net)" ]
}

@test "qemu allow: HTTP to an allowed name, resolved through sbx's DNS by the world's; logged as allowed" {
	local before
	before=$(grep -c "^dns a.test 1 $NETWORLD_HOST\$" "$NETWORLD_LOG" || true)
	run --separate-stderr sbx-exec -s "$S" -- wget -q -O - http://a.test/hello
	assert_success
	[ "$(jq -r '[.server, .host, .path] | join(" ")' <<<"$output")" = "a.test a.test /hello" ]
	# the query reached the world's resolver, from the host (sbx-netd)
	[ "$(grep -c "^dns a.test 1 $NETWORLD_HOST\$" "$NETWORLD_LOG")" -gt "$before" ]
	wait_log 1 ".proto == \"tcp\" and .dest == \"$NETWORLD_A\""
	run log_lines ".proto == \"tcp\" and .dest == \"$NETWORLD_A\""
	[ "$(jq -r '[.port, .verdict] | join(" ")' <<<"${lines[-1]}")" = "80 allow" ]
}

@test "qemu allow: a denied name never reaches the world, and the log says deny" {
	local before
	before=$(world_conns "$NETWORLD_C" 80)
	run sbx-exec -s "$S" -- wget -q -O - "http://$NETWORLD_C/"
	assert_failure
	refute_output --partial '"server"'
	[ "$(world_conns "$NETWORLD_C" 80)" = "$before" ]
	wait_log 1 ".proto == \"tcp\" and .dest == \"$NETWORLD_C\""
	run log_lines ".proto == \"tcp\" and .dest == \"$NETWORLD_C\""
	[ "$(jq -r .verdict <<<"${lines[-1]}")" = deny ]
}

@test "qemu allow: sbx-net changes the rules of the running VM at once; --network deny cuts, allow gives them back" {
	local before
	run sbx-net -s "$S" --allow-out c.test
	assert_success
	[ "$(jq -c .allow_out <<<"$output")" = '["c.test"]' ]
	run --separate-stderr sbx-exec -s "$S" -- wget -q -O - "http://c.test/"
	assert_success
	[ "$(jq -r .server <<<"$output")" = c.test ]
	run sbx-net -s "$S" --network deny
	assert_success
	before=$(world_conns "$NETWORLD_C" 80)
	run sbx-exec -s "$S" -- wget -q -O - "http://$NETWORLD_C/"
	assert_failure
	[ "$(world_conns "$NETWORLD_C" 80)" = "$before" ]
	run sbx-net -s "$S" --network allow --deny-out all --allow-out a.test --allow-out "$NETWORLD_DNS_ADDR"
	assert_success
	run --separate-stderr sbx-exec -s "$S" -- wget -q -O - "http://a.test/"
	assert_success
	[ "$(jq -r .server <<<"$output")" = a.test ]
}

@test "qemu deny: no NIC in the VM, and sbx-net says it has no network" {
	local s=$BATS_TEST_TMPDIR/d.json
	sbx-create -b qemu --image "$IMG" --memory 128M -s "$s" >/dev/null
	run --separate-stderr sbx-exec -s "$s" -- ls /sys/class/net
	assert_success
	assert_output lo
	run --separate-stderr sbx-net -s "$s" --allow-out a.test
	assert_failure 2
	assert_equal "$stderr" "sbx-net: sandbox '$(jq -r .ref.id "$s")' has no network (backend 'qemu' gives a VM its NIC when it is made: sbx-create -n allow)"
	sbx-kill -q -s "$s"
}

@test "qemu allow: kill ends QEMU and sbx-netd and leaves nothing" {
	local s=$BATS_TEST_TMPDIR/k.json dir npid qpid hp
	sbx-create -b qemu --image "$IMG" --memory 128M -n allow --port 8080 \
	    -s "$s" >/dev/null
	# --port: the VM's 8080 on the host's loopback.
	sbx-exec -s "$s" -- sh -c 'mkdir -p /tmp/www && echo made-with-port >/tmp/www/index.html && httpd -p 8080 -h /tmp/www'
	hp=$(sbx-port -s "$s" | jq -r 'select(.port == 8080) | .host_port')
	run curl -fsS --max-time 20 "http://127.0.0.1:$hp/index.html"
	assert_success
	assert_output made-with-port
	dir=$(jq -r .ref.dir "$s")
	npid=$(jq -r .net_pid "$dir/meta.json")
	qpid=$(jq -r .pid "$dir/meta.json")
	[ "$(cat "/proc/$npid/comm")" = sbx-netd ]
	sbx-kill -q -s "$s"
	[ ! -e "$dir" ]
	for p in "$npid" "$qpid"; do
		[ ! -e "/proc/$p" ] || [ "$(awk '{print $3}' "/proc/$p/stat")" = Z ]
	done
}

@test "qemu allow: header injection: sbx-netd's CA in the VM's trust store and variables; the world sees the header over HTTP and HTTPS; sbx-net refuses it for a VM made without" {
	local s=$BATS_TEST_TMPDIR/i.json dir key=qinj-$RANDOM$RANDOM$RANDOM
	# sbx-netd trusts the world's CA upstream; the value is a throwaway.
	SBX_NETWORK_CA_FILE=$NETWORLD_CA SBX_TEST_KEY=$key \
	    sbx-create -b qemu --image "$IMG" --memory 128M -n allow \
	    --inject-header 'a.test:x-api-key=env:SBX_TEST_KEY' -s "$s" >/dev/null
	dir=$(jq -r .ref.dir "$s")
	# Its CA in /etc/ssl/certs: the PEM, its hash's link, the bundle
	# (the image has none: the CA alone); the variables point at them.
	run --separate-stderr sbx-exec -s "$s" -- cat /etc/ssl/certs/sbx-ca.pem
	assert_success
	assert_output "$(cat "$dir/ca.crt")"
	run --separate-stderr sbx-exec -s "$s" -- sh -c 'cd /etc/ssl/certs && readlink *.0 && grep -c "BEGIN CERTIFICATE" ca-certificates.crt && echo "$SSL_CERT_FILE $NODE_EXTRA_CA_CERTS"'
	assert_success
	assert_equal "${lines[0]}" sbx-ca.pem
	assert_equal "${lines[1]}" 1
	assert_equal "${lines[2]}" "/etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/sbx-ca.pem"
	run --separate-stderr sbx-exec -s "$s" -- wget -q -O - http://a.test/h
	assert_success
	jq_true --arg k "$key" '.tls == false and .headers["x-api-key"] == $k' <<<"$output"
	# HTTPS: the VM's trust store (sbx-netd's CA alone) verifies the
	# chain sbx-netd presents for a.test, and the world sees the header.
	run --separate-stderr sbx-exec -s "$s" -- tls-get "$NETWORLD_A" a.test /s \
	    /etc/ssl/certs/ca-certificates.crt
	assert_success
	jq_true --arg k "$key" '.tls == true and .sni == "a.test" and
	    .path == "/s" and .headers["x-api-key"] == $k' <<<"$output"
	# Not a client that trusts anything: with the world's CA in place of
	# sbx-netd's, the handshake fails (the chain is sbx-netd's).
	run --separate-stderr sbx-exec -s "$s" -i -- sh -c 'cat >/tmp/w.pem; tls-get "$1" a.test /s /tmp/w.pem' - "$NETWORLD_A" <"$NETWORLD_CA"
	assert_failure 1
	assert_equal "${stderr%%$'\n'*}" "tls-get: handshake: unable to get local issuer certificate"
	# Never in the VM's environment, nor in its meta.
	run sbx-exec -s "$s" -- env
	refute_output --partial "$key"
	run grep -rl "$key" "$dir/meta.json" "$s"
	assert_failure
	sbx-kill -q -s "$s"
	# A VM made without it has no CA to trust: sbx-net says so.
	run --separate-stderr sbx-net -s "$S" --inject-header 'a.test:x-token=env:HOME'
	assert_failure 2
	assert_equal "$stderr" "sbx-net: sandbox '$(jq -r .ref.id "$S")' was made without header injection: its VM has no CA of sbx's to trust (create it with --inject-header)"
	run sbx-net -s "$S"
	assert_success
	jq_true '.allow_out == ["a.test", "'"$NETWORLD_DNS_ADDR"'"]' <<<"$output"
}

@test "qemu allow, rootless: QEMU in a user and a network namespace of its own; the VM reaches the world by name through sbx-netd; sbin not in PATH" {
	local r
	r=$(mktemp -d /tmp/sbx-rootless.XXXXXX)
	ROOTLESS_DIR=$r
	mkdir "$r/guest"
	cp "$SBX_QEMU_GUEST"/{vmlinux,initrd.img,kernel} "$r/guest/"
	sbx_busybox_root "$r/root"
	chown -R 65534:65534 "$r"
	chmod 755 "$r"
	nobody() {
		(cd "$r" && setpriv --reuid=65534 --regid=65534 --clear-groups \
		    env -i HOME="$r" SBX_QEMU_DIR="$r/vms" SBX_QEMU_GUEST="$r/guest" \
		    SBX_NETWORK_DNS="$SBX_NETWORK_DNS" PATH="$SBX_BIN:/usr/bin:/bin" "$@")
	}
	run --separate-stderr nobody sbx-create -b qemu --image "$r/root" --memory 128M -n allow -s "$r/s.json"
	assert_success
	local dir qpid
	dir=$(jq -r .ref.dir "$r/s.json")
	qpid=$(jq -r .pid "$dir/meta.json")
	[ "$(readlink "/proc/$qpid/ns/user")" != "$(readlink /proc/self/ns/user)" ]
	[ "$(readlink "/proc/$qpid/ns/net")" != "$(readlink /proc/self/ns/net)" ]
	[ "$(jq -c .dns "$dir/net.json")" = "[\"$NETWORLD_DNS\"]" ]
	run --separate-stderr nobody sbx-exec -s "$r/s.json" -- wget -q -O - http://a.test/rootless
	assert_success
	[ "$(jq -r '[.server, .path] | join(" ")' <<<"$output")" = "a.test /rootless" ]
	run nobody sbx-kill -q -s "$r/s.json"
	assert_success
	[ ! -e "$dir" ]
}

@test "qemu allow: sbx-port publishes a port of the running VM on the host's loopback, where a server in the VM answers" {
	sbx-exec -s "$S" -- sh -c 'mkdir -p /tmp/www && echo published >/tmp/www/index.html && httpd -p 8081 -h /tmp/www'
	run --separate-stderr sbx-port -s "$S" 8081
	assert_success
	hp=$(jq -r .host_port <<<"$output")
	jq_true --argjson hp "$hp" '.port == 8081 and .host_port == $hp and
	    .url == "http://127.0.0.1:\($hp)"' <<<"$output"
	run curl -fsS --max-time 20 "http://127.0.0.1:$hp/index.html"
	assert_success
	assert_output published
	# Listed; a second publish of it is the same.
	run --separate-stderr sbx-port -s "$S"
	assert_success
	jq_true --argjson hp "$hp" 'select(.port == 8081) | .host_port == $hp' <<<"$output"
	run --separate-stderr sbx-port -s "$S" 8081
	assert_success
	[ "$(jq .host_port <<<"$output")" = "$hp" ]
	echo "$hp" >"$BATS_FILE_TMPDIR/hp"
}

@test "qemu allow: a stopped VM resumed has its network again, with the rules it had (a new sbx-netd for its new QEMU)" {
	local dir old new
	dir=$(jq -r .ref.dir "$S")
	old=$(jq -r .net_pid "$dir/meta.json")
	run sbx-pause -m stop -s "$S"
	assert_success
	[ ! -e "/proc/$old" ] || [ "$(awk '{print $3}' "/proc/$old/stat")" = Z ]
	run sbx-pause -r -s "$S"
	assert_success
	new=$(jq -r .net_pid "$dir/meta.json")
	[ "$new" != "$old" ]
	[ "$(cat "/proc/$new/comm")" = sbx-netd ]
	[ "$(jq -r .pid "$dir/meta.json")" = "$(awk '{print $3}' "$dir/keeper.pid")" ]
	run --separate-stderr sbx-exec -s "$S" -- wget -q -O - http://a.test/again
	assert_success
	[ "$(jq -r .path <<<"$output")" = /again ]
	local before
	before=$(world_conns "$NETWORLD_C" 80)
	run sbx-exec -s "$S" -- wget -q -O - "http://$NETWORLD_C/"
	assert_failure
	[ "$(world_conns "$NETWORLD_C" 80)" = "$before" ]
	# The port sbx-port published: forwarded by the new QEMU too, on
	# the same host port.
	sbx-exec -s "$S" -- sh -c 'mkdir -p /tmp/www && echo again >/tmp/www/index.html && httpd -p 8081 -h /tmp/www'
	run curl -fsS --max-time 20 "http://127.0.0.1:$(cat "$BATS_FILE_TMPDIR/hp")/index.html"
	assert_success
	assert_output again
}
