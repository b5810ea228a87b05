#!/usr/bin/env bats
# sbx-image build -b docker against a private dockerd (tests/lib/dockerd.bash):
# the context sent as a tar, the image named NAME-HASH, reused while the
# context is unchanged, --check, and the build's errors. FROM the local
# test image only: nothing is pulled.

load ../../lib/helper
load ../../lib/dockerd
load ../../lib/registry

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
	unset SBX_BACKEND
	mkdir -p ctx/src
	printf 'FROM %s\nARG GREETING=none\nCOPY . /app\nRUN echo "$GREETING" >/greeting\n' \
	    "$SBX_TEST_IMAGE" >ctx/Dockerfile
	echo hello >ctx/src/a.txt
	# A unique name per test: the engine is shared by the file's tests.
	NAME=sbxt$BATS_TEST_NUMBER
}

teardown() {
	local i
	# A registry a test started, stopped by its pid even when it failed.
	sbx_registry_stop
	for i in $(docker images -q "$NAME-*" 2>/dev/null); do
		docker rmi -f "$i" >/dev/null 2>&1 || true
	done
}

# What the image $1 holds at path $2.
cat_in() {
	docker run --rm --network none "$1" cat "$2"
}

@test "build sends the context, names the image NAME-HASH and prints it" {
	h=$(sbx-image hash ctx | jq_str .hash)
	run --separate-stderr sbx-image build -b docker -t "$NAME" ctx
	assert_success
	assert_output "{\"image\":\"$NAME-$h\",\"hash\":\"$h\",\"backend\":\"docker\",\"built\":true}"
	# The build's steps on stderr, a line each.
	[[ $stderr == *"Step 1/4 : FROM $SBX_TEST_IMAGE"* ]]
	[ "$(cat_in "$NAME-$h" /app/src/a.txt)" = hello ]
	[ "$(cat_in "$NAME-$h" /greeting)" = none ]
}

@test "an unchanged context reuses the image without building; a change builds a new one" {
	run --separate-stderr sbx-image build -b docker -t "$NAME" ctx
	assert_success
	id1=$(jq_str .image <<<"$output")
	run --separate-stderr sbx-image build -b docker -t "$NAME" ctx
	assert_success
	jq_true '.built == false' <<<"$output"
	[ "$(jq_str .image <<<"$output")" = "$id1" ]
	[ -z "$stderr" ]
	echo changed >ctx/src/a.txt
	run --separate-stderr sbx-image build -b docker -t "$NAME" ctx
	assert_success
	jq_true '.built == true' <<<"$output"
	id2=$(jq_str .image <<<"$output")
	[ "$id1" != "$id2" ]
	[ "$(cat_in "$id2" /app/src/a.txt)" = changed ]
}

@test "--check says present (exit 0) or missing (exit 3) and builds nothing" {
	h=$(sbx-image hash ctx | jq_str .hash)
	run --separate-stderr sbx-image build -b docker --check -t "$NAME" ctx
	assert_failure 3
	assert_output "{\"image\":\"$NAME-$h\",\"hash\":\"$h\",\"backend\":\"docker\",\"present\":false}"
	run docker image inspect "$NAME-$h"
	assert_failure
	run sbx-image build -b docker -q -t "$NAME" ctx
	assert_success
	run --separate-stderr sbx-image build -b docker --check -t "$NAME" ctx
	assert_success
	jq_true '.present == true' <<<"$output"
}

@test "a name with a path and a registry host: built, found again, and --check finds it" {
	NAME=localhost:5000/sbxt/ns$BATS_TEST_NUMBER
	run --separate-stderr sbx-image build -b docker -q -t "$NAME" ctx
	assert_success
	[ -z "$stderr" ]
	img=$(jq_str .image <<<"$output")
	[[ $img == "$NAME-"???????? ]]
	run --separate-stderr sbx-image build -b docker -t "$NAME" ctx
	assert_success
	jq_true '.built == false' <<<"$output"
	run --separate-stderr sbx-image build -b docker -c -t "$NAME" ctx
	assert_success
	jq_true '.present == true' <<<"$output"
	docker rmi -f "$img" >/dev/null
}

@test "a Dockerfile outside the context: the context's .dockerignore kept, the Dockerfile's name added, as docker build does" {
	mv ctx/Dockerfile elsewhere.Dockerfile
	echo 'src/skip.txt' >ctx/.dockerignore
	echo s >ctx/src/skip.txt
	run --separate-stderr sbx-image build -b docker -t "$NAME" \
	    -f elsewhere.Dockerfile ctx
	assert_success
	img=$(jq_str .image <<<"$output")
	run --separate-stderr docker run --rm --network none "$img" \
	    sh -c 'ls -a /app /app/src; cat /app/.dockerignore'
	assert_success
	h=$(sbx-image hash -f elsewhere.Dockerfile ctx | jq_str .hash)
	assert_output $'/app:\n.\n..\n.dockerignore\nsrc\n\n/app/src:\n.\n..\na.txt\nsrc/skip.txt\n\n'".dockerfile.sbx-$h"
}

@test ".dockerignore is honoured in what is sent, the Dockerfile is sent even when ignored" {
	mkdir ctx/secret ctx/.git
	echo s >ctx/secret/key
	echo g >ctx/.git/HEAD
	printf 'secret\nDockerfile\n' >ctx/.dockerignore
	run --separate-stderr sbx-image build -b docker -t "$NAME" ctx
	assert_success
	img=$(jq_str .image <<<"$output")
	run --separate-stderr docker run --rm --network none "$img" ls -a /app
	assert_success
	assert_output $'.\n..\n.dockerignore\nsrc'
}

@test "a Dockerfile outside the context (-f) and --build-arg" {
	mv ctx/Dockerfile elsewhere.Dockerfile
	export FROM_ENV=env-value
	run --separate-stderr sbx-image build -b docker -t "$NAME" \
	    -f elsewhere.Dockerfile --build-arg GREETING=hi ctx
	assert_success
	img=$(jq_str .image <<<"$output")
	[ "$(cat_in "$img" /greeting)" = hi ]
	# The Dockerfile went in under a name of its own, which the engine
	# took out (a .dockerignore the context had not, with it).
	run --separate-stderr docker run --rm --network none "$img" ls -a /app
	assert_output $'.\n..\nsrc'
	echo 'ARG FROM_ENV' >>elsewhere.Dockerfile
	echo 'RUN echo "$FROM_ENV" >/env' >>elsewhere.Dockerfile
	run --separate-stderr sbx-image build -b docker -t "$NAME" \
	    -f elsewhere.Dockerfile --build-arg FROM_ENV ctx
	assert_success
	[ "$(cat_in "$(jq_str .image <<<"$output")" /env)" = env-value ]
}

@test "a failing step is a one-line error, exit 1, and no image" {
	echo 'RUN echo boom >&2; exit 7' >>ctx/Dockerfile
	h=$(sbx-image hash ctx | jq_str .hash)
	run --separate-stderr sbx-image build -b docker -t "$NAME" ctx
	assert_failure 1
	[ -z "$output" ]
	last=$(tail -n 1 <<<"$stderr")
	[[ $last == "sbx-image: build of '$NAME-$h' failed: "*"returned a non-zero code: 7" ]]
	run docker image inspect "$NAME-$h"
	assert_failure
}

@test "an unknown base image fails without pulling from the internet" {
	printf 'FROM sbx-no-such-image-%s:latest\n' "$RANDOM" >ctx/Dockerfile
	run --separate-stderr sbx-image build -b docker -t "$NAME" ctx
	assert_failure 1
	[ -z "$output" ]
	[[ $(tail -n 1 <<<"$stderr") == "sbx-image: build of '$NAME-"*"' failed: "* ]]
}

@test "no engine answering is exit 1, naming it" {
	export DOCKER_HOST=unix://$BATS_TEST_TMPDIR/none.sock
	run --separate-stderr sbx-image build -b docker -t "$NAME" ctx
	assert_failure 1
	[ -z "$output" ]
	[[ $stderr == "sbx-image: "*"none.sock"* ]]
}

# --- import, export and pull through the engine ------------------------

@test "docker save -> sbx-image import -> a local sandbox; export -> docker load -> docker run" {
	export SBX_IMAGE_DIR=$BATS_TEST_TMPDIR/store
	docker save -o saved.tar "$SBX_TEST_IMAGE"
	run --separate-stderr sbx-image import saved.tar
	assert_success
	jq_true '.image == "docker.io/library/sbx-test-busybox:latest" and
	    (.format == "docker" or .format == "oci")' <<<"$output"
	dg=$(jq_str .digest <<<"$output")
	run --separate-stderr sbx-create -b local -s s.json \
	    --image sbx-test-busybox
	assert_success
	run --separate-stderr sbx-exec -s s.json -- sh -c 'echo in; ls /usr/bin/busybox'
	assert_success
	assert_output "in
/usr/bin/busybox"
	sbx-kill -s s.json >/dev/null
	# Back into the engine under another name, and out again: the same
	# manifest.
	sbx-image import -t "$NAME:v1" saved.tar >/dev/null
	sbx-image export -o out.tar "$NAME:v1"
	run docker load -i out.tar
	assert_success
	assert_output --partial "$NAME:v1"
	run docker run --rm --network none "$NAME:v1" sh -c 'echo ran'
	assert_success
	assert_output ran
	sbx-image rm "$NAME:v1" >/dev/null
	run --separate-stderr sbx-image import out.tar
	assert_success
	jq_true --arg d "$dg" '.digest == $d' <<<"$output"
}

@test "pull -b docker: the engine pulls from the loopback registry, progress on stderr, -q quiet" {
	sbx_registry_start || return 1
	# An image made of the test image's tree, pushed by the tests.
	cid=$(docker create "$SBX_TEST_IMAGE" true)
	mkdir root
	docker export "$cid" | tar -C root -xf -
	docker rm "$cid" >/dev/null
	dg=$(sbx_registry_push_image t/pulled v1 '{"Cmd":["/bin/sh"]}' root)
	R=$SBX_TEST_REGISTRY
	run --separate-stderr sbx-image pull -b docker "$R/t/pulled:v1"
	sbx_registry_stop
	assert_success
	jq_true --arg d "$dg" --arg i "$R/t/pulled:v1" \
	    '.image == $i and .backend == "docker" and .digest == $d and
	    (.id | startswith("sha256:"))' <<<"$output"
	[[ $stderr == *"Pull complete"* ]]
	run docker run --rm --network none "$R/t/pulled:v1" sh -c 'echo ran'
	assert_success
	assert_output ran
	docker rmi -f "$R/t/pulled:v1" >/dev/null
}

@test "pull -b docker: docker's config.json credentials go to the engine as X-Registry-Auth; without them, exit 5" {
	sbx_registry_start user s3cret-pw || return 1
	cid=$(docker create "$SBX_TEST_IMAGE" true)
	mkdir root
	docker export "$cid" | tar -C root -xf -
	docker rm "$cid" >/dev/null
	sbx_registry_push_image t/priv v1 '{}' root >/dev/null
	export HOME=$BATS_TEST_TMPDIR XDG_CONFIG_HOME=$BATS_TEST_TMPDIR/config
	run --separate-stderr sbx-image pull -b docker "$SBX_TEST_REGISTRY/t/priv:v1"
	assert_failure 5
	[ -z "$output" ]
	[[ ${stderr_lines[-1]} == "sbx-image: the engine cannot pull '$SBX_TEST_REGISTRY/t/priv:v1': "*"no basic auth credentials"* ]]
	mkdir -p "$HOME/.docker"
	printf '{"auths":{"%s":{"auth":"%s"}}}' "$SBX_TEST_REGISTRY" \
	    "$(printf user:s3cret-pw | base64)" >"$HOME/.docker/config.json"
	R=$SBX_TEST_REGISTRY
	run --separate-stderr sbx-image pull -q -b docker "$R/t/priv:v1"
	sbx_registry_stop
	assert_success
	[ -z "$stderr" ]
	jq_true '.backend == "docker" and (.digest | startswith("sha256:"))' \
	    <<<"$output"
	# The password is nowhere the engine writes it down.
	run grep -q s3cret-pw "$SBX_TEST_DOCKERD_DIR/dockerd.log"
	assert_failure 1
	docker rmi -f "$R/t/priv:v1" >/dev/null
}

@test "sbx-create -b docker --build: the context's image built when missing, the sandbox made of it; again, nothing built" {
	h=$(sbx-image hash ctx | jq_str .hash)
	run --separate-stderr sbx-create -b docker --build -t "$NAME" -C ctx -s s.json
	assert_success
	[[ $stderr == *"Step 1/4 : FROM $SBX_TEST_IMAGE"* ]]
	run sbx-exec -s s.json -- cat /app/src/a.txt /greeting
	assert_success
	assert_output $'hello\nnone'
	run jq -r .template s.json
	assert_output "$NAME-$h"
	sbx-kill -q -s s.json >/dev/null
	run --separate-stderr sbx-create -b docker --build -t "$NAME" -C ctx -s s.json
	assert_success
	[[ $stderr != *"Step 1/4"* ]]
	sbx-kill -q -s s.json >/dev/null
}
