#!/usr/bin/env bats
# One address space, with docker beside local: sbx-ls without -b lists
# both, an id, prefix or name finds its sandbox in either without -b, a
# name in both is refused, and docker.host says where the engine is.

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
	# local stays the default backend: docker is found without -b.
	sbx_setup_backends
}

teardown() {
	sbx-ls -j 2>/dev/null | sbx-kill -q >/dev/null 2>&1 || true
}

dk() {
	sbx-create -s - -b docker -i "$SBX_TEST_IMAGE" "$@" | jq_str .id
}

@test "docker-ls: sbx-ls without -b lists local and docker sandboxes, -b narrows" {
	local l d
	l=$(sbx-create -s - | jq_str .id)
	d=$(dk)
	run --separate-stderr sbx-ls
	assert_success
	[ "${#lines[@]}" -eq 2 ]
	jq_true -s --arg l "$l" --arg d "$d" 'map({(.id): .backend}) | add ==
	    {($l): "local", ($d): "docker"}' <<<"$output"
	# The JSON keeps full ids and says where the engine is.
	jq_true -s --arg d "$d" --arg h "$DOCKER_HOST" '.[] | select(.id == $d)
	    | .endpoint == $h' <<<"$output"
	run sbx-ls -b docker
	assert_success
	[ "${#lines[@]}" -eq 1 ]
	jq_true --arg d "$d" '.id == $d' <<<"$output"
	run sbx-ls -b local
	[ "${#lines[@]}" -eq 1 ]
	jq_true --arg l "$l" '.id == $l' <<<"$output"
}

@test "docker-ls: the table shows a docker id 12 wide, its backend, and - for the idle time it cannot tell" {
	local d
	d=$(dk)
	run on_tty -b docker
	assert_success
	[ "${#lines[@]}" -eq 2 ]
	read -r -a f <<<"${lines[1]}"
	[ "${f[0]}" = "${d:0:12}" ]
	[ "${f[1]}" = docker ]
	[ "${f[3]}" = $'\e[32mrunning\e[0m' ]
	# AGE, then IDLE: null in the JSON, - on the table (not 0s).
	[ "${f[5]}" = - ]
	sbx-ls -b docker -j | jq_true '.idle == null'
}

@test "docker-ls: an id, a prefix or a name finds a docker sandbox without -b in sbx-exec, sbx-pause, sbx-port and sbx-kill" {
	local d
	d=$(dk --name dkls)
	run --separate-stderr sbx-exec -I "$d" -- echo full
	assert_success
	[ "$output" = full ]
	run --separate-stderr sbx-exec -I "${d:0:6}" -- echo prefix
	assert_success
	[ "$output" = prefix ]
	run --separate-stderr sbx-exec -I dkls -- echo name
	assert_success
	[ "$output" = name ]
	run --separate-stderr sbx-pause -I "${d:0:8}"
	assert_success
	jq_true --arg d "$d" '.backend == "docker" and .id == $d and
	    .status == "paused"' <<<"$output"
	run --separate-stderr sbx-pause -r dkls
	assert_success
	jq_true '.status == "running"' <<<"$output"
	# Found: the container's own answer, with its full id.
	run --separate-stderr sbx-port -I "${d:0:8}"
	assert_failure 2
	[[ $stderr == *"sandbox '$d' has network deny and no published port"* ]]
	run --separate-stderr sbx-kill "${d:0:5}"
	assert_success
	jq_true --arg d "$d" '.backend == "docker" and .id == $d and
	    .status == "killed"' <<<"$output"
	run sbx-ls -b docker
	[ -z "$output" ]
}

@test "docker-ls: a name on local and on docker is refused with exit 2, naming both, and nothing is done" {
	local l d
	l=$(sbx-create -s - --name twin | jq_str .id)
	d=$(dk --name twin)
	# sbx-exec's own failures are 125 (env(1)'s), the others' 2.
	run --separate-stderr sbx-exec -I twin -- touch /tmp/done
	assert_failure 125
	[[ $stderr == "sbx-exec: 'twin' names more than one sandbox: "* ]]
	[[ $stderr == *"local '$l'"* ]]
	[[ $stderr == *"docker '$d'"* ]]
	run --separate-stderr sbx-kill twin
	assert_failure 2
	[[ $stderr == *"more than one sandbox"* ]]
	[ -z "$output" ]
	[ "$(sbx-ls | jq -r .status | sort -u)" = running ]
	run sbx-exec -I "$d" -- test -e /tmp/done
	assert_failure 1
	# -b says which.
	run --separate-stderr sbx-exec -b docker -I twin -- echo dk
	assert_success
	[ "$output" = dk ]
}

@test "docker-ls: docker.host in the config file says where the engine is" {
	local d host=$DOCKER_HOST
	d=$(dk)
	mkdir -p config/sbx
	printf 'docker.host = %s\n' "$host" >config/sbx/config
	DOCKER_HOST= run --separate-stderr sbx-ls -b docker
	assert_success
	jq_true --arg d "$d" --arg h "$host" '.id == $d and .endpoint == $h' \
	    <<<"$output"
	# $SBX_DOCKER_HOST above all; $DOCKER_HOST above the file.
	DOCKER_HOST=$host SBX_DOCKER_HOST=unix://$BATS_TEST_TMPDIR/none.sock \
	    run --separate-stderr sbx-ls -b docker
	assert_failure 1
	[[ $stderr == *"none.sock"* ]]
	printf 'docker.host = unix://%s/none.sock\n' "$BATS_TEST_TMPDIR" \
	    >config/sbx/config
	DOCKER_HOST=$host run --separate-stderr sbx-ls -b docker
	assert_success
	jq_true --arg d "$d" '.id == $d' <<<"$output"
}

@test "docker-ls: a ref from -I carries the engine's address, so a sandbox is found on the engine it is on" {
	local d host=$DOCKER_HOST
	d=$(dk)
	mkdir -p config/sbx
	printf 'docker.host = %s\n' "$host" >config/sbx/config
	# Found through the config file; the kill goes to that engine.
	DOCKER_HOST= run --separate-stderr sbx-kill "${d:0:8}"
	assert_success
	jq_true --arg d "$d" '.id == $d and .status == "killed"' <<<"$output"
}
