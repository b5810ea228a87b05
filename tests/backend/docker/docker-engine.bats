#!/usr/bin/env bats
# docker-engine: the private Docker engine that the docker backend's tests
# run (tests/lib/dockerd.bash): private, able to run runc and gVisor containers,
# and gone without a trace when stopped.

load ../../lib/helper
load ../../lib/dockerd

IMG=sbx-test-busybox:latest

setup_file() {
	local t0 t1
	# What the host had before, to show it untouched afterwards.
	host_paths >"$BATS_FILE_TMPDIR/host-paths"
	t0=$(date +%s%N)
	sbx_dockerd_start || return 1
	t1=$(date +%s%N)
	sbx_docker_image || return 1
	printf '# private dockerd: up in %d ms, image in %d ms\n' \
	    $(((t1 - t0) / 1000000)) $((($(date +%s%N) - t1) / 1000000)) >&3
}

teardown_file() {
	sbx_dockerd_stop
}

# A second engine a test started, stopped even when the test failed.
teardown() {
	local d
	d=$(cat "$BATS_TEST_TMPDIR/second" 2>/dev/null) || return 0
	sbx_dockerd_stop "$d"
}

# The address of the engine's bridge on the host.
bridge_ip() {
	ip -4 -o addr show dev "$SBX_TEST_DOCKERD_BRIDGE" |
		awk '{ sub("/.*", "", $4); print $4 }'
}

# A small HTTP server on the bridge address, port $1, saying $2; prints
# its pid.  The container side talks to it with busybox nc (busybox-static's
# wget crashes, in any runtime).
serve() {
	mkdir -p "$BATS_TEST_TMPDIR/www"
	echo "$2" >"$BATS_TEST_TMPDIR/www/index.html"
	busybox httpd -f -p "$(bridge_ip):$1" -h "$BATS_TEST_TMPDIR/www" \
	    </dev/null >/dev/null 2>&1 3>&- &
	echo $!
}

# The pid of dockerd's containerd (its child).
containerd_pid() {
	ps -o pid=,comm= --ppid "$SBX_TEST_DOCKERD_PID" |
		awk '$2 == "containerd" { print $1; f = 1 } END { exit !f }'
}

# The paths a system engine uses, as they are: "path dev:inode" of those that
# exist.
host_paths() {
	stat -c '%n %d:%i' /var/run/docker.sock /var/lib/docker \
	    /var/lib/containerd /run/containerd 2>/dev/null || true
}

@test "the private engine answers on its own socket under /tmp/sbx-dockerd.*" {
	[[ $SBX_TEST_DOCKERD_DIR == /tmp/sbx-dockerd.* ]]
	[ "$DOCKER_HOST" = "unix://$SBX_TEST_DOCKERD_DIR/docker.sock" ]
	run curl -s --unix-socket "$SBX_TEST_DOCKERD_DIR/docker.sock" http://d/_ping
	assert_success
	assert_output OK
	run docker version --format '{{.Server.APIVersion}}'
	assert_success
	assert_output 1.41
	[ "$(cat "$SBX_TEST_DOCKERD_DIR/dockerd.pid")" = "$SBX_TEST_DOCKERD_PID" ]
}

@test "the private engine runs its own containerd, with its state under its directory" {
	local pid
	pid=$(containerd_pid)
	run cat "/proc/$pid/cmdline"
	assert_output --partial "$SBX_TEST_DOCKERD_DIR/exec/containerd/containerd.toml"
	run grep -E '^(root|state|  address) ' \
	    "$SBX_TEST_DOCKERD_DIR/exec/containerd/containerd.toml"
	assert_line "root = \"$SBX_TEST_DOCKERD_DIR/data/containerd/daemon\""
	assert_line "state = \"$SBX_TEST_DOCKERD_DIR/exec/containerd/daemon\""
	assert_line "  address = \"$SBX_TEST_DOCKERD_DIR/exec/containerd/containerd.sock\""
}

@test "the private engine uses overlay2, a private bridge and cgroup parent, and no iptables" {
	run docker info --format '{{.Driver}} {{.CgroupDriver}} {{json .Runtimes}}'
	assert_success
	assert_output --regexp '^overlay2 cgroupfs .*"runsc":\{"path":"[^"]*runsc","runtimeArgs":\["--platform=ptrace","--network=host"\]\}'
	run docker network inspect bridge --format \
	    '{{index .Options "com.docker.network.bridge.name"}} {{(index .IPAM.Config 0).Subnet}}'
	assert_success
	assert_output "$SBX_TEST_DOCKERD_BRIDGE $(bridge_ip | sed 's/\.1$/.0/')/24"
	[[ $SBX_TEST_DOCKERD_BRIDGE == sbxd* ]]
	run jq -r '.iptables, ."ip-forward", ."ip-masq", ."cgroup-parent"' \
	    "$SBX_TEST_DOCKERD_DIR/daemon.json"
	assert_output "false
false
false
sbx-dockerd-${SBX_TEST_DOCKERD_DIR##*.}"
	# Its bridge is in no rule (after a container ran on it, above or not).
	docker run --rm "$IMG" true
	run iptables-save
	assert_success
	refute_output --partial "$SBX_TEST_DOCKERD_BRIDGE"
}

@test "a running container's mounts and namespaces stay out of the host's mount table" {
	local id
	id=$(docker run -d --network none "$IMG" sleep 60)
	run docker inspect -f '{{.State.Running}} {{.GraphDriver.Name}}' "$id"
	assert_output "true overlay2"
	run grep -c -e "$SBX_TEST_DOCKERD_DIR" -e ' /run/docker' -e ' /run/containerd' \
	    /proc/self/mountinfo
	assert_output 0
	docker rm -f "$id" >/dev/null
}

@test "a container with no network runs the test image and prints ok" {
	run docker run --rm --network none "$IMG" sh -c 'echo ok'
	assert_success
	assert_output ok
}

@test "a container with no network has a loopback interface only" {
	run docker run --rm --network none "$IMG" ls /sys/class/net
	assert_success
	assert_output lo
}

@test "a container on the default network reaches the host at the bridge address" {
	local srv
	srv=$(serve 18081 hello-runc)
	run docker run --rm "$IMG" sh -c \
	    "printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 5 $(bridge_ip) 18081"
	kill "$srv"
	assert_success
	assert_line hello-runc
	run docker run --rm "$IMG" ip -4 -o addr show dev eth0
	assert_output --partial "inet $(bridge_ip | sed 's/\.1$/./')"
}

@test "runsc runs a container under gVisor with the ptrace platform" {
	run docker run --rm --network none --runtime runsc "$IMG" \
	    sh -c 'echo ok; cat /proc/version; dmesg'
	assert_success
	assert_line --index 0 ok
	assert_line --partial 'Starting gVisor...'
	[ "${lines[1]}" != "$(cat /proc/version)" ]
	# runc shows the host's kernel: the difference is gVisor's doing.
	run docker run --rm --network none "$IMG" cat /proc/version
	assert_output "$(cat /proc/version)"
}

@test "runsc with no network has a loopback interface only" {
	run docker run --rm --network none --runtime runsc "$IMG" \
	    sh -c 'ls /sys/class/net; ip -o link | cut -d: -f2'
	assert_success
	refute_output --partial eth0
	assert_line ' lo'
}

@test "runsc on the default network reaches the host at the bridge address" {
	local srv
	srv=$(serve 18082 hello-gvisor)
	run docker run --rm --runtime runsc "$IMG" sh -c \
	    "printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 5 $(bridge_ip) 18082"
	kill "$srv"
	assert_success
	assert_line hello-gvisor
}

@test "the test image runs the applets sbx's sync needs as programs" {
	# Each by its path: busybox's sh would run a bare name as a built-in
	# applet even with no link for it.
	run docker run --rm --network none "$IMG" sh -c '
		for a in sh sleep tar find stat xargs sha256sum rm mkdir cat \
		    kill ps env id mv chmod touch mktemp; do
			/usr/bin/$a --help 2>&1 | grep -q "^Usage: $a " &&
			    [ "$(readlink /bin/$a)" = /usr/bin/busybox ] ||
			    echo "no $a"
		done'
	assert_success
	assert_output ''
	# Without a shell, as the backend's exec runs them.
	run docker run --rm --network none "$IMG" find /workspace -maxdepth 0
	assert_success
	assert_output /workspace
	run docker run --rm --network none "$IMG" sh -c '
		cd /workspace && mkdir -p d && echo one >d/a && echo two >d/b &&
		tar -cf /tmp/t.tar d && rm -r d && tar -xf /tmp/t.tar &&
		find d -type f | sort | xargs sha256sum && stat -c "%s %n" d/a'
	assert_success
	assert_output "$(cd "$BATS_TEST_TMPDIR" && mkdir d && echo one >d/a &&
	    echo two >d/b && sha256sum d/a d/b && echo '4 d/a')"
}

@test "the test image has root in /etc/passwd and /etc/group, a sticky /tmp and an empty /workspace" {
	run docker run --rm --network none "$IMG" sh -c '
		id -un; id -gn; stat -c %a /tmp; ls -A /workspace | wc -l; echo $HOME'
	assert_success
	assert_output "root
root
1777
0
/root"
}

@test "the private engine leaves /var/run/docker.sock, /var/lib/docker and /run/containerd as they were" {
	local mine
	# (The containers of the tests above have come and gone by now.)
	[ "$(host_paths)" = "$(cat "$BATS_FILE_TMPDIR/host-paths")" ]
	# If an engine answers on /var/run/docker.sock, it is another one.
	if [ -S /var/run/docker.sock ]; then
		mine=$(docker info --format '{{.ID}}')
		run curl -s -m 5 --unix-socket /var/run/docker.sock http://d/info
		if [ "$status" -eq 0 ] && [ -n "$output" ]; then
			[ "$(jq -r .ID <<<"$output")" != "$mine" ]
		fi
	fi
}

@test "sbx_docker_image keeps an image that is there" {
	local before
	before=$(docker image inspect -f '{{.Id}}' "$IMG")
	run sbx_docker_image
	assert_success
	[ "$(docker image inspect -f '{{.Id}}' "$IMG")" = "$before" ]
}

@test "sbx_dockerd_stop ends a second engine and its containers and removes every trace" {
	local first_host=$DOCKER_HOST first_ip dir pid cpid br cg ctrs all p
	first_ip=$(bridge_ip)
	sbx_dockerd_start
	dir=$SBX_TEST_DOCKERD_DIR pid=$SBX_TEST_DOCKERD_PID
	br=$SBX_TEST_DOCKERD_BRIDGE cg=sbx-dockerd-${dir##*.}
	echo "$dir" >"$BATS_TEST_TMPDIR/second"
	[ "$DOCKER_HOST" != "$first_host" ]
	[ "$(bridge_ip)" != "$first_ip" ]
	cpid=$(containerd_pid)
	sbx_docker_image
	# One container of each runtime left running, on the bridge.
	docker run -d "$IMG" sleep 600 >/dev/null
	docker run -d --runtime runsc "$IMG" sleep 600 >/dev/null
	# runc's sleep, gVisor's sandbox and gofer (and its sleep, which the
	# host does not see).
	ctrs=$(_sbx_dockerd_cgroup_pids "$cg")
	[ "$(wc -l <<<"$ctrs")" -ge 3 ]
	# And dockerd, containerd, two shims.
	all=$(_sbx_dockerd_pids "$dir")
	[ "$(wc -l <<<"$all")" -ge 7 ]
	grep -qx "$pid" <<<"$all"
	grep -qx "$cpid" <<<"$all"
	sbx_dockerd_stop
	for p in $all; do
		dead "$p"
	done
	[ ! -e "$dir" ]
	[ ! -e "/sys/class/net/$br" ]
	run find /sys/fs/cgroup -maxdepth 2 -name "$cg"
	assert_output ''
	run grep -c "$dir" /proc/self/mountinfo
	assert_output 0
	[ -z "${DOCKER_HOST:-}" ]
	# The file's engine goes on.
	run curl -s --unix-socket "${first_host#unix://}" http://d/_ping
	assert_output OK
}

@test "sbx_dockerd_start fails with dockerd's log when dockerd cannot start, and leaves nothing" {
	local dir
	SBX_TEST_DOCKERD_STORAGE=no-such-driver run sbx_dockerd_start
	assert_failure
	assert_output --regexp 'did not answer on /tmp/sbx-dockerd\.[^/]+/docker\.sock'
	assert_output --partial 'error initializing graphdriver: driver not supported'
	dir=$(grep -o '/tmp/sbx-dockerd\.[^/]*' <<<"$output" | head -1)
	[ ! -e "$dir" ]
	[ ! -e "/sys/class/net/sbxd${dir##*.}" ]
	run find /sys/fs/cgroup -maxdepth 2 -name "sbx-dockerd-${dir##*.}"
	assert_output ''
}
