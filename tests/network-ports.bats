#!/usr/bin/env bats
# Published ports of a local sandbox: sbx-create --port and sbx-port, on
# the host's 127.0.0.1 only, with network allow and deny; the connections
# are made inside the sandbox by sbx-netd.  Nothing here leaves the host.

load lib/helper

setup_file() { sbx_setup_file; }
teardown_file() { sbx_teardown_file; }
setup() {
	sbx_setup
	HOST_PIDS=()
}
teardown() {
	local p
	for p in "${HOST_PIDS[@]}"; do
		kill "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
}

# A free port on the host's 127.0.0.1.
free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# serve PORT [STATE]: a web server on the sandbox's 127.0.0.1:PORT whose
# /hello says "hi from PORT"; back once it listens.
serve() {
	sbx-exec -s "${2:-$BATS_TEST_TMPDIR/s.json}" -- sh -c '
		mkdir -p /tmp/w$1 && cd /tmp/w$1 && echo "hi from $1" >hello &&
		(setsid python3 -m http.server "$1" --bind 127.0.0.1 >/dev/null 2>&1 &)
		for i in $(seq 100); do
			python3 -c "import socket,sys; socket.create_connection((\"127.0.0.1\", int(sys.argv[1])))" "$1" 2>/dev/null && exit 0
			sleep 0.05
		done
		exit 1' sh "$1"
}

# The URL sbx-port prints for PORT.
url() {
	sbx-port -s "${2:-$BATS_TEST_TMPDIR/s.json}" "$1" | jq_str .url
}

sdir() {
	jq -r .ref.dir "${1:-$BATS_TEST_TMPDIR/s.json}"
}

@test "--port: a server in the sandbox answers at the URL sbx-port prints; one tcp-in log line" {
	local u
	new_sandbox -n allow --port 8000
	serve 8000
	u=$(url 8000)
	[[ $u =~ ^http://127\.0\.0\.1:[0-9]+$ ]]
	run curl -sS "$u/hello"
	assert_success
	assert_output "hi from 8000"
	sleep 0.2
	run jq -c 'select(.proto == "tcp-in") | [.proto, .dest, .port, .verdict, (.bytes_in > 0), (.bytes_out > 0)]' "$(sdir)/net.log"
	assert_output '["tcp-in","127.0.0.1",8000,"allow",true,true]'
}

@test "sbx-port lists every port, one JSON line each, fields in order; HOSTPORT:PORT is kept" {
	local hp
	hp=$(free_port)
	new_sandbox -n allow --port 8000 --port "$hp:8001"
	serve 8000
	serve 8001
	run sbx-port -s s.json
	assert_success
	[ "${#lines[@]}" = 2 ]
	[[ ${lines[0]} =~ ^\{\"port\":8000,\"host\":\"127.0.0.1\",\"host_port\":[0-9]+,\"url\":\"http://127.0.0.1:[0-9]+\"\}$ ]]
	[ "${lines[1]}" = "{\"port\":8001,\"host\":\"127.0.0.1\",\"host_port\":$hp,\"url\":\"http://127.0.0.1:$hp\"}" ]
	run curl -sS "http://127.0.0.1:$hp/hello"
	assert_output "hi from 8001"
	run curl -sS "$(url 8000)/hello"
	assert_output "hi from 8000"
	run jq -c .ports "$(sdir)/net.json"
	[[ $output =~ ^\[\{\"port\":8000,\"host_port\":[1-9][0-9]*\},\{\"port\":8001,\"host_port\":$hp\}\]$ ]]
}

@test "a published port listens on the host's 127.0.0.1 only" {
	local hp
	hp=$(free_port)
	new_sandbox -n allow --port "$hp:8000"
	run sh -c "ss -Hltn 'sport = :$hp' | awk '{print \$4}'"
	assert_output "127.0.0.1:$hp"
}

@test "a HOSTPORT in use: exit 1, 'port N is in use', nothing created" {
	local hp before
	hp=$(free_port)
	python3 -c 'import socket,sys,time; s=socket.socket(); s.bind(("127.0.0.1",int(sys.argv[1]))); s.listen(); time.sleep(60)' "$hp" &
	HOST_PIDS+=($!)
	for i in $(seq 50); do ss -Hltn "sport = :$hp" | grep -q . && break; sleep 0.05; done
	before=$(ls "$SBX_LOCAL_DIR" | wc -l)
	run --separate-stderr sbx-create -n allow --port "$hp:8000" -s s.json
	assert_failure 1
	[ "$stderr" = "sbx-create: network: port $hp is in use" ]
	[ ! -e s.json ]
	[ "$(ls "$SBX_LOCAL_DIR" | wc -l)" = "$before" ]
	[ "$(ss -Hltn "sport = :$hp" | wc -l)" = 1 ]
}

@test "a port out of range or given twice: exit 2, one line, nothing created" {
	local before
	before=$(ls "$SBX_LOCAL_DIR" | wc -l)
	run --separate-stderr sbx-create --port 70000 -s s.json
	assert_failure 2
	[ "$stderr" = "sbx-create: invalid port '70000' (want [HOSTPORT:]PORT, each 1-65535)" ]
	run --separate-stderr sbx-create --port 0:80 -s s.json
	assert_failure 2
	[ "$stderr" = "sbx-create: invalid port '0:80' (want [HOSTPORT:]PORT, each 1-65535)" ]
	run --separate-stderr sbx-create --port 80 --port 9000:80 -s s.json
	assert_failure 2
	[ "$stderr" = "sbx-create: port 80 is given twice" ]
	[ ! -e s.json ]
	[ "$(ls "$SBX_LOCAL_DIR" | wc -l)" = "$before" ]
	run --separate-stderr sbx-port -I x 99999
	assert_failure 2
	[ "$stderr" = "sbx-port: invalid port '99999' (want [HOSTPORT:]PORT, each 1-65535)" ]
}

@test "sbx-port publishes a port live; again, the same; another host port for it is exit 1" {
	local u hp
	new_sandbox -n allow
	serve 8100
	run sbx-port -s s.json
	assert_output ''
	u=$(url 8100)
	run curl -sS "$u/hello"
	assert_output "hi from 8100"
	[ "$(url 8100)" = "$u" ]
	hp=$(free_port)
	run --separate-stderr sbx-port -s s.json "$hp:8100"
	assert_failure 1
	[ "$stderr" = "sbx-port: port 8100 is published on ${u##*:} already" ]
	run sbx-port -s s.json "$hp:8101"
	assert_output "{\"port\":8101,\"host\":\"127.0.0.1\",\"host_port\":$hp,\"url\":\"http://127.0.0.1:$hp\"}"
}

@test "a port nothing listens on inside: the connection is reset and logged with the error" {
	new_sandbox -n allow --port 8200
	run curl -sS "$(url 8200)/"
	assert_failure
	sleep 0.2
	run jq -c 'select(.proto == "tcp-in") | [.port, .verdict, .error]' "$(sdir)/net.log"
	assert_output '[8200,"allow","Connection refused"]'
}

@test "-n deny with --port: the port answers, and the sandbox still has no way out" {
	new_sandbox -n deny --port 8000
	serve 8000
	run curl -sS "$(url 8000)/hello"
	assert_output "hi from 8000"
	run sx python3 -c 'import socket; socket.create_connection(("198.18.255.1", 80), timeout=2)'
	assert_failure
	assert_output --partial "Network is unreachable"
	# No route at all: the header line of the table alone.
	run sx sh -c 'wc -l </proc/net/route'
	assert_output 1
}

@test "-n deny without --port: sbx-port cannot publish (exit 2) and lists nothing" {
	new_sandbox -n deny
	run --separate-stderr sbx-port -s s.json 8000
	assert_failure 2
	[ "$stderr" = "sbx-port: sandbox '$(sid)' has network deny and no published port: ports need --network allow or --port at create" ]
	run sbx-port -s s.json
	assert_success
	assert_output ''
}

@test "sbx-kill closes the ports and ends sbx-netd" {
	local hp net
	hp=$(free_port)
	new_sandbox -n deny --port "$hp:8000"
	net=$(jq -r .net_pid "$(sdir)/meta.json")
	alive "$net"
	ss -Hltn "sport = :$hp" | grep -q .
	sbx-kill -q -s s.json >/dev/null
	for i in $(seq 100); do dead "$net" && break; sleep 0.02; done
	dead "$net"
	run ss -Hltn "sport = :$hp"
	assert_output ''
}

@test "pause: a connection waits and is answered after resume; stop and resume: the same host port" {
	local u
	new_sandbox -n allow --port 8000
	serve 8000
	u=$(url 8000)
	sbx-pause -q -s s.json
	curl -sS --max-time 20 "$u/hello" >"$BATS_TEST_TMPDIR/out" 2>&1 &
	HOST_PIDS+=($!)
	sleep 0.5
	[ ! -s "$BATS_TEST_TMPDIR/out" ]
	sbx-pause -q -r -s s.json
	wait "${HOST_PIDS[0]}"
	HOST_PIDS=()
	[ "$(cat "$BATS_TEST_TMPDIR/out")" = "hi from 8000" ]
	sbx-pause -q -m stop -s s.json
	run ss -Hltn "sport = :${u##*:}"
	assert_output ''
	sbx-pause -q -r -s s.json
	[ "$(url 8000)" = "$u" ]
	serve 8000
	run curl -sS "$u/hello"
	assert_output "hi from 8000"
}
