#!/usr/bin/env bats
# The docker backend's agent: sbx-init as the container's PID 1 (a
# read-only bind mount), its socket in a directory of the host, execs
# through it (our fds passed) and not through the engine's exec API; what
# still goes through the engine; what is left of it (nothing) in a commit
# and after sbx-kill. What sbx-exec does the same way on every backend is
# in conformance/sbx-exec.bats.

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

setup() {
	sbx_setup
	export SBX_BACKEND=docker
}

teardown() {
	local c
	for c in $(api '/containers/json?all=1' | jq -r '.[].Id'); do
		api "/containers/$c?force=1" -X DELETE
	done
}

api() {
	curl -s --unix-socket "${DOCKER_HOST#unix://}" "http://d$1" "${@:2}"
}

dk() {
	sbx-create -b docker -i "$SBX_TEST_IMAGE" -s "$BATS_TEST_TMPDIR/s.json" \
	    "$@" >/dev/null
}

# The agent's directory of sandbox s.json, from its label.
agent_dir() {
	api "/containers/$(sid)/json" | jq -r '.Config.Labels["io.sbx.agent"]'
}

# The engine's exec_create events of container $1 while "${@:2}" runs,
# one line each, on stdout; the command's own output in cmd.out.
exec_events() {
	local id=$1 t0 t1
	shift
	t0=$(date +%s)
	"$@" >"$BATS_TEST_TMPDIR/cmd.out" 2>&1
	t1=$(($(date +%s) + 1))
	api "/events?since=$t0&until=$t1&filters=$(jq -rn --arg c "$id" \
	    '{container: [$c], event: ["exec_create"]} | tojson | @uri')" |
	    jq -c 'select(.Action | startswith("exec_create"))'
}

@test "docker: sbx-init is PID 1 from a read-only bind mount, its socket in a directory of the host only the caller reaches" {
	dk
	id=$(sid)
	api "/containers/$id/json" >c.json
	dir=$(agent_dir)
	[[ "$dir" == "$SBX_LOCAL_DIR/.docker-agent/"* ]] || fail "dir: $dir"
	jq_true --arg d "$dir" '.HostConfig.Init == false and
	    .Config.Entrypoint[0:4] == ["/dev/.sbx/init", "--docker",
	    "/dev/.sbx/run", "--"] and
	    ([.Mounts[] | select(.Destination == "/dev/.sbx/init")][0].RW ==
	    false) and ([.Mounts[] | select(.Destination == "/dev/.sbx/run")][0]
	    .Source == ($d + "/run"))' <c.json
	[ "$(stat -c %a "$dir")" = 700 ]
	[ -S "$dir/run/sock" ] || sleep 1
	[ -S "$dir/run/sock" ]
	run sbx-exec -s s.json -- sh -c 'cat /proc/1/cmdline | tr "\0" " "; echo; grep CapEff /proc/1/status; echo x >/dev/.sbx/init'
	assert_failure
	assert_line --partial '/dev/.sbx/init --docker /dev/.sbx/run -- sh -c'
	assert_line --regexp 'CapEff:[[:space:]]+0+$'
	assert_output --partial 'Read-only file system'
	cmp "$SBX_BIN/sbx-init" <(sbx-exec -s s.json -- cat /dev/.sbx/init)
}

@test "docker: sbx-ls -B says execs go through the agent on runc and the engine on runsc; docker.agent off, the engine" {
	run sbx-ls -B -j
	assert_success
	jq_true -s 'map(select(.backend == "docker"))[0].exec ==
	    {"runc": "agent", "runsc": "engine"}' <<<"$output"
	run env SBX_DOCKER_AGENT=off sbx-ls -B -j
	jq_true -s 'map(select(.backend == "docker"))[0].exec.runc ==
	    "engine"' <<<"$output"
}

@test "docker: an exec through the agent asks the engine for no exec; -u goes through the engine's" {
	dk
	id=$(sid)
	run exec_events "$id" sbx-exec -s s.json -- sh -c 'echo out; echo err >&2; exit 3'
	assert_success
	assert_output ''
	[ "$(sort "$BATS_TEST_TMPDIR/cmd.out")" = $'err\nout' ]
	# The same check sees the engine's exec: it can fail.
	run exec_events "$id" sbx-exec -s s.json -u nobody -- id -un
	assert_success
	[ -n "$output" ] || fail "no exec_create for -u"
	[ "$(cat "$BATS_TEST_TMPDIR/cmd.out")" = nobody ]
}

@test "docker: docker.agent off: docker's init, no agent directory, execs through the engine" {
	SBX_DOCKER_AGENT=off dk
	id=$(sid)
	api "/containers/$id/json" >c.json
	jq_true '.HostConfig.Init == true and
	    (.Config.Labels | has("io.sbx.agent") | not)' <c.json
	run exec_events "$id" sbx-exec -s s.json -- echo hi
	[ -n "$output" ] || fail "no exec_create"
	[ "$(cat "$BATS_TEST_TMPDIR/cmd.out")" = hi ]
}

@test "docker: through the agent, exit status, 127, environment, workdir, stdin and a UTF-8 locale are the engine's" {
	dk -e FOO=bar
	run sbx-exec -s s.json -- sh -c 'exit 7'
	assert_failure 7
	run -127 --separate-stderr sbx-exec -s s.json -- nosuch
	run sbx-exec -s s.json -e X=1 -- sh -c 'echo "$FOO $X $LANG $HOME $(pwd) $(id -u)"'
	assert_output "bar 1 C.UTF-8 /root /workspace 0"
	run sbx-exec -s s.json -w /tmp -- pwd
	assert_output /tmp
	run sbx-exec -s s.json -i -- cat <<<"in put"
	assert_output "in put"
	run sbx-exec -s s.json -- sh -c 'kill -9 $$'
	assert_failure 137
}

@test "docker: through the agent, --timeout and the caller's end kill what left the command's session too" {
	dk
	run sbx-exec -s s.json -T 1 -- sh -c 'setsid sleep 301 & sleep 302'
	assert_failure 124
	sbx-exec -s s.json -- sh -c 'setsid sleep 303 & exec sleep 304' &
	pid=$!
	sleep 1
	kill -KILL "$pid"
	wait "$pid" || true
	sleep 0.5
	run sbx-exec -s s.json -- ps -o args
	assert_success
	refute_output --partial 'sleep 30'
}

# The agent's socket is in the container too (0666, as a container's
# user may differ from the host's): it serves the host (outside its pid
# namespace: pid 0 to it) and its own user, not another user in there,
# who would have it run commands as root.
@test "docker: the agent answers root in the container but closes another user's connection unanswered" {
	dk
	id=$(sid)
	cat >peer.c <<'EOF'
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
/* peer SOCKET: send the agent an INFO (a header: length 0, type 2) and
 * say whether an answer came. It sends 0.2 s after it connects: an agent
 * that refuses has closed by then (EPIPE, no SIGPIPE), as it may have
 * under load anyway. */
int main(int argc, char **argv)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	uint32_t h[2] = {0, 2};
	char b[64];
	int s = socket(AF_UNIX, SOCK_STREAM, 0);

	if (argc != 2)
		return 2;
	strncpy(a.sun_path, argv[1], sizeof a.sun_path - 1);
	if (connect(s, (struct sockaddr *)&a, sizeof a) < 0) {
		perror(argv[1]);
		return 2;
	}
	usleep(200000);
	if (send(s, h, sizeof h, MSG_NOSIGNAL) != sizeof h) {
		if (errno != EPIPE && errno != ECONNRESET) {
			perror(argv[1]);
			return 2;
		}
		puts("closed");
		return 0;
	}
	puts(read(s, b, sizeof b) >= 8 ? "answered" : "closed");
	return 0;
}
EOF
	cc -static -o peer peer.c
	docker cp peer "$id:/tmp/peer" >/dev/null
	# -u: through the engine's exec, as that user in the container.
	run sbx-exec -s s.json -u 0 -- /tmp/peer /dev/.sbx/run/sock
	assert_success
	assert_output answered
	run sbx-exec -s s.json -u 65534 -- sh -c 'id -u; /tmp/peer /dev/.sbx/run/sock'
	assert_success
	assert_output $'65534\nclosed'
	# And the agent still serves the host.
	run sbx-exec -s s.json -- echo fine
	assert_output fine
}

@test "docker: a directory as stdin is never passed into the container: that exec goes through the engine" {
	dk
	id=$(sid)
	run exec_events "$id" sbx-exec -s s.json -i -- sh -c 'ls -id /proc/self/fd/0 2>&1; cat; echo rc=$?' </
	[ -n "$output" ] || fail "no exec_create"
}

@test "docker: the agent comes back after sbx-pause -m stop and resume, and after docker restart" {
	dk
	id=$(sid)
	sbx-pause -s s.json -m stop >/dev/null
	run sbx-exec -s s.json -- true
	assert_failure 125
	assert_output --partial stopped
	sbx-pause -s s.json --resume >/dev/null
	run exec_events "$id" sbx-exec -s s.json -- echo back
	assert_output ''
	[ "$(cat "$BATS_TEST_TMPDIR/cmd.out")" = back ]
	api "/containers/$id/restart?t=1" -X POST
	run exec_events "$id" sbx-exec -s s.json -- echo again
	assert_output ''
	[ "$(cat "$BATS_TEST_TMPDIR/cmd.out")" = again ]
	# The container still ends as the keep-alive ends: stopped, killed.
	sbx-kill -s s.json --keep >/dev/null
	[ "$(api "/containers/$id/json" | jq .State.ExitCode)" = 138 ]
}

@test "docker: a commit of the container holds nothing of the agent; a snapshot's sandbox has an agent of its own" {
	dk
	id=$(sid)
	sbx-exec -s s.json -- sh -c 'echo v >/workspace/f; echo w >/etc/g'
	run api "/containers/$id/changes"
	assert_success
	refute_output --partial '.sbx'
	run --separate-stderr sbx-snapshot -s s.json
	assert_success
	snap=$(jq -r .snapshot <<<"$output")
	img=$(api "/images/json?filters=$(jq -rn --arg s "$snap" \
	    '{label: ["io.sbx.snapshot=" + $s]} | tojson | @uri')" | jq -r '.[0].Id')
	api "/images/$img/json" >i.json
	jq_true '(.Config.Entrypoint // [] | map(test("sbx")) | any | not)' <i.json
	sbx-create -b docker -i "$SBX_TEST_IMAGE" --from "$snap" -s t.json >/dev/null
	run sbx-exec -s t.json -- sh -c 'cat /workspace/f /etc/g; ls -A /dev/.sbx'
	assert_output $'v\nw\ninit\nrun'
	sbx-kill -s t.json >/dev/null
	sbx-snapshot rm -b docker "$snap" >/dev/null
}

@test "docker: sbx-kill removes the agent's directory; a create that fails leaves none" {
	dk
	dir=$(agent_dir)
	[ -d "$dir" ]
	sbx-kill -s s.json >/dev/null
	[ ! -e "$dir" ]
	ls "$SBX_LOCAL_DIR/.docker-agent" >before
	run sbx-create -b docker -i no-such-image:x -s u.json
	assert_failure 1
	ls "$SBX_LOCAL_DIR/.docker-agent" >after
	cmp before after
}

@test "docker: sbx-gc removes the agent directory of a container removed behind sbx's back, not a fresh one's" {
	dk
	old=$(agent_dir)
	api "/containers/$(sid)?force=1" -X DELETE
	sbx-create -b docker -i "$SBX_TEST_IMAGE" -s t.json >/dev/null
	live=$(api "/containers/$(sid t.json)/json" | jq -r '.Config.Labels["io.sbx.agent"]')
	mkdir "$SBX_LOCAL_DIR/.docker-agent/fresh"
	touch -d '-2 min' "$old" "$live"
	run sbx-gc -b docker
	assert_success
	[ ! -e "$old" ] || fail "$old is left"
	[ -d "$live" ] && [ -d "$SBX_LOCAL_DIR/.docker-agent/fresh" ]
	rmdir "$SBX_LOCAL_DIR/.docker-agent/fresh"
	sbx-kill -s t.json >/dev/null
}

@test "docker: an agent label that names a directory outside sbx's store is ignored: sbx-kill removes nothing there, exec goes through the engine" {
	mkdir -p "$BATS_TEST_TMPDIR/other/run"
	touch "$BATS_TEST_TMPDIR/other/keep"
	id=$(api /containers/create -X POST -H 'Content-Type: application/json' \
	    -d "$(jq -cn --arg i "$SBX_TEST_IMAGE" --arg d "$BATS_TEST_TMPDIR/other" \
	    '{Image: $i, Cmd: ["sleep", "300"], Labels: {"io.sbx.managed": "1",
	    "io.sbx.agent": $d}}')" | jq -r .Id)
	api "/containers/$id/start" -X POST
	run exec_events "$id" sbx-exec -b docker --id "$id" -- echo hi
	[ -n "$output" ] || fail "no exec_create"
	[ "$(cat "$BATS_TEST_TMPDIR/cmd.out")" = hi ]
	run sbx-kill -b docker --id "$id"
	assert_success
	[ -e "$BATS_TEST_TMPDIR/other/keep" ]
}
