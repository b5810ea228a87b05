#!/usr/bin/env bats
# sbxd: the control plane and the process service, over plain HTTP.
load ../lib/helper
load ../lib/sbxd

setup_file() {
	sbx_setup_file
	sbxd_start
}

teardown_file() {
	sbxd_stop
	sbx_teardown_file
	rm -rf "$SBXD_DIR"
}

setup() {
	sbx_setup
}

# A new sandbox; sets ID and TOK. [JSON body]
box() {
	local out
	out=$(sbxd_create "$@")
	ID=$(jq -r .sandboxID <<<"$out")
	TOK=$(jq -r '.envdAccessToken // empty' <<<"$out")
	[ ${#ID} = 20 ] || { echo "no sandbox: $out" >&2; return 1; }
}

# Status code of a request: code METHOD PATH [curl args]
code() {
	local m=$1 p=$2
	shift 2
	curl -s -o "$BATS_TEST_TMPDIR/body" -w '%{http_code}' -X "$m" "$@" "$SBXD_URL$p"
}

body() {
	cat "$BATS_TEST_TMPDIR/body"
}

@test "sbxd --help prints the usage and exits 0" {
	run sbxd --help
	assert_success
	assert_output --partial "usage: sbxd"
}

@test "sbxd with a bad option or value is a usage error" {
	run sbxd --on-exit maybe -k /dev/null
	assert_failure 2
	assert_output "sbxd: bad value 'maybe' for --on-exit (leave, kill, pause)"
	run sbxd -l 127.0.0.1:0 -k /dev/null --max-sandboxes -1
	assert_failure 2
	run sbxd -l 127.0.0.1:0 -k /dev/null --max-connections 8
	assert_failure 2
	assert_output "sbxd: bad count '8' for --max-connections (0, or 16 to 1000000)"
	run sbxd -l 127.0.0.1:0 -k /dev/null --max-per-address x
	assert_failure 2
	assert_output "sbxd: bad count 'x' for --max-per-address"
	run sbxd -l 127.0.0.1:0 -k /dev/null --header-timeout 0
	assert_failure 2
	assert_output "sbxd: --header-timeout: 0 is under the minimum, 1s"
	run sbxd -l 127.0.0.1:0 -k /dev/null --header-timeout 2h
	assert_failure 2
	assert_output "sbxd: --header-timeout: 2h is over the maximum, 1h"
	run sbxd -l 127.0.0.1:0 -k /dev/null --max-timeout 400d
	assert_failure 2
	assert_output "sbxd: --max-timeout: 400d is over the maximum, 365d"
	run sbxd -l 127.0.0.1:0 -k /dev/null --max-timeout 1x
	assert_failure 2
	assert_output "sbxd: --max-timeout: invalid duration '1x' (want 90, 90s, 15m, 1h, 2d)"
	run sbxd -l 127.0.0.1:0 -k /dev/null --daytona-minute 0
	assert_failure 2
	assert_output "sbxd: --daytona-minute: 0 is under the minimum, 1s"
	run sbxd -l 127.0.0.1:0 -k /dev/null --daytona-minute 2m
	assert_failure 2
	assert_output "sbxd: --daytona-minute: 2m is over the maximum, 1m"
}

@test "sbxd without a readable key file exits 5 and says which file" {
	run sbxd -l 127.0.0.1:1 -k "$BATS_TEST_TMPDIR/nokey" -S "$BATS_TEST_TMPDIR/st"
	assert_failure 5
	assert_output --partial "cannot open '$BATS_TEST_TMPDIR/nokey'"
	: >"$BATS_TEST_TMPDIR/empty"
	run sbxd -l 127.0.0.1:1 -k "$BATS_TEST_TMPDIR/empty" -S "$BATS_TEST_TMPDIR/st"
	assert_failure 5
	assert_output --partial "no API key in"
}

@test "sbxd refuses an address it cannot listen on" {
	run sbxd -l "127.0.0.1:$SBXD_PORT" -k "$SBXD_DIR/key" -S "$BATS_TEST_TMPDIR/st"
	assert_failure 1
	assert_output --partial "cannot listen on '127.0.0.1:$SBXD_PORT'"
}

@test "health answers 204 without a key" {
	run code GET /health
	assert_output 204
}

@test "a request without an API key, or with a wrong one, is 401" {
	run code GET /v2/sandboxes
	assert_output 401
	run jq -c . "$BATS_TEST_TMPDIR/body"
	assert_output '{"code":401,"message":"Invalid API key"}'
	run code GET /v2/sandboxes -H "X-API-Key: e2b_00"
	assert_output 401
}

@test "create answers 201 with a Sandbox, and the sandbox runs locally" {
	run code POST /sandboxes -H "X-API-Key: $SBXD_KEY" \
		-d '{"templateID":"base","timeout":300,"secure":true,"metadata":{"job":"t1"}}'
	assert_output 201
	id=$(jq -r .sandboxID "$BATS_TEST_TMPDIR/body")
	[[ $id =~ ^[a-z0-9]{20}$ ]]
	run jq -r '[.templateID, .clientID, .envdVersion, (.envdAccessToken | length > 20)] | @tsv' "$BATS_TEST_TMPDIR/body"
	assert_output $'base\t6532622b\t0.6.4\ttrue'
	run sbx-ls -j
	assert_output --partial "\"sbxd\":\"$id\""
}

@test "create v2 (POST /v2/sandboxes) is always secure and lives 300 s unless told" {
	run code POST /v2/sandboxes -H "X-API-Key: $SBXD_KEY" -d '{"templateID":"base"}'
	assert_output 201
	id=$(jq -r .sandboxID "$BATS_TEST_TMPDIR/body")
	run jq -r '.envdAccessToken | length > 20' "$BATS_TEST_TMPDIR/body"
	assert_output true
	run sbxd_api GET "/sandboxes/$id"
	run jq -r '((.endAt | sub("\\.[0-9]+Z$"; "Z") | fromdate) - (.startedAt | sub("\\.[0-9]+Z$"; "Z") | fromdate))' <<<"$output"
	assert_output 300
	run code POST /v2/sandboxes -H "X-API-Key: $SBXD_KEY" -d '{"templateID":"base","timeout":0}'
	assert_output 400
}

@test "create without secure gives no access token" {
	box '{"templateID":"base","timeout":60}'
	[ -z "$TOK" ]
	run sbxd_run "$ID" "" '{"process":{"cmd":"true"}}'
	assert_line --index 0 '{"event":{"start":{"pid":100}}}'
}

# The network interfaces in sandbox $1, sorted; the host's without $1.
netdevs() {
	if [ -n "${1:-}" ]; then
		sbxd_run "$1" "" '{"process":{"cmd":"cat","args":["/proc/net/dev"]}}' |
			jq -r 'select(.event.data.stdout) | .event.data.stdout' | base64 -d
	else
		cat /proc/net/dev
	fi | awk -F: 'NR > 2 { gsub(/ /, "", $1); print $1 }' | sort
}

# The network namespace of sandbox $1 ("net:[inode]").
netns() {
	sbxd_run "$1" "" '{"process":{"cmd":"readlink","args":["/proc/self/ns/net"]}}' |
		jq -r 'select(.event.data.stdout) | .event.data.stdout' | base64 -d
}

@test "allow_internet_access false: loopback only; by default a network of its own, never the host's" {
	box '{"templateID":"base","timeout":60,"allow_internet_access":false}'
	assert_equal "$(netdevs "$ID")" lo
	assert_equal "$(sbxd_api GET "/sandboxes/$ID" | jq -r .allowInternetAccess)" false
	box '{"templateID":"base","timeout":60}'
	assert_equal "$(netdevs "$ID")" lo
	local ns
	ns=$(netns "$ID")
	[[ $ns == net:\[* ]]
	[ "$ns" != "$(readlink /proc/self/ns/net)" ]
	assert_equal "$(sbxd_api GET "/sandboxes/$ID" | jq -r .allowInternetAccess)" true
}

@test "network at create: allowOut and denyOut are taken; what sbxd cannot do yet is 400, never dropped" {
	box '{"templateID":"base","timeout":60,"network":{"allowOut":["198.18.1.1","*.a.test"],"denyOut":["0.0.0.0/0"]}}'
	local dir
	dir=$(sbx-ls -j | jq -r --arg id "$ID" 'select(.labels.sbxd == $id) | .dir')
	[ -d "$dir" ]
	run jq -c '[.allow_out, .deny_out]' "$dir/net.json"
	assert_output '[["198.18.1.1","*.a.test"],["0.0.0.0/0"]]'
	box '{"templateID":"base","timeout":60,"allow_internet_access":false,"network":{"allowOut":["198.18.1.1"]}}'
	dir=$(sbx-ls -j | jq -r --arg id "$ID" 'select(.labels.sbxd == $id) | .dir')
	run jq -c '[.allow_out, .deny_out]' "$dir/net.json"
	assert_output '[["198.18.1.1"],["all"]]'
	run code POST /sandboxes -H "X-API-Key: $SBXD_KEY" \
		-d '{"templateID":"base","network":{"allowOut":["a.test"]}}'
	assert_output 400
	run jq -r .message "$BATS_TEST_TMPDIR/body"
	assert_output "allowOut with domains needs denyOut to hold 0.0.0.0/0"
	run code POST /sandboxes -H "X-API-Key: $SBXD_KEY" \
		-d '{"templateID":"base","network":{"denyOut":["a.test"]}}'
	assert_output 400
	run jq -r .message "$BATS_TEST_TMPDIR/body"
	assert_output "denyOut takes IP addresses and CIDRs, not domains ('a.test')"
	run code POST /sandboxes -H "X-API-Key: $SBXD_KEY" \
		-d '{"templateID":"base","network":{"denyOut":["10.0.0.0/33"]}}'
	assert_output 400
	run jq -r .message "$BATS_TEST_TMPDIR/body"
	assert_output --partial "invalid rule '10.0.0.0/33'"
	run code POST /sandboxes -H "X-API-Key: $SBXD_KEY" \
		-d '{"templateID":"base","network":{"maskRequestHost":"x y"}}'
	assert_output 400
	run jq -r .message "$BATS_TEST_TMPDIR/body"
	assert_output 'network.maskRequestHost is not a host[:port] (with ${PORT} for the port)'
	# Ports that serve TLS themselves: not forwarded by sbxd, so refused.
	run code POST /sandboxes -H "X-API-Key: $SBXD_KEY" \
		-d '{"templateID":"base","network":{"httpsPorts":[3000]}}'
	assert_output 400
	run jq -r .message "$BATS_TEST_TMPDIR/body"
	assert_output 'network.httpsPorts is not supported by this server'
	run code POST /sandboxes -H "X-API-Key: $SBXD_KEY" \
		-d '{"templateID":"base","timeout":30,"network":{"httpsPorts":[]}}'
	assert_output 201
}

@test "create with malformed JSON, no template, a bad timeout or an unknown template fails" {
	run code POST /sandboxes -H "X-API-Key: $SBXD_KEY" -d '{"templateID":'
	assert_output 400
	run jq -r .message "$BATS_TEST_TMPDIR/body"
	assert_output --partial "Error when parsing request:"
	run code POST /sandboxes -H "X-API-Key: $SBXD_KEY" -d '{"timeout":5}'
	assert_output 400
	run code POST /sandboxes -H "X-API-Key: $SBXD_KEY" -d '{"templateID":"base","timeout":0}'
	assert_output 400
	run jq -r .message "$BATS_TEST_TMPDIR/body"
	assert_output "Timeout must be greater than 0"
	run code POST /sandboxes -H "X-API-Key: $SBXD_KEY" -d '{"templateID":"nope"}'
	assert_output 404
	run jq -r .message "$BATS_TEST_TMPDIR/body"
	assert_output "template 'nope' not found"
	# nothing was made
	run sbxd_api GET '/v2/sandboxes?metadata=never%3Dmade'
	assert_output '[]'
}

@test "get answers a SandboxDetail; an unknown id is 404 with E2B's message" {
	box '{"templateID":"base","timeout":120,"secure":true,"metadata":{"k":"v"}}'
	run sbxd_api GET "/sandboxes/$ID"
	run jq -r '[.sandboxID, .state, .metadata.k, (.endAt > .startedAt), .envdAccessToken == "'"$TOK"'"] | @tsv' <<<"$output"
	assert_output "$ID"$'\trunning\tv\ttrue\ttrue'
	run code GET /sandboxes/aaaaaaaaaaaaaaaaaaaa -H "X-API-Key: $SBXD_KEY"
	assert_output 404
	run jq -r .message "$BATS_TEST_TMPDIR/body"
	assert_output 'Sandbox "aaaaaaaaaaaaaaaaaaaa" doesn'"'"'t exist or you don'"'"'t have access to it'
}

@test "list v2 filters by metadata (encoded three times) and state, and pages with X-Next-Token" {
	box '{"templateID":"base","timeout":120,"metadata":{"run":"p1","x y":"a&b"}}'
	a=$ID
	box '{"templateID":"base","timeout":120,"metadata":{"run":"p1"}}'
	b=$ID
	box '{"templateID":"base","timeout":120,"metadata":{"run":"p2"}}'
	run sbxd_api GET '/v2/sandboxes?metadata=run%3Dp1'
	run jq -r '.[].sandboxID' <<<"$output"
	assert_line "$a"
	assert_line "$b"
	assert_equal "${#lines[@]}" 2
	# {"x y": "a&b"} as E2B's SDKs send it: k and v escaped, the pairs
	# escaped again (URLSearchParams, urlencode), and the value escaped on
	# the wire; E2B's API unescapes the whole, splits, unescapes each part.
	run sbxd_api GET '/v2/sandboxes?metadata=x%252520y%3Da%252526b%26run%3Dp1'
	run jq -r '.[].sandboxID' <<<"$output"
	assert_output "$a"
	run sbxd_api GET '/v2/sandboxes?metadata=x%252520y%3Da%252526'
	assert_output '[]'
	run code GET '/v2/sandboxes?metadata=run%3Dp%25zz' -H "X-API-Key: $SBXD_KEY"
	assert_output 400
	run curl -s -D "$BATS_TEST_TMPDIR/h" -H "X-API-Key: $SBXD_KEY" "$SBXD_URL/v2/sandboxes?metadata=run%3Dp1&limit=1"
	first=$(jq -r '.[0].sandboxID' <<<"$output")
	next=$(sed -n 's/^X-Next-Token: \([a-z0-9]*\).*/\1/ip' "$BATS_TEST_TMPDIR/h")
	[ -n "$next" ]
	run curl -s -D "$BATS_TEST_TMPDIR/h2" -H "X-API-Key: $SBXD_KEY" "$SBXD_URL/v2/sandboxes?metadata=run%3Dp1&limit=1&nextToken=$next"
	second=$(jq -r '.[0].sandboxID' <<<"$output")
	[ "$first" != "$second" ]
	run grep -i '^X-Next-Token' "$BATS_TEST_TMPDIR/h2"
	assert_failure
	sbxd_api POST "/sandboxes/$a/pause" >/dev/null
	run sbxd_api GET '/v2/sandboxes?metadata=run%3Dp1&state=paused'
	run jq -r '.[].sandboxID' <<<"$output"
	assert_output "$a"
	run sbxd_api GET '/sandboxes?metadata=run%3Dp1'
	run jq -r '.[].sandboxID' <<<"$output"
	assert_output "$b"
	run code GET '/v2/sandboxes?metadata=broken' -H "X-API-Key: $SBXD_KEY"
	assert_output 400
}

@test "kill answers 204, and the sandbox is gone here and locally" {
	box
	run code DELETE "/sandboxes/$ID" -H "X-API-Key: $SBXD_KEY"
	assert_output 204
	run code GET "/sandboxes/$ID" -H "X-API-Key: $SBXD_KEY"
	assert_output 404
	run code DELETE "/sandboxes/$ID" -H "X-API-Key: $SBXD_KEY"
	assert_output 404
	run bash -c 'sbx-ls -j | grep -c "\"sbxd\":\"'"$ID"'\""'
	assert_output 0
}

@test "a sandbox whose time is up is killed; with autoPause it is paused" {
	box '{"templateID":"base","timeout":1}'
	k=$ID
	box '{"templateID":"base","timeout":1,"autoPause":true}'
	p=$ID
	for ((i = 0; i < 100; i++)); do
		[ "$(code GET "/sandboxes/$k" -H "X-API-Key: $SBXD_KEY")" = 404 ] && break
		sleep 0.1
	done
	run code GET "/sandboxes/$k" -H "X-API-Key: $SBXD_KEY"
	assert_output 404
	# The second was created later: its end may come a moment after.
	for ((i = 0; i < 100; i++)); do
		[ "$(sbxd_api GET "/sandboxes/$p" | jq -r .state)" = paused ] && break
		sleep 0.1
	done
	run sbxd_api GET "/sandboxes/$p"
	run jq -r .state <<<"$output"
	assert_output paused
}

@test "autoPauseMemory: not a boolean, or false with autoResume enabled, is 400 and makes nothing" {
	before=$(sbxd_api GET /v2/sandboxes | jq length)
	run code POST /sandboxes -H "X-API-Key: $SBXD_KEY" -d '{"templateID":"base","autoPause":true,"autoPauseMemory":"no"}'
	assert_output 400
	run jq -r .message "$BATS_TEST_TMPDIR/body"
	assert_output 'Error when parsing request: "autoPauseMemory" must be a boolean'
	run code POST /sandboxes -H "X-API-Key: $SBXD_KEY" -d '{"templateID":"base","autoPause":true,"autoPauseMemory":false,"autoResume":{"enabled":true}}'
	assert_output 400
	run jq -r .message "$BATS_TEST_TMPDIR/body"
	assert_output --partial 'autoResume cannot be enabled with autoPauseMemory false'
	run jq length <(sbxd_api GET /v2/sandboxes)
	assert_output "$before"
}

@test "set timeout moves the end, shorter too; refresh only extends" {
	box '{"templateID":"base","timeout":600}'
	end0=$(sbxd_api GET "/sandboxes/$ID" | jq -r .endAt)
	run code POST "/sandboxes/$ID/timeout" -H "X-API-Key: $SBXD_KEY" -d '{"timeout":30}'
	assert_output 204
	end1=$(sbxd_api GET "/sandboxes/$ID" | jq -r .endAt)
	[[ $end1 < $end0 ]]
	run code POST "/sandboxes/$ID/refreshes" -H "X-API-Key: $SBXD_KEY" -d '{"duration":15}'
	assert_output 204
	end2=$(sbxd_api GET "/sandboxes/$ID" | jq -r .endAt)
	[[ ! $end2 < $end1 ]]
	run code POST "/sandboxes/$ID/timeout" -H "X-API-Key: $SBXD_KEY" -d '{"timeout":"x"}'
	assert_output 400
	run code POST "/sandboxes/$ID/timeout" -H "X-API-Key: $SBXD_KEY" -d '{"timeout":999999}'
	assert_output 204
	run code POST /sandboxes/aaaaaaaaaaaaaaaaaaaa/timeout -H "X-API-Key: $SBXD_KEY" -d '{"timeout":30}'
	assert_output 404
}

@test "pause, pause again (409), envd of a paused sandbox (502), connect resumes (201), connect again (200)" {
	box '{"templateID":"base","timeout":120,"secure":true}'
	sbxd_run "$ID" "$TOK" '{"process":{"cmd":"sh","args":["-c","echo kept >/home/user/f"]}}' >/dev/null
	run code POST "/sandboxes/$ID/pause" -H "X-API-Key: $SBXD_KEY"
	assert_output 204
	run code POST "/sandboxes/$ID/pause" -H "X-API-Key: $SBXD_KEY"
	assert_output 409
	run jq -r .message "$BATS_TEST_TMPDIR/body"
	assert_output "Error pausing sandbox - sandbox '$ID' is already paused"
	run sbxd_envd "$ID" "$TOK" /process.Process/List -H 'Content-Type: application/json' -d '{}' -w ' %{http_code}'
	assert_output "{\"sandboxId\":\"$ID\",\"message\":\"The sandbox was not found\",\"code\":502} 502"
	run code POST "/sandboxes/$ID/connect" -H "X-API-Key: $SBXD_KEY" -d '{}'
	assert_output 400
	run code POST "/sandboxes/$ID/connect" -H "X-API-Key: $SBXD_KEY" -d '{"timeout":60}'
	assert_output 201
	run jq -r .envdAccessToken "$BATS_TEST_TMPDIR/body"
	assert_output "$TOK"
	run code POST "/sandboxes/$ID/connect" -H "X-API-Key: $SBXD_KEY" -d '{"timeout":60}'
	assert_output 200
	run code POST "/sandboxes/$ID/resume" -H "X-API-Key: $SBXD_KEY" -d '{}'
	assert_output 409
	run sbxd_run "$ID" "$TOK" '{"process":{"cmd":"cat","args":["/home/user/f"]}}'
	assert_line --index 1 '{"event":{"data":{"stdout":"a2VwdAo="}}}'
}

@test "pause with a \"memory\" not a boolean is 400; with false, 204, and connect resumes it (201)" {
	box '{"templateID":"base","timeout":120,"secure":true}'
	run code POST "/sandboxes/$ID/pause" -H "X-API-Key: $SBXD_KEY" -d '{"memory":"no"}'
	assert_output 400
	run jq -r .message "$BATS_TEST_TMPDIR/body"
	assert_output 'Error when parsing request: "memory" must be a boolean'
	run code POST "/sandboxes/$ID/pause" -H "X-API-Key: $SBXD_KEY" -d '{"memory":false}'
	assert_output 204
	assert_equal "$(sbxd_api GET "/sandboxes/$ID" | jq -r .state)" paused
	run code POST "/sandboxes/$ID/connect" -H "X-API-Key: $SBXD_KEY" -d '{"timeout":60}'
	assert_output 201
}

@test "connect v2: no body is 300 s, a paused sandbox resumes (201), memory false is a cold boot (201)" {
	box '{"templateID":"base","timeout":30,"secure":true}'
	run code POST "/v2/sandboxes/$ID/connect" -H "X-API-Key: $SBXD_KEY"
	assert_output 200
	run jq -r .sandboxID "$BATS_TEST_TMPDIR/body"
	assert_output "$ID"
	run sbxd_api GET "/sandboxes/$ID"
	run jq -r '((.endAt | sub("\\.[0-9]+Z$"; "Z") | fromdate) - now) > 200' <<<"$output"
	assert_output true
	sbxd_api POST "/sandboxes/$ID/pause" >/dev/null
	run code POST "/v2/sandboxes/$ID/connect" -H "X-API-Key: $SBXD_KEY" -d '{"timeout":60,"memory":false}'
	assert_output 201
	run jq -r .envdAccessToken "$BATS_TEST_TMPDIR/body"
	assert_output "$TOK"
	sbxd_api POST "/sandboxes/$ID/pause" >/dev/null
	run code POST "/v2/sandboxes/$ID/connect" -H "X-API-Key: $SBXD_KEY" -d '{"timeout":60}'
	assert_output 201
	run jq -r .envdAccessToken "$BATS_TEST_TMPDIR/body"
	assert_output "$TOK"
	run code POST "/v2/sandboxes/nosuchsandbox0000000/connect" -H "X-API-Key: $SBXD_KEY"
	assert_output 404
}

@test "what sbxd does not support answers 501 in E2B's error shape" {
	# The v1 template builds; v2's and v3's are sbxd-template.bats'.
	run code POST /templates -H "X-API-Key: $SBXD_KEY" -d '{}'
	assert_output 501
	run jq -c . "$BATS_TEST_TMPDIR/body"
	assert_output '{"code":501,"message":"sbxd does not support the v1 template builds (POST /templates: an image pushed to E2B'"'"'s registry, which sbxd has not; build with POST /v3/templates, the SDK'"'"'s Template.build) (see sbxd(8))"}'
	box
	run sbxd_envd "$ID" "$TOK" /files/compose -H 'Content-Type: application/json' -d '{}' -w ' %{http_code}'
	assert_output '{"code":501,"message":"sbxd does not support composing files (see sbxd(8))"} 501'
}

@test "a body over --max-body is 413" {
	{ printf '{"templateID":"base","x":"'; head -c 1100000 /dev/zero | tr '\0' a; printf '"}'; } >"$BATS_TEST_TMPDIR/big"
	run code POST /sandboxes -H "X-API-Key: $SBXD_KEY" --data-binary @"$BATS_TEST_TMPDIR/big"
	assert_output 413
	run jq -r .code "$BATS_TEST_TMPDIR/body"
	assert_output 413
}

@test "Start streams start, stdout and stderr, and an end with the exit code" {
	box
	run sbxd_run "$ID" "$TOK" '{"process":{"cmd":"/bin/sh","args":["-c","echo out; echo err >&2; exit 3"],"envs":{"A":"1"}},"stdin":false}'
	assert_line --index 0 --regexp '^\{"event":\{"start":\{"pid":[0-9]+\}\}\}$'
	assert_line '{"event":{"data":{"stdout":"b3V0Cg=="}}}'
	assert_line '{"event":{"data":{"stderr":"ZXJyCg=="}}}'
	assert_line '{"event":{"end":{"exitCode":3,"exited":true,"status":"exit status 3","error":"exit status 3"}}}'
	assert_line --index $((${#lines[@]} - 1)) 'END {}'
}

@test "Start: a zero exit leaves exitCode out; envs, cwd and the sandbox's envVars reach the command" {
	box '{"templateID":"base","timeout":60,"secure":true,"envVars":{"G":"global","A":"box"}}'
	run sbxd_run "$ID" "$TOK" '{"process":{"cmd":"/bin/sh","args":["-c","echo $G $A; pwd"],"envs":{"A":"req"},"cwd":"/tmp"}}'
	out=$(printf '%s\n' "${lines[@]}" | jq -r 'select(.event.data.stdout) | .event.data.stdout' 2>/dev/null | base64 -d)
	assert_equal "$out" $'global req\n/tmp'
	assert_line '{"event":{"end":{"exited":true,"status":"exit status 0"}}}'
}

@test "Start: HOME is /home/user, as for E2B's user, unless envVars or envs set it" {
	box '{"templateID":"base","timeout":60,"secure":true}'
	run sbxd_run "$ID" "$TOK" '{"process":{"cmd":"/bin/sh","args":["-c","echo $HOME; cd; pwd"]}}'
	out=$(printf '%s\n' "${lines[@]}" | jq -r 'select(.event.data.stdout) | .event.data.stdout' 2>/dev/null | base64 -d)
	assert_equal "$out" $'/home/user\n/home/user'
	run sbxd_run "$ID" "$TOK" '{"process":{"cmd":"/bin/sh","args":["-c","echo $HOME"],"envs":{"HOME":"/tmp"}}}'
	out=$(printf '%s\n' "${lines[@]}" | jq -r 'select(.event.data.stdout) | .event.data.stdout' 2>/dev/null | base64 -d)
	assert_equal "$out" /tmp
	box '{"templateID":"base","timeout":60,"secure":true,"envVars":{"HOME":"/root"}}'
	run sbxd_run "$ID" "$TOK" '{"process":{"cmd":"/bin/sh","args":["-c","echo $HOME"]}}'
	out=$(printf '%s\n' "${lines[@]}" | jq -r 'select(.event.data.stdout) | .event.data.stdout' 2>/dev/null | base64 -d)
	assert_equal "$out" /root
}

@test "Start as root (Authorization: Basic root:): HOME and the default cwd are /root, envs still win" {
	box '{"templateID":"base","timeout":60,"secure":true}'
	run sbxd_run_as root "$ID" "$TOK" '{"process":{"cmd":"/bin/sh","args":["-c","echo $HOME; pwd"]}}'
	out=$(printf '%s\n' "${lines[@]}" | jq -r 'select(.event.data.stdout) | .event.data.stdout' 2>/dev/null | base64 -d)
	assert_equal "$out" $'/root\n/root'
	run sbxd_run_as root "$ID" "$TOK" '{"process":{"cmd":"/bin/sh","args":["-c","echo $HOME; pwd"],"envs":{"HOME":"/tmp"},"cwd":"~/"}}'
	out=$(printf '%s\n' "${lines[@]}" | jq -r 'select(.event.data.stdout) | .event.data.stdout' 2>/dev/null | base64 -d)
	assert_equal "$out" $'/tmp\n/root'
	# The default user's, as before.
	run sbxd_run_as user "$ID" "$TOK" '{"process":{"cmd":"/bin/sh","args":["-c","echo $HOME; pwd"]}}'
	out=$(printf '%s\n' "${lines[@]}" | jq -r 'select(.event.data.stdout) | .event.data.stdout' 2>/dev/null | base64 -d)
	assert_equal "$out" $'/home/user\n/home/user'
}

@test "a sandbox killed under a running process breaks its stream: no end event, no end of stream; envd's /health is 502" {
	box
	sbxd_frame '{"process":{"cmd":"sleep","args":["60"]},"stdin":false}' |
		sbxd_envd "$ID" "$TOK" /process.Process/Start -H 'Content-Type: application/connect+json' \
		--data-binary @- >"$BATS_TEST_TMPDIR/st" &
	cpid=$!
	for ((i = 0; i < 100; i++)); do
		[ -n "$(sbxd_envd "$ID" "$TOK" /process.Process/List -H 'Content-Type: application/json' -d '{}' | jq '.processes[0].pid // empty')" ] && break
		sleep 0.05
	done
	run code DELETE "/sandboxes/$ID" -H "X-API-Key: $SBXD_KEY"
	assert_output 204
	# As E2B's: the connection drops mid-response (curl fails).
	local rc=0
	wait "$cpid" || rc=$?
	[ "$rc" -ne 0 ]
	run sbxd_unframe <"$BATS_TEST_TMPDIR/st"
	assert_line --index 0 --partial '{"event":{"start":{"pid":'
	refute_output --partial '"end"'
	refute_output --partial 'END '
	run sbxd_envd "$ID" "$TOK" /health -o /dev/null -w '%{http_code}'
	assert_output 502
}

@test "Start with Connect-Timeout-Ms kills the process at the deadline" {
	box
	run bash -c "sbxd_frame '{\"process\":{\"cmd\":\"sleep\",\"args\":[\"30\"]}}' |
		sbxd_envd $ID '$TOK' /process.Process/Start -H 'Content-Type: application/connect+json' -H 'Connect-Timeout-Ms: 500' --data-binary @- | sbxd_unframe"
	assert_line '{"event":{"end":{"exitCode":-1,"status":"signal: killed","error":"signal: killed"}}}'
	assert_line 'END {"error":{"code":"deadline_exceeded","message":"the operation timed out"}}'
}

@test "keepalives come during silence, at the interval asked" {
	box
	run bash -c "sbxd_frame '{\"process\":{\"cmd\":\"sleep\",\"args\":[\"2.5\"]}}' |
		sbxd_envd $ID '$TOK' /process.Process/Start -H 'Content-Type: application/connect+json' -H 'Keepalive-Ping-Interval: 1' --data-binary @- | sbxd_unframe"
	assert_line '{"event":{"keepalive":{}}}'
	assert_line 'END {}'
}

@test "a background process: List, SendInput, CloseStdin, and its output on the stream" {
	box
	sbxd_frame '{"process":{"cmd":"cat"},"stdin":true,"tag":"bg"}' |
		sbxd_envd "$ID" "$TOK" /process.Process/Start -H 'Content-Type: application/connect+json' --data-binary @- >"$BATS_TEST_TMPDIR/stream" &
	cpid=$!
	for ((i = 0; i < 100; i++)); do
		list=$(sbxd_envd "$ID" "$TOK" /process.Process/List -H 'Content-Type: application/json' -d '{}')
		[ "$(jq '.processes | length' <<<"$list")" = 1 ] && break
		sleep 0.05
	done
	run jq -c '.processes[0] | [.config.cmd, .tag, (.pid > 0)]' <<<"$list"
	assert_output '["cat","bg",true]'
	pid=$(jq '.processes[0].pid' <<<"$list")
	run sbxd_envd "$ID" "$TOK" /process.Process/SendInput -H 'Content-Type: application/json' \
		-d "{\"process\":{\"pid\":$pid},\"input\":{\"stdin\":\"aGVsbG8K\"}}" -w ' %{http_code}'
	assert_output '{} 200'
	run sbxd_envd "$ID" "$TOK" /process.Process/CloseStdin -H 'Content-Type: application/json' \
		-d '{"process":{"tag":"bg"}}' -w ' %{http_code}'
	assert_output '{} 200'
	wait "$cpid"
	run sbxd_unframe <"$BATS_TEST_TMPDIR/stream"
	assert_line '{"event":{"data":{"stdout":"aGVsbG8K"}}}'
	assert_line '{"event":{"end":{"exited":true,"status":"exit status 0"}}}'
	run sbxd_envd "$ID" "$TOK" /process.Process/List -H 'Content-Type: application/json' -d '{}'
	assert_output '{"processes":[]}'
}

@test "SendSignal SIGKILL ends a process; Connect to it reattaches; unknown pids are not_found" {
	box
	sbxd_frame '{"process":{"cmd":"sleep","args":["60"]},"stdin":false}' |
		sbxd_envd "$ID" "$TOK" /process.Process/Start -H 'Content-Type: application/connect+json' --data-binary @- >/dev/null &
	cpid=$!
	for ((i = 0; i < 100; i++)); do
		pid=$(sbxd_envd "$ID" "$TOK" /process.Process/List -H 'Content-Type: application/json' -d '{}' | jq '.processes[0].pid // empty')
		[ -n "$pid" ] && break
		sleep 0.05
	done
	# The request made first (python's start can outlast a fixed sleep),
	# then SendSignal once Connect's start event is in.
	sbxd_frame "{\"process\":{\"pid\":$pid}}" >"$BATS_TEST_TMPDIR/re.req"
	sbxd_envd "$ID" "$TOK" /process.Process/Connect -N -H 'Content-Type: application/connect+json' \
		--data-binary @"$BATS_TEST_TMPDIR/re.req" >"$BATS_TEST_TMPDIR/re" &
	rpid=$!
	for ((i = 0; i < 100; i++)); do
		grep -q start "$BATS_TEST_TMPDIR/re" 2>/dev/null && break
		sleep 0.05
	done
	run sbxd_envd "$ID" "$TOK" /process.Process/SendSignal -H 'Content-Type: application/json' \
		-d "{\"process\":{\"pid\":$pid},\"signal\":\"SIGNAL_SIGKILL\"}" -w ' %{http_code}'
	assert_output '{} 200'
	wait "$cpid" "$rpid"
	run sbxd_unframe <"$BATS_TEST_TMPDIR/re"
	assert_line --index 0 "{\"event\":{\"start\":{\"pid\":$pid}}}"
	assert_line '{"event":{"end":{"exitCode":-1,"status":"signal: killed","error":"signal: killed"}}}'
	run sbxd_envd "$ID" "$TOK" /process.Process/SendSignal -H 'Content-Type: application/json' \
		-d '{"process":{"pid":99999},"signal":"SIGNAL_SIGKILL"}' -w ' %{http_code}'
	assert_output '{"code":"not_found","message":"process with pid 99999 not found"} 404'
	run bash -c "sbxd_frame '{\"process\":{\"pid\":99999}}' | sbxd_envd $ID '$TOK' /process.Process/Connect -H 'Content-Type: application/connect+json' --data-binary @- | sbxd_unframe"
	assert_output 'END {"error":{"code":"not_found","message":"process with pid 99999 not found"}}'
}

@test "a pty process is a terminal of the size asked, and Update resizes it" {
	box
	run sbxd_run "$ID" "$TOK" '{"process":{"cmd":"/bin/sh","args":["-c","stty size; tty"]},"pty":{"size":{"cols":100,"rows":30}}}'
	out=$(printf '%s\n' "${lines[@]}" | jq -r 'select(.event.data.pty) | .event.data.pty' 2>/dev/null | base64 -d | tr -d '\r')
	[[ $out == *"30 100"* ]]
	[[ $out == *"/dev/pts/"* ]]
	sbxd_frame '{"process":{"cmd":"/bin/sh","args":["-c","read x; stty size"]},"pty":{"size":{"cols":80,"rows":24}}}' |
		sbxd_envd "$ID" "$TOK" /process.Process/Start -H 'Content-Type: application/connect+json' --data-binary @- >"$BATS_TEST_TMPDIR/pty" &
	cpid=$!
	for ((i = 0; i < 100; i++)); do
		pid=$(sbxd_envd "$ID" "$TOK" /process.Process/List -H 'Content-Type: application/json' -d '{}' | jq '.processes[0].pid // empty')
		[ -n "$pid" ] && break
		sleep 0.05
	done
	run sbxd_envd "$ID" "$TOK" /process.Process/Update -H 'Content-Type: application/json' \
		-d "{\"process\":{\"pid\":$pid},\"pty\":{\"size\":{\"cols\":120,\"rows\":40}}}" -w ' %{http_code}'
	assert_output '{} 200'
	sleep 0.2
	sbxd_envd "$ID" "$TOK" /process.Process/SendInput -H 'Content-Type: application/json' \
		-d "{\"process\":{\"pid\":$pid},\"input\":{\"pty\":\"DQ==\"}}" >/dev/null
	wait "$cpid"
	out=$(sbxd_unframe <"$BATS_TEST_TMPDIR/pty" | jq -r 'select(.event.data.pty) | .event.data.pty' 2>/dev/null | base64 -d | tr -d '\r')
	[[ $out == *"40 120"* ]]
}

@test "envd: an unknown sandbox is 502, a missing port header 400, another port 502" {
	run sbxd_envd aaaaaaaaaaaaaaaaaaaa "" /process.Process/List -H 'Content-Type: application/json' -d '{}' -w ' %{http_code}'
	assert_output '{"sandboxId":"aaaaaaaaaaaaaaaaaaaa","message":"The sandbox was not found","code":502} 502'
	run curl -s -w ' %{http_code}' -H 'E2b-Sandbox-Id: aaaaaaaaaaaaaaaaaaaa' "$SBXD_URL/health"
	assert_output '{"code":400,"message":"Missing header: E2b-Sandbox-Port"} 400'
	box
	run curl -s -w ' %{http_code}' -H "E2b-Sandbox-Id: $ID" -H 'E2b-Sandbox-Port: 8080' "$SBXD_URL/"
	assert_output "{\"sandboxId\":\"$ID\",\"message\":\"The sandbox is running but port is not open\",\"code\":502} 502"
}

@test "envd: the host form <port>-<id>.<domain> routes too" {
	box
	run curl -s -w ' %{http_code}' -H "Host: 49983-$ID.sbx.test" -H "X-Access-Token: $TOK" \
		-H 'Content-Type: application/json' -d '{}' "$SBXD_URL/process.Process/List"
	assert_output '{"processes":[]} 200'
}

@test "envd: a secure sandbox wants its access token (401 otherwise)" {
	box
	run sbxd_envd "$ID" "" /process.Process/List -H 'Content-Type: application/json' -d '{}' -w ' %{http_code}'
	assert_output '{"code":401,"message":"unauthorized access, please provide a valid access token or method signing if supported"} 401'
	run sbxd_envd "$ID" "wrong$TOK" /process.Process/List -H 'Content-Type: application/json' -d '{}' -w ' %{http_code}'
	assert_output --partial ' 401'
	run sbxd_envd "$ID" "" /health -w '%{http_code}'
	assert_output 204
}

@test "envd: a malformed request is invalid_argument" {
	box
	run sbxd_envd "$ID" "$TOK" /process.Process/Start -H 'Content-Type: application/connect+json' -d 'nope' -w ' %{http_code}'
	assert_output '{"code":"invalid_argument","message":"the request is not one Connect envelope"} 400'
	run sbxd_envd "$ID" "$TOK" /process.Process/List -H 'Content-Type: application/json' -d '[' -w ' %{http_code}'
	assert_output '{"code":"invalid_argument","message":"the request is not a JSON object"} 400'
}

@test "the access log has request id, method, path, status and time, and no secret" {
	box
	sbxd_run "$ID" "$TOK" '{"process":{"cmd":"true"}}' >/dev/null
	run grep -E '^sbxd: [0-9a-f]{16} POST /process.Process/Start 200 [0-9]+ms$' "$SBXD_DIR/log"
	assert_success
	run grep -F -e "$SBXD_KEY" -e "$TOK" "$SBXD_DIR/log"
	assert_failure
}

@test "sbxd's sandboxes get the default limits (512 MiB, 2 CPUs, 1024 processes), and say so as cpuCount and memoryMB" {
	box
	run sbxd_api GET "/sandboxes/$ID"
	assert_equal "$(jq -c '[.cpuCount, .memoryMB]' <<<"$output")" '[2,512]'
	run sbx-ls -j
	assert_success
	assert_equal "$(jq -c --arg id "$ID" 'select(.labels.sbxd == $id) | .limits' <<<"$output")" \
	    '{"memory":536870912,"cpus":2,"pids":1024,"shm":268435456}'
	local lid
	lid=$(jq -r --arg id "$ID" 'select(.labels.sbxd == $id) | .id' <<<"$output")
	[ -n "$lid" ]
	assert_equal "$(cat /sys/fs/cgroup/pids/sbx/"$lid"/pids.max)" 1024
}

@test "sbxd with a malformed limits.* exits 2 at start, with one line naming it" {
	local dir
	dir=$(mktemp -d /tmp/sbxd-test.XXXXXX)
	printf 'e2b_%s\n' 0123456789abcdef0123456789abcdef >"$dir/key"
	chmod 600 "$dir/key"
	run --separate-stderr env SBX_LIMITS_PIDS=lots timeout 20 sbxd \
	    -l "127.0.0.1:$(sbxd_free_port)" -k "$dir/key" -S "$dir/store"
	rm -rf "$dir"
	assert_equal "$status" 2
	assert_equal "$stderr" "sbxd: invalid limits.pids 'lots' in the configuration or SBX_LIMITS_PIDS"
}
