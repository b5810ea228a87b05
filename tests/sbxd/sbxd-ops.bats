#!/usr/bin/env bats
# sbxd in operation: restarts, signals, limits and load. Each test runs
# its own sbxd, stopped by its pid in teardown.
load ../lib/helper
load ../lib/sbxd

setup_file() {
	sbx_setup_file
}

teardown_file() {
	sbx_teardown_file
}

setup() {
	sbx_setup
	SBXD_DIR=$BATS_TEST_TMPDIR/sbxd
	mkdir -p "$SBXD_DIR"
}

# The default --on-exit leaves sandboxes running: kill what a test left.
teardown() {
	sbxd_stop
	sbx-ls -j | sbx-kill -q >/dev/null 2>&1 || true
}

# The local sandbox behind sbxd's sandbox $1.
local_id() {
	jq -r .ref.id "$SBXD_DIR/store/$1.json"
}

# Echo through the process service of sandbox $1 (token $2).
hello() {
	sbxd_run "$1" "$2" '{"process":{"cmd":"echo","args":["hello"]}}' |
		jq -r 'select(.event.data.stdout) | .event.data.stdout' 2>/dev/null | base64 -d
}

@test "sandboxes survive a restart: the next sbxd adopts them, token and all" {
	sbxd_start
	out=$(sbxd_create)
	id=$(jq -r .sandboxID <<<"$out")
	tok=$(jq -r .envdAccessToken <<<"$out")
	sbxd_run "$id" "$tok" '{"process":{"cmd":"/bin/sh","args":["-c","echo kept >/tmp/mark"]}}' >/dev/null
	sbxd_stop
	sbxd_start
	grep -q "adopted sandbox $id (running)" "$SBXD_DIR/log"
	run sbxd_api GET "/sandboxes/$id"
	assert_equal "$(jq -r .state <<<"$output")" running
	run sbxd_run "$id" "$tok" '{"process":{"cmd":"cat","args":["/tmp/mark"]}}'
	assert_line '{"event":{"data":{"stdout":"a2VwdAo="}}}'
	run sbxd_envd "$id" wrong /process.Process/List -H 'Content-Type: application/json' -d '{}' -o /dev/null -w '%{http_code}'
	assert_output 401
}

@test "a key file of two keys: each of them works, a third key does not" {
	SBXD_KEY2=e2b_$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
	sbxd_start
	run grep -c . "$SBXD_DIR/key"
	assert_output 2
	run sbxd_api GET /v2/sandboxes
	assert_output '[]'
	SBXD_KEY=$SBXD_KEY2 run sbxd_api GET /v2/sandboxes
	assert_output '[]'
	run curl -s -o /dev/null -w '%{http_code}' -H "X-API-Key: e2b_not_one_of_them" "$SBXD_URL/v2/sandboxes"
	assert_output 401
	run curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $SBXD_KEY2" "$SBXD_URL/v2/sandboxes"
	assert_output 200
}

@test "SIGHUP reloads the key file: the new key works, the old one no longer" {
	sbxd_start
	old=$SBXD_KEY
	new=e2b_$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
	printf '%s\n' "$new" >"$SBXD_DIR/key.new"
	mv "$SBXD_DIR/key.new" "$SBXD_DIR/key"
	kill -HUP "$SBXD_PID"
	for ((i = 0; i < 100; i++)); do
		grep -q "keys reloaded" "$SBXD_DIR/log" && break
		sleep 0.05
	done
	SBXD_KEY=$new run sbxd_api GET /v2/sandboxes
	assert_output '[]'
	run curl -s -o /dev/null -w '%{http_code}' -H "X-API-Key: $old" "$SBXD_URL/v2/sandboxes"
	assert_output 401
	# A key file that went bad keeps the keys there are.
	: >"$SBXD_DIR/key"
	kill -HUP "$SBXD_PID"
	for ((i = 0; i < 100; i++)); do
		grep -q "keys not reloaded" "$SBXD_DIR/log" && break
		sleep 0.05
	done
	run grep "keys not reloaded" "$SBXD_DIR/log"
	assert_success
	SBXD_KEY=$new run sbxd_api GET /v2/sandboxes
	assert_output '[]'
	kill -0 "$SBXD_PID"
}

@test "--on-exit kill: SIGTERM kills the sandboxes, and sbxd exits 0" {
	sbxd_start --on-exit kill
	id=$(sbxd_create | jq -r .sandboxID)
	lid=$(local_id "$id")
	[ -n "$(ls_line "$lid")" ]
	kill -TERM "$SBXD_PID"
	rc=0
	wait "$SBXD_PID" || rc=$?
	SBXD_PID=
	assert_equal "$rc" 0
	assert_equal "$(ls_line "$lid")" ""
	[ ! -e "$SBXD_DIR/store/$id.json" ]
}

@test "--on-exit pause: the sandboxes are paused, adopted paused, and connect resumes them" {
	sbxd_start --on-exit pause
	out=$(sbxd_create)
	id=$(jq -r .sandboxID <<<"$out")
	tok=$(jq -r .envdAccessToken <<<"$out")
	lid=$(local_id "$id")
	sbxd_stop
	assert_equal "$(ls_line "$lid" | jq -r .status)" paused
	sbxd_start
	assert_equal "$(sbxd_api GET "/sandboxes/$id" | jq -r .state)" paused
	run code_of POST "/sandboxes/$id/connect" '{"timeout":60}'
	assert_output 201
	assert_equal "$(hello "$id" "$tok")" hello
}

@test "the default --on-exit leaves the sandboxes running" {
	sbxd_start
	id=$(sbxd_create | jq -r .sandboxID)
	lid=$(local_id "$id")
	sbxd_stop
	assert_equal "$(ls_line "$lid" | jq -r .status)" running
}

@test "SIGTERM ends an open stream with 'unavailable' and sbxd exits 0" {
	sbxd_start
	out=$(sbxd_create)
	id=$(jq -r .sandboxID <<<"$out")
	tok=$(jq -r .envdAccessToken <<<"$out")
	sbxd_run "$id" "$tok" '{"process":{"cmd":"sleep","args":["60"]}}' >"$BATS_TEST_TMPDIR/stream" &
	cpid=$!
	for ((i = 0; i < 100; i++)); do
		[ -n "$(sbxd_envd "$id" "$tok" /process.Process/List -H 'Content-Type: application/json' -d '{}' | jq '.processes[0].pid // empty')" ] && break
		sleep 0.05
	done
	kill -TERM "$SBXD_PID"
	rc=0
	wait "$SBXD_PID" || rc=$?
	SBXD_PID=
	assert_equal "$rc" 0
	wait "$cpid"
	run cat "$BATS_TEST_TMPDIR/stream"
	assert_line 'END {"error":{"code":"unavailable","message":"sbxd is stopping"}}'
}

# Status of a control-plane request: code_of METHOD PATH [JSON]
code_of() {
	curl -s -o "$BATS_TEST_TMPDIR/body" -w '%{http_code}' -X "$1" -H "X-API-Key: $SBXD_KEY" \
		${3:+-H 'Content-Type: application/json' -d "$3"} "$SBXD_URL$2"
}

@test "--max-sandboxes: one more is 429 in E2B's shape, until one is killed" {
	sbxd_start --max-sandboxes 2
	a=$(sbxd_create | jq -r .sandboxID)
	sbxd_create | jq_true .sandboxID >/dev/null
	run code_of POST /sandboxes '{"templateID":"base"}'
	assert_output 429
	run jq -c . "$BATS_TEST_TMPDIR/body"
	assert_output '{"code":429,"message":"you have reached the maximum number of concurrent E2B sandboxes (2). If you need more, please visit '"'https://e2b.dev/docs/billing'"'"}'
	run code_of DELETE "/sandboxes/$a"
	assert_output 204
	run code_of POST /sandboxes '{"templateID":"base"}'
	assert_output 201
}

@test "--create-rate: creates over the rate are 429; the count is per second" {
	sbxd_start --create-rate 1
	pids=()
	for i in 1 2 3 4; do
		curl -s -o /dev/null -w '%{http_code}\n' -X POST -H "X-API-Key: $SBXD_KEY" \
			-H 'Content-Type: application/json' -d '{"templateID":"base"}' "$SBXD_URL/sandboxes" >"$BATS_TEST_TMPDIR/c$i" &
		pids+=($!)
	done
	wait "${pids[@]}"
	run sort "$BATS_TEST_TMPDIR"/c[1-4]
	# Four at once: the first of a second gets in, the others wait for
	# another second (four curls never span four seconds).
	assert_line 429
	assert_line 201
	sleep 1.1
	run code_of POST /sandboxes '{"templateID":"base"}'
	assert_output 201
}

@test "load: 20 clients each create, run 50 commands and kill; no error, no leak" {
	sbxd_start --no-access-log
	fds=$(ls "/proc/$SBXD_PID/fd" | wc -l)
	# sbxd's one child is its spawner, which forks every other.
	spawner=$(ps -o pid= --ppid "$SBXD_PID" | tr -d ' ')
	[ -n "$spawner" ] && [ "$(wc -w <<<"$spawner")" = 1 ] || fail "sbxd's children before the load: '$spawner'"
	run python3 "$BATS_TEST_DIRNAME/sbxd-load.py" "$SBXD_URL" "$SBXD_DIR/key" 20 50
	assert_success
	assert_output "ok 20"
	run sbxd_api GET /v2/sandboxes
	assert_output '[]'
	assert_equal "$(sbx-ls -j | jq -s 'map(select(.labels.sbxd)) | length')" 0
	# Connections close a moment after their last answer; the count before
	# may hold the start-up health check's, so no more than then.
	for ((i = 0; i < 100; i++)); do
		(($(ls "/proc/$SBXD_PID/fd" | wc -l) <= fds)) && break
		sleep 0.05
	done
	now=$(ls "/proc/$SBXD_PID/fd" | wc -l)
	((now <= fds)) || fail "sbxd had $fds fds before the load, $now after"
	assert_equal "$(ps -o pid= --ppid "$SBXD_PID" | tr -d ' ')" "$spawner"
	assert_equal "$(ps -o pid= --ppid "$spawner")" ""
}

# The sbxd ids of the local sandboxes sbxd made, sorted, one a line.
made_ids() {
	sbx-ls -j | jq -r 'select(.labels.sbxd) | .labels.sbxd' | sort
}

# Wait (30 s at most) until made_ids prints $1 lines.
made_wait() {
	local i
	for ((i = 0; i < 600; i++)); do
		[ "$(made_ids | grep -c .)" = "$1" ] && return 0
		sleep 0.05
	done
	fail "sbxd made $(made_ids | grep -c .) sandboxes, not $1"
}

# A sandbox with envVars WARM_T=$1, none of $parked: its id, once its
# echo $WARM_T printed base64 $2 (run in $(...): each check returns).
env_box() {
	local out id tok
	out=$(sbxd_create "{\"templateID\":\"base\",\"timeout\":300,\"secure\":true,\"envVars\":{\"WARM_T\":\"$1\"}}")
	id=$(jq -r .sandboxID <<<"$out")
	tok=$(jq -r .envdAccessToken <<<"$out")
	if grep -qx -- "$id" <<<"$parked"; then
		fail "$id was made ahead for another kind" || return 1
	fi
	run sbxd_run "$id" "$tok" '{"process":{"cmd":"/bin/sh","args":["-c","echo $WARM_T"]}}'
	assert_line "{\"event\":{\"data\":{\"stdout\":\"$2\"}}}" >&2 || return 1
	echo "$id"
}

@test "--warm 2: a create like the last takes one made ahead, which works; another kind turns the pool; SIGTERM kills the parked" {
	sbxd_start --warm 2
	out=$(sbxd_create)
	id1=$(jq -r .sandboxID <<<"$out")
	[ -n "$id1" ] && [ "$id1" != null ]
	grep -q "made ahead: up to 2 sandboxes" "$SBXD_DIR/log"
	made_wait 3
	# Not the API's: only the one handed out is listed.
	run sbxd_api GET /v2/sandboxes
	assert_equal "$(jq -r '[.[].sandboxID] | join(" ")' <<<"$output")" "$id1"
	parked=$(made_ids | grep -vx "$id1")
	assert_equal "$(grep -c . <<<"$parked")" 2
	out=$(sbxd_create)
	id2=$(jq -r .sandboxID <<<"$out")
	tok2=$(jq -r .envdAccessToken <<<"$out")
	grep -qx -- "$id2" <<<"$parked" || fail "$id2 is not one of the parked: $parked"
	assert_equal "$(jq -r .ref.id "$SBXD_DIR/store/$id2.json")" "$(sbx-ls -j | jq -r --arg i "$id2" 'select(.labels.sbxd == $i) | .id')"
	assert_equal "$(hello "$id2" "$tok2")" hello
	run sbxd_api GET "/sandboxes/$id2"
	assert_equal "$(jq -r .state <<<"$output")" running
	# Another kind (envVars): made afresh, with its env; the old kind's
	# parked one goes, two of the new kind come.
	id3=$(env_box b Ygo=) || fail "no sandbox of the new kind"
	old=$(grep -vx -- "$id2" <<<"$parked")
	made_wait 5
	! made_ids | grep -qx -- "$old" || fail "the old kind's parked $old is still there"
	id4=$(env_box c Ywo=) || fail "no second sandbox of the new kind"
	# SIGTERM with the default --on-exit leave: the handed-out stay,
	# the parked go, from the backend and from the store.
	made_wait 6
	sbxd_stop
	assert_equal "$(made_ids | tr '\n' ' ')" "$(printf '%s\n' "$id1" "$id2" "$id3" "$id4" | sort | tr '\n' ' ')"
	assert_equal "$(cd "$SBXD_DIR/store" && ls -- *.json | sort | tr '\n' ' ')" "$(printf '%s.json\n' "$id1" "$id2" "$id3" "$id4" | sort | tr '\n' ' ')"
}

@test "--warm: the parked sandboxes of an sbxd killed by SIGKILL are removed by the next" {
	sbxd_start --warm 2
	id1=$(sbxd_create | jq -r .sandboxID)
	made_wait 3
	kill -KILL "$SBXD_PID"
	wait "$SBXD_PID" 2>/dev/null || true
	SBXD_PID=
	sbxd_start
	sbxd_log_wait "adopted sandbox $id1"
	assert_equal "$(made_ids | tr -d '\n')" "$id1"
	assert_equal "$(cd "$SBXD_DIR/store" && ls -- *.json | tr -d '\n')" "$id1.json"
}

@test "--warm: a parked sandbox killed from outside is never handed out; the create makes a working one" {
	sbxd_start --warm 2
	id1=$(sbxd_create | jq -r .sandboxID)
	[ -n "$id1" ] && [ "$id1" != null ]
	made_wait 3
	parked=$(made_ids | grep -vx "$id1")
	# sbx-kill (as sbx-gc would) of both parked ones, by their labels
	sbx-ls -j | jq -c --arg i "$id1" 'select(.labels.sbxd and .labels.sbxd != $i)' |
		sbx-kill -q >/dev/null
	assert_equal "$(made_ids | tr -d '\n')" "$id1"
	out=$(sbxd_create)
	id2=$(jq -r .sandboxID <<<"$out")
	tok2=$(jq -r .envdAccessToken <<<"$out")
	[ -n "$id2" ] && [ "$id2" != null ]
	! grep -qx -- "$id2" <<<"$parked" || fail "$id2 was parked and killed, yet handed out"
	assert_equal "$(hello "$id2" "$tok2")" hello
	grep -q "warm sandbox .* is gone: not handed out" "$SBXD_DIR/log"
}

@test "--warm: a bad count is a usage error" {
	run sbxd --warm 10001 -k /dev/null
	assert_failure 2
	assert_output --partial "bad count '10001' for --warm (0 to 10000)"
}
