#!/usr/bin/env bats
# sbx-stats on the backend under test: what a sandbox uses, read from the
# backend (cgroups on local, the engine's stats on docker, E2B's metrics
# API on e2b), each field a number or null where the backend cannot tell.

load conformance

setup_file() { conf_setup_file; }
teardown_file() { conf_teardown_file; }
setup() { conf_setup; }

FIELDS='["backend","cpu_pct","cpu_s","cpus","disk_bytes","disk_limit","id","memory_bytes","memory_cache","memory_limit","net_rx_bytes","net_tx_bytes","pids","pids_limit","status","time"]'

# One reading of the test's sandbox, as one JSON line.
stat1() {
	sbx-stats -j -i 0.2 -s "$BATS_TEST_TMPDIR/s.json"
}

# Wait (bounded, 60 s) until jq filter $1 holds of a reading.
wait_stat() {
	local i
	for ((i = 0; i < 120; i++)); do
		stat1 | jq_true "$1" >/dev/null && return 0
		sleep 0.5
	done
	echo "never true: $1: $(stat1)" >&2
	return 1
}

@test "$B: one reading: one line, every field, numbers or null, memory and CPUs" {
	new_sandbox
	run --separate-stderr stat1
	assert_success
	[ "${#lines[@]}" -eq 1 ]
	jq_true --argjson f "$FIELDS" --arg id "$(sid)" --arg b "$BACKEND" '
	    (keys == $f) and .id == $id and .backend == $b and
	    .status == "running" and (.memory_bytes | type == "number") and
	    .memory_bytes > 0 and (.cpu_pct | type == "number") and
	    .cpu_pct >= 0 and
	    ([.cpu_s, .cpus, .disk_bytes, .disk_limit, .memory_cache, .memory_limit,
	      .net_rx_bytes, .net_tx_bytes, .pids, .pids_limit] |
	     all(. == null or (type == "number" and . >= 0)))' <<<"$output"
	if [ "$BACKEND" = qemu ]; then
		# QEMU's CPU time; the guest's processes are not asked.
		jq_true '(.cpu_s | type == "number") and .pids == null' <<<"$output"
	elif [ "$BACKEND" != e2b ]; then
		# The engine and the cgroup count processes and CPU time.
		jq_true '(.cpu_s | type == "number") and .pids >= 1' <<<"$output"
	fi
}

@test "$B: a sandbox holding 64 MiB shows memory used of 64 MiB or more, within its limit" {
	new_sandbox
	# The shell holds the string: a command after the sleep keeps the
	# shell from exec'ing the sleep (and freeing it).
	sbx-exec -d -s s.json -- sh -c \
	    'a=$(head -c 67108864 /dev/zero | tr "\0" x); sleep 600; echo ${#a}' \
	    >/dev/null
	wait_stat '.memory_bytes >= 67108864'
	jq_true '.memory_limit == null or .memory_limit >= .memory_bytes' \
	    <<<"$(stat1)"
}

@test "$B: CPU burnt shows: cpu_s grows between two readings (e2b: cpu_pct above 0)" {
	new_sandbox
	if [ "$BACKEND" = e2b ]; then
		# E2B's metrics give a percentage, not the time.
		sbx-exec -d -s s.json -- sh -c 'while :; do :; done' >/dev/null
		wait_stat '.cpu_pct > 0 and .cpu_s == null'
		return
	fi
	a=$(stat1 | jq -r .cpu_s)
	run sx sh -c 'i=0; while [ $i -lt 300000 ]; do i=$((i + 1)); done'
	assert_success
	b=$(stat1 | jq -r .cpu_s)
	[ -n "$a" ] && [ "$a" != null ] && [ -n "$b" ] && [ "$b" != null ]
	jq -en --argjson a "$a" --argjson b "$b" '$b > $a'
}

@test "$B: a sleep counts among the pids (e2b, qemu: pids is null)" {
	new_sandbox
	if [ "$BACKEND" = e2b ] || [ "$BACKEND" = qemu ]; then
		jq_true '.pids == null and .pids_limit == null' <<<"$(stat1)"
		return
	fi
	n=$(stat1 | jq -r .pids)
	[[ $n =~ ^[0-9]+$ ]]
	sbx-exec -d -s s.json -- sleep 600 >/dev/null
	wait_stat ".pids >= $((n + 1))"
}

@test "$B: several sandboxes: a line for each, ids as arguments and on stdin" {
	a=$(mk)
	b=$(mk)
	run --separate-stderr sbx-stats -j -i 0.2 "$a" "$b"
	assert_success
	[ "$(jq -r .id <<<"$output" | sort | tr '\n' ' ')" = \
	    "$(printf '%s\n' "$a" "$b" | sort | tr '\n' ' ')" ]
	run --separate-stderr sh -c "sbx-ls -j | jq -c 'select(.status == \"running\")' | sbx-stats -j -i 0.2"
	assert_success
	jq_true -s --arg a "$a" --arg b "$b" 'map(.id) | index($a) != null and
	    index($b) != null' <<<"$output"
	sbx-kill "$a" "$b" >/dev/null
}

@test "$B: -f prints a line per interval and ends (0) when the sandbox is killed" {
	new_sandbox
	sbx-stats -f -j -i 0.2 -s s.json >f.out 2>f.err &
	pid=$!
	for ((i = 0; i < 240; i++)); do
		[ "$(wc -l <f.out)" -ge 3 ] && break
		sleep 0.25
	done
	sbx-kill -s s.json >/dev/null
	for ((i = 0; i < 240; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.25
	done
	if kill -0 "$pid" 2>/dev/null; then
		kill "$pid"
		echo "sbx-stats -f did not end with its sandbox" >&2
		return 1
	fi
	wait "$pid"
	[ "$(wc -l <f.out)" -ge 3 ]
	jq_true -s --arg id "$(sid)" 'all(.id == $id and
	    (.memory_bytes | type == "number"))' <f.out
}

@test "$B: -f ends (0) on SIGINT" {
	new_sandbox
	sbx-stats -f -j -i 0.2 -s s.json >f.out 2>f.err &
	pid=$!
	for ((i = 0; i < 240; i++)); do
		[ -s f.out ] && break
		sleep 0.25
	done
	kill -INT "$pid"
	rc=0
	wait "$pid" || rc=$?
	[ "$rc" -eq 0 ]
	jq_true -s 'length >= 1' <f.out
}

@test "$B: an unknown or killed sandbox is 3; a bad interval is 2" {
	run --separate-stderr sbx-stats -b "$BACKEND" -I nosuchsandbox1
	assert_failure 3
	assert_output ''
	[ -n "$stderr" ]
	new_sandbox
	sbx-kill -s s.json >/dev/null
	run --separate-stderr sbx-stats -s s.json
	assert_failure 3
	assert_output ''
	for bad in 0 abc -1 0.01; do
		run --separate-stderr sbx-stats -i "$bad" -s s.json
		assert_failure 2
		[[ "$stderr" == *"invalid interval '$bad'"* ]]
	done
}
