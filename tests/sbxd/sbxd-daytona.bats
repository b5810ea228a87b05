#!/usr/bin/env bats
# sbxd speaking Daytona's API (/api) and toolbox (/toolbox/ID/...), driven
# by the official Daytona TypeScript SDK (npm package @daytonaio/sdk): the
# scripts in tests/sbxd/daytona/ print one JSON line that these tests check;
# and by curl for what the SDK never sends.
#
# The SDK is installed as E2B's is (tests/lib/sbxd.bash's npm_cache_install)
# into ${XDG_CACHE_HOME:-$HOME/.cache}/sbx-test/daytona-$DAYTONA_SDK_VERSION,
# kept between runs and never committed.
#
# How the SDK reaches sbxd: DAYTONA_API_URL=http://127.0.0.1:PORT/api and
# DAYTONA_API_KEY (sent as Authorization: Bearer). The toolbox is where each
# Sandbox's toolboxProxyUrl says: sbxd's own /toolbox. The SDK also opens a
# Socket.IO connection to /api/socket.io/ for state events; sbxd refuses it
# (404) and the SDK polls GET /api/sandbox/ID instead, as it does when
# DAYTONA_USE_DEPRECATED_POLLING=true.
load ../lib/helper
load ../lib/sbxd
load ../lib/registry

DAYTONA_SDK_VERSION=0.218.0

setup_file() {
	DAYTONA_SDK_DIR=${XDG_CACHE_HOME:-$HOME/.cache}/sbx-test/daytona-$DAYTONA_SDK_VERSION
	export DAYTONA_SDK_DIR
	npm_cache_install "$DAYTONA_SDK_DIR" @daytonaio/sdk "$DAYTONA_SDK_VERSION"
	sbx_setup_file
	# The images of the builds (snapshots, create with image): a busybox
	# root with the host's bash (the toolbox runs commands with it), in
	# a registry on loopback.
	sbx_registry_start || return 1
	sbxd_bash_image || return 1
	sbxd_start
	unset DAYTONA_USE_DEPRECATED_POLLING DAYTONA_JWT_TOKEN DAYTONA_TARGET
	unset DAYTONA_SERVER_URL DAYTONA_ORGANIZATION_ID
	# The key goes to the SDK by the environment, never by argv.
	DAYTONA_API_URL=$SBXD_URL/api
	DAYTONA_API_KEY=$SBXD_KEY
	export DAYTONA_API_URL DAYTONA_API_KEY
}

teardown_file() {
	sbxd_stop
	sbx_registry_stop
	sbx_teardown_file
	rm -rf "$SBXD_DIR"
}

setup() {
	sbx_setup
}

# dsdk SCRIPT [args]: run tests/sbxd/daytona/SCRIPT.mjs (a minute at most),
# in the test's own directory (the SDK refuses to start beside a .env that
# names an endpoint).
dsdk() {
	local s=$1 rc=0
	shift
	(cd "$BATS_TEST_TMPDIR" && timeout 60 node "$BATS_TEST_DIRNAME/daytona/$s.mjs" "$@") 2>"$BATS_TEST_TMPDIR/dsdk.err" || rc=$?
	((rc == 0)) || cat "$BATS_TEST_TMPDIR/dsdk.err"
	return "$rc"
}

# wait_state PATH STATE...: GET PATH while its state is one of the STATEs
# (two minutes at most); OUT is the last answer, st its state.
wait_state() {
	local p=$1 i
	shift
	for ((i = 0; i < 600; i++)); do
		OUT=$(dapi GET "$p")
		st=$(jq -r .state <<<"$OUT")
		[[ " $* " == *" $st "* ]] || return 0
		sleep 0.2
	done
}

# jq -r FILTER on the JSON a script printed (kept in OUT).
field() {
	jq -r "$1" <<<"$OUT"
}

# A sandbox through Daytona's API; sets ID. [JSON body]
dbox() {
	local out
	out=$(dapi POST /api/sandbox "${1:-{\}}")
	ID=$(jq -r .id <<<"$out")
	[ ${#ID} = 20 ] || { echo "create failed: $out" >&2; return 1; }
}

# dapi_until ID JQ N: poll GET /api/sandbox/ID (N tenths of a second at
# most) until the jq expression JQ holds of it; fails (the last answer
# shown) when it never does.
dapi_until() {
	local i
	for ((i = 0; i < $3; i++)); do
		dapi GET "/api/sandbox/$1" | jq_true "$2" >/dev/null && return 0
		sleep 0.1
	done
	run dapi GET "/api/sandbox/$1"
	jq_true "$2" <<<"$output"
}

@test "daytona SDK: create and executeCommand (exit code, output, cwd, env); the sandbox is one of sbxd's local ones" {
	run dsdk create dt-create
	assert_success
	OUT=$output
	id=$(field .id)
	[[ $id =~ ^[a-z0-9]{20}$ ]]
	run field '[.name, .state, .labels.test, .labels["code-toolbox-language"], .user, .snapshot] | @tsv'
	assert_output $'dt-create\tstarted\tcreate\tpython\tuser\tbase'
	run field '[.ok, .bad, .piped, .workDir, .home] | @json'
	assert_output '[{"exitCode":0,"result":"made given\n/tmp\n"},{"exitCode":7,"result":"oops\n"},"2","/home/user","/home/user"]'
	# a local sandbox (sbx-ls) that E2B's API lists too, labels as metadata
	run sbx-ls -j
	assert_success
	assert_output --partial "\"sbxd\":\"$id\""
	run sbxd_api GET /sandboxes
	assert_success
	jq_true --arg id "$id" 'map(select(.sandboxID == $id))[0].metadata.test == "create"' <<<"$output"
	dapi DELETE "/api/sandbox/$id" >/dev/null
}

@test "daytona SDK: get by name, list by labels, setLabels, autostop, stop/start, delete then 404" {
	tag=t$RANDOM$RANDOM
	run dsdk lifecycle "dt-life-$tag" "$tag"
	assert_success
	OUT=$output
	id=$(field .id)
	[[ $id =~ ^[a-z0-9]{20}$ ]]
	run field '[.byName == .id, .listed == [.id], .none, .labels, .autoStop] | @json'
	assert_output "[true,true,[],{\"suite\":\"$tag\",\"after\":\"set\"},30]"
	run field '[.stopped, .execStopped, .refetched, .started, .after] | @json'
	assert_output '["stopped",409,"stopped","started","back\n"]'
	run field '[.gone.name, .gone.status, .gone.message] | @tsv'
	assert_output $'DaytonaNotFoundError\t404\tSandbox with ID or name '"$id"' not found'
	# gone from sbxd and from the machine too
	run sbxd_api GET "/sandboxes/$id"
	assert_output --partial '"code":404'
	run sbx-ls -j
	assert_success
	refute_output --partial "\"sbxd\":\"$id\""
}

@test "daytona SDK: upload(s), download(s), list, folder, details, move, find, search, permissions, delete" {
	run dsdk files
	assert_success
	OUT=$output
	run field '[.one, .many, .listed] | @json'
	assert_output '["hello daytona\n",[{"source":"/tmp/many/two.txt","ok":true,"text":"two\nneedle here\n","error":null},{"source":"/tmp/many/missing.txt","ok":false,"error":"path '"'"'/tmp/many/missing.txt'"'"' does not exist"}],[["deep",true],["one.txt",false]]]'
	run field '[.folder, .details.name, .details.size, .details.isDir, .details.mode, .details.permissions] | @json'
	assert_output '[{"isDir":true,"permissions":"0750"},"one.txt",14,false,"-rw-r--r--","0644"]'
	[[ $(field .details.modifiedAt) =~ ^20[0-9-]+T[0-9:.]+Z$ ]]
	run field '[.moveGone, .moveConflict, .moveMissing, .found, .searched, .perm, .rmDir, .rmDirMessage, .after] | @json'
	assert_output '[404,409,404,[{"file":"/tmp/many/two.txt","line":2,"content":"needle here"}],["/home/user/up/deep/three.txt","/home/user/up/moved.txt"],"0600",400,"cannot delete directory without recursive flag",[]]'
	# what the SDK did is in the sandbox, as a shell sees it
	run field .ls
	assert_output $'drwxr-x---\ntwo\nneedle here'
}

@test "daytona API: a missing or wrong key is 401 with NestJS's body, the toolbox's with its own; /api/config needs none" {
	run curl -s "$SBXD_URL/api/sandbox"
	assert_success
	jq_true '.statusCode == 401 and .error == "Unauthorized" and .path == "/api/sandbox" and (.timestamp | test("Z$")) and (.message | length > 0)' <<<"$output"
	run curl -s -H 'Authorization: Bearer dtn_wrong' "$SBXD_URL/api/sandbox"
	jq_true '.statusCode == 401' <<<"$output"
	run curl -s -H 'Authorization: Bearer dtn_wrong' -H 'Content-Type: application/json' -d '{"command":"true"}' "$SBXD_URL/toolbox/aaaaaaaaaaaaaaaaaaaa/process/execute"
	jq_true '.statusCode == 401 and .code == "UNAUTHORIZED" and .method == "POST" and .path == "/process/execute"' <<<"$output"
	run curl -s "$SBXD_URL/api/config"
	jq_true --arg u "$SBXD_URL/toolbox" '.proxyToolboxUrl == $u and .defaultSnapshot == "base"' <<<"$output"
}

@test "daytona API: bad bodies are 400 with Daytona's body, and nothing is made" {
	before=$(sbx-ls -j | wc -l)
	run dapi POST /api/sandbox 'not json'
	jq_true '.statusCode == 400 and .error == "Bad Request"' <<<"$output"
	run dapi POST /api/sandbox '{"cpu":2}'
	jq_true '.statusCode == 400 and .message == "Cannot specify Sandbox resources when using a snapshot"' <<<"$output"
	run dapi POST /api/sandbox '{"snapshot":"no-such"}'
	jq_true '.statusCode == 400 and .message == "Snapshot no-such not found"' <<<"$output"
	run dapi POST /api/sandbox '{"labels":{"a":1}}'
	jq_true '.statusCode == 400' <<<"$output"
	run dapi POST /api/sandbox '{"autoStopInterval":-1}'
	jq_true '.statusCode == 400' <<<"$output"
	run dapi POST /api/sandbox '{"buildInfo":{"dockerfileContent":"FROM x\n"},"snapshot":"base"}'
	jq_true '.statusCode == 400 and .message == "Cannot specify a snapshot when using a build info entry"' <<<"$output"
	run dapi POST /api/sandbox '{"buildInfo":{"dockerfileContent":"FROM x\n"},"cpu":5}'
	jq_true '.statusCode == 400 and .message == "CPU request 5 exceeds maximum allowed per sandbox (4)"' <<<"$output"
	run dapi POST /api/sandbox '{"buildInfo":{"dockerfileContent":"FROM x\n"},"memory":9}'
	jq_true '.statusCode == 400 and .message == "Memory request 9 exceeds maximum allowed per sandbox (8)"' <<<"$output"
	run dapi POST /api/sandbox '{"buildInfo":{"dockerfileContent":"FROM x\n"},"disk":0}'
	jq_true '.statusCode == 400 and .message == "disk must be an integer of 1 or more"' <<<"$output"
	run dapi POST /api/sandbox '{"buildInfo":{"dockerfileContent":"FROM x\n","contextHashes":["ab"]}}'
	jq_true '.statusCode == 400 and (.message | test("contextHashes"))' <<<"$output"
	run dapi POST /api/sandbox '{"buildInfo":{}}'
	jq_true '.statusCode == 400 and .message == "buildInfo wants a dockerfileContent"' <<<"$output"
	run dapi POST /api/sandbox '{"autoPauseInterval":5,"kvm":false}'
	jq_true '.statusCode == 400 and .message == "sbxd does not serve '"'autoPauseInterval'"' (see sbxd(8))"' <<<"$output"
	run curl -s -H "Authorization: Bearer $SBXD_KEY" "$SBXD_URL/api/sandbox?labels=%7Bnot"
	jq_true '.statusCode == 400 and .message == "Invalid labels JSON format"' <<<"$output"
	[ "$(sbx-ls -j | wc -l)" = "$before" ]
}

@test "daytona API: unknown sandboxes are 404 on both planes; a taken name is 409" {
	run dapi GET /api/sandbox/no-such-box
	jq_true '.statusCode == 404 and .message == "Sandbox with ID or name no-such-box not found"' <<<"$output"
	run dapi POST /api/sandbox/no-such-box/stop
	jq_true '.statusCode == 404' <<<"$output"
	run dapi POST /toolbox/aaaaaaaaaaaaaaaaaaaa/process/execute '{"command":"true"}'
	jq_true '.statusCode == 404 and .code == "NOT_FOUND"' <<<"$output"
	dbox '{"name":"dt-taken"}'
	run dapi POST /api/sandbox '{"name":"dt-taken"}'
	jq_true '.statusCode == 409 and .message == "Sandbox with name dt-taken already exists"' <<<"$output"
	run dapi DELETE /api/sandbox/dt-taken
	jq_true --arg id "$ID" '.id == $id and .state == "destroyed"' <<<"$output"
	run dapi GET "/api/sandbox/$ID"
	jq_true '.statusCode == 404' <<<"$output"
}

@test "daytona toolbox: execute refuses a blank command (400), and a timeout is 408 with Daytona's body" {
	dbox
	run dapi POST "/toolbox/$ID/process/execute" '{"command":"  "}'
	jq_true '.statusCode == 400 and .code == "BAD_REQUEST" and .path == "/process/execute"' <<<"$output"
	run dapi POST "/toolbox/$ID/process/execute" '{"command":"true","envs":{"1X":"y"}}'
	jq_true '.statusCode == 400' <<<"$output"
	run dapi POST "/toolbox/$ID/process/execute" '{"command":"sleep 30","timeout":1}'
	jq_true '.statusCode == 408 and .code == "REQUEST_TIMEOUT" and .message == "request timeout: command execution timeout"' <<<"$output"
	run dapi POST "/toolbox/$ID/files/bulk-download" '{"paths":"x"}'
	jq_true '.statusCode == 400 and .code == "INVALID_REQUEST_BODY"' <<<"$output"
	run curl -s -H "Authorization: Bearer $SBXD_KEY" -X DELETE "$SBXD_URL/toolbox/$ID/files?path=/nonexistent"
	jq_true '.statusCode == 404 and .code == "NOT_FOUND" and .method == "DELETE"' <<<"$output"
	dapi DELETE "/api/sandbox/$ID" >/dev/null
}

@test "daytona toolbox: upload, bulk-upload and bulk-download speak multipart (curl)" {
	dbox
	printf 'single\n' >"$BATS_TEST_TMPDIR/s.txt"
	run curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $SBXD_KEY" -F "file=@$BATS_TEST_TMPDIR/s.txt" "$SBXD_URL/toolbox/$ID/files/upload?path=/tmp/s.txt"
	assert_output 200
	run curl -s -H "Authorization: Bearer $SBXD_KEY" -F 'files[0].path=/tmp/b/one' -F "files[0].file=@$BATS_TEST_TMPDIR/s.txt" -F 'files[1].path=/tmp/b/two' -F "files[1].file=@$BATS_TEST_TMPDIR/s.txt" "$SBXD_URL/toolbox/$ID/files/bulk-upload"
	jq_true '.files == [{"path":"/tmp/b/one","bytes":7},{"path":"/tmp/b/two","bytes":7}]' <<<"$output"
	# a file part before its path is refused, and leaves nothing
	run curl -s -H "Authorization: Bearer $SBXD_KEY" -F "files[0].file=@$BATS_TEST_TMPDIR/s.txt" -F 'files[0].path=/tmp/b/three' "$SBXD_URL/toolbox/$ID/files/bulk-upload"
	jq_true '.statusCode == 400 and (.message | test("must come before"))' <<<"$output"
	run curl -s -D "$BATS_TEST_TMPDIR/h" -H "Authorization: Bearer $SBXD_KEY" -H 'Content-Type: application/json' -d '{"paths":["/tmp/s.txt","/tmp/none"]}' "$SBXD_URL/toolbox/$ID/files/bulk-download"
	assert_success
	grep -qi '^content-type: multipart/form-data; boundary=DAYTONA-FILE-BOUNDARY' "$BATS_TEST_TMPDIR/h"
	assert_output --partial $'name="file"; filename="/tmp/s.txt"'
	assert_output --partial $'\r\n\r\nsingle\n\r\n'
	assert_output --partial $'name="error"; filename="/tmp/none"'
	assert_output --partial '"code":"FILE_NOT_FOUND"'
	assert_output --partial '--DAYTONA-FILE-BOUNDARY--'
	run dapi POST "/toolbox/$ID/process/execute" '{"command":"cat /tmp/s.txt /tmp/b/one /tmp/b/two; ls /tmp/b"}'
	jq_true '.result == "single\nsingle\nsingle\none\ntwo\n"' <<<"$output"
	dapi DELETE "/api/sandbox/$ID" >/dev/null
}

@test "one model: a sandbox made through E2B's API is Daytona's too (named by its id), and its toolbox runs" {
	out=$(sbxd_create '{"templateID":"base","timeout":300,"metadata":{"via":"e2b"}}')
	id=$(jq -r .sandboxID <<<"$out")
	[ ${#id} = 20 ]
	run dapi GET "/api/sandbox/$id"
	jq_true --arg id "$id" '.id == $id and .name == $id and .state == "started" and .labels.via == "e2b" and .autoDeleteInterval == -1' <<<"$output"
	run dapi GET '/api/sandbox?labels=%7B%22via%22%3A%22e2b%22%7D'
	jq_true --arg id "$id" '[.items[].id] == [$id] and .nextCursor == null' <<<"$output"
	run dapi POST "/toolbox/$id/process/execute" '{"command":"echo from-daytona"}'
	jq_true '.exitCode == 0 and .result == "from-daytona\n"' <<<"$output"
	# stopped through Daytona: paused for E2B
	run dapi POST "/api/sandbox/$id/stop"
	jq_true '.state == "stopped"' <<<"$output"
	run sbxd_api GET "/sandboxes/$id"
	jq_true '.state == "paused"' <<<"$output"
	run dapi GET '/api/sandbox?states=stopped&labels=%7B%22via%22%3A%22e2b%22%7D'
	jq_true --arg id "$id" '[.items[] | [.id, .state]] == [[$id, "stopped"]]' <<<"$output"
	run dapi GET '/api/sandbox?states=started&labels=%7B%22via%22%3A%22e2b%22%7D'
	jq_true '.items == []' <<<"$output"
	run dapi DELETE "/api/sandbox/$id"
	jq_true '.state == "destroyed"' <<<"$output"
}

@test "daytona API: auto-stop is the sandbox's end (E2B's endAt); auto-delete kills a stopped one; an ephemeral one's stop deletes it" {
	dbox '{"autoStopInterval":20}'
	run sbxd_api GET "/sandboxes/$ID"
	left=$(jq '((.endAt | sub("\\.[0-9]+Z$"; "Z") | fromdate) - now) | floor' <<<"$output")
	# 20 minutes from about now (a few seconds pass)
	((left > 1100 && left <= 1200))
	run dapi POST "/api/sandbox/$ID/autostop/0"
	jq_true '.autoStopInterval == 0' <<<"$output"
	run dapi POST "/api/sandbox/$ID/autodelete/-2"
	jq_true '.statusCode == 400' <<<"$output"
	run dapi POST "/api/sandbox/$ID/stop"
	jq_true '.state == "stopped" and .autoDeleteInterval == -1' <<<"$output"
	run dapi POST "/api/sandbox/$ID/stop"
	jq_true '.statusCode == 400 and .message == "Sandbox is not in a stoppable state"' <<<"$output"
	# auto-delete 0 on a stopped sandbox: sbxd's reaper kills it
	run dapi POST "/api/sandbox/$ID/autodelete/0"
	jq_true '.autoDeleteInterval == 0' <<<"$output"
	dapi_until "$ID" '.statusCode == 404' 100
	run sbx-ls -j
	refute_output --partial "\"sbxd\":\"$ID\""
	# ephemeral from the start: its stop is its delete
	dbox '{"autoDeleteInterval":0}'
	run dapi POST "/api/sandbox/$ID/stop"
	jq_true '.state == "destroyed"' <<<"$output"
	run dapi GET "/api/sandbox/$ID"
	jq_true '.statusCode == 404' <<<"$output"
}

@test "daytona API: user root runs in /root; an unknown user is 400 and leaves nothing; the legacy toolbox path routes too" {
	before=$(sbx-ls -j | wc -l)
	run dapi POST /api/sandbox '{"user":"no-such-user"}'
	jq_true '.statusCode == 400 and .message == "User no-such-user does not exist in snapshot base"' <<<"$output"
	[ "$(sbx-ls -j | wc -l)" = "$before" ]
	dbox '{"user":"root"}'
	run dapi GET "/api/sandbox/$ID"
	jq_true '.user == "root"' <<<"$output"
	run dapi POST "/toolbox/$ID/process/execute" '{"command":"echo $HOME; pwd"}'
	jq_true '.exitCode == 0 and .result == "/root\n/root\n"' <<<"$output"
	run dapi GET "/toolbox/$ID/work-dir"
	jq_true '.dir == "/root"' <<<"$output"
	run dapi POST "/api/toolbox/$ID/toolbox/process/execute" '{"command":"echo legacy"}'
	jq_true '.result == "legacy\n"' <<<"$output"
	dapi DELETE "/api/sandbox/$ID" >/dev/null
}

@test "daytona API: a sandbox keeps its name, labels and intervals across a restart of sbxd" {
	# a server of this test's own, restarted over its store
	local keep=("$SBXD_URL" "$SBXD_PID" "$SBXD_DIR" "$SBXD_KEY" "$SBXD_PORT")
	SBXD_DIR=$BATS_TEST_TMPDIR/own
	mkdir -p "$SBXD_DIR"
	sbxd_start
	OWN_PID=$SBXD_PID
	dbox '{"name":"dt-kept","labels":{"k":"v"},"autoStopInterval":0,"autoDeleteInterval":30}'
	OWN_ID=$ID
	sbxd_stop
	sbxd_start
	OWN_PID=$SBXD_PID
	sbxd_log_wait "adopted sandbox $ID"
	run dapi GET /api/sandbox/dt-kept
	jq_true --arg id "$ID" '.id == $id and .labels == {"k":"v"} and .autoStopInterval == 0 and .autoDeleteInterval == 30 and .state == "started"' <<<"$output"
	run dapi DELETE /api/sandbox/dt-kept
	jq_true '.state == "destroyed"' <<<"$output"
	OWN_ID=
	sbxd_stop
	OWN_PID=
	SBXD_URL=${keep[0]} SBXD_PID=${keep[1]} SBXD_DIR=${keep[2]} SBXD_KEY=${keep[3]} SBXD_PORT=${keep[4]}
}

@test "daytona API: --daytona-minute shortens the minute of the intervals: auto-stop, then auto-delete, in its seconds" {
	# a server of this test's own, whose minute is 2 s
	local keep=("$SBXD_URL" "$SBXD_PID" "$SBXD_DIR" "$SBXD_KEY" "$SBXD_PORT") t0
	SBXD_DIR=$BATS_TEST_TMPDIR/own
	mkdir -p "$SBXD_DIR"
	sbxd_start --daytona-minute 2
	OWN_PID=$SBXD_PID
	t0=$(date +%s)
	dbox '{"autoStopInterval":1,"autoDeleteInterval":1}'
	OWN_ID=$ID
	# the API still speaks of minutes
	run dapi GET "/api/sandbox/$ID"
	jq_true '.autoStopInterval == 1 and .autoDeleteInterval == 1 and .state == "started"' <<<"$output"
	run sbxd_api GET "/sandboxes/$ID"
	left=$(jq '((.endAt | sub("\\.[0-9]+Z$"; "Z") | fromdate) - now) | floor' <<<"$output")
	((left >= -1 && left <= 2))
	# stopped after its 2 s of idleness, deleted 2 s after that
	dapi_until "$ID" '.state == "stopped"' 150
	dapi_until "$ID" '.statusCode == 404' 150
	# well before a real minute and a half
	(($(date +%s) - t0 < 30))
	OWN_ID=
	sbxd_stop
	OWN_PID=
	SBXD_URL=${keep[0]} SBXD_PID=${keep[1]} SBXD_DIR=${keep[2]} SBXD_KEY=${keep[3]} SBXD_PORT=${keep[4]}
}

# The restart test's own server, when it failed before stopping it: its
# sandbox killed, then the server, by its pid.
teardown() {
	if [ -n "${OWN_PID:-}" ]; then
		[ -z "${OWN_ID:-}" ] || dapi DELETE "/api/sandbox/$OWN_ID" >/dev/null || true
		kill -TERM "$OWN_PID" 2>/dev/null || true
		wait "$OWN_PID" 2>/dev/null || true
	fi
}

@test "daytona SDK: sessions keep cd and export, split stdout and stderr, run async commands in turn, take input, follow logs, and go" {
	run dsdk sessions
	assert_success
	OUT=$output
	[ -n "$OUT" ]
	assert_equal "$(field .dup)" 409
	assert_equal "$(field .persist.stdout)" "/tmp/sdir hi there"
	assert_equal "$(field .persist.stderr)" "to-err"
	assert_equal "$(field .persist.exitCode)" 0
	assert_equal "$(field .failed.stdout)" 'a
b\c%'
	assert_equal "$(field .failed.exitCode)" 7
	assert_equal "$(field '[.async.idLength, .async.exitCode, .async.output] | map(tostring) | join(",")')" 36,null,null
	assert_equal "$(field .runningExit)" null
	assert_equal "$(field .runningCommand)" 'read line; echo "got $line"; echo e1 >&2; sleep 0.2'
	assert_equal "$(field .done)" 0
	assert_equal "$(field .logs.stdout)" "got hello input"
	assert_equal "$(field .logs.stderr)" "e1"
	assert_equal "$(field .session.sessionId)" s1
	assert_equal "$(field '.session.codes | map(tostring) | join(",")')" "0,0,0,7,0"
	assert_equal "$(field '.list | join(",")')" s1
	assert_equal "$(field .next)" second
	assert_equal "$(field .slow)" first
	assert_equal "$(field .streamed.stdout)" "out1
out2
out3"
	assert_equal "$(field .streamed.stderr)" "err1
err2
err3"
	assert_equal "$(field .streamedExit)" 0
	assert_equal "$(field .again.stdout)" "out1
out2
out3"
	assert_equal "$(field .gone)" 404
	assert_equal "$(field .goneExec)" 404
}

@test "daytona toolbox: sessions without an SDK version are combined text; split on request; unknown sessions and commands are 404 (curl)" {
	local s=/toolbox/ID/process/session
	dbox
	s=${s/ID/$ID}
	run dapi POST "$s" '{"sessionId":"c1"}'
	assert_success
	assert_output ""
	run dapi POST "$s" '{}'
	jq_true '.statusCode == 400 and .code == "BAD_REQUEST" and .path == "/process/session" and .method == "POST"' <<<"$output"
	run dapi POST "$s/c1/exec" '{"command":"echo out; echo err >&2; false"}'
	jq_true '.output == "out\nerr\n" and .exitCode == 1 and (.stdout == null) and (.cmdId | length == 36)' <<<"$output"
	local cmd
	cmd=$(jq -r .cmdId <<<"$output")
	run curl -s -D "$BATS_TEST_TMPDIR/h" -H "Authorization: Bearer $SBXD_KEY" "$SBXD_URL$s/c1/command/$cmd/logs"
	assert_output "out
err"
	grep -qi '^content-type: text/plain' "$BATS_TEST_TMPDIR/h"
	run curl -s -H "Authorization: Bearer $SBXD_KEY" -H 'X-Daytona-Split-Output: true' "$SBXD_URL$s/c1/command/$cmd/logs"
	jq_true '.stdout == "out\n" and .stderr == "err\n" and .output == "\u0001\u0001\u0001out\n\u0002\u0002\u0002err\n"' <<<"$output"
	run curl -s -H "Authorization: Bearer $SBXD_KEY" -H 'X-Daytona-SDK-Version: 0.166.9' "$SBXD_URL$s/c1/command/$cmd/logs"
	assert_output "out
err"
	run dapi POST "$s/c1/exec" '{"command":"  "}'
	jq_true '.statusCode == 400 and .code == "BAD_REQUEST"' <<<"$output"
	run dapi POST "$s/c1/command/$cmd/input" '{"data":"x\n"}'
	jq_true '.statusCode == 400 and .message == "command is not running"' <<<"$output"
	run dapi POST "$s/nope/exec" '{"command":"true"}'
	jq_true '.statusCode == 404 and .code == "NOT_FOUND" and .message == "session not found" and .path == "/process/session/nope/exec"' <<<"$output"
	run dapi GET "$s/c1/command/nope"
	jq_true '.statusCode == 404 and .message == "command not found"' <<<"$output"
	run dapi GET "$s/c1/command/nope/logs"
	jq_true '.statusCode == 404 and .message == "command not found"' <<<"$output"
	run dapi DELETE "$s/nope"
	jq_true '.statusCode == 404 and .message == "session not found"' <<<"$output"
	# A command that ends the shell ends the session.
	run dapi POST "$s/c1/exec" '{"command":"exit 4"}'
	jq_true '.exitCode == 4' <<<"$output"
	run dapi POST "$s/c1/exec" '{"command":"true"}'
	jq_true '.statusCode == 400 and .message == "session c1 has ended"' <<<"$output"
	# The sandbox's end ends its sessions: a sync command returns.
	run dapi POST "$s" '{"sessionId":"c2"}'
	assert_success
	dapi POST "$s/c2/exec" '{"command":"sleep 600"}' >"$BATS_TEST_TMPDIR/sync" &
	local pid=$! i
	for ((i = 0; i < 100; i++)); do
		run dapi GET "$s/c2"
		jq_true '.commands | length == 1' <<<"$output" >/dev/null && break
		sleep 0.1
	done
	jq_true '.sessionId == "c2" and .commands[0].command == "sleep 600" and (.commands[0].exitCode == null)' <<<"$output"
	dapi DELETE "/api/sandbox/$ID" >/dev/null
	wait "$pid"
	jq_true '.exitCode == 137' <"$BATS_TEST_TMPDIR/sync"
}

@test "daytona toolbox: a log's WebSocket answers pings, ends with 1000 after the log, and refuses an unmasked frame with 1002" {
	local s=/toolbox/ID/process/session ws
	dbox
	s=${s/ID/$ID}
	run dapi POST "$s" '{"sessionId":"w1"}'
	assert_success
	run dapi POST "$s/w1/exec" '{"command":"echo one; echo two >&2"}'
	local done=$(jq -r .cmdId <<<"$output")
	run dapi POST "$s/w1/exec" '{"command":"sleep 600","runAsync":true}'
	local slow=$(jq -r .cmdId <<<"$output")
	ws=${SBXD_URL/http/ws}$s/w1/command
	run dsdk wsraw "$ws/$done/logs?follow=true"
	assert_success
	# The marks, as the SDK (this one sends its version) splits them.
	jq_true '.status == 101 and .accept and ([.frames[] | select(.op == 2) | .data] | add) == "\u0001\u0001\u0001one\n\u0002\u0002\u0002two\n" and .frames[-1] == {"op":8,"code":1000}' <<<"$output"
	# The version as a browser's protocol; none: no marks.
	run dsdk wsraw "$ws/$done/logs?follow=true" proto
	assert_success
	jq_true '.protocol == "X-Daytona-SDK-Version~0.218.0" and ([.frames[] | select(.op == 2) | .data] | add) == "\u0001\u0001\u0001one\n\u0002\u0002\u0002two\n"' <<<"$output"
	run dsdk wsraw "$ws/$done/logs?follow=true" plain
	assert_success
	jq_true '([.frames[] | select(.op == 2) | .data] | add) == "one\ntwo\n" and .frames[-1] == {"op":8,"code":1000}' <<<"$output"
	run dsdk wsraw "$ws/$slow/logs?follow=true" bad
	assert_success
	jq_true '.status == 101 and .frames[0] == {"op":10,"data":"hi"} and .frames[-1] == {"op":8,"code":1002}' <<<"$output"
	run dsdk wsraw "$ws/nope/logs?follow=true"
	jq_true '.status == 404' <<<"$output"
	# Without the upgrade, follow is the log so far.
	run dapi GET "$s/w1/command/$done/logs?follow=true"
	assert_output "one
two"
	dapi DELETE "/api/sandbox/$ID" >/dev/null
}

@test "daytona SDK: createPty runs a shell on a terminal with its envs, cwd and size, resizes, and ends with its exit code; connectPty" {
	run dsdk pty
	assert_success
	OUT=$output
	[ -n "$OUT" ]
	assert_equal "$(field .first)" true
	assert_equal "$(field .greeting)" true
	assert_equal "$(field '[.info.id, .info.cols, .info.rows, .info.active, .info.cwd] | map(tostring) | join(",")')" "p1,90,20,true,/tmp"
	assert_equal "$(field .resized)" true
	assert_equal "$(field '.list | join(",")')" p1
	assert_equal "$(field .exitCode)" 3
	assert_equal "$(field .afterActive)" false
	assert_equal "$(field .gone)" 404
	assert_equal "$(field .connected)" true
	assert_equal "$(field .exitCode2)" 0
}

@test "daytona toolbox: PTYs over HTTP: create 201, info, resize checks its size, connect needs the upgrade, unknown ones are 404 (curl)" {
	local t=/toolbox/ID/process/pty
	dbox
	t=${t/ID/$ID}
	run dapi POST "$t" '{"id":"h1","cols":100,"rows":30}'
	jq_true '.sessionId == "h1"' <<<"$output"
	run dapi POST "$t" '{"id":"h1"}'
	jq_true '.statusCode == 409 and .code == "CONFLICT"' <<<"$output"
	run dapi POST "$t" '{"id":"h2","cols":0}'
	jq_true '.statusCode == 400 and .message == "cols and rows are 1 to 1000"' <<<"$output"
	run dapi GET "$t/h1"
	jq_true '.id == "h1" and .cols == 100 and .rows == 30 and .active == true and (.createdAt | test("^[0-9-]+T[0-9:]+Z$"))' <<<"$output"
	run dapi POST "$t/h1/resize" '{"cols":50,"rows":10}'
	jq_true '.cols == 50 and .rows == 10' <<<"$output"
	run dapi POST "$t/h1/resize" '{"cols":1001,"rows":10}'
	jq_true '.statusCode == 400' <<<"$output"
	run dapi GET "$t"
	jq_true '[.sessions[].id] == ["h1"]' <<<"$output"
	run dapi GET "$t/h1/connect"
	jq_true '.statusCode == 400 and .message == "a WebSocket upgrade is required"' <<<"$output"
	run dapi GET "$t/nope"
	jq_true '.statusCode == 404 and .code == "NOT_FOUND" and .path == "/process/pty/nope"' <<<"$output"
	run dapi DELETE "$t/h1"
	assert_success
	run dapi GET "$t/h1"
	jq_true '.statusCode == 404' <<<"$output"
	dapi DELETE "/api/sandbox/$ID" >/dev/null
}

@test "daytona SDK: snapshot.create from an image (its size), get, list (base is general), a sandbox from it, delete then 404; it is E2B's template too" {
	run dsdk snapshots dt-snap-one "$BASE"
	assert_success
	OUT=$output
	field '[.made.state, .made.name, .made.cpu, .made.mem, .made.disk, .made.imageName] | @tsv' >"$BATS_TEST_TMPDIR/m"
	assert_equal "$(cat "$BATS_TEST_TMPDIR/m")" "$(printf 'active\tdt-snap-one\t1\t1\t1\t%s' "$BASE")"
	field '.got.state' | grep -qx active
	jq_true '.listed | any(.[0] == "dt-snap-one" and .[1] == false and .[2] == "active")' <<<"$OUT"
	jq_true '.listed | any(.[0] == "base" and .[1] == true and .[2] == "active")' <<<"$OUT"
	jq_true '.run == "from-snapshot" and .size.cpu == 1 and .size.memory == 1 and .size.snapshot == "dt-snap-one"' <<<"$OUT"
	jq_true '.gone.status == 404' <<<"$OUT"
}

@test "daytona API: a snapshot is a template of E2B's API, and a sandbox of it has its size on both APIs" {
	run dapi POST /api/snapshots "{\"name\":\"dt-snap-two\",\"imageName\":\"$BASE\",\"cpu\":2,\"memory\":3}"
	jq_true '.name == "dt-snap-two" and .general == false and (.state == "building" or .state == "active") and .cpu == 2 and .mem == 3' <<<"$output"
	SID=$(jq -r .id <<<"$output")
	wait_state /api/snapshots/dt-snap-two building pending
	assert_equal "$st" active
	run dapi GET "/api/snapshots/$SID"
	jq_true '.name == "dt-snap-two" and .state == "active"' <<<"$output"
	run sbxd_api GET /templates/aliases/dt-snap-two
	jq_true --arg id "$SID" '.templateID == $id' <<<"$output"
	run sbxd_api POST /sandboxes '{"templateID":"dt-snap-two","timeout":60}'
	E2B=$(jq -r .sandboxID <<<"$output")
	[ ${#E2B} = 20 ]
	run sbxd_api GET "/sandboxes/$E2B"
	jq_true '.cpuCount == 2 and .memoryMB == 3072' <<<"$output"
	run dapi GET "/api/sandbox/$E2B"
	jq_true '.cpu == 2 and .memory == 3' <<<"$output"
	sbxd_api DELETE "/sandboxes/$E2B" >/dev/null
	run dapi DELETE "/api/snapshots/$SID"
	[ -z "$output" ]
	run dapi GET /api/snapshots/dt-snap-two
	jq_true '.statusCode == 404 and .message == "Snapshot dt-snap-two not found"' <<<"$output"
}

@test "daytona API: snapshot errors: no tag or :latest is 400, a taken name 409, base cannot be deleted (403), unknown ones 404" {
	run dapi POST /api/snapshots '{"name":"dt-bad","imageName":"busybox"}'
	jq_true '.statusCode == 400 and (.message | test("tag"))' <<<"$output"
	run dapi POST /api/snapshots '{"name":"dt-bad","imageName":"busybox:latest"}'
	jq_true '.statusCode == 400 and (.message | test("latest"))' <<<"$output"
	run dapi POST /api/snapshots '{"name":"dt-bad"}'
	jq_true '.statusCode == 400 and .message == "Must specify either imageName or buildInfo"' <<<"$output"
	run dapi POST /api/snapshots '{"name":"dt-bad","imageName":"busybox:1","cpu":9}'
	jq_true '.statusCode == 400 and .message == "CPU request 9 exceeds maximum allowed per sandbox (4)"' <<<"$output"
	run dapi POST /api/snapshots '{"name":"base","imageName":"busybox:1"}'
	jq_true '.statusCode == 409 and .message == "Snapshot with name \"base\" already exists for this organization"' <<<"$output"
	run dapi DELETE /api/snapshots/base
	jq_true '.statusCode == 403' <<<"$output"
	run dapi GET /api/snapshots/base
	jq_true '.general == true and .state == "active"' <<<"$output"
	run dapi DELETE /api/snapshots/no-such
	jq_true '.statusCode == 404' <<<"$output"
	run dapi GET '/api/snapshots?name=bas&limit=1'
	jq_true '.page == 1 and .total >= 1 and (.items | length) == 1 and (.items[0].name | test("bas"))' <<<"$output"
	run dapi GET /api/snapshots/dt-bad
	jq_true '.statusCode == 404' <<<"$output"
}

@test "daytona SDK: create({image}) builds it (pending_build, then started) with its size; the same image again is the same build" {
	before=$(sbxd_api GET /templates | jq '[.[] | select(.names[0] | startswith("dt-"))] | length')
	run dsdk image "$BASE"
	assert_success
	OUT=$output
	jq_true '.a.state == "started" and .a.cpu == 2 and .a.memory == 2 and .a.run == "built-by-image"' <<<"$OUT"
	jq_true '.b.state == "started" and .b.run == "built-by-image" and .b.snapshot == .a.snapshot and .a.id != .b.id' <<<"$OUT"
	after=$(sbxd_api GET /templates | jq '[.[] | select(.names[0] | startswith("dt-"))] | length')
	assert_equal "$after" "$((before + 1))"
	# its size is the local sandbox's limits
	A=$(field .a.id)
	run sbx-ls -j
	assert_success
	jq -s --arg id "$A" 'map(select(.labels.sbxd == $id))[0].limits' <<<"$output" >"$BATS_TEST_TMPDIR/limits"
	cat "$BATS_TEST_TMPDIR/limits"
	jq_true '.cpus == 2 and .memory == 2147483648' <"$BATS_TEST_TMPDIR/limits"
	run sbxd_api GET "/sandboxes/$A"
	jq_true '.cpuCount == 2 and .memoryMB == 2048' <<<"$output"
	dapi DELETE "/api/sandbox/$A" >/dev/null
}

@test "daytona API: a buildInfo or a snapshot whose build fails is build_failed with its errorReason; a sandbox of that snapshot is 400" {
	run dapi POST /api/sandbox '{"buildInfo":{"dockerfileContent":"FROM 127.0.0.1:1/none/such:1\n"}}'
	jq_true '.state == "pending_build" or .state == "building_snapshot"' <<<"$output"
	ID=$(jq -r .id <<<"$output")
	wait_state "/api/sandbox/$ID" pending_build building_snapshot starting
	assert_equal "$st" build_failed
	jq_true '(.errorReason | length) > 0' <<<"$OUT"
	# a snapshot likewise, and no sandbox is made of it
	run dapi POST /api/snapshots '{"name":"dt-snap-fails","imageName":"127.0.0.1:1/none/such:1"}'
	jq_true '.name == "dt-snap-fails"' <<<"$output"
	wait_state /api/snapshots/dt-snap-fails building pending
	assert_equal "$st" build_failed
	jq_true '(.errorReason | length) > 0' <<<"$OUT"
	run dapi POST /api/sandbox '{"snapshot":"dt-snap-fails"}'
	jq_true '.statusCode == 400 and .message == "Snapshot dt-snap-fails is build_failed"' <<<"$output"
	run dapi DELETE /api/snapshots/dt-snap-fails
	[ -z "$output" ]
	run dapi DELETE "/api/sandbox/$ID"
	jq_true '.state == "destroyed"' <<<"$output"
	run dapi GET "/api/sandbox/$ID"
	jq_true '.statusCode == 404' <<<"$output"
}

@test "daytona SDK: archive is refused while started, archives a stopped sandbox, and start brings it back with its files" {
	run dsdk archive
	assert_success
	OUT=$output
	jq_true '.running.status == 400 and (.running.message | test("Sandbox is not stopped"))' <<<"$OUT"
	jq_true '.archived == "archived" and .listed == "archived" and .started == "started" and .kept == "kept"' <<<"$OUT"
}

@test "daytona SDK: a linux-vm snapshot's sandbox pauses with its processes and starts with them; a container's pause is 422" {
	run dsdk pause dt-snap-vm "$BASE"
	assert_success
	OUT=$output
	jq_true '.snapClass == "linux-vm" and .vmClass == "linux-vm" and .boxClass == "container"' <<<"$OUT"
	jq_true '.paused == "paused" and .listed == "paused" and .started == "started"' <<<"$OUT"
	jq_true '.whilePaused | test("is not started")' <<<"$OUT"
	# The counter lived through the pause; a stop ends it.
	assert_equal "$(field .alive)" "$(printf 'alive\nkept')"
	jq_true '.stopped == "stopped" and .after == "gone"' <<<"$OUT"
	jq_true '.refused.status == 422 and .boxState == "started"' <<<"$OUT"
}

@test "daytona API: sandboxClass is container or linux-vm (400 else, and for a build), and a container cannot pause, started or stopped" {
	run dapi POST /api/snapshots "{\"name\":\"dt-cls\",\"imageName\":\"$BASE\",\"sandboxClass\":\"windows\"}"
	jq_true '.statusCode == 400 and (.message | test("sandboxClass"))' <<<"$output"
	run dapi POST /api/snapshots '{"name":"dt-cls","buildInfo":{"dockerfileContent":"FROM busybox:1\n"},"sandboxClass":"linux-vm"}'
	jq_true '.statusCode == 400 and (.message | test("container class"))' <<<"$output"
	run dapi GET /api/snapshots/dt-cls
	jq_true '.statusCode == 404' <<<"$output"
	run dapi POST /api/sandbox '{}'
	ID=$(jq -r .id <<<"$output")
	run dapi POST "/api/sandbox/$ID/pause"
	jq_true '.statusCode == 422' <<<"$output"
	run dapi POST "/api/sandbox/$ID/stop"
	wait_state "/api/sandbox/$ID" stopping
	run dapi POST "/api/sandbox/$ID/pause"
	jq_true '.statusCode == 422' <<<"$output"
	dapi DELETE "/api/sandbox/$ID" >/dev/null
}

@test "daytona API: an ephemeral sandbox cannot be archived" {
	dbox '{"autoDeleteInterval":0}'
	run dapi POST "/api/sandbox/$ID/archive"
	jq_true '.statusCode == 400 and .message == "Ephemeral sandboxes cannot be archived"' <<<"$output"
	dapi DELETE "/api/sandbox/$ID" >/dev/null
}

@test "daytona SDK: getPreviewLink's URL reaches a server in the sandbox with its token, and not without" {
	port=8123
	run dsdk preview "$port"
	assert_success
	OUT=$output
	ID=$(field .id)
	url=$(field .url)
	token=$(field .token)
	[ -n "$token" ] && [ "$token" != null ]
	assert_equal "$(field .sandboxId)" "$ID"
	host=${url#http://}
	assert_equal "$host" "$port-$ID.127.0.0.1:$SBXD_PORT"
	run curl -s -H "Host: $host" -H "x-daytona-preview-token: $token" "$SBXD_URL/index.html"
	assert_output preview-ok
	run curl -s -o /dev/null -w '%{http_code}' -H "Host: $host" "$SBXD_URL/index.html"
	assert_output 403
	run dapi GET "/api/sandbox/$ID/ports/0/preview-url"
	jq_true '.statusCode == 400' <<<"$output"
	dapi DELETE "/api/sandbox/$ID" >/dev/null
}
