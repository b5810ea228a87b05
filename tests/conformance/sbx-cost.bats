#!/usr/bin/env bats
# sbx-cost of a sandbox of the backend under test: the running time of its
# state file's segments, open while it runs and closed by sbx-kill. (The
# arithmetic, rates, budgets and the log need no sandbox: ../sbx-cost.bats.)

load conformance

setup_file() { conf_setup_file; }
teardown_file() { conf_teardown_file; }
setup() {
	conf_setup
	# No rate from the user's own configuration or environment.
	export XDG_CONFIG_HOME=$BATS_TEST_TMPDIR/config
	unset SBX_COST_PER_HOUR SBX_COST_LOCAL_PER_HOUR SBX_COST_DOCKER_PER_HOUR
}
teardown() { sbx-ls -j 2>/dev/null | sbx-kill -q >/dev/null 2>&1 || true; }

@test "$B: sbx-cost of a live sandbox counts its open segment; after sbx-kill, its closed ones" {
	new_sandbox
	local id
	id=$(sid)
	run --separate-stderr sbx-cost -s s.json -r 3600
	assert_success
	[ -z "$stderr" ]
	[ "${#lines[@]}" -eq 1 ]
	[ "$(jq -r .id <<<"$output")" = "$id" ]
	[ "$(jq -r .backend <<<"$output")" = "$BACKEND" ]
	[ "$(jq '.running_s | type == "number" and . == floor and . >= 0' <<<"$output")" = true ]
	[ "$(jq -r .rate <<<"$output")" = 3600.0000 ]
	[ "$(jq -r .rate_source <<<"$output")" = flag ]
	# Where the backend accounts for CPU time, a number.
	[ "$(jq '.cpu_s | (type == "number" and . >= 0) or . == null' <<<"$output")" = true ]
	[ "$(jq -r .accrued_cost s.json)" = "$(jq -r '.estimated | tonumber' <<<"$output")" ]
	sbx-kill -s s.json >/dev/null
	[ "$(jq -r '.segments[-1][1] | type' s.json)" = number ]
	run --separate-stderr sbx-cost -s s.json -r 3600
	assert_success
	[ "$(jq -r .id <<<"$output")" = "$id" ]
	[ "$(jq -c .cpu_s <<<"$output")" = null ]
	# 3600 an hour is 1 a second: the estimate is the running time.
	[ "$(jq '(.estimated | tonumber) == .running_s' <<<"$output")" = true ]
	[ "$(jq .running_s <<<"$output")" = \
	    "$(jq '[.segments[] | .[1] - .[0]] | add' s.json)" ]
}

@test "$B: sbx-cost of a live sandbox without a configured rate has the backend's default, never a silent 0" {
	new_sandbox
	sx sh -c 'i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done'
	run --separate-stderr sbx-cost -s s.json --max 1000
	assert_success
	if [ "$BACKEND" = e2b ] || [ "$BACKEND" = daytona ] ||
	    [ "$BACKEND" = qemu ]; then
		# Sized ones: the provider's rates on the sandbox's size (a
		# qemu VM's, as E2B prices its microVMs).
		[[ $(jq -r .rate_source <<<"$output") == "default cost.$BACKEND.vcpu_second+gib_second ("* ]]
		[ "$(jq '.rate | tonumber > 0' <<<"$output")" = true ]
	else
		assert_equal "$(jq -r .rate_source <<<"$output")" \
		    "default cost.$BACKEND.cpu_second (CPU time used)"
		assert_equal "$(jq -r .rate <<<"$output")" 0.0504
		# Its CPU time is measured and kept in the state.
		[ "$(jq '.cpu_s > 0' <<<"$output")" = true ]
		[ "$(jq --arg id "$(sid)" '.cpu_seen[$id] > 0' s.json)" = true ]
	fi
}

@test "$B: sbx-cost --by label=team sums sandboxes labelled team=a, team=b and none, live or gone" {
	create -l team=a -s a1.json >/dev/null
	create -l team=a -l other=x -s a2.json >/dev/null
	create -l team=b -s b.json >/dev/null
	create -s n.json >/dev/null
	# Gone: their segments closed, the figures hold still.
	for f in a1 a2 b n; do sbx-kill -s $f.json >/dev/null; done
	# At 3600 an hour, an estimate is the running time (at least 1 s, so
	# that a wrong sum shows).
	d=5
	for f in a1 a2 b n; do
		d=$((d + 2))
		jq --argjson d $d '.segments = [[.segments[0][0], .segments[0][0] + $d]]' $f.json >t.json
		mv t.json $f.json
	done
	run --separate-stderr sbx-cost -r 3600 -l cost.log a1.json a2.json b.json n.json
	assert_success
	per=$output
	[ "$(jq -sc '[.[] | select(.id) | .labels.team]' <<<"$per")" = '["a","a","b",null]' ]
	# b's state file goes; the log keeps what it cost.
	rm b.json
	run --separate-stderr sbx-cost -r 3600 --by label=team -l cost.log a1.json a2.json n.json
	assert_success
	[ -z "$stderr" ]
	want=$(jq -sc '[.[] | select(.id)] | group_by(.labels.team) | (.[1:] + .[:1]) |
	    map([.[0].labels.team, length, (map(.estimated | tonumber) | add)])' <<<"$per")
	got=$(jq -sc '[.[] | select(.label) | [.value, .count, (.estimated | tonumber)]]' <<<"$output")
	[ "$(jq length <<<"$got")" -eq 3 ]
	assert_equal "$got" "$want"
	assert_equal "$(tail -n 1 <<<"$output" | jq -c '[.total, .count, .estimated]')" \
	    "$(tail -n 1 <<<"$per" | jq -c '[.total, .count, .estimated]')"
}
