#!/usr/bin/env bats
# sbxd against E2B's official CLI (npm package @e2b/cli): `e2b sandbox list`,
# `metrics`, `logs`, `snapshot` and `e2b template list` on a private sbxd, each checked
# by what it prints (the ids made, the commands run and what they wrote).
#
# The CLI is installed as the SDK is (tests/lib/sbxd.bash: the machine's npm,
# into ${XDG_CACHE_HOME:-$HOME/.cache}/sbx-test/e2b-cli-$E2B_CLI_VERSION,
# kept between runs, never committed). What it reads (its dist/index.js):
#   E2B_API_URL   the control plane (the SDK's ConnectionConfig, which the
#                 CLI builds its client with); no login is needed with
#   E2B_API_KEY   the key (sent as X-API-Key); ~/.e2b/config.json, written
#                 by `e2b auth login`, is read only without it, and HOME is
#                 a directory of this file's, so there is none.
#   NO_UPDATE_NOTIFIER  set: no update check (without it the CLI asks
#                 registry.npmjs.org for its latest version every 8 hours).
# It runs with only these (env -i), and one test traces its connect(2)s:
# none goes anywhere but loopback.
load ../lib/helper
load ../lib/sbxd

setup_file() {
	cli_install
	sbx_setup_file
	sbxd_start
	CLI_HOME=$SBXD_DIR/home
	mkdir -p "$CLI_HOME"
	export CLI_HOME
}

teardown_file() {
	sbxd_stop
	sbx_teardown_file
	rm -rf "$SBXD_DIR"
}

setup() {
	sbx_setup
}

# e2b ARGS...: the CLI against the private sbxd, the key by the environment.
e2b() {
	env -i PATH="$PATH" HOME="$CLI_HOME" XDG_CONFIG_HOME="$CLI_HOME/config" \
		NO_UPDATE_NOTIFIER=1 E2B_API_URL="$SBXD_URL" E2B_API_KEY="$SBXD_KEY" \
		${CLI_TRACE:+strace -f -qq -e trace=connect -o "$CLI_TRACE"} \
		timeout 60 node "$E2B_CLI_DIR/node_modules/@e2b/cli/dist/index.js" "$@"
}

# A sandbox through the API; sets ID and TOK.
box() {
	local out
	out=$(sbxd_create)
	ID=$(jq -r .sandboxID <<<"$out")
	TOK=$(jq -r .envdAccessToken <<<"$out")
	[ ${#ID} = 20 ]
}

# The HTTP status of METHOD PATH on the control plane.
status() {
	curl -s -o /dev/null -w '%{http_code}' -X "$1" -H "X-API-Key: $SBXD_KEY" "$SBXD_URL$2"
}

# The local sandbox behind sbxd's $1.
local_id() {
	sbx-ls -j | jq -r --arg id "$1" 'select(.labels.sbxd == $id) | .id'
}

@test "CLI: sandbox list shows the sandboxes made, running, of template base; a killed one is gone" {
	box
	a=$ID
	box
	b=$ID
	[ "$(status DELETE "/sandboxes/$b")" = 204 ]
	run e2b sandbox list -f json
	assert_success
	json=$output
	run jq -r --arg a "$a" '.[] | select(.sandboxId == $a) |
		[.templateId, .state, .envdVersion] | @tsv' <<<"$json"
	assert_output $'base\trunning\t0.6.4'
	run jq -r --arg b "$b" '[.[] | select(.sandboxId == $b)] | length' <<<"$json"
	assert_output 0
	# The table too.
	run e2b sandbox list
	assert_success
	assert_output --partial "$a"
	refute_output --partial "$b"
}

@test "CLI: sandbox metrics prints the sandbox's sample; an unknown id fails" {
	box
	run e2b sandbox metrics "$ID" --format json
	assert_success
	line=$(grep '^{' <<<"$output")
	[ -n "$line" ]
	jq_true '(.cpuCount >= 1) and (.memTotal > 0) and (.memUsed > 0) and
		(.timestamp | test("^20[0-9-]+T"))' <<<"$line"
	run e2b sandbox metrics nosuchsandboxxxxxxxx --format json
	assert_failure
}

@test "CLI: sandbox logs shows each command run and a detached command's output; --level ERROR the failed one" {
	box
	run sbxd_run "$ID" "$TOK" '{"process":{"cmd":"/bin/sh","args":["-c","echo fine-one"]}}'
	assert_output --partial '"exited":true'
	run sbxd_run "$ID" "$TOK" '{"process":{"cmd":"/bin/sh","args":["-c","exit 3"]}}'
	assert_output --partial '"exitCode":3'
	# A detached command (as a template's start command runs): its output
	# is in the sandbox, read at each request.
	lid=$(local_id "$ID")
	[ -n "$lid" ]
	run sbx-exec -d -I "$lid" -- sh -c 'echo wrote-line-1; echo wrote-line-2'
	assert_success
	for i in $(seq 50); do
		sbx-exec -I "$lid" -- test -f /tmp/.sbx/cmd/"$output"/status && break
		sleep 0.1
	done
	run e2b sandbox logs "$ID" --format json
	assert_success
	logs=$(grep '^{' <<<"$output")
	run jq -r '[.level, .logger, .msg, .exitCode // "-"] | @tsv' <<<"$logs"
	assert_line $'info\tprocess\t/bin/sh -c echo fine-one\t0'
	assert_line $'error\tprocess\t/bin/sh -c exit 3\t3'
	assert_line $'info\tprocess\tsh -c echo wrote-line-1; echo wrote-line-2\t0'
	assert_line $'info\tprocess\twrote-line-1\t-'
	assert_line $'info\tprocess\twrote-line-2\t-'
	run e2b sandbox logs "$ID" --format json --level ERROR
	assert_success
	run jq -r .msg <<<"$(grep '^{' <<<"$output")"
	assert_output '/bin/sh -c exit 3'
	# The pretty form: the level in capitals (the JSON keeps the line's).
	run e2b sandbox logs "$ID"
	assert_success
	assert_output --regexp 'ERROR.*/bin/sh -c exit 3'
	assert_output --regexp 'INFO.*wrote-line-2'
}

@test "CLI: sandbox logs -f shows a detached command's lines as they come, each once, and ends with the sandbox; times to the millisecond" {
	box
	lid=$(local_id "$ID")
	[ -n "$lid" ]
	run sbx-exec -d -I "$lid" -- sh -c 'echo first-line; sleep 2; echo second-line; sleep 2; echo third-line'
	assert_success
	e2b sandbox logs -f "$ID" --format json >f.out 2>f.err &
	pid=$!
	# The third line, seen by the follow, then the sandbox's end.
	for ((i = 0; i < 300; i++)); do
		grep -q '"msg":"third-line"' f.out && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	[ "$(status DELETE "/sandboxes/$ID")" = 204 ]
	# It ends with the sandbox (the logs of a killed one are 404 here,
	# which the CLI prints and exits 1 on), not by its timeout (124).
	st=0
	wait "$pid" || st=$?
	[ "$st" = 0 ] || [ "$st" = 1 ]
	run jq -r .msg <<<"$(grep '^{' f.out)"
	[ "$(grep -c '^first-line$' <<<"$output")" = 1 ]
	[ "$(grep -c '^second-line$' <<<"$output")" = 1 ]
	[ "$(grep -c '^third-line$' <<<"$output")" = 1 ]
	# Their times go up to the millisecond.
	run jq -r .timestamp <<<"$(grep '^{' f.out)"
	[ "$(sort -c <<<"$output" && echo sorted)" = sorted ]
}

@test "GET /v2/sandboxes/{id}/logs: forward, backward, level, search, limit; 400 and 404" {
	box
	sbxd_run "$ID" "$TOK" '{"process":{"cmd":"/bin/sh","args":["-c","echo a"]}}' >/dev/null
	sbxd_run "$ID" "$TOK" '{"process":{"cmd":"/bin/sh","args":["-c","exit 4"]}}' >/dev/null
	run bash -c "sbxd_api GET '/v2/sandboxes/$ID/logs' | jq -r '.logs[] | [.level, .message, .fields.logger] | @tsv'"
	assert_output $'info\t/bin/sh -c echo a\tprocessSvc\nerror\t/bin/sh -c exit 4\tprocessSvc'
	run bash -c "sbxd_api GET '/v2/sandboxes/$ID/logs?direction=backward&limit=1' | jq -r '.logs[].message'"
	assert_output '/bin/sh -c exit 4'
	run bash -c "sbxd_api GET '/v2/sandboxes/$ID/logs?level=warn' | jq -r '.logs[].message'"
	assert_output '/bin/sh -c exit 4'
	run bash -c "sbxd_api GET '/v2/sandboxes/$ID/logs?search=echo' | jq -r '.logs[].message'"
	assert_output '/bin/sh -c echo a'
	# A cursor past them all (forward), before them all (backward).
	run bash -c "sbxd_api GET '/v2/sandboxes/$ID/logs?cursor=$(( ($(date +%s) + 5) * 1000 ))' | jq -c .logs"
	assert_output '[]'
	run bash -c "sbxd_api GET '/v2/sandboxes/$ID/logs?cursor=1000&direction=backward' | jq -c .logs"
	assert_output '[]'
	[ "$(status GET "/v2/sandboxes/$ID/logs?direction=up")" = 400 ]
	[ "$(status GET "/v2/sandboxes/$ID/logs?level=loud")" = 400 ]
	[ "$(status GET "/v2/sandboxes/$ID/logs?limit=1001")" = 400 ]
	[ "$(status GET /v2/sandboxes/nosuchsandboxxxxxxxx/logs)" = 404 ]
	[ "$(status GET /sandboxes/nosuchsandboxxxxxxxx/logs)" = 404 ]
	# v1: each entry twice, as a line of JSON and as a SandboxLogEntry.
	run bash -c "sbxd_api GET '/sandboxes/$ID/logs?limit=1' | jq -r '(.logs[].line | fromjson | .msg), (.logEntries[].message), (.logs | length)'"
	assert_output $'/bin/sh -c echo a\n/bin/sh -c echo a\n1'
}

@test "CLI: template list shows base" {
	run e2b template list -f json
	assert_success
	run jq -r '.[] | select(.templateID == "base") | .aliases | join(",")' <<<"$output"
	assert_output base
}

@test "CLI: every connection it makes is to sbxd on loopback" {
	command -v strace >/dev/null || fail "strace not found (run scripts/install-deps)"
	box
	CLI_TRACE=$BATS_TEST_TMPDIR/trace
	run e2b sandbox list -f json
	assert_success
	assert_output --partial "$ID"
	# IP connects only; at least one to sbxd, none elsewhere.
	grep -E 'sa_family=AF_INET6?' "$CLI_TRACE" >"$BATS_TEST_TMPDIR/ip"
	grep -q "htons($SBXD_PORT)" "$BATS_TEST_TMPDIR/ip"
	run grep -Ev 'inet_addr\("127\.0\.0\.1"\)|inet_pton\(AF_INET6, "::1"' "$BATS_TEST_TMPDIR/ip"
	assert_output ''
}

@test "CLI: sandbox list -t and --started-after filter as E2B's API does" {
	box
	local a=$ID t
	sleep 0.05
	t=$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ)
	sleep 0.05
	box
	local b=$ID
	run e2b sandbox list -t base -f json
	assert_success
	run jq -c --arg a "$a" --arg b "$b" '[.[].sandboxId | select(. == $a or . == $b)] | sort' <<<"$output"
	assert_output "$(jq -c -n --arg a "$a" --arg b "$b" '[$a, $b] | sort')"
	run e2b sandbox list -t no-such-template -f json
	assert_success
	assert_output '[]'
	run e2b sandbox list --started-after "$t" -f json
	assert_success
	run jq -c '[.[].sandboxId]' <<<"$output"
	assert_output "[\"$b\"]"
}

@test "CLI: sandbox snapshot create, list (all, by sandbox, by name) and delete" {
	box
	run e2b sandbox snapshot create "$ID" -n cli-snap
	assert_success
	sid=$(sbxd_api GET "/snapshots?name=cli-snap" | jq -r '.[0].snapshotID')
	[[ "$sid" == snp-* ]]
	assert_output --partial "$sid"
	run e2b sandbox snapshot list -f json
	assert_success
	jq_true --arg s "$sid" 'map(select(.snapshotId == $s)) | length == 1' <<<"$output"
	run e2b sandbox snapshot list "$ID" -f json
	assert_success
	jq_true --arg s "$sid" 'length == 1 and .[0].snapshotId == $s' <<<"$output"
	run e2b sandbox snapshot list -n cli-snap -f json
	assert_success
	jq_true --arg s "$sid" 'length == 1 and .[0].snapshotId == $s' <<<"$output"
	run e2b sandbox snapshot delete "$sid"
	assert_success
	[ "$(sbxd_api GET "/snapshots?name=cli-snap" | jq length)" -eq 0 ]
}

@test "CLI: snapshot create -n with a name in use: the new one takes it (E2B's new build), the old goes unless a sandbox stands on it" {
	box
	run e2b sandbox snapshot create "$ID" -n cli-again
	assert_success
	one=$(sbxd_api GET "/snapshots?name=cli-again" | jq -r '.[0].snapshotID')
	[[ "$one" == snp-* ]]
	# A sandbox stands on the first.
	on=$(sbxd_api POST /sandboxes '{"templateID":"cli-again","timeout":120}' | jq -r .sandboxID)
	[ "$(sbxd_api GET "/sandboxes/$on" | jq -r .templateID)" = "$one" ]
	run e2b sandbox snapshot create "$ID" -n cli-again
	assert_success
	two=$(sbxd_api GET "/snapshots?name=cli-again" | jq -r '.[0].snapshotID')
	[[ "$two" == snp-* ]]
	[ "$two" != "$one" ]
	assert_output --partial "$two"
	run jq length <(sbxd_api GET "/snapshots?name=cli-again")
	assert_output 1
	# The first stays, unnamed, for its sandbox.
	run jq -r --arg s "$one" '.[] | select(.snapshotID == $s) | .names | length' \
	    <(sbxd_api GET /snapshots)
	assert_output 0
	new=$(sbxd_api POST /sandboxes '{"templateID":"cli-again","timeout":120}' | jq -r .sandboxID)
	[ "$(sbxd_api GET "/sandboxes/$new" | jq -r .templateID)" = "$two" ]
	# A third, once nothing stands on the second.
	sbxd_api DELETE "/sandboxes/$new" >/dev/null
	run e2b sandbox snapshot create "$ID" -n cli-again
	assert_success
	three=$(sbxd_api GET "/snapshots?name=cli-again" | jq -r '.[0].snapshotID')
	[ "$three" != "$two" ]
	# Unused, the second is gone; the first is still there.
	run jq -r '[.[].snapshotID] | sort | join(" ")' <(sbxd_api GET /snapshots)
	assert_output "$(printf '%s\n' "$one" "$three" | sort | paste -sd' ')"
	sbxd_api DELETE "/sandboxes/$on" >/dev/null
	for s in "$one" "$three"; do
		run e2b sandbox snapshot delete "$s"
		assert_success
	done
}

