#!/usr/bin/env bats
# sbxd's metrics routes (GET /sandboxes/{id}/metrics, /sandboxes/metrics)
# through the official E2B JavaScript SDK's getMetrics, and with curl:
# E2B's field names and shapes, with values read from the sandbox's cgroup.
load ../lib/helper
load ../lib/sbxd

setup_file() {
	sdk_install
	sbx_setup_file
	sbxd_start
	unset E2B_DEBUG E2B_DOMAIN E2B_ACCESS_TOKEN
	E2B_API_URL=$SBXD_URL
	E2B_SANDBOX_URL=$SBXD_URL
	E2B_API_KEY=$SBXD_KEY
	export E2B_API_URL E2B_SANDBOX_URL E2B_API_KEY
}

teardown_file() {
	sbxd_stop
	sbx_teardown_file
	rm -rf "$SBXD_DIR"
}

setup() {
	sbx_setup
}

# GET $1 of the control plane with the key, as curl -s prints it and
# the status on a last line.
api() {
	curl -s -H "X-API-Key: $SBXD_KEY" -w '\n%{http_code}' "$SBXD_URL$1"
}

@test "SDK: getMetrics of a sandbox holding 64 MiB and burning a CPU; a past window is empty; a killed one is SandboxNotFoundError" {
	run sdk metrics
	assert_success
	OUT=$output
	jq_true '.held and .count == 1 and .byId == 1 and .past == 0' <<<"$OUT"
	jq_true '.metric | (.cpuCount >= 1) and (.cpuUsedPct > 0) and
	    (.cpuUsedPct <= 100) and (.memUsed >= 67108864) and
	    (.memTotal >= .memUsed) and (.memCache >= 0) and
	    (.diskUsed == null or .diskUsed >= 0) and
	    (.diskTotal == null or .diskTotal >= .diskUsed)' <<<"$OUT"
	jq_true '.ageS < 120 and .byIdCpu > 0' <<<"$OUT"
	jq_true '.gone.notFound == true' <<<"$OUT"
}

@test "GET /sandboxes/metrics: by id, E2B's shape; unknown ids left out; none or over 100 is 400" {
	out=$(sbxd_create)
	id=$(jq -r .sandboxID <<<"$out")
	[ ${#id} = 20 ]
	run api "/sandboxes/metrics?sandbox_ids=$id,nosuchsandbox0000000"
	assert_success
	[ "${lines[-1]}" = 200 ]
	jq_true --arg id "$id" '.sandboxes | keys == [$id] and (.[$id] |
	    keys == ["cpuCount","cpuUsedPct","diskTotal","diskUsed","memCache",
	    "memTotal","memUsed","timestamp","timestampUnix"] and
	    .memUsed > 0 and .cpuCount >= 1 and (.timestamp | test("Z$")))' \
	    <<<"${lines[0]}"
	run api "/sandboxes/metrics"
	[ "${lines[-1]}" = 400 ]
	ids=$(seq -s, -f "x%019g" 1 101)
	run api "/sandboxes/metrics?sandbox_ids=$ids"
	[ "${lines[-1]}" = 400 ]
	run api "/sandboxes/$id/metrics?start=abc"
	[ "${lines[-1]}" = 400 ]
	run api "/sandboxes/nosuchsandbox0000000/metrics"
	[ "${lines[-1]}" = 404 ]
	curl -s -X DELETE -H "X-API-Key: $SBXD_KEY" "$SBXD_URL/sandboxes/$id"
}
