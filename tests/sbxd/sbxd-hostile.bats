#!/usr/bin/env bats
# sbxd under hostile clients: a slowloris of half-sent requests, the caps
# on connections, the header timeout, streams with many connections
# open, and the create limits. Each test runs its own sbxd, stopped by
# its pid in teardown; the hostile client (sbxd-hostile.py) is bounded
# and closes its connections before it exits.
load ../lib/helper
load ../lib/sbxd

HOSTILE=$BATS_TEST_DIRNAME/sbxd-hostile.py

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
	WATCH_PID=
}

teardown() {
	if [ -n "$WATCH_PID" ]; then
		kill "$WATCH_PID" 2>/dev/null || true
		wait "$WATCH_PID" 2>/dev/null || true
	fi
	sbxd_stop
	sbx-ls -j | sbx-kill -q >/dev/null 2>&1 || true
}

@test "1200 half-sent requests from one client: /health still answers" {
	sbxd_start --no-access-log
	# Ten source addresses: the per-address cap is not what holds them off.
	run python3 "$HOSTILE" --addrs 10 "$SBXD_URL" 1200 -- \
		curl -s -m 5 -o /dev/null -w '%{http_code}\n' "$SBXD_URL/health"
	assert_success
	assert_line "held 1200 of 1200"
	assert_line 204
	kill -0 "$SBXD_PID"
}

@test "--max-per-address: the N+1th connection from one address is refused, another address is served" {
	sbxd_start --max-per-address 8
	run python3 "$HOSTILE" "$SBXD_URL" 9
	assert_failure
	assert_output "held 8 of 9"
	# With 8 held from 127.0.0.1, a 9th from there gets nothing; one from
	# 127.0.0.2 gets its answer.
	run python3 "$HOSTILE" "$SBXD_URL" 8 -- \
		curl -s -m 5 -o /dev/null -w '%{http_code}\n' "$SBXD_URL/health"
	assert_line "held 8 of 8"
	refute_line 204
	run python3 "$HOSTILE" "$SBXD_URL" 8 -- \
		curl -s -m 5 --interface 127.0.0.2 -o /dev/null -w '%{http_code}\n' "$SBXD_URL/health"
	assert_success
	assert_line 204
}

@test "--max-connections: past the cap a connection is refused" {
	sbxd_start --max-connections 20
	run python3 "$HOSTILE" --addrs 4 "$SBXD_URL" 30
	assert_failure
	assert_output "held 20 of 30"
}

@test "--header-timeout: a connection that has not sent a whole request is closed" {
	sbxd_start --header-timeout 1
	# Half a head, and nothing at all: both closed within 3 s.
	run python3 "$HOSTILE" --wait 3 "$SBXD_URL" 4
	assert_failure
	assert_output "held 0 of 4"
	run python3 "$HOSTILE" --idle --wait 3 "$SBXD_URL" 4
	assert_failure
	assert_output "held 0 of 4"
	# A request under way is not cut by it: a command that is silent for
	# 2 s still ends with its exit.
	out=$(sbxd_create)
	id=$(jq_str .sandboxID <<<"$out")
	tok=$(jq_str .envdAccessToken <<<"$out")
	run sbxd_run "$id" "$tok" '{"process":{"cmd":"/bin/sh","args":["-c","sleep 2; echo late"]}}'
	assert_line '{"event":{"data":{"stdout":"bGF0ZQo="}}}'
	assert_line '{"event":{"end":{"exited":true,"status":"exit status 0"}}}'
}

@test "a streaming command and a watch keep working with 1200 connections open" {
	sbxd_start --no-access-log
	out=$(sbxd_create)
	id=$(jq_str .sandboxID <<<"$out")
	tok=$(jq_str .envdAccessToken <<<"$out")
	sbxd_run "$id" "$tok" '{"process":{"cmd":"mkdir","args":["-p","/home/user/wd"]}}' >/dev/null
	sbxd_frame '{"path":"wd"}' >"$BATS_TEST_TMPDIR/watch.req"
	sbxd_envd "$id" "$tok" /filesystem.Filesystem/WatchDir -N \
		-H 'Content-Type: application/connect+json' -H 'Connect-Timeout-Ms: 8000' \
		--data-binary @"$BATS_TEST_TMPDIR/watch.req" -o "$BATS_TEST_TMPDIR/watch" &
	WATCH_PID=$!
	for ((i = 0; i < 200; i++)); do
		grep -q start "$BATS_TEST_TMPDIR/watch" 2>/dev/null && break
		sleep 0.05
	done
	sbxd_frame '{"process":{"cmd":"/bin/sh","args":["-c","for i in 1 2 3; do echo tick$i; sleep 0.5; done; touch /home/user/wd/made"]}}' \
		>"$BATS_TEST_TMPDIR/run.req"
	run python3 "$HOSTILE" --addrs 10 "$SBXD_URL" 1200 -- \
		curl -s -m 20 -N -H "E2b-Sandbox-Id: $id" -H 'E2b-Sandbox-Port: 49983' \
		-H "X-Access-Token: $tok" -H 'Content-Type: application/connect+json' \
		--data-binary @"$BATS_TEST_TMPDIR/run.req" -o "$BATS_TEST_TMPDIR/run" \
		"$SBXD_URL/process.Process/Start"
	assert_success
	assert_line "held 1200 of 1200"
	run sbxd_unframe <"$BATS_TEST_TMPDIR/run"
	assert_line '{"event":{"data":{"stdout":"dGljazEK"}}}'
	assert_line '{"event":{"data":{"stdout":"dGljazMK"}}}'
	assert_line '{"event":{"end":{"exited":true,"status":"exit status 0"}}}'
	wait "$WATCH_PID"
	WATCH_PID=
	run sbxd_unframe <"$BATS_TEST_TMPDIR/watch"
	assert_line --index 0 '{"start":{}}'
	assert_line '{"filesystem":{"name":"made","type":"EVENT_TYPE_CREATE"}}'
	assert_line 'END {"error":{"code":"deadline_exceeded","message":"the operation timed out"}}'
}

@test "the limits have defaults, said at start, and the open-file limit is raised for them" {
	ulimit -Sn 1024
	sbxd_start
	sbxd_log_wait 'limits:'
	run grep 'limits:' "$SBXD_DIR/log"
	assert_output "sbxd: limits: connections 4096, per address 256, header timeout 10s, sandboxes 100, creates a second per key 20, open files 9216 (raised from 1024)"
	run grep 'Max open files' "/proc/$SBXD_PID/limits"
	assert_output --regexp '^Max open files +9216 '
}

@test "--max-sandboxes 0 and --create-rate 0 lift the defaults" {
	sbxd_start --max-sandboxes 0 --create-rate 0
	sbxd_log_wait 'limits:'
	run grep -o 'sandboxes none, creates a second per key none' "$SBXD_DIR/log"
	assert_success
}

@test "--create-rate is a token bucket per key: one key over its rate is 429, another key still creates" {
	SBXD_KEY2=e2b_$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
	sbxd_start --create-rate 1
	body='{"templateID":"base","timeout":60}'
	run curl -s -o /dev/null -w '%{http_code}' -X POST -H "X-API-Key: $SBXD_KEY" \
		-H 'Content-Type: application/json' -d "$body" "$SBXD_URL/sandboxes"
	assert_output 201
	run curl -s -o "$BATS_TEST_TMPDIR/body" -w '%{http_code}' -X POST -H "X-API-Key: $SBXD_KEY" \
		-H 'Content-Type: application/json' -d "$body" "$SBXD_URL/sandboxes"
	assert_output 429
	run jq -c . "$BATS_TEST_TMPDIR/body"
	assert_output '{"code":429,"message":"Rate limit exceeded: at most 1 sandboxes a second"}'
	run curl -s -o /dev/null -w '%{http_code}' -X POST -H "X-API-Key: $SBXD_KEY2" \
		-H 'Content-Type: application/json' -d "$body" "$SBXD_URL/sandboxes"
	assert_output 201
}
