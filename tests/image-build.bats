#!/usr/bin/env bats
# sbx-image build on the local backend (the local builder) and
# sbx-create --build: Dockerfiles over a busybox image the tests push into
# a registry on loopback (tests/lib/registry.bash), each step a layer of
# the store, the cache, multi-stage builds, the config, and what is
# refused with its line and exit code, nothing stored.
load lib/helper
load lib/registry

setup_file() {
	sbx_setup_file
	sbx_registry_start || return 1
	local r=$BATS_FILE_TMPDIR/base
	sbx_busybox_root "$r" || return 1
	mkdir -p "$r"/home/app
	printf 'root:x:0:0:root:/root:/bin/sh\napp:x:1000:1000::/home/app:/bin/sh\n' \
	    >"$r/etc/passwd"
	printf 'root:x:0:\napp:x:1000:\nstaff:x:50:\n' >"$r/etc/group"
	chown 1000:1000 "$r/home/app"
	echo base >"$r/etc/base-file"
	sbx_registry_push_image t/base v1 \
	    '{"Env":["PATH=/usr/bin:/bin"],"Cmd":["sh"]}' "$r" >/dev/null ||
	    return 1
}

teardown_file() {
	sbx_registry_stop
	sbx_teardown_file
}

setup() {
	sbx_setup
	unset SBX_BACKEND
	export SBX_IMAGE_DIR=$BATS_TEST_TMPDIR/store
	export XDG_CONFIG_HOME=$BATS_TEST_TMPDIR/config HOME=$BATS_TEST_TMPDIR
	BASE=$SBX_TEST_REGISTRY/t/base:v1
	mkdir ctx
}

teardown() {
	if [ -n "${pid:-}" ]; then
		kill "$pid" 2>/dev/null || true
	fi
	if [ -s "$BATS_TEST_TMPDIR/s.json" ]; then
		sbx-kill -q -s "$BATS_TEST_TMPDIR/s.json" >/dev/null 2>&1 || true
	fi
}

# The images of the store named $1-*: none printed when there is none.
stored() {
	sbx-image ls | jq -r --arg n "$1-" \
	    'select(.image | startswith($n)) | .image'
}

@test "build: each step a line on stderr, the image NAME-HASH in the store; a sandbox of it sees what RUN and COPY made" {
	echo hello >ctx/a.txt
	mkdir ctx/sub
	echo s >ctx/sub/s.txt
	cat >ctx/Dockerfile <<EOF
FROM $BASE
ENV FOO=bar
WORKDIR /app
COPY a.txt ./
COPY sub /app/sub/
RUN echo "built-\$FOO" >/app/out && cat /etc/base-file
EOF
	run --separate-stderr sbx-image build -t myimg ctx
	assert_success
	hash=$(sbx-image hash ctx | jq_str .hash)
	jq_true ".image == \"myimg-$hash\" and .hash == \"$hash\" and
	    .backend == \"local\" and .built == true" <<<"$output"
	assert_equal "$(grep -c '^step [0-9]/6: ' <<<"$stderr")" 6
	grep -qx 'step 6/6: RUN echo "built-$FOO" >/app/out && cat /etc/base-file' \
	    <<<"$stderr"
	grep -qx base <<<"$stderr" # the RUN's own output
	run --separate-stderr sbx-image inspect "myimg-$hash"
	assert_success
	jq_true '(.layers | length) == 4' <<<"$output"
	run --separate-stderr sbx-create -s s.json --image "myimg-$hash"
	assert_success
	run --separate-stderr sbx-exec -s s.json -- sh -c \
	    'cat /app/out /app/a.txt /app/sub/s.txt; pwd'
	assert_success
	assert_output "built-bar
hello
s
/app"
}

@test "build: an unchanged context is the image already built, no step runs; an edited line reuses the steps before it" {
	echo one >ctx/f
	cat >ctx/Dockerfile <<EOF
FROM $BASE
RUN echo first >/first
COPY f /f
RUN echo second >/second
EOF
	run --separate-stderr sbx-image build -t c ctx
	assert_success
	jq_true '.built == true' <<<"$output"
	run --separate-stderr sbx-image build -t c ctx
	assert_success
	jq_true '.built == false' <<<"$output"
	assert_equal "$stderr" ""
	# The last line edited: the two before it come from the cache.
	sed -i 's/second/SECOND/' ctx/Dockerfile
	run --separate-stderr sbx-image build -t c ctx
	assert_success
	jq_true '.built == true' <<<"$output"
	grep -qx 'step 2/4: RUN echo first >/first (cached)' <<<"$stderr"
	grep -qx 'step 3/4: COPY f /f (cached)' <<<"$stderr"
	grep -qx 'step 4/4: RUN echo SECOND >/second' <<<"$stderr"
	# A copied file edited: its COPY runs again, and what follows.
	echo two >ctx/f
	run --separate-stderr sbx-image build -t c ctx
	assert_success
	grep -qx 'step 2/4: RUN echo first >/first (cached)' <<<"$stderr"
	grep -qx 'step 3/4: COPY f /f' <<<"$stderr"
	root=$(sbx-image inspect "$(jq_str .image <<<"$output")" | jq_str .rootfs)
	assert_equal "$(cat "$root/f")" two
}

@test "build: multi-stage, COPY --from a stage by name and by number, FROM an earlier stage" {
	cat >ctx/Dockerfile <<EOF
FROM $BASE AS build
RUN echo artifact >/artifact && echo junk >/junk
FROM build AS second
RUN echo more >/more
FROM $BASE
COPY --from=build /artifact /out/a
COPY --from=1 /more /out/
COPY --from=$BASE /etc/passwd /out/passwd
RUN ["/bin/sh", "-c", "echo exec-form >/out/exec"]
EOF
	run --separate-stderr sbx-image build -t ms ctx
	assert_success
	root=$(sbx-image inspect "$(jq_str .image <<<"$output")" | jq_str .rootfs)
	assert_equal "$(cat "$root/out/a" "$root/out/more" "$root/out/exec")" \
	    "artifact
more
exec-form"
	cmp "$root/out/passwd" "$BATS_FILE_TMPDIR/base/etc/passwd"
	[ ! -e "$root/junk" ]
	[ ! -e "$root/artifact" ]
}

@test "build: FROM scratch, a COPY its one layer" {
	echo only >ctx/only
	printf 'FROM scratch\nCOPY only /only\nCMD ["/only"]\n' >ctx/Dockerfile
	run --separate-stderr sbx-image build -t scr ctx
	assert_success
	run --separate-stderr sbx-image inspect "$(jq_str .image <<<"$output")"
	assert_success
	jq_true '(.layers | length) == 1 and .config.Cmd == ["/only"]' \
	    <<<"$output"
	root=$(jq_str .rootfs <<<"$output")
	assert_equal "$(ls -A "$root")" only
}

@test "build: ENV, WORKDIR, USER, LABEL, EXPOSE, SHELL, CMD and ENTRYPOINT in the image config" {
	cat >ctx/Dockerfile <<EOF
FROM $BASE
ENV A=1 B="two words"
ENV C \$A-x
WORKDIR /w
WORKDIR sub
LABEL org.x=y "k 2"=v
EXPOSE 8080 53/udp
SHELL ["/bin/sh", "-ec"]
USER app
RUN id -u >/tmp/uid && pwd >/tmp/pwd
CMD echo hi
ENTRYPOINT ["/bin/sh", "-c"]
EOF
	run --separate-stderr sbx-image build -t cfg ctx
	assert_success
	img=$(jq_str .image <<<"$output")
	run --separate-stderr sbx-image inspect "$img"
	assert_success
	jq_true '.config.Env == ["PATH=/usr/bin:/bin","A=1","B=two words","C=1-x"]
	    and .config.WorkingDir == "/w/sub" and .config.User == "app"
	    and .config.Labels == {"org.x":"y","k 2":"v"}
	    and .config.ExposedPorts == {"8080/tcp":{},"53/udp":{}}
	    and .config.Shell == ["/bin/sh","-ec"]
	    and .config.Entrypoint == ["/bin/sh","-c"]
	    and .config.Cmd == ["/bin/sh","-ec","echo hi"]' <<<"$output"
	root=$(jq_str .rootfs <<<"$output")
	# The RUN ran as USER, in WORKDIR (made for it).
	assert_equal "$(cat "$root/tmp/uid" "$root/tmp/pwd")" "1000
/w/sub"
}

@test "build: CMD in shell form goes through SHELL; history records each step; ENTRYPOINT drops the base's CMD" {
	cat >ctx/Dockerfile <<EOF
FROM $BASE
CMD echo hi
EOF
	run --separate-stderr sbx-image build -t cmd ctx
	assert_success
	cfg=$(sbx-image inspect "$(jq_str .image <<<"$output")" | jq_str .config_digest)
	jq_true '.config.Cmd == ["/bin/sh","-c","echo hi"] and
	    (.history | map(.created_by) | index("CMD echo hi")) != null' \
	    <"$SBX_IMAGE_DIR/blobs/sha256/${cfg#sha256:}"
	# An ENTRYPOINT drops the base image's CMD (["sh"]).
	printf 'FROM %s\nENTRYPOINT ["/bin/cat"]\n' "$BASE" >ctx/Dockerfile
	run --separate-stderr sbx-image build -t cmd ctx
	assert_success
	run --separate-stderr sbx-image inspect "$(jq_str .image <<<"$output")"
	jq_true '.config.Entrypoint == ["/bin/cat"] and
	    (.config | has("Cmd") | not)' <<<"$output"
}

@test "build: ARG with its default, --build-arg over it, ARG before FROM; a changed argument is a new step" {
	cat >ctx/Dockerfile <<'EOF'
ARG TAG=v1
FROM ${REG}/t/base:${TAG}
ARG WHO=world
ARG NODEF
RUN echo "hello $WHO [$NODEF]" >/greeting
EOF
	sed -i "s|\${REG}|$SBX_TEST_REGISTRY|" ctx/Dockerfile
	run --separate-stderr sbx-image build -t arg ctx
	assert_success
	root=$(sbx-image inspect "$(jq_str .image <<<"$output")" | jq_str .rootfs)
	assert_equal "$(cat "$root/greeting")" "hello world []"
	sbx-image rm "$(jq_str .image <<<"$output")" >/dev/null
	run --separate-stderr sbx-image build -t arg -a WHO=you -a NODEF=x ctx
	assert_success
	grep -q 'RUN echo "hello $WHO \[$NODEF\]" >/greeting$' <<<"$stderr"
	root=$(sbx-image inspect "$(jq_str .image <<<"$output")" | jq_str .rootfs)
	assert_equal "$(cat "$root/greeting")" "hello you [x]"
	# The argument is not in the image's Env.
	run --separate-stderr sbx-image inspect "$(jq_str .image <<<"$output")"
	jq_true '.config.Env == ["PATH=/usr/bin:/bin"]' <<<"$output"
}

@test "build: ADD of a local tar unpacks it; COPY --chown and --chmod; .dockerignore is honoured" {
	mkdir t
	echo in-tar >t/f
	tar -C t -czf ctx/data.tgz .
	echo own >ctx/own.txt
	echo secret >ctx/ignored.txt
	printf 'ignored.txt\n' >ctx/.dockerignore
	cat >ctx/Dockerfile <<EOF
FROM $BASE
ADD data.tgz /opt/
COPY --chown=app:staff --chmod=640 own.txt /own.txt
COPY --chown=1000 . /ctx/
EOF
	run --separate-stderr sbx-image build -t add ctx
	assert_success
	root=$(sbx-image inspect "$(jq_str .image <<<"$output")" | jq_str .rootfs)
	assert_equal "$(cat "$root/opt/f")" in-tar
	assert_equal "$(stat -c '%u:%g %a' "$root/own.txt")" "1000:50 640"
	assert_equal "$(stat -c '%u:%g' "$root/ctx/own.txt")" "1000:1000"
	[ -f "$root/ctx/data.tgz" ] # COPY does not unpack
	[ ! -e "$root/ctx/ignored.txt" ]
}

@test "build: a file a later RUN deletes is absent (an OCI whiteout in its layer), an emptied directory opaque" {
	cat >ctx/Dockerfile <<EOF
FROM $BASE
RUN mkdir -p /d/sub /d/opq && echo x >/d/sub/x && echo y >/d/y && echo o >/d/opq/old
RUN rm -r /d/y /etc/base-file /d/opq && mkdir /d/opq && echo n >/d/opq/new
EOF
	run --separate-stderr sbx-image build -t wh ctx
	assert_success
	run --separate-stderr sbx-image inspect "$(jq_str .image <<<"$output")"
	root=$(jq_str .rootfs <<<"$output")
	[ -f "$root/d/sub/x" ]
	[ ! -e "$root/d/y" ]
	[ ! -e "$root/etc/base-file" ]
	[ -f "$root/d/opq/new" ]
	[ ! -e "$root/d/opq/old" ]
	top=$(jq -r '.layers[-1]' <<<"$output")
	run tar -tf "$SBX_IMAGE_DIR/blobs/sha256/${top#sha256:}"
	assert_success
	assert_line d/.wh.y
	assert_line etc/.wh.base-file
	assert_line d/opq/.wh..wh..opq
}

@test "prune: the build cache stays (a failed build's steps too), its broken entries and leftovers go; --all drops it, the images it built stay whole" {
	B=$SBX_IMAGE_DIR/build
	printf 'FROM %s\nRUN echo ok >/ok\nRUN exit 7\n' "$BASE" >ctx/Dockerfile
	run --separate-stderr sbx-image build -t pr ctx
	assert_failure 1
	# Only the cache needs the failed build's step: prune keeps it.
	run --separate-stderr sbx-image prune
	assert_success
	jq_true '.cache == 0 and .layers == 0' <<<"$output"
	sed -i 's/exit 7/true/' ctx/Dockerfile
	run --separate-stderr sbx-image build -t pr ctx
	assert_success
	grep -qx 'step 2/3: RUN echo ok >/ok (cached)' <<<"$stderr"
	img=$(jq_str .image <<<"$output")
	# A killed build's step, a layer no entry names, an entry whose
	# layer is gone.
	zeros=$(printf '0%.0s' {1..64})
	mkdir -p "$B/tmp/killed/upper" "$B/layers/$zeros"
	echo data >"$B/layers/$zeros/f"
	printf '{"digest":"sha256:%s","size":1}\n' "$(printf 'e%.0s' {1..64})" \
	    >"$B/cache/$(printf 'f%.0s' {1..64})"
	run --separate-stderr sbx-image prune
	assert_success
	jq_true '.cache == 1 and .layers == 1 and .freed > 0' <<<"$output"
	[ ! -e "$B/tmp/killed" ]
	[ ! -e "$B/layers/$zeros" ]
	assert_equal "$(ls "$B/cache" | wc -l)" 2
	assert_equal "$(ls "$B/layers" | wc -l)" 2
	# --all: the whole cache; the image stays whole.
	run --separate-stderr sbx-image prune --all
	assert_success
	jq_true '.cache == 2 and .layers == 2 and .blobs == 0 and .freed > 0' \
	    <<<"$output"
	assert_equal "$(ls -A "$B/cache" "$B/layers" | grep -cv ':$\|^$')" 0
	root=$(sbx-image inspect "$img" | jq_str .rootfs)
	assert_equal "$(cat "$root/ok")" ok
	# Nothing cached now: once the image goes, every step runs again.
	sbx-image rm -q "$img"
	run --separate-stderr sbx-image build -t pr ctx
	assert_success
	run grep -c cached <<<"$stderr"
	assert_output 0
	run --separate-stderr sbx-image ls --all
	assert_failure 2
	assert_equal "$stderr" "sbx-image: --all is for sbx-image prune"
}

@test "prune: while a build runs, its steps and the blobs stay" {
	printf 'FROM %s\nRUN sleep 4; echo done >/done\n' "$BASE" >ctx/Dockerfile
	sbx-image build -t busy ctx >out.json 2>err.txt &
	pid=$!
	for _ in $(seq 100); do
		grep -q 'step 2/2' err.txt && break
		sleep 0.1
	done
	run --separate-stderr sbx-image prune --all
	kill -0 "$pid" # the build is still running
	wait "$pid"
	assert_success
	jq_true '.build_running == true and .blobs == 0' <<<"$output"
	root=$(sbx-image inspect "$(jq_str .image <out.json)" | jq_str .rootfs)
	assert_equal "$(cat "$root/done")" done
}

@test "build: a RUN has no network, only its own loopback" {
	cat >ctx/Dockerfile <<EOF
FROM $BASE
RUN cat /proc/net/dev >/netdev
EOF
	run --separate-stderr sbx-image build -t net ctx
	assert_success
	root=$(sbx-image inspect "$(jq_str .image <<<"$output")" | jq_str .rootfs)
	run grep -c ':' "$root/netdev"
	assert_output 1
	grep -q 'lo:' "$root/netdev"
}

@test "build: a RUN has a sandbox's seccomp filter: a blocked syscall fails as in a sandbox; the rest works, as USER too" {
	# unshare(CLONE_NEWUSER) needs no capability: only the filter
	# refuses it.
	printf 'FROM %s\nRUN unshare -U true\n' "$BASE" >ctx/Dockerfile
	run --separate-stderr sbx-image build -t sec ctx
	assert_failure 1
	grep -q "unshare.*Operation not permitted" <<<"$stderr"
	grep -qx "sbx-image: step 2/2: 'RUN unshare -U true' failed: exit status 1" \
	    <<<"$stderr"
	assert_equal "$(stored sec)" ""
	# What the filter leaves works, as USER too.
	printf 'FROM %s\nUSER app\nRUN id -u >/tmp/uid\n' "$BASE" >ctx/Dockerfile
	run --separate-stderr sbx-image build -t sec ctx
	assert_success
}

@test "build --check: exit 3 while missing, 0 once built; nothing built by it" {
	printf 'FROM %s\nRUN true\n' "$BASE" >ctx/Dockerfile
	run --separate-stderr sbx-image build --check -t chk ctx
	assert_failure 3
	jq_true '.present == false' <<<"$output"
	assert_equal "$(stored chk)" ""
	sbx-image build -q -t chk ctx >/dev/null
	run --separate-stderr sbx-image build --check -t chk ctx
	assert_success
	jq_true '.present == true' <<<"$output"
}

@test "build: a failing RUN is exit 1 naming the step and its status; nothing stored under NAME-HASH" {
	printf 'FROM %s\nRUN echo ok\nRUN echo out; exit 7\n' "$BASE" \
	    >ctx/Dockerfile
	run --separate-stderr sbx-image build -t fail ctx
	assert_failure 1
	assert_output ""
	grep -qx "sbx-image: step 3/3: 'RUN echo out; exit 7' failed: exit status 7" \
	    <<<"$stderr"
	grep -qx out <<<"$stderr"
	assert_equal "$(stored fail)" ""
}

@test "build: a missing base image is exit 3, nothing stored" {
	printf 'FROM %s/t/nope:v1\nRUN true\n' "$SBX_TEST_REGISTRY" \
	    >ctx/Dockerfile
	run --separate-stderr sbx-image build -t nobase ctx
	assert_failure 3
	assert_output ""
	[ -n "$stderr" ]
	assert_equal "$(stored nobase)" ""
}

@test "build: what is not supported and syntax errors are exit 2 with the line; nothing stored" {
	local df want
	while IFS='|' read -r df want; do
		printf "$df\n" "$BASE" >ctx/Dockerfile
		run --separate-stderr sbx-image build -t bad ctx
		[ "$status" -eq 2 ] || fail "'$df': exit $status: $stderr"
		assert_output ""
		[[ $stderr == *"sbx-image: $want"* ]] ||
			fail "'$df': '$stderr', want '$want'"
		assert_equal "$(stored bad)" ""
	done <<'EOF'
FROM %s\nHEALTHCHECK CMD true|Dockerfile:2: HEALTHCHECK is not supported
FROM %s\n\nONBUILD RUN true|Dockerfile:3: ONBUILD is not supported
FROM %s\nSTOPSIGNAL 9|Dockerfile:2: STOPSIGNAL is not supported
FROM %s\nVOLUME /v|Dockerfile:2: VOLUME is not supported
FROM %s\nRUN --mount=type=cache true|Dockerfile:2: RUN --mount=type=cache is not supported
FROM %s\nRUN --network=host true|Dockerfile:2: RUN --network other than none is not supported
FROM %s\nCOPY --link a /b|Dockerfile:2: COPY --link is not supported
FROM %s\nRUN <<EOF\ntrue\nEOF|Dockerfile:2: RUN heredoc is not supported
FROM %s\nADD http://127.0.0.1:1/x /x|Dockerfile:2: ADD of a URL is not supported
FROM %s\nBOGUS x|Dockerfile:2: unknown instruction 'BOGUS'
RUN true\nFROM %s|Dockerfile:1: the first instruction must be FROM
FROM %s\nENV A="unclosed|Dockerfile:2: unclosed quote
FROM %s\nSHELL /bin/sh|Dockerfile:2: SHELL needs a JSON array
FROM %s\nCOPY missing.txt /|Dockerfile:2: COPY: no 'missing.txt' in the context
FROM %s\nEXPOSE http|Dockerfile:2: EXPOSE wants PORT
EOF
	# No Dockerfile at all.
	rm ctx/Dockerfile
	run --separate-stderr sbx-image build -t bad ctx
	assert_failure 2
	[ -n "$stderr" ]
}

@test "sbx-create --build: builds the context's image only when it is missing, then makes the sandbox of it" {
	printf 'FROM %s\nRUN echo made >/made\nWORKDIR /w\n' "$BASE" \
	    >ctx/Dockerfile
	cd ctx
	run --separate-stderr sbx-create --build -t cb -s ../s.json
	[ "$status" -eq 0 ] || fail "exit $status: $stderr"
	grep -q '^step 2/3: RUN echo made >/made$' <<<"$stderr"
	run --separate-stderr sbx-exec -s ../s.json -- sh -c 'cat /made; pwd'
	assert_success
	assert_output "made
/w"
	sbx-kill -q -s ../s.json
	run --separate-stderr sbx-create -B -t cb -s ../s.json
	assert_success
	assert_equal "$stderr" ""
	[ "$(stored cb | wc -l)" -eq 1 ]
}

@test "sbx-create --build: -t is needed, --image excluded; a failed build creates nothing" {
	printf 'FROM %s\nRUN exit 3\n' "$BASE" >ctx/Dockerfile
	run --separate-stderr sbx-create --build -s s.json -C ctx
	assert_failure 2
	assert_equal "$stderr" "sbx-create: --build needs -t name"
	run --separate-stderr sbx-create --build -t x -i host -s s.json -C ctx
	assert_failure 2
	run --separate-stderr sbx-create -t x -s s.json
	assert_failure 2
	assert_equal "$stderr" "sbx-create: --tag is for --build"
	run --separate-stderr sbx-create --build -t x -s s.json -C ctx
	assert_failure 1
	[ ! -e s.json ]
	run sbx-ls -j
	assert_output ""
}
