#!/usr/bin/env bats
# sbx-create --start, --ready, --ready-timeout, --post-create, --no-start on
# the backend under test, and the image's Entrypoint and Cmd as the default
# start command (local and qemu: an image of the test registry; docker: an
# image of the test engine).

load conformance
load ../lib/registry

setup_file() {
	conf_setup_file || return 1
	case $BACKEND in
	local | qemu)
		sbx_registry_start || return 1
		# qemu's sandboxes are of the suite's store (setup_suite.bash).
		[ "$BACKEND" = qemu ] ||
			export SBX_IMAGE_DIR=$BATS_FILE_TMPDIR/store
		local r=$BATS_FILE_TMPDIR/root
		sbx_busybox_root "$r" || return 1
		mkdir -p "$r"/workspace
		sbx_registry_push_image t/start v1 '{"Env":["PATH=/usr/bin:/bin"],
		    "Entrypoint":["sh","-c"],
		    "Cmd":["echo image-start >/tmp/image-start; exec sleep 1000"]}' \
		    "$r" >/dev/null || return 1
		sbx-image pull "$SBX_TEST_REGISTRY/t/start:v1" >/dev/null ||
			return 1
		export IMAGE=$SBX_TEST_REGISTRY/t/start:v1
		# A shell alone as its Cmd, as Debian's and busybox's images.
		sbx_registry_push_image t/start sh '{"Env":["PATH=/usr/bin:/bin"],
		    "Cmd":["/bin/sh"]}' "$r" >/dev/null || return 1
		sbx-image pull "$SBX_TEST_REGISTRY/t/start:sh" >/dev/null ||
			return 1
		export SH_IMAGE=$SBX_TEST_REGISTRY/t/start:sh
		;;
	docker)
		local d=$BATS_FILE_TMPDIR/ctx
		mkdir -p "$d"
		printf '%s\n' "FROM $SBX_TEST_IMAGE" 'ENTRYPOINT ["sh", "-c"]' \
		    'CMD ["echo image-start >/tmp/image-start; exec sleep 1000"]' \
		    >"$d/Dockerfile"
		DOCKER_BUILDKIT=0 docker build -q -t sbx-test-start:latest "$d" \
		    >/dev/null || return 1
		export IMAGE=sbx-test-start:latest
		# The test image's Cmd is ["/bin/sh"].
		export SH_IMAGE=$SBX_TEST_IMAGE
		;;
	esac
}

teardown_file() {
	[ "$BACKEND" != local ] && [ "$BACKEND" != qemu ] || sbx_registry_stop
	conf_teardown_file
}

setup() { conf_setup; }
teardown() { sbx-ls -j 2>/dev/null | sbx-kill -q >/dev/null 2>&1 || true; }

# The sandboxes the backend lists with label t=$1.
labelled() {
	sbx-ls -j -l "t=$1" | wc -l
}

@test "$B: sbx-create --start runs a shell command in the background for the sandbox's life" {
	run --separate-stderr create -s s.json --start \
	    'echo $$ >/tmp/start.pid; exec sleep 1000' --ready 'test -s /tmp/start.pid'
	assert_success
	[ -z "$stderr" ]
	[ "$(jq -r .id <<<"$output")" = "$(sid)" ]
	# Still running after sbx-create (and the exec that made it) ended.
	run sx sh -c 'kill -0 "$(cat /tmp/start.pid)" && echo alive'
	assert_success
	assert_output alive
	assert_equal "$(jq -c .start s.json)" \
	    '{"cmd":"echo $$ >/tmp/start.pid; exec sleep 1000","ready":"test -s /tmp/start.pid","ready_timeout":60}'
}

@test "$B: the start command's output is in sbx-logs, as a detached command's" {
	create -s s.json --start 'echo from-start; echo to-stderr >&2; touch /tmp/said; exec sleep 1000' \
	    --ready 'test -f /tmp/said' >/dev/null
	run --separate-stderr sbx-logs -s s.json
	assert_success
	[ "${#lines[@]}" -eq 1 ]
	jq_true '.start == true and .detached == true and .argv[0:2] == ["sh", "-c"] and
	    (.argv[2] | startswith("echo from-start"))' <<<"${lines[0]}"
	cid=$(jq_str .id <<<"${lines[0]}")
	run --separate-stderr sbx-logs -s s.json -o "$cid"
	assert_success
	assert_output "from-start
to-stderr"
}

@test "$B: sbx-create --ready waits until the ready command succeeds" {
	# Ready only a second after it starts: sbx-create returns after that.
	create -s s.json --start 'sleep 1; echo up >/tmp/ready; exec sleep 1000' \
	    --ready 'test -s /tmp/ready' >/dev/null
	run sx cat /tmp/ready
	assert_success
	assert_output up
}

@test "$B: sbx-create --ready that never succeeds: exit 1, one line, no sandbox left" {
	run --separate-stderr create -s s.json -l t=ready-timeout \
	    --start 'exec sleep 1000' --ready 'exit 3' --ready-timeout 1s
	# Its message, should it fail otherwise (it did once, exit 3, in CI).
	[ "$status" -eq 1 ] || fail "exit $status: $stderr"
	assert_output ''
	assert_equal "$stderr" "sbx-create: the ready command did not succeed within 1s (its last exit status 3)"
	[ ! -e s.json ]
	[ "$(labelled ready-timeout)" -eq 0 ]
}

@test "$B: sbx-create --post-create runs once, after the sandbox is ready" {
	create -s s.json --start 'sleep 1; touch /tmp/up; exec sleep 1000' \
	    --ready 'test -f /tmp/up' \
	    --post-create 'test -f /tmp/up && echo post >>/tmp/post' >/dev/null
	run sx cat /tmp/post
	assert_success
	assert_output post
	# Nothing runs it again: a reuse of the living sandbox neither.
	run --separate-stderr create -s s.json --reuse
	assert_success
	run sx cat /tmp/post
	assert_output post
	[ "$(jq -r .start.post_create s.json)" = 'test -f /tmp/up && echo post >>/tmp/post' ]
}

@test "$B: sbx-create --post-create that fails: exit 1, its output on stderr, no sandbox left" {
	run --separate-stderr create -s s.json -l t=post-fails \
	    --post-create 'echo said-out; echo said-err >&2; exit 4'
	assert_failure 1
	assert_output ''
	assert_equal "$stderr" "said-out
said-err
sbx-create: the post-create command failed (exit status 4)"
	[ ! -e s.json ]
	[ "$(labelled post-fails)" -eq 0 ]
}

@test "$B: sbx-create refuses --start with --no-start, an empty command and a bad --ready-timeout, with nothing made" {
	for a in "--start x --no-start" "--ready-timeout 0" "--ready-timeout soon"; do
		# shellcheck disable=SC2086
		run --separate-stderr create -s s.json -l t=bad-start $a
		assert_failure 2
		assert_output ''
		[ "${#stderr_lines[@]}" -ge 1 ]
		[[ "${stderr_lines[0]}" == sbx-create:* ]]
	done
	run --separate-stderr create -s s.json -l t=bad-start --start ''
	assert_failure 2
	[[ "${stderr_lines[0]}" == "sbx-create: an empty command for --start" ]]
	[ ! -e s.json ]
	[ "$(labelled bad-start)" -eq 0 ]
}

@test "$B: the image's Entrypoint and Cmd are the default start command; --no-start skips it; --start replaces it" {
	if [ "$BACKEND" = e2b ] || [ "$BACKEND" = daytona ]; then
		# A template's start command is the server's to run: the client
		# starts none of its own.
		create -s s.json >/dev/null
		run --separate-stderr sbx-logs -s s.json
		assert_success
		assert_output ''
		return 0
	fi
	sbx-create -b "$BACKEND" -i "$IMAGE" -s s.json >/dev/null
	run sx sh -c 'for i in $(seq 100); do [ -s /tmp/image-start ] && break; sleep 0.1; done; cat /tmp/image-start'
	assert_success
	assert_output image-start
	run --separate-stderr sbx-logs -s s.json
	jq_true '.start == true and .argv == ["sh", "-c",
	    "echo image-start >/tmp/image-start; exec sleep 1000"]' <<<"${lines[0]}"
	sbx-create -b "$BACKEND" -i "$IMAGE" -s n.json --no-start >/dev/null
	run --separate-stderr sbx-logs -s n.json
	assert_success
	assert_output ''
	run sbx-exec -s n.json -- sh -c 'sleep 1; ls /tmp/image-start'
	assert_failure
	sbx-create -b "$BACKEND" -i "$IMAGE" -s o.json --start 'touch /tmp/own; exec sleep 1000' \
	    --ready 'test -f /tmp/own' >/dev/null
	run sbx-exec -s o.json -- sh -c 'sleep 1; ls /tmp/image-start'
	assert_failure
}

@test "$B: a suspended sandbox's start command goes on after resume; after a stop it is started again" {
	# Each start says so once (/tmp/up), to the ready command alone, which
	# takes it: ready is ready again only after the next start.
	create -s s.json --start 'echo $$ >/tmp/pid; echo x >>starts; touch /tmp/up; exec sleep 1000' \
	    --ready 'rm /tmp/up 2>/dev/null' --post-create 'echo p >>posts' >/dev/null
	if has_cap suspend; then
		sbx-pause -m suspend -s s.json >/dev/null
		sbx-pause -r -s s.json >/dev/null
		run sx sh -c 'kill -0 "$(cat /tmp/pid)" && cat starts'
		assert_success
		assert_output x
	fi
	if ! has_cap stop; then
		return 0
	fi
	sbx-pause -m stop -s s.json >/dev/null
	sbx-pause -r -s s.json >/dev/null
	# Started again (its ready command awaited), its post-create not.
	run sx sh -c 'cat starts posts'
	assert_output "x
x
p"
}

@test "$B: an image whose Cmd is a shell alone has no default start command" {
	[ "$BACKEND" != e2b ] && [ "$BACKEND" != daytona ] || return 0
	sbx-create -b "$BACKEND" -i "$SH_IMAGE" -s s.json >/dev/null
	run --separate-stderr sbx-logs -s s.json
	assert_success
	assert_output ''
}
