#!/usr/bin/env bats
# The docker backend against a private dockerd (tests/lib/dockerd.bash): create,
# ls, exec, pause, kill, and the errors of each. What sbx-exec does the same
# way on every backend is in conformance/sbx-exec.bats.

load ../../lib/helper
load ../../lib/dockerd

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
	local c d
	# A second engine a test started.
	if d=$(cat "$BATS_TEST_TMPDIR/second" 2>/dev/null); then
		sbx_dockerd_stop "$d"
	fi
	if [ -n "${LOOP:-}" ]; then
		kill -KILL "$LOOP" 2>/dev/null || true
		wait "$LOOP" 2>/dev/null || true
	fi
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

@test "docker: the ref holds the container's full id and the engine's address, nothing else" {
	run --separate-stderr sbx-create -b docker -i "$SBX_TEST_IMAGE" -s s.json
	assert_success
	id=$(jq -r .id <<<"$output")
	[[ "$id" =~ ^[0-9a-f]{64}$ ]]
	jq_true --arg h "$DOCKER_HOST" '.backend == "docker" and .endpoint == $h
	    and (keys | length) == 3' <<<"$output"
	[ "$(api "/containers/$id/json" | jq -r .Id)" = "$id" ]
	run sbx-ls -b docker -j
	jq_true --arg h "$DOCKER_HOST" '.endpoint == $h and .runtime == "runc"' \
	    <<<"$output"
	sbx-kill -s s.json >/dev/null
	no_containers
}

@test "docker: the container is sbx's, labelled, with an init, no capabilities and no new privileges" {
	dk -l owner=ci -l team=a
	id=$(sid)
	api "/containers/$id/json" >c.json
	# The init is sbx-init (docker-agent.bats), docker's own without it.
	jq_true '.Config.Labels["io.sbx.managed"] == "1" and
	    .Config.Labels.owner == "ci" and .HostConfig.Init == false and
	    .Config.Entrypoint[0] == "/dev/.sbx/init" and
	    .HostConfig.CapDrop == ["ALL"] and
	    .HostConfig.SecurityOpt == ["no-new-privileges"] and
	    .HostConfig.NetworkMode == "none"' <c.json
	run sbx-ls -b docker -j -l owner=ci
	jq_true '.labels == {"owner": "ci", "team": "a"}' <<<"$output"
	run sbx-ls -b docker -j -l owner=other
	assert_output ''
	run sbx-exec -s s.json -- sh -c 'grep CapEff /proc/self/status'
	assert_output --regexp 'CapEff:[[:space:]]+0+$'
	sbx-kill -s s.json >/dev/null
	no_containers
}

@test "docker: no flags: the engine gets the default limits (Memory, no swap, NanoCpus, PidsLimit, ShmSize); sbx-ls shows them" {
	dk
	id=$(sid)
	api "/containers/$id/json" >c.json
	jq_true '.HostConfig.Memory == 536870912 and
	    .HostConfig.MemorySwap == 536870912 and
	    .HostConfig.NanoCpus == 2000000000 and
	    .HostConfig.PidsLimit == 1024 and
	    .HostConfig.ShmSize == 268435456' <c.json
	run sbx-exec -s s.json -- df -k /dev/shm
	assert_success
	assert_output --regexp 'shm +262144 '
	run sbx-ls -b docker -j
	assert_equal "$(jq -c --arg id "$id" 'select(.id == $id) | .limits' <<<"$output")" \
	    '{"memory":536870912,"cpus":2,"pids":1024,"shm":268435456}'
	sbx-kill -s s.json >/dev/null
}

@test "docker: limits.* and flags replace the defaults; 0 is none (the engine's own /dev/shm)" {
	SBX_LIMITS_MEMORY=256M SBX_LIMITS_PIDS=0 dk --cpus 0.5
	id=$(sid)
	api "/containers/$id/json" >c.json
	jq_true '.HostConfig.Memory == 268435456 and
	    .HostConfig.ShmSize == 134217728 and
	    .HostConfig.NanoCpus == 500000000 and
	    ((.HostConfig.PidsLimit // 0) <= 0)' <c.json
	sbx-kill -s s.json >/dev/null
	dk --memory 0 --cpus 0
	id=$(sid)
	api "/containers/$id/json" >c.json
	jq_true '.HostConfig.Memory == 0 and .HostConfig.NanoCpus == 0 and
	    .HostConfig.PidsLimit == 1024 and .HostConfig.ShmSize == 67108864' <c.json
	sbx-kill -s s.json >/dev/null
}

@test "docker: sbx-kill --keep keeps the container and its files, ended, until a second kill" {
	dk
	id=$(sid)
	sbx-exec -s s.json -- sh -c 'echo kept >/workspace/kept.txt'
	run sbx-kill --keep -s s.json
	assert_success
	api "/containers/$id/json" | jq_true '.State.Running == false'
	[ "$(api "/containers/$id/archive?path=/workspace/kept.txt" |
	    tar -xOf - kept.txt)" = kept ]
	sbx-kill "$id" >/dev/null
	no_containers
}

@test "docker: sbx-ls lists only sbx's containers" {
	api /containers/create -X POST -H 'Content-Type: application/json' \
	    -d "{\"Image\":\"$SBX_TEST_IMAGE\",\"Cmd\":[\"true\"]}" >/dev/null
	dk
	run sbx-ls -b docker -j
	[ "${#lines[@]}" -eq 1 ]
	jq_true --arg id "$(sid)" '.id == $id' <<<"$output"
	sbx-kill -s s.json >/dev/null
	c=$(containers)
	[ "$(wc -l <<<"$c")" -eq 1 ]
	[ "$c" != "$(sid)" ]
	api "/containers/$c?force=1" -X DELETE
	no_containers
}

@test "docker: sbx-ls -j | sbx-kill asks the engine for no listing per line" {
	local i ids=()
	for i in 1 2 3; do
		sbx-create -b docker -i "$SBX_TEST_IMAGE" -s "s$i.json" >/dev/null
		ids+=("$(jq -r .ref.id "s$i.json")")
	done
	sbx-ls -b docker -j >list
	[ "$(wc -l <list)" -eq 3 ]
	# What sbx-kill sends the engine: a kill and a remove per sandbox,
	# and without -b (local the default backend) no listing of every
	# container for each line.
	# (LeakSanitizer cannot run under ptrace: off for the SAN build.)
	run env -u SBX_BACKEND ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
	    strace -f -qq -e trace=sendto,write -s 200 -o trace sbx-kill <list
	assert_success
	[ "$(grep -c '"killed"' <<<"$output")" -eq 3 ] || fail "$output"
	[ "$(grep -c 'GET /v[0-9.]*/containers/json' trace)" -eq 0 ] ||
	    fail "listings: $(grep -o 'GET /v[0-9.]*/containers/json[^ ]*' trace)"
	grep -q "DELETE /v[0-9.]*/containers/${ids[0]}" trace ||
	    fail "no DELETE of ${ids[0]} in the trace: $(grep -o '[A-Z]* /v[0-9.]*/[^ ]*' trace)"
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
	[ "$stderr" = "sbx-create: no such image 'no-such-image:1' (pull it, or use --pull)
hint: pull it (--pull, or docker pull no-such-image:1), build it (docker build -t no-such-image:1 .), or import a root filesystem directory: --image ./DIR" ]
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
	[ "${stderr%%$'\n'*}" = "sbx-create: the engine knows no runtime 'no-such-runtime'" ]
	# The hint names the runtimes the engine has.
	[[ "$stderr" == *$'\nhint: the engine has: '*runsc* ]] ||
	    fail "no hint: $stderr"
	[ ! -e s.json ]
	no_containers
}

@test "docker: runsc on an engine that does not have it says how to register it" {
	local first=$DOCKER_HOST
	SBX_TEST_DOCKERD_RUNSC=no sbx_dockerd_start
	echo "$SBX_TEST_DOCKERD_DIR" >"$BATS_TEST_TMPDIR/second"
	[ "$DOCKER_HOST" != "$first" ]
	run --separate-stderr sbx-create -b docker -i "$SBX_TEST_IMAGE" \
	    --runtime runsc -s s.json
	assert_failure 2
	assert_output ''
	[[ "$stderr" == "sbx-create: the engine knows no runtime 'runsc'"$'\n'"hint: register gVisor with the engine: sudo runsc install "*"; it has: "*runc* ]] ||
	    fail "$stderr"
	[[ "$stderr" != *runsc,* && "$stderr" != *", runsc"* ]]
	[ ! -e s.json ]
	sbx_dockerd_stop
	rm "$BATS_TEST_TMPDIR/second"
	export DOCKER_HOST=$first
}

@test "docker: a pull that fails says how else to get the image" {
	# A registry on loopback that is not there: no traffic leaves.
	run --separate-stderr sbx-create -b docker -i 127.0.0.1:9/sbx/none:1 \
	    --pull -s s.json
	assert_failure 1
	assert_output ''
	[[ "$stderr" == "sbx-create: cannot pull '127.0.0.1:9/sbx/none:1': "* ]]
	[[ "$stderr" == *$'\nhint: offline or no registry? build it (docker build -t 127.0.0.1:9/sbx/none:1 .), docker load it, or give a root filesystem directory: --image ./DIR' ]] ||
	    fail "no hint: $stderr"
	[ ! -e s.json ]
	no_containers
}

@test "docker: an unreachable engine fails with exit 1 and names the socket" {
	sock=$BATS_TEST_TMPDIR/none.sock
	DOCKER_HOST=unix://$sock run --separate-stderr sbx-create -b docker \
	    -i "$SBX_TEST_IMAGE" -s s.json
	assert_failure 1
	assert_output ''
	[ "$stderr" = "sbx-create: cannot reach the Docker engine at 'unix://$sock': No such file or directory
hint: start one: sudo systemctl start docker (Debian's package docker.io), or set DOCKER_HOST or the config key docker.host to one that runs" ]
	[ ! -e s.json ]
	DOCKER_HOST=unix://$sock run --separate-stderr sbx-ls -b docker
	assert_failure 1
	[[ "$stderr" == *"unix://$sock"* ]]
	no_containers
}

@test "docker: a failed create with the default state file leaves no .sbx/ it made" {
	# A socket with nothing listening: connection refused.
	sock=$BATS_TEST_TMPDIR/dead.sock
	python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$sock"
	mkdir p && cd p
	DOCKER_HOST=unix://$sock run --separate-stderr sbx-create -b docker \
	    -i "$SBX_TEST_IMAGE"
	assert_failure 1
	assert_output ''
	[[ "$stderr" == "sbx-create: cannot reach the Docker engine at 'unix://$sock': "* ]] ||
	    fail "$stderr"
	run ls -A
	assert_success
	assert_output ''
	# One that was there stays, with what it held.
	mkdir .sbx
	echo keep >.sbx/other.json
	DOCKER_HOST=unix://$sock run --separate-stderr sbx-create -b docker \
	    -i "$SBX_TEST_IMAGE"
	assert_failure 1
	[ "$(cat .sbx/other.json)" = keep ]
	no_containers
}

# A root filesystem as a user makes one: busybox and its applets, a file
# of another owner and mode, a symlink; in directory $1.
rootfs() {
	mkdir -p "$1"/usr/bin "$1"/tmp "$1"/etc "$1"/workspace
	ln -s usr/bin "$1/bin"
	cp /bin/busybox "$1/usr/bin/"
	/bin/busybox --list | grep -vx busybox | while read -r a; do
		ln -s busybox "$1/usr/bin/$a"
	done
	chmod 1777 "$1/tmp"
	echo secret >"$1/etc/owned"
	chown 1234:5678 "$1/etc/owned"
	chmod 604 "$1/etc/owned"
	ln -s owned "$1/etc/link"
}

# The ids of the engine's images of repository sbx-import.
imports() {
	api /images/json | jq -r '.[] | select(any(.RepoTags[]?;
	    startswith("sbx-import:"))) | .Id' | sort
}

@test "docker: --image ./DIR imports the directory, owners, modes and links kept" {
	rootfs root
	run --separate-stderr sbx-create -b docker --image ./root -s s.json
	assert_success
	tag=$(jq -r .image <<<"$output")
	[[ "$tag" =~ ^sbx-import:[0-9a-f]{12}$ ]] || fail "ref: $output"
	jq_true '.ref.image | startswith("sbx-import:")' <s.json
	run sbx-exec -s s.json -- stat -c '%u:%g %a %n' /etc/owned /tmp
	assert_success
	assert_line '1234:5678 604 /etc/owned'
	assert_line '0:0 1777 /tmp'
	run sbx-exec -s s.json -- readlink /etc/link
	assert_output owned
	run sbx-exec -s s.json -- sh -c 'echo $PATH; cat /etc/link'
	assert_line --regexp '(^|:)/usr/bin(:|$)'
	assert_line secret
	run sbx-ls -b docker -j
	assert_success
	[ "$(jq -r --arg t "$tag" 'select(.image == $t) | .image' <<<"$output")" = "$tag" ]
	sbx-kill -s s.json >/dev/null
}

@test "docker: the same directory twice is one image, uploaded once; a change makes another" {
	rootfs "$BATS_TEST_TMPDIR/root"
	sbx-create -b docker -i "$BATS_TEST_TMPDIR/root" -s a.json >/dev/null
	first=$(imports)
	[ -n "$first" ]
	sbx-create -b docker -i "$BATS_TEST_TMPDIR/root/" -s b.json >/dev/null
	# The same image (an import again would have a new id).
	[ "$(imports)" = "$first" ]
	[ "$(jq -r .ref.image a.json)" = "$(jq -r .ref.image b.json)" ]
	sbx-create -b docker -i root/ -s b2.json >/dev/null
	[ "$(imports)" = "$first" ]
	# Without a slash, an image of the engine, with a hint.
	run --separate-stderr sbx-create -b docker -i root -s x.json
	assert_failure 1
	[ "${stderr#*$'\n'}" = "hint: 'root' is a directory here: give it as --image ./root to import it" ]
	echo more >root/etc/new
	sbx-create -b docker -i ./root -s c.json >/dev/null
	[ "$(jq -r .ref.image c.json)" != "$(jq -r .ref.image a.json)" ]
	run sbx-exec -s c.json -- cat /etc/new
	assert_output more
	for f in a b b2 c; do sbx-kill -s $f.json >/dev/null; done
}

@test "docker: --image DIR without /bin/sh, or not a directory, is refused (2) with nothing made" {
	mkdir -p empty/etc
	run --separate-stderr sbx-create -b docker -i ./empty -s s.json
	assert_failure 2
	assert_output ''
	[ "$stderr" = "sbx-create: image './empty' has no /bin/sh" ]
	run --separate-stderr sbx-create -b docker -i ./none -s s.json
	assert_failure 2
	[[ "$stderr" == "sbx-create: image './none' is not a directory"* ]]
	[ ! -e s.json ]
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

# The CPU time the engine counts for container $1, in ns.
cpu_ns() {
	api "/containers/$1/stats?stream=false" | jq .cpu_stats.cpu_usage.total_usage
}

@test "docker: a paused sandbox's container is paused and uses no CPU; killed, nothing is left" {
	dk
	id=$(sid)
	sbx-exec -s s.json -- sh -c 'while :; do sleep 0.01; done' &
	LOOP=$!
	sbx-pause -s s.json >/dev/null
	jq_true '.State.Paused == true' <<<"$(api "/containers/$id/json")"
	a=$(cpu_ns "$id")
	sleep 1
	[ "$(cpu_ns "$id")" = "$a" ]
	sbx-pause -r -s s.json >/dev/null
	jq_true '.State.Paused == false and .State.Running' <<<"$(api "/containers/$id/json")"
	sbx-pause -s s.json >/dev/null
	run sbx-kill -s s.json
	assert_success
	no_containers
}

@test "docker: the workdir is a volume of the container's own, removed with it" {
	dk -w /work/dir
	id=$(sid)
	api "/containers/$id/json" >c.json
	# Beside it, the agent's two bind mounts (docker-agent.bats).
	jq_true '[.Mounts[] | select(.Type != "bind")] | length == 1 and
	    .[0].Type == "volume" and .[0].Destination == "/work/dir" and
	    .[0].RW' <c.json
	vol=$(jq -r '[.Mounts[] | select(.Type == "volume")][0].Name' c.json)
	api "/volumes/$vol" | jq_true --arg v "$vol" '.Name == $v'
	sbx-kill -s s.json >/dev/null
	no_containers
	[ "$(api "/volumes/$vol" -o /dev/null -w '%{http_code}')" = 404 ]
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

@test "docker: sbx-gc collects with no local store yet, and makes one for its lock" {
	dk --timeout 1
	id=$(sid)
	wait_status "$id" expired
	SBX_LOCAL_DIR=$BATS_TEST_TMPDIR/none/store run --separate-stderr \
	    sbx-gc -b docker
	assert_success
	[ "$output" = "{\"id\":\"$id\",\"reason\":\"expired\",\"action\":\"killed\"}" ]
	[ -f "$BATS_TEST_TMPDIR/none/store/.gc.lock" ]
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

@test "docker: --disk is the engine's storage quota where its driver has one, else exit 2 with nothing created" {
	local driver fs
	driver=$(api /info | jq -r .Driver)
	fs=$(api /info | jq -r '.DriverStatus // [] | map(select(.[0] == "Backing Filesystem"))[0][1] // ""')
	run --separate-stderr sbx-create -b docker -i "$SBX_TEST_IMAGE" -s s.json --disk 64M
	if [ "$status" -eq 0 ]; then
		# The driver took it: the container's writes stop near 64 MiB.
		run sbx-exec -s s.json -- sh -c 'dd if=/dev/zero of=/big bs=1M count=100 2>&1'
		assert_failure
		assert_output --partial "No space left on device"
		sbx-kill -q -s s.json >/dev/null
	else
		echo "driver $driver on ${fs:-?}: $stderr"
		assert_failure 2
		assert_output ""
		assert_equal "${#stderr_lines[@]}" 1
		[[ "$stderr" == "sbx-create: the engine's storage driver cannot limit disk (--disk): "*storage* ]]
		[ ! -e s.json ]
	fi
	no_containers
	# limits.disk is not asked of the engine: no flag, no quota, no refusal.
	SBX_LIMITS_DISK=64M dk
	assert_equal "$(api "/containers/$(sid)/json" | jq -c '.HostConfig.StorageOpt // {}')" '{}'
	sbx-kill -q -s s.json >/dev/null
	no_containers
}
