#!/usr/bin/env bats
# sbxd's template builds (E2B's API: POST /v3/templates, the upload links of
# GET /templates/ID/files/HASH, POST /v2/templates/ID/builds/BUILD, its
# status and logs, aliases, list, get, delete), through curl and through
# the official E2B SDK's Template builder. A template is built by
# sbx-image build on the local backend into a private image store, from a
# base image the tests push to a registry on loopback (tests/lib/registry.bash).
load ../lib/helper
load ../lib/sbxd
load ../lib/registry

setup_file() {
	sdk_install
	sbx_setup_file
	sbx_registry_start || return 1
	local r=$BATS_FILE_TMPDIR/base
	# A busybox root (the sandbox needs /bin/sh) with bash (the SDK's
	# commands run /bin/bash -l -c).
	sbxd_bash_root "$r" || return 1
	sbx_registry_push_image t/busybox 1 '{"Env":["PATH=/usr/bin:/bin"]}' \
		"$r" >/dev/null || return 1
	BASE=$SBX_TEST_REGISTRY/t/busybox:1
	export SBX_IMAGE_DIR=$BATS_FILE_TMPDIR/images
	# A build pulls its base and runs its steps: more than sdk's minute.
	export SBX_SDK_TIMEOUT=120
	sbxd_start -U 4096
	unset E2B_DEBUG E2B_DOMAIN E2B_ACCESS_TOKEN
	E2B_API_URL=$SBXD_URL E2B_SANDBOX_URL=$SBXD_URL E2B_API_KEY=$SBXD_KEY
	export BASE E2B_API_URL E2B_SANDBOX_URL E2B_API_KEY
	# The context of the SDK's builds.
	CTX=$BATS_FILE_TMPDIR/ctx
	mkdir -p "$CTX/sub"
	echo hello >"$CTX/hello.txt"
	echo deep >"$CTX/sub/deep.txt"
	export CTX
}

teardown_file() {
	# The last test restarts sbxd: its pid is in sbxd.pid.
	if [ -s "$BATS_FILE_TMPDIR/sbxd.pid" ]; then
		SBXD_PID=$(cat "$BATS_FILE_TMPDIR/sbxd.pid")
	fi
	sbxd_stop
	sbx_registry_stop
	sbx_teardown_file
	rm -rf "$SBXD_DIR"
}

setup() {
	sbx_setup
}

teardown() {
	# A test's own registry (sbx_registry_start's variables are the
	# test's).
	if [ -n "${REG2_DIR:-}" ]; then
		SBX_TEST_REGISTRY_DIR=$REG2_DIR SBX_TEST_REGISTRY_PID=$REG2_PID \
		    sbx_registry_stop
	fi
}

# A new build of template $1: sets TID and BID.
request() {
	local out
	out=$(sbxd_api POST /v3/templates "{\"name\":\"$1\"}")
	TID=$(jq -r .templateID <<<"$out")
	BID=$(jq -r .buildID <<<"$out")
	[[ $TID =~ ^[a-z0-9]{20}$ ]] || { echo "request: $out" >&2; return 1; }
}

# The status of build BID of TID until it is done: its JSON in OUT.
wait_build() {
	local i st
	for ((i = 0; i < 600; i++)); do
		OUT=$(sbxd_api GET "/templates/$TID/builds/$BID/status")
		st=$(jq -r .status <<<"$OUT")
		[ "$st" = building ] || [ "$st" = waiting ] || return 0
		sleep 0.1
	done
	echo "build still $st" >&2
	return 1
}

code() {
	curl -s -o "$BATS_TEST_TMPDIR/body" -w '%{http_code}' "$@"
}

@test "templates: base is listed, answers by alias and by id; an unknown one is 404" {
	run sbxd_api GET /templates
	assert_success
	run jq -r '.[] | select(.templateID == "base") | [.names[0], .buildStatus, .envdVersion] | @tsv' <<<"$output"
	assert_output $'base\tready\t0.6.4'
	run code -H "X-API-Key: $SBXD_KEY" "$SBXD_URL/templates/aliases/base"
	assert_output 200
	run jq -r .templateID "$BATS_TEST_TMPDIR/body"
	assert_output base
	run code -H "X-API-Key: $SBXD_KEY" "$SBXD_URL/templates/aliases/nope"
	assert_output 404
	run code -H "X-API-Key: $SBXD_KEY" "$SBXD_URL/templates/nope"
	assert_output 404
	# Without the key: 401, as every control-plane route.
	run code "$SBXD_URL/templates"
	assert_output 401
}

@test "POST /v3/templates: a bad name is 400; a name again is the same template with a new build" {
	run code -H "X-API-Key: $SBXD_KEY" -H 'Content-Type: application/json' \
		-d '{"name":"Bad Name"}' "$SBXD_URL/v3/templates"
	assert_output 400
	run code -H "X-API-Key: $SBXD_KEY" -H 'Content-Type: application/json' \
		-d '{"name":"-lead"}' "$SBXD_URL/v3/templates"
	assert_output 400
	run code -H "X-API-Key: $SBXD_KEY" -H 'Content-Type: application/json' \
		-d '{"name":"base"}' "$SBXD_URL/v3/templates"
	assert_output 409
	request again:v1
	t1=$TID b1=$BID
	request again
	[ "$TID" = "$t1" ]
	[ "$BID" != "$b1" ]
	run sbxd_api GET "/templates/$TID"
	run jq -r '[.names[0], (.builds | length), .builds[0].status] | @tsv' <<<"$output"
	assert_output $'again\t2\twaiting'
}

@test "POST /v2/templates (older SDKs: alias, cpuCount, memoryMB) is the same build, answered with the template; POST /templates (v1) is 501 naming v3" {
	run code -H "X-API-Key: $SBXD_KEY" -H 'Content-Type: application/json' \
		-d '{"alias":"Bad Name"}' "$SBXD_URL/v2/templates"
	assert_output 400
	run code -H "X-API-Key: $SBXD_KEY" -H 'Content-Type: application/json' \
		-d '{"alias":"legacy-tpl","cpuCount":1,"memoryMB":512}' "$SBXD_URL/v2/templates"
	assert_output 202
	OUT=$(cat "$BATS_TEST_TMPDIR/body")
	TID=$(jq -r .templateID <<<"$OUT")
	BID=$(jq -r .buildID <<<"$OUT")
	run jq -r '[.aliases[0], .cpuCount, .memoryMB, .buildCount, .public, .envdVersion != null] | @tsv' <<<"$OUT"
	assert_output $'legacy-tpl\t1\t512\t1\tfalse\ttrue'
	run code -X POST -H "X-API-Key: $SBXD_KEY" -H 'Content-Type: application/json' \
		-d "{\"fromImage\":\"$BASE\",\"steps\":[{\"type\":\"RUN\",\"args\":[\"echo legacy > /legacy\"]}]}" \
		"$SBXD_URL/v2/templates/$TID/builds/$BID"
	assert_output 202
	wait_build
	run jq -r .status <<<"$OUT"
	assert_output ready
	run jq -r .templateID <(sbxd_api GET /templates/aliases/legacy-tpl)
	assert_output "$TID"
	run code -H "X-API-Key: $SBXD_KEY" -H 'Content-Type: application/json' \
		-d '{"dockerfile":"FROM x","alias":"v1"}' "$SBXD_URL/templates"
	assert_output 501
	run jq -r .message "$BATS_TEST_TMPDIR/body"
	assert_output "sbxd does not support the v1 template builds (POST /templates: an image pushed to E2B's registry, which sbxd has not; build with POST /v3/templates, the SDK's Template.build) (see sbxd(8))"
}

@test "upload links: signed, the key not needed; a bad signature is 401; over --max-upload 413; then present" {
	request up
	h=$(printf up-test | sha256sum | cut -c1-64)
	run code -H "X-API-Key: $SBXD_KEY" "$SBXD_URL/templates/$TID/files/xyz"
	assert_output 400
	run code -H "X-API-Key: $SBXD_KEY" "$SBXD_URL/templates/nope/files/$h"
	assert_output 404
	run sbxd_api GET "/templates/$TID/files/$h"
	run jq -r '[.present, (.url | test("^http://127.0.0.1:[0-9]+/templates/'"$TID"'/files/'"$h"'[?]signature=[0-9a-f]{64}$"))] | @tsv' <<<"$output"
	assert_output $'false\ttrue'
	url=$(sbxd_api GET "/templates/$TID/files/$h" | jq -r .url)
	printf x >"$BATS_TEST_TMPDIR/small"
	run code -X PUT --data-binary @"$BATS_TEST_TMPDIR/small" "${url%signature=*}signature=$(printf '0%.0s' {1..64})"
	assert_output 401
	# The signature is of this template and hash only.
	other=$(printf other | sha256sum | cut -c1-64)
	run code -X PUT --data-binary @"$BATS_TEST_TMPDIR/small" "${url/$h/$other}"
	assert_output 401
	head -c 5000 /dev/zero >"$BATS_TEST_TMPDIR/big"
	run code -X PUT --data-binary @"$BATS_TEST_TMPDIR/big" "$url"
	assert_output 413
	run jq -r .present <(sbxd_api GET "/templates/$TID/files/$h")
	assert_output false
	run code -X PUT --data-binary @"$BATS_TEST_TMPDIR/small" "$url"
	assert_output 200
	run jq -r .present <(sbxd_api GET "/templates/$TID/files/$h")
	assert_output true
}

@test "a build's start: bad bodies are 400 and leave it waiting; a step sbxd cannot build fails it; a second start is 409" {
	request bad
	p=/v2/templates/$TID/builds/$BID
	for body in '{"steps":[]}' \
		"{\"fromImage\":\"$BASE\",\"fromTemplate\":\"base\"}" \
		"{\"fromImage\":\"$BASE\",\"fromImageRegistry\":{\"type\":\"gcp\",\"serviceAccountJson\":\"{}\"}}" \
		"{\"fromImage\":\"$BASE\",\"fromImageRegistry\":{\"type\":\"registry\",\"username\":\"u\"}}" \
		"{\"fromTemplate\":\"base\",\"fromImageRegistry\":{\"type\":\"registry\",\"username\":\"u\",\"password\":\"p\"}}" \
		'{"fromImage":"a b"}'; do
		run code -X POST -H "X-API-Key: $SBXD_KEY" -H 'Content-Type: application/json' -d "$body" "$SBXD_URL$p"
		assert_output 400
	done
	run jq -r .status <(sbxd_api GET "/templates/$TID/builds/$BID/status")
	assert_output waiting
	run code -X POST -H "X-API-Key: $SBXD_KEY" -H 'Content-Type: application/json' \
		-d '{"fromImage":"x"}' "$SBXD_URL/v2/templates/$TID/builds/nope"
	assert_output 404
	run code -X POST -H "X-API-Key: $SBXD_KEY" -H 'Content-Type: application/json' \
		-d "{\"fromImage\":\"$BASE\",\"steps\":[{\"type\":\"HEALTHCHECK\",\"args\":[\"x\"]}]}" "$SBXD_URL$p"
	assert_output 400
	run jq -r .message "$BATS_TEST_TMPDIR/body"
	assert_output 'step 1: sbxd cannot build a HEALTHCHECK step'
	# A COPY whose files never came.
	request bad2
	h=$(printf never | sha256sum | cut -c1-64)
	run code -X POST -H "X-API-Key: $SBXD_KEY" -H 'Content-Type: application/json' \
		-d "{\"fromImage\":\"$BASE\",\"steps\":[{\"type\":\"COPY\",\"args\":[\"a\",\"/a\",\"\",\"\"],\"filesHash\":\"$h\"}]}" \
		"$SBXD_URL/v2/templates/$TID/builds/$BID"
	assert_output 400
	run jq -r '[.status, .reason.message] | @tsv' <(sbxd_api GET "/templates/$TID/builds/$BID/status")
	assert_output "error	the files of hash $h were not uploaded"
	run code -X POST -H "X-API-Key: $SBXD_KEY" -H 'Content-Type: application/json' \
		-d "{\"fromImage\":\"$BASE\"}" "$SBXD_URL/v2/templates/$TID/builds/$BID"
	assert_output 409
}

@test "SDK: Template.build (fromImage, copy, runCmd, setEnvs, setWorkdir, setStartCmd) on sbxd; Sandbox.create runs it" {
	run sdk template "$CTX" "$BASE" sdk-tpl
	assert_success
	OUT=$output
	run jq -r '[.name, .exists, .sandboxTemplate == .templateId] | @tsv' <<<"$OUT"
	assert_output $'sdk-tpl\ttrue\ttrue'
	run jq -r .stdout <<<"$OUT"
	# The start command ran, and was ready, before the create returned.
	# and the commands start in the template's WORKDIR.
	assert_output $'hello\ndeep\nbuilt\nstarted\nhi there|a "b" $c\n/app'
	# Its logs came through the status polls, the builder's steps among them.
	run jq -r '.logs | map(select(test("RUN"))) | length > 0' <<<"$OUT"
	assert_output true
	# The second build uploaded nothing.
	run jq -r '[(.logs2 | map(select(test("^Skipping upload"))) | length),
		(.logs2 | map(select(test("^Uploaded"))) | length)] | @tsv' <<<"$OUT"
	assert_output $'2\t0'
	run jq -r '.[] | select(.names[0] == "sdk-tpl") | [.buildStatus, .buildCount, .spawnCount] | @tsv' <(sbxd_api GET /templates)
	assert_output $'ready\t2\t1'
}

@test "SDK: a failing RUN is BuildError with the builder's message; Sandbox.create of it is refused" {
	run sdk template-fail "$CTX" "$BASE" sdk-fail
	assert_success
	OUT=$output
	run jq -r .build.name <<<"$OUT"
	assert_output BuildError
	run jq -r '.build.message | test("exit status 7|status 7")' <<<"$OUT"
	assert_output true
	run jq -r '.create.message | test("template .sdk-fail. not found")' <<<"$OUT"
	assert_output true
}

@test "sbx-image build -b e2b: a Dockerfile as an E2B template named NAME-HASH; --check; a rebuild builds nothing; sbx-create -b e2b runs it" {
	export XDG_CONFIG_HOME=$BATS_TEST_TMPDIR/config SBX_E2B_ENDPOINT=$SBXD_URL
	c=$BATS_TEST_TMPDIR/ctx
	mkdir -p "$c/src/deep"
	echo one >"$c/src/a.txt"
	echo two >"$c/src/deep/b.txt"
	cat >"$c/Dockerfile" <<DF
ARG BASE=$BASE
FROM \$BASE
ARG WHO=nobody
COPY src/ /opt/src/
RUN echo "built by \$WHO" > /opt/who
ENV GREETING="hi there" LEVEL=3
WORKDIR /opt/src
LABEL org.example=1
CMD ["sh", "-c", "echo up > /tmp/up; exec sleep 1000"]
DF
	run --separate-stderr sbx-image build -b e2b -t e2bimg -a WHO=ci "$c"
	assert_success
	img=$(jq -r .image <<<"$output")
	[[ $img =~ ^e2bimg-[0-9a-f]{8}$ ]]
	run jq -r '[.backend, .built, (.template_id | test("^[a-z0-9]{20}$"))] | @tsv' <<<"$output"
	assert_output $'e2b\ttrue\ttrue'
	# The build's log came to stderr, and the LABEL's note.
	[[ $stderr == *"LABEL has no E2B equivalent"* ]]
	[[ $stderr == *"the template is built"* ]]
	run sbx-image build -b e2b --check -t e2bimg "$c"
	assert_success
	run jq -r .present <<<"$output"
	assert_output true
	run sbx-image build -q -b e2b -t e2bimg "$c"
	assert_success
	run jq -r .built <<<"$output"
	assert_output false
	run --separate-stderr sbx-create -b e2b -E "$SBXD_URL" -i "$img" -s "$BATS_TEST_TMPDIR/s.json"
	assert_success
	# (sbx-exec runs in the sandbox's workdir, /workspace, as on every
	# backend; the SDK's commands start in the WORKDIR: see above.)
	run sbx-exec -s "$BATS_TEST_TMPDIR/s.json" -- sh -c 'cat /opt/src/a.txt /opt/src/deep/b.txt /opt/who /tmp/up; echo "$GREETING $LEVEL"'
	sbx-kill -q -s "$BATS_TEST_TMPDIR/s.json" >/dev/null || true
	assert_output $'one\ntwo\nbuilt by ci\nup\nhi there 3'
	# A changed file is a new hash, hence a template not built yet.
	echo three >"$c/src/a.txt"
	run sbx-image build -b e2b --check -t e2bimg "$c"
	assert_failure 3
}

@test "sbx-image build -b e2b: what E2B cannot take is exit 2 naming the line, and no template is requested" {
	export XDG_CONFIG_HOME=$BATS_TEST_TMPDIR/config SBX_E2B_ENDPOINT=$SBXD_URL
	c=$BATS_TEST_TMPDIR/ctx
	mkdir -p "$c"
	echo x >"$c/f"
	before=$(sbxd_api GET /templates | jq length)
	for df in $'FROM a AS b\nFROM c\nCOPY --from=b /x /y' $'FROM a\nCOPY *.txt /x/' \
		$'FROM a\nADD f.tar.gz /x/' $'FROM a\nCOPY missing /x' $'FROM scratch' $'RUN true'; do
		printf '%s\n' "$df" >"$c/Dockerfile"
		run --separate-stderr sbx-image build -b e2b -t bad "$c"
		assert_failure 2
		[[ $stderr == "sbx-image: Dockerfile"* ]]
		[ "$(wc -l <<<"$stderr")" = 1 ]
	done
	run jq length <(sbxd_api GET /templates)
	assert_output "$before"
}

# Last: it restarts sbxd.
@test "DELETE /templates/ID removes its image from the store; one a sandbox stands on keeps its tree until the sandbox is gone" {
	local a b roota rootb id
	run sdk template "$CTX" "$BASE" del-one
	assert_success
	# Other files: two builds of one template in the same second are one
	# image (the same digest, one tree), which this test is not about.
	cp -r "$CTX" "$BATS_TEST_TMPDIR/ctx2"
	echo other >"$BATS_TEST_TMPDIR/ctx2/hello.txt"
	run sdk template "$BATS_TEST_TMPDIR/ctx2" "$BASE" del-two
	assert_success
	a=$(sbx-image ls | jq -r 'select(.image | startswith("del-one-")) | .image')
	b=$(sbx-image ls | jq -r 'select(.image | startswith("del-two-")) | .image')
	[ -n "$a" ]
	[ -n "$b" ]
	roota=$(sbx-image inspect "$a" | jq_str .rootfs)
	rootb=$(sbx-image inspect "$b" | jq_str .rootfs)
	[ -d "$roota" ]
	[ "$roota" != "$rootb" ]
	run sbxd_api POST /sandboxes '{"templateID":"del-two","timeout":60}'
	id=$(jq -r .sandboxID <<<"$output")
	[[ $id =~ ^[a-z0-9]{20}$ ]]
	run code -X DELETE -H "X-API-Key: $SBXD_KEY" "$SBXD_URL/templates/del-one"
	assert_output 204
	run sbx-image inspect "$a"
	assert_failure 3
	[ ! -e "$roota" ]
	# del-two's sandbox stands on its tree: the name goes, the tree stays.
	run code -X DELETE -H "X-API-Key: $SBXD_KEY" "$SBXD_URL/templates/del-two"
	assert_output 204
	run sbx-image inspect "$b"
	assert_failure 3
	[ -d "$rootb" ]
	run sbxd_api DELETE "/sandboxes/$id"
	run sbx-image prune
	assert_success
	[ ! -e "$rootb" ]
}

@test "SDK: fromImage with registry credentials pulls through them (never stored nor logged); a wrong password fails the build with the registry's refusal; AWS is refused" {
	local pass=Sekr1t-$RANDOM$RANDOM base2 f
	# A registry of its own, htpasswd: the file's stays anonymous.
	unset SBX_TEST_REGISTRY_DIR SBX_TEST_REGISTRY_PORT
	sbx_registry_start reguser "$pass"
	REG2_DIR=$SBX_TEST_REGISTRY_DIR REG2_PID=$SBX_TEST_REGISTRY_PID
	sbx_registry_push_image t/private 1 '{"Env":["PATH=/usr/bin:/bin"]}' \
	    "$BATS_FILE_TMPDIR/base" >/dev/null
	base2=$SBX_TEST_REGISTRY/t/private:1
	run sdk template-registry "$CTX" "$base2" reg-bad reguser "wrong-$pass"
	assert_success
	run jq -r '[.build.name, (.build.message | test("refused the credentials"))] | @tsv' <<<"$output"
	assert_output $'BuildError\ttrue'
	run sdk template-registry "$CTX" "$base2" reg-ok reguser "$pass"
	assert_success
	run jq -r '[.name, .build] | @tsv' <<<"$output"
	assert_output $'reg-ok\t'
	img=$(sbx-image ls | jq -r 'select(.image | startswith("reg-ok-")) | .image')
	root=$(sbx-image inspect "$img" | jq_str .rootfs)
	assert_equal "$(cat "$root/pulled")" pulled
	run sdk template-registry "$CTX" "$base2" reg-aws key secret aws
	assert_success
	run jq -r '.build.message' <<<"$output"
	[[ $output == *"sbxd does not pull from AWS ECR (fromImageRegistry type 'aws')"* ]]
	# The password in no file of sbxd's store, its image store, its log.
	for f in "$SBXD_DIR" "$SBX_IMAGE_DIR"; do
		run grep -rlF -- "$pass" "$f"
		assert_failure 1
	done
	run grep -rlF -- "$(printf 'reguser:%s' "$pass" | base64 -w0)" "$SBXD_DIR"
	assert_failure 1
}

@test "templates survive a restart of sbxd; a build cut by it is an error; DELETE removes one, never base" {
	request cut
	cut_t=$TID cut_b=$BID
	run sdk template "$CTX" "$BASE" keep-tpl
	assert_success
	keep=$(jq -r .templateId <<<"$output")
	sbxd_stop
	sbxd_start -U 4096
	# teardown_file stops this one (a test's variables die with it).
	echo "$SBXD_PID" >"$BATS_FILE_TMPDIR/sbxd.pid"
	E2B_API_URL=$SBXD_URL E2B_SANDBOX_URL=$SBXD_URL E2B_API_KEY=$SBXD_KEY
	run jq -r '[.status, .reason.message] | @tsv' <(sbxd_api GET "/templates/$cut_t/builds/$cut_b/status")
	assert_output $'error\tsbxd stopped during the build'
	run jq -r .templateID <(sbxd_api GET /templates/aliases/keep-tpl)
	assert_output "$keep"
	run sbxd_api POST /sandboxes '{"templateID":"keep-tpl","timeout":60}'
	id=$(jq -r .sandboxID <<<"$output")
	[[ $id =~ ^[a-z0-9]{20}$ ]]
	run sbxd_api DELETE "/sandboxes/$id"
	run code -X DELETE -H "X-API-Key: $SBXD_KEY" "$SBXD_URL/templates/base"
	assert_output 400
	run code -X DELETE -H "X-API-Key: $SBXD_KEY" "$SBXD_URL/templates/$keep"
	assert_output 204
	run code -H "X-API-Key: $SBXD_KEY" "$SBXD_URL/templates/aliases/keep-tpl"
	assert_output 404
	run code -X POST -H "X-API-Key: $SBXD_KEY" -H 'Content-Type: application/json' \
		-d '{"templateID":"keep-tpl","timeout":60}' "$SBXD_URL/sandboxes"
	assert_output 404
}
