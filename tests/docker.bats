#!/usr/bin/env bats
# The docker backend against a private dockerd (tests/dockerd.bash): create,
# ls, exec, pause, kill, and the errors of each. What sbx-exec does the same
# way on every backend is in conformance/sbx-exec.bats.

load helper
load dockerd

setup_file() {
	sbx_setup_file
	sbx_dockerd_start && sbx_docker_image
}

teardown_file() {
	sbx_dockerd_stop
	sbx_teardown_file
}

# sbx-ls and the helper's ls_line and wait_status look at docker.
setup() {
	sbx_setup
	export SBX_BACKEND=docker
}

# Whatever a failing test left behind goes.
teardown() {
	local c
	for c in $(containers); do
		api "/containers/$c?force=1" -X DELETE
	done
}

# The engine's API, as curl sees it: api PATH [curl args].
api() {
	curl -s --unix-socket "${DOCKER_HOST#unix://}" "http://d$1" "${@:2}"
}

# Every container of the engine, sbx's or not.
containers() {
	api '/containers/json?all=1' | jq -r '.[].Id'
}

no_containers() {
	local left
	left=$(containers)
	[ -z "$left" ] || fail "containers left: $left"
}

# A docker sandbox for this test, its state in s.json.
dk() {
	sbx-create -b docker -i "$SBX_TEST_IMAGE" -s "$BATS_TEST_TMPDIR/s.json" \
	    "$@" >/dev/null
}

@test "docker: create, ls, exec and kill, round trip" {
	run --separate-stderr sbx-create -b docker -i "$SBX_TEST_IMAGE" -s s.json
	assert_success
	[ "${#lines[@]}" -eq 1 ]
	id=$(jq -r .id <<<"$output")
	[[ "$id" =~ ^[0-9a-f]{64}$ ]]
	jq -e --arg h "$DOCKER_HOST" '.backend == "docker" and .endpoint == $h
	    and (keys | length) == 3' <<<"$output"
	jq -e --arg id "$id" '.schema == 1 and .ref.id == $id and
	    .status == "running" and .workdir == "/workspace"' s.json
	run sbx-ls -b docker -j
	assert_success
	[ "${#lines[@]}" -eq 1 ]
	jq -e --arg id "$id" '.id == $id and .status == "running" and
	    .backend == "docker" and .workdir == "/workspace"' <<<"$output"
	run sbx-exec -s s.json -- echo hello
	assert_success
	assert_output hello
	run sbx-kill -s s.json
	assert_success
	jq -e '.status == "killed"' <<<"$output"
	jq -e '.status == "killed"' s.json
	run sbx-ls -b docker -j
	assert_output ''
	no_containers
}

@test "docker: the container is sbx's, labelled, with an init, no capabilities and no new privileges" {
	dk -l owner=ci -l team=a
	id=$(sid)
	api "/containers/$id/json" >c.json
	jq -e '.Config.Labels["io.sbx.managed"] == "1" and
	    .Config.Labels.owner == "ci" and .HostConfig.Init == true and
	    .HostConfig.CapDrop == ["ALL"] and
	    .HostConfig.SecurityOpt == ["no-new-privileges"] and
	    .HostConfig.NetworkMode == "none"' c.json
	run sbx-ls -b docker -j -l owner=ci
	jq -e '.labels == {"owner": "ci", "team": "a"}' <<<"$output"
	run sbx-ls -b docker -j -l owner=other
	assert_output ''
	run sbx-exec -s s.json -- sh -c 'grep CapEff /proc/self/status'
	assert_output --regexp 'CapEff:[[:space:]]+0+$'
	sbx-kill -s s.json >/dev/null
	no_containers
}

@test "docker: sbx-ls lists only sbx's containers" {
	api /containers/create -X POST -H 'Content-Type: application/json' \
	    -d "{\"Image\":\"$SBX_TEST_IMAGE\",\"Cmd\":[\"true\"]}" >/dev/null
	dk
	run sbx-ls -b docker -j
	[ "${#lines[@]}" -eq 1 ]
	jq -e --arg id "$(sid)" '.id == $id' <<<"$output"
	sbx-kill -s s.json >/dev/null
	c=$(containers)
	[ "$(wc -l <<<"$c")" -eq 1 ] && [ "$c" != "$(sid)" ]
	api "/containers/$c?force=1" -X DELETE
	no_containers
}

@test "docker: stdout and stderr, two pipes of the engine, interleave as written" {
	dk
	sbx-exec -s s.json -- sh -c 'echo 1; sleep 0.2; echo 2 >&2; sleep 0.2; echo 3' \
	    >both 2>&1
	[ "$(cat both)" = $'1\n2\n3' ]
	sbx-kill -s s.json >/dev/null
	no_containers
}

@test "docker: a missing image fails with exit 1, names it, and leaves nothing" {
	run --separate-stderr sbx-create -b docker -i no-such-image:1 -s s.json
	assert_failure 1
	assert_output ''
	[ "$stderr" = "sbx-create: no such image 'no-such-image:1' (pull it, or use --pull)" ]
	[ ! -e s.json ]
	no_containers
	run --separate-stderr sbx-create -b docker -s s.json
	assert_failure 2
	[[ "$stderr" == *"--image"* ]]
	no_containers
}

@test "docker: an unknown runtime is a usage error (2) and leaves nothing" {
	run --separate-stderr sbx-create -b docker -i "$SBX_TEST_IMAGE" \
	    --runtime no-such-runtime -s s.json
	assert_failure 2
	assert_output ''
	[ "$stderr" = "sbx-create: the engine knows no runtime 'no-such-runtime'" ]
	[ ! -e s.json ]
	no_containers
}

@test "docker: an unreachable engine fails with exit 1 and names the socket" {
	sock=$BATS_TEST_TMPDIR/none.sock
	DOCKER_HOST=unix://$sock run --separate-stderr sbx-create -b docker \
	    -i "$SBX_TEST_IMAGE" -s s.json
	assert_failure 1
	assert_output ''
	[ "$stderr" = "sbx-create: cannot reach the Docker engine at 'unix://$sock': No such file or directory" ]
	[ ! -e s.json ]
	DOCKER_HOST=unix://$sock run --separate-stderr sbx-ls -b docker
	assert_failure 1
	[[ "$stderr" == *"unix://$sock"* ]]
	no_containers
}

@test "docker: a container that is not sbx's is no sandbox (3), and is left alone" {
	c=$(api /containers/create -X POST -H 'Content-Type: application/json' \
	    -d "{\"Image\":\"$SBX_TEST_IMAGE\",\"Cmd\":[\"sleep\",\"60\"]}" |
	    jq -r .Id)
	api "/containers/$c/start" -X POST
	run --separate-stderr sbx-kill -b docker "$c"
	assert_failure 3
	assert_output ''
	[ "$stderr" = "sbx-kill: cannot kill '$c': no sandbox: '$c' is not an sbx container" ]
	run --separate-stderr sbx-exec -b docker -I "$c" -- true
	assert_failure 125
	[[ "$stderr" == *"is not an sbx container"* ]]
	run --separate-stderr sbx-pause -b docker "$c"
	assert_failure 3
	[ "$(api "/containers/$c/json" | jq -r .State.Status)" = running ]
	api "/containers/$c?force=1" -X DELETE
	no_containers
}

@test "docker: sbx-kill twice: the second says gone and succeeds" {
	dk
	id=$(sid)
	run sbx-kill -b docker "$id"
	assert_success
	jq -e '.status == "killed"' <<<"$output"
	run --separate-stderr sbx-kill -b docker "$id"
	assert_success
	jq -e '.status == "gone"' <<<"$output"
	[ "$stderr" = "sbx-kill: '$id' is already gone" ]
	no_containers
}

@test "docker: pause suspends (exec refuses, 125), resume goes on; --mode stop keeps the files" {
	dk
	id=$(sid)
	run sbx-pause -b docker -S
	jq -e '.pause == "suspend"' <<<"$output"
	sbx-exec -s s.json -- sh -c 'echo kept >/workspace/f'
	run sbx-pause -s s.json
	assert_success
	jq -e '.status == "paused"' <<<"$output"
	[ "$(ls_line "$id" | jq -r .status)" = paused ]
	run --separate-stderr sbx-exec -s s.json -- true
	assert_failure 125
	[ "$stderr" = "sbx-exec: sandbox '$id' is paused (sbx-exec --resume, or sbx-pause --resume)" ]
	run sbx-pause -r -s s.json
	assert_success
	run sbx-exec -s s.json -- cat /workspace/f
	assert_output kept
	run sbx-pause -s s.json --mode stop
	assert_success
	[ "$(ls_line "$id" | jq -r .status)" = stopped ]
	run sbx-exec -s s.json -R -- cat /workspace/f
	assert_success
	assert_output kept
	jq -e '.status == "running"' s.json
	sbx-kill -s s.json >/dev/null
	no_containers
}

@test "docker: --runtime runsc runs the sandbox in gVisor" {
	dk --runtime runsc
	run sbx-exec -s s.json -- dmesg
	assert_success
	assert_output --partial gVisor
	run sbx-exec -s s.json -- sh -c 'echo $((6 * 7))'
	assert_output 42
	[ "$(ls_line "$(sid)" | jq -r .runtime)" = runsc ]
	sbx-kill -s s.json >/dev/null
	no_containers
}

@test "docker: --timeout ends a sandbox left idle; sbx-gc then removes it" {
	dk --timeout 2
	id=$(sid)
	wait_status "$id" expired
	run sbx-gc -b docker
	assert_success
	no_containers
}

@test "docker: sbx-sync pushes a project in and pulls changes and deletions back" {
	mkdir p && cd p
	echo hello >a.txt && mkdir sub && echo x >sub/b && ln -s a.txt link
	dk
	run sbx-sync push -s "$BATS_TEST_TMPDIR/s.json" .
	assert_success
	jq -e '.files == 3' <<<"$output"
	run sbx-exec -s "$BATS_TEST_TMPDIR/s.json" -- sh -c \
	    'cat a.txt sub/b; readlink link; echo new >c.txt; rm sub/b; echo more >>a.txt'
	assert_output $'hello\nx\na.txt'
	run sbx-sync pull -s "$BATS_TEST_TMPDIR/s.json" .
	assert_success
	jq -e '.files == 2 and .deleted == 1' <<<"$output"
	[ "$(cat a.txt)" = $'hello\nmore' ]
	[ "$(cat c.txt)" = new ]
	[ ! -e sub/b ]
	[ "$(readlink link)" = a.txt ]
	sbx-kill -s "$BATS_TEST_TMPDIR/s.json" >/dev/null
	no_containers
}

# An engine that speaks API 1.24 only, on a unix socket ($1) or, with a
# port of 0, on 127.0.0.1 (its port then in $BATS_TEST_TMPDIR/port).
old_engine() {
	python3 - "$1" "$BATS_TEST_TMPDIR/port" <<'PY' &
import http.server, os, socket, socketserver, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Api-Version", "1.24")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"OK")
    def log_message(self, *a):
        pass
    def address_string(self):
        return "test"
if sys.argv[1] == "0":
    s = socketserver.TCPServer(("127.0.0.1", 0), H)
    open(sys.argv[2] + ".tmp", "w").write(str(s.server_address[1]))
    os.rename(sys.argv[2] + ".tmp", sys.argv[2])
else:
    class U(socketserver.UnixStreamServer):
        def get_request(self):
            r, _ = super().get_request()
            return r, ("test", 0)
    s = U(sys.argv[1], H)
s.serve_forever()
PY
	echo $! >"$BATS_TEST_TMPDIR/engine.pid"
}

@test "docker: an engine whose API is too old is refused (1), on a unix socket and on tcp://" {
	old_engine "$BATS_TEST_TMPDIR/old.sock"
	for ((i = 0; i < 100; i++)); do
		[ -S "$BATS_TEST_TMPDIR/old.sock" ] && break
		sleep 0.05
	done
	DOCKER_HOST=unix://$BATS_TEST_TMPDIR/old.sock run --separate-stderr \
	    sbx-create -b docker -i "$SBX_TEST_IMAGE" -s s.json
	kill "$(cat "$BATS_TEST_TMPDIR/engine.pid")"
	assert_failure 1
	assert_output ''
	[ "$stderr" = "sbx-create: the Docker engine at 'unix://$BATS_TEST_TMPDIR/old.sock' speaks API 1.24; sbx needs 1.35 or later" ]
	[ ! -e s.json ]
	old_engine 0
	for ((i = 0; i < 100; i++)); do
		[ -s "$BATS_TEST_TMPDIR/port" ] && break
		sleep 0.05
	done
	port=$(cat "$BATS_TEST_TMPDIR/port")
	DOCKER_HOST=tcp://127.0.0.1:$port run --separate-stderr sbx-ls -b docker
	kill "$(cat "$BATS_TEST_TMPDIR/engine.pid")"
	assert_failure 1
	[ "$stderr" = "sbx-ls: the Docker engine at 'tcp://127.0.0.1:$port' speaks API 1.24; sbx needs 1.35 or later" ]
	no_containers
}
