#!/usr/bin/env bats
# sbx-cost: the arithmetic, where rates come from, budgets, alerts, the log,
# refusing bad input, and a local sandbox's CPU time. (A sandbox of any
# backend: conformance/sbx-cost.bats.)

load lib/helper

setup_file() { sbx_setup_file; }
teardown_file() { sbx_teardown_file; }
setup() {
	sbx_setup
	# No rate from the user's own configuration or environment.
	export XDG_CONFIG_HOME=$BATS_TEST_TMPDIR/config
	unset SBX_COST_PER_HOUR SBX_COST_LOCAL_PER_HOUR SBX_COST_E2B_PER_HOUR \
	    SBX_COST_E2B_VCPU_SECOND SBX_COST_E2B_GIB_SECOND
}
teardown() { sbx-ls -j 2>/dev/null | sbx-kill -q >/dev/null 2>&1 || true; }

# A hand-made state file $1 with the segments $2 (JSON), backend $3 (local)
# and more fields $4 (a jq object).
mkstate() {
	local more='{}'
	if [ -n "${4:-}" ]; then more=$4; fi
	jq -n --argjson segs "$2" --arg be "${3:-local}" --argjson more "$more" \
	    '{schema: 1, ref: {backend: $be, id: "0123456789ab"},
	      status: "killed", segments: $segs, accrued_cost: 0,
	      cost_alerted: false} + $more' >"$1"
}

# A line of the configuration file.
config() {
	mkdir -p "$XDG_CONFIG_HOME/sbx"
	echo "$1" >>"$XDG_CONFIG_HOME/sbx/config"
}

@test "sbx-cost: 7200 s at 0.10 an hour is exactly \"0.2000\"" {
	mkstate a.json '[[1000, 8200]]'
	run --separate-stderr sbx-cost --rate 0.10 a.json
	assert_success
	[ "${#lines[@]}" -eq 1 ]
	[ "$(jq -c 'keys_unsorted' <<<"$output")" = \
	    '["id","backend","running_s","estimated","rate","rate_source","cpu_s"]' ]
	[ "$(jq -r .id <<<"$output")" = 0123456789ab ]
	[ "$(jq -r .backend <<<"$output")" = local ]
	[ "$(jq .running_s <<<"$output")" = 7200 ]
	[ "$(jq .estimated <<<"$output")" = '"0.2000"' ]
	[ "$(jq .rate <<<"$output")" = '"0.1000"' ]
	[ "$(jq -r .rate_source <<<"$output")" = flag ]
	[ "$(jq -c .cpu_s <<<"$output")" = null ]
	[ -z "$stderr" ]
}

@test "sbx-cost prints money as strings with exactly 4 decimals" {
	mkstate a.json '[[0, 1]]'
	run sbx-cost -r 0.10 a.json
	assert_success
	[[ $(jq -r .estimated <<<"$output") =~ ^[0-9]+\.[0-9]{4}$ ]]
	[ "$(jq -r .estimated <<<"$output")" = 0.0000 ]
	[ "$(jq -r '.estimated | type' <<<"$output")" = string ]
	[ "$(jq -r '.rate | type' <<<"$output")" = string ]
	# 1 s at 0.18 an hour is 0.00005: rounded half up.
	run sbx-cost -r 0.18 a.json
	[ "$(jq -r .estimated <<<"$output")" = 0.0001 ]
}

@test "sbx-cost sums several segments" {
	mkstate a.json '[[1000, 2800], [5000, 5900], [10000, 10900]]'
	run sbx-cost -r 2 a.json
	assert_success
	[ "$(jq .running_s <<<"$output")" = 3600 ]
	[ "$(jq -r .estimated <<<"$output")" = 2.0000 ]
}

@test "sbx-cost counts an open segment up to now" {
	local now
	now=$(date +%s)
	mkstate a.json "[[$((now - 3600)), null]]"
	run sbx-cost --rate 1 a.json
	assert_success
	[ "$(jq '.running_s >= 3600 and .running_s <= 3610' <<<"$output")" = true ]
	[ "$(jq '.estimated | tonumber | . >= 1 and . <= 1.003' <<<"$output")" = true ]
}

@test "sbx-cost of a state without segments costs nothing" {
	mkstate a.json '[]'
	run sbx-cost -r 1 a.json
	assert_success
	[ "$(jq .running_s <<<"$output")" = 0 ]
	[ "$(jq -r .estimated <<<"$output")" = 0.0000 ]
}

@test "sbx-cost --max exits 4 when the estimate reaches it exactly" {
	mkstate a.json '[[1000, 8200]]'
	run --separate-stderr sbx-cost -r 0.10 --max 0.2 a.json
	assert_failure 4
	[ "$(jq -r .estimated <<<"$output")" = 0.2000 ]
	[ "$stderr" = "sbx-cost: budget reached: 0.2000 >= 0.2000 (0123456789ab)" ]
}

@test "sbx-cost --max exits 0 just below the budget" {
	mkstate a.json '[[1000, 8200]]'
	run --separate-stderr sbx-cost -r 0.10 --max 0.2001 a.json
	assert_success
	[ "$(jq -r .estimated <<<"$output")" = 0.2000 ]
	[ -z "$stderr" ]
}

@test "sbx-cost --max compares the total of several state files" {
	mkstate a.json '[[1000, 4600]]'
	mkstate b.json '[[1000, 4600]]'
	run --separate-stderr sbx-cost -r 1 -m 1.5 a.json
	assert_success
	run --separate-stderr sbx-cost -r 1 -m 1.5 a.json -s b.json
	assert_failure 4
	[ "${#lines[@]}" -eq 3 ]
	[ "$stderr" = "sbx-cost: budget reached: 2.0000 >= 1.5000 (total of 2)" ]
}

@test "sbx-cost prints a total line after several state files" {
	mkstate a.json '[[1000, 4600]]'
	mkstate b.json '[[1000, 8200]]' local '{"ref":{"backend":"local","id":"bbbbbbbbbbbb"}}'
	run --separate-stderr sbx-cost -r 0.10 -s a.json b.json
	assert_success
	[ "${#lines[@]}" -eq 3 ]
	[ "$(jq -r .id <<<"${lines[0]}")" = 0123456789ab ]
	[ "$(jq -r .id <<<"${lines[1]}")" = bbbbbbbbbbbb ]
	[ "${lines[2]}" = '{"total":true,"running_s":10800,"estimated":"0.3000","count":2}' ]
}

@test "sbx-cost --alert warns once across calls and remembers it in the state" {
	mkstate a.json '[[1000, 8200]]'
	run --separate-stderr sbx-cost -r 0.10 --alert 0.15 a.json
	assert_success
	[ "$stderr" = "sbx-cost: cost alert: 0.2000 >= 0.1500 (0123456789ab)" ]
	[ "$(jq .cost_alerted a.json)" = true ]
	run --separate-stderr sbx-cost -r 0.10 --alert 0.15 a.json
	assert_success
	[ -z "$stderr" ]
	[ "$(jq -r .estimated <<<"$output")" = 0.2000 ]
	run --separate-stderr sbx-cost -r 0.10 -a 0.15 a.json
	[ -z "$stderr" ]
	[ "$(jq .cost_alerted a.json)" = true ]
}

@test "sbx-cost --alert below the amount neither warns nor records" {
	mkstate a.json '[[1000, 8200]]'
	run --separate-stderr sbx-cost -r 0.10 --alert 0.2001 a.json
	assert_success
	[ -z "$stderr" ]
	[ "$(jq .cost_alerted a.json)" = false ]
}

@test "sbx-cost records the estimate in the state as accrued_cost" {
	mkstate a.json '[[1000, 8200]]' local '{"sync":{"kept":1}}'
	run sbx-cost -r 0.10 a.json
	assert_success
	[ "$(jq .accrued_cost a.json)" = 0.2 ]
	[ "$(jq -c .sync a.json)" = '{"kept":1}' ]
	[ "$(jq .schema a.json)" = 1 ]
	run sbx-cost -r 1 a.json
	[ "$(jq .accrued_cost a.json)" = 2 ]
}

@test "sbx-cost: rate_source flag, env, config and default, first found wins" {
	mkstate a.json '[[1000, 8200]]'
	config 'cost.local.per_hour = 0.5'
	run sbx-cost a.json
	[ "$(jq -r .rate_source <<<"$output")" = "config cost.local.per_hour" ]
	[ "$(jq -r .estimated <<<"$output")" = 1.0000 ]
	SBX_COST_LOCAL_PER_HOUR=0.25 run sbx-cost a.json
	[ "$(jq -r .rate_source <<<"$output")" = "env SBX_COST_LOCAL_PER_HOUR" ]
	[ "$(jq -r .estimated <<<"$output")" = 0.5000 ]
	SBX_COST_PER_HOUR=2 run sbx-cost a.json
	[ "$(jq -r .rate_source <<<"$output")" = "env SBX_COST_PER_HOUR" ]
	[ "$(jq -r .estimated <<<"$output")" = 4.0000 ]
	SBX_COST_PER_HOUR=2 run sbx-cost -r 0.10 a.json
	[ "$(jq -r .rate_source <<<"$output")" = flag ]
	[ "$(jq -r .estimated <<<"$output")" = 0.2000 ]
	rm -r "$XDG_CONFIG_HOME"
	# The default prices the CPU time it was seen using.
	mkstate a.json '[[1000, 8200]]' local '{"cpu_seen":{"0123456789ab":1800}}'
	run sbx-cost a.json
	assert_success
	[ "$(jq -r .rate_source <<<"$output")" = \
	    "default cost.local.cpu_second (CPU time used)" ]
	[ "$(jq -r .rate <<<"$output")" = 0.0504 ]
	[ "$(jq -r .estimated <<<"$output")" = 0.0252 ]
}

@test "sbx-cost takes a rate from ./.sbxrc too" {
	mkstate a.json '[[1000, 8200]]'
	echo 'cost.local.per_hour = 1' >.sbxrc
	run sbx-cost a.json
	assert_success
	[ "$(jq -r .rate_source <<<"$output")" = "config cost.local.per_hour" ]
	[ "$(jq -r .estimated <<<"$output")" = 2.0000 ]
}

@test "sbx-cost applies per-second rates to the state's resources" {
	config 'cost.e2b.vcpu_second = 0.000014'
	config 'cost.e2b.gib_second = 0.0000045'
	mkstate a.json '[[1000, 8200]]' e2b '{"resources":{"vcpus":4,"memory_mib":1024}}'
	run sbx-cost a.json
	assert_success
	# 4 x 0.000014 x 3600 + 1 x 0.0000045 x 3600 = 0.2178 an hour
	[ "$(jq -r .rate <<<"$output")" = 0.2178 ]
	[ "$(jq -r .estimated <<<"$output")" = 0.4356 ]
	[ "$(jq -r .rate_source <<<"$output")" = \
	    "config cost.e2b.vcpu_second+gib_second (4 vCPU, 1 GiB)" ]
}

@test "sbx-cost adds a disk rate (cost.B.disk_gib_second) to the per-second rates, applied to the state's disk_gib or an assumed 10 GiB" {
	config 'cost.e2b.vcpu_second = 0.000014'
	config 'cost.e2b.gib_second = 0.0000045'
	config 'cost.e2b.disk_gib_second = 0.00000003'
	mkstate a.json '[[1000, 8200]]' e2b '{"resources":{"vcpus":4,"memory_mib":1024,"disk_gib":100}}'
	run sbx-cost a.json
	assert_success
	# 0.2178 an hour, + 100 x 0.00000003 x 3600 = 0.0108: 0.2286
	[ "$(jq -r .rate <<<"$output")" = 0.2286 ]
	[ "$(jq -r .estimated <<<"$output")" = 0.4572 ]
	[ "$(jq -r .rate_source <<<"$output")" = \
	    "config cost.e2b.vcpu_second+gib_second (4 vCPU, 1 GiB) + config cost.e2b.disk_gib_second (100 GiB of disk)" ]
	mkstate b.json '[[1000, 8200]]' e2b '{"resources":{"vcpus":4,"memory_mib":1024}}'
	run sbx-cost b.json
	# 10 GiB assumed: 0.2178 + 0.00108 = 0.21888, 0.2189 rounded
	[ "$(jq -r .rate <<<"$output")" = 0.2189 ]
	[[ "$(jq -r .rate_source <<<"$output")" == *"(10 GiB of disk assumed)" ]]
	mkstate c.json '[[1000, 8200]]' e2b '{"resources":{"disk_gib":"big"}}'
	run --separate-stderr sbx-cost c.json
	assert_failure 6
	[[ $stderr == *'"disk_gib": D}'* ]]
}

@test "sbx-cost assumes 2 vCPU and 0.5 GiB where the state has no resources, and says so" {
	config 'cost.e2b.vcpu_second = 0.000014'
	config 'cost.e2b.gib_second = 0.0000045'
	mkstate a.json '[[1000, 8200]]' e2b
	run sbx-cost a.json
	assert_success
	# 2 x 0.0504 + 0.5 x 0.0162 = 0.1089 an hour
	[ "$(jq -r .rate <<<"$output")" = 0.1089 ]
	[ "$(jq -r .estimated <<<"$output")" = 0.2178 ]
	[ "$(jq -r .rate_source <<<"$output")" = \
	    "config cost.e2b.vcpu_second+gib_second (2 vCPU, 0.5 GiB assumed)" ]
	mkstate b.json '[[1000, 8200]]' e2b '{"resources":{"vcpus":1.5,"memory_mib":null}}'
	run sbx-cost b.json
	[ "$(jq -r .rate_source <<<"$output")" = \
	    "config cost.e2b.vcpu_second+gib_second (1.5 vCPU; 0.5 GiB assumed)" ]
}

@test "sbx-cost of e2b without a configured rate applies E2B's published rates" {
	mkstate a.json '[[1000, 8200]]' e2b
	run --separate-stderr sbx-cost a.json
	assert_success
	# 2 x 0.000014 x 3600 + 0.5 x 0.0000045 x 3600 = 0.1089 an hour
	[ "$(jq -r .rate <<<"$output")" = 0.1089 ]
	[ "$(jq -r .estimated <<<"$output")" = 0.2178 ]
	[ "$(jq -r .rate_source <<<"$output")" = \
	    "default cost.e2b.vcpu_second+gib_second (2 vCPU, 0.5 GiB assumed)" ]
}

@test "sbx-cost of a sandbox that ran but whose CPU time was never seen exits 2 naming the key, not 0" {
	local be
	for be in local docker; do
		mkstate a.json '[[1000, 8200]]' "$be"
		cp a.json before.json
		run --separate-stderr sbx-cost --max 5 a.json
		assert_failure 2
		[ -z "$output" ]
		assert_equal "$stderr" "sbx-cost: no rate for backend '$be': the CPU time of '0123456789ab' is not known; set cost.$be.per_hour (or give --rate)"
		cmp a.json before.json
	done
	# Nothing ran: nothing to know.
	mkstate a.json '[]'
	run sbx-cost --max 5 a.json
	assert_success
	[ "$(jq -r .estimated <<<"$output")" = 0.0000 ]
}

@test "sbx-cost of a backend without a default rate exits 2 naming the key and changes nothing" {
	mkstate a.json '[[1000, 8200]]' e2b
	jq '.ref.backend = "other"' a.json >b.json
	cp b.json before.json
	run --separate-stderr sbx-cost b.json
	assert_failure 2
	[ -z "$output" ]
	[[ $stderr == "sbx-cost: no rate for backend 'other': set cost.other.per_hour"* ]]
	cmp b.json before.json
}

@test "sbx-cost -q prints nothing and says it with the exit status" {
	mkstate a.json '[[1000, 8200]]'
	run --separate-stderr sbx-cost -q -r 0.10 --max 0.2001 a.json
	assert_success
	[ -z "$output" ]
	[ -z "$stderr" ]
	run --separate-stderr sbx-cost --quiet -r 0.10 --max 0.2 a.json -s a.json
	assert_failure 4
	[ -z "$output" ]
	[ -z "$stderr" ]
	# What it would have printed still goes to the log and the state.
	run sbx-cost -q -r 1 -l cost.log a.json
	assert_success
	[ -z "$output" ]
	[ "$(jq -r .estimated cost.log)" = 2.0000 ]
	[ "$(jq .accrued_cost a.json)" = 2 ]
}

@test "sbx-cost --log appends one line per call with the time" {
	mkstate a.json '[[1000, 8200]]'
	run sbx-cost -r 0.10 --log cost.log a.json
	assert_success
	[ "$(stat -c %a cost.log)" = 644 ]
	[ "$(wc -l <cost.log)" -eq 1 ]
	run sbx-cost -r 1 -l cost.log a.json
	assert_success
	[ "$(wc -l <cost.log)" -eq 2 ]
	[ "$(sed -n 1p cost.log | jq -r .estimated)" = 0.2000 ]
	[ "$(sed -n 2p cost.log | jq -r .estimated)" = 2.0000 ]
	[[ $(sed -n 2p cost.log | jq -r .at) =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$ ]]
	# The printed line, with "at" in front.
	[ "$(sed -n 2p cost.log | jq -c 'del(.at, .state)')" = "$output" ]
	# and the state file it is of, absolute (sbx-cost --by reads it).
	[ "$(sed -n 2p cost.log | jq -r .state)" = "$PWD/a.json" ]
}

@test "sbx-cost refuses malformed or negative amounts with exit 2 and changes nothing" {
	local a o
	mkstate a.json '[[1000, 8200]]'
	cp a.json before.json
	for o in --max --alert --rate; do
		for a in -1 1e3 abc 0.1.2 '' .5 5. +1 ' 1' 0x10 1,5 1000001; do
			run --separate-stderr sbx-cost -r 0.10 "$o" "$a" -l cost.log a.json
			[ "$status" -eq 2 ] || fail "$o '$a': exit $status"
			[ -z "$output" ] || fail "$o '$a' printed: $output"
			[ "$stderr" = "sbx-cost: invalid amount '$a'" ] ||
			    fail "$o '$a': $stderr"
		done
	done
	run --separate-stderr sbx-cost --max 5.00001 a.json
	assert_failure 2
	cmp a.json before.json
	[ ! -e cost.log ]
}

@test "sbx-cost refuses a malformed rate in the configuration with exit 2" {
	mkstate a.json '[[1000, 8200]]'
	cp a.json before.json
	config 'cost.local.per_hour = 0.1.2'
	run --separate-stderr sbx-cost a.json
	assert_failure 2
	[ "$stderr" = "sbx-cost: invalid amount '0.1.2' (config cost.local.per_hour)" ]
	SBX_COST_PER_HOUR=-1 run --separate-stderr sbx-cost a.json
	assert_failure 2
	[ "$stderr" = "sbx-cost: invalid amount '-1' (env SBX_COST_PER_HOUR)" ]
	cmp a.json before.json
}

@test "sbx-cost on a state file that does not exist exits 3 and creates nothing" {
	run --separate-stderr sbx-cost -r 1 sub/none.json
	assert_failure 3
	[ "$stderr" = "sbx-cost: no sandbox: no state file 'sub/none.json'" ]
	[ -z "$output" ]
	[ ! -e sub ]
}

@test "sbx-cost with nothing naming a state file exits 3 with 'no sandbox'" {
	run --separate-stderr sbx-cost
	assert_failure 3
	[[ $stderr == "sbx-cost: no sandbox"* ]]
	[ ! -e .sbx ]
}

@test "sbx-cost uses \$SBX_STATE, then ./.sbx/state.json" {
	mkdir .sbx
	mkstate .sbx/state.json '[[1000, 4600]]'
	mkstate a.json '[[1000, 8200]]'
	run sbx-cost -r 1
	assert_success
	[ "$(jq .running_s <<<"$output")" = 3600 ]
	SBX_STATE=a.json run sbx-cost -r 1
	assert_success
	[ "$(jq .running_s <<<"$output")" = 7200 ]
}

@test "sbx-cost on a malformed state file exits 6 and leaves it unchanged" {
	printf '{"schema": 1, "ref": {"backend": "local", "id": ' >bad.json
	cp bad.json before.json
	run --separate-stderr sbx-cost -r 1 bad.json
	assert_failure 6
	[[ $stderr == sbx-cost:*bad.json* ]]
	[ -z "$output" ]
	cmp bad.json before.json
}

@test "sbx-cost on malformed segments exits 6 and leaves the file unchanged" {
	local segs
	for segs in '"x"' '[[1000]]' '[[2000, 1000]]' '[["a", 2]]' '[[-5, 2]]'; do
		mkstate bad.json "$segs"
		cp bad.json before.json
		run --separate-stderr sbx-cost -r 1 -a 0 bad.json
		[ "$status" -eq 6 ] || fail "$segs: exit $status"
		[[ $stderr == sbx-cost:*bad.json* ]] || fail "$segs: $stderr"
		[ -z "$output" ]
		cmp bad.json before.json
	done
}

@test "sbx-cost goes on after a bad state file and returns the worst status" {
	mkstate a.json '[[1000, 4600]]'
	echo '{' >bad.json
	run --separate-stderr sbx-cost -r 1 none.json a.json bad.json
	assert_failure 6
	[ "${#lines[@]}" -eq 2 ]
	[ "$(jq -r .estimated <<<"${lines[0]}")" = 1.0000 ]
	[ "$(jq -c . <<<"${lines[1]}")" = '{"total":true,"running_s":3600,"estimated":"1.0000","count":1}' ]
}

@test "sbx-cost of a local sandbox: the CPU seconds of its cgroup, priced by default" {
	new_sandbox
	run --separate-stderr sbx-cost -s s.json
	assert_success
	[ "$(jq -r .id <<<"$output")" = "$(sid)" ]
	[ "$(jq -r .rate_source <<<"$output")" = \
	    "default cost.local.cpu_second (CPU time used)" ]
	[ "$(jq -r .rate <<<"$output")" = 0.0504 ]
	[ "$(jq -r '.cpu_s | type' <<<"$output")" = number ]
	sx sh -c 'i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done'
	run --separate-stderr sbx-cost -s s.json -r 3600
	assert_success
	[ "$(jq '.cpu_s > 0' <<<"$output")" = true ]
}

@test "sbx-cost --max stops a local sandbox's loop once its CPU time costs that much, also after sbx-kill" {
	config 'cost.local.cpu_second = 1'
	new_sandbox
	run sbx-cost -s s.json --max 1000
	assert_success
	[ "$(jq -r .rate_source <<<"$output")" = \
	    "config cost.local.cpu_second (CPU time used)" ]
	[ "$(jq -r .rate <<<"$output")" = 3600.0000 ]
	# Burn a little CPU: at 1 a CPU-second, 0.0100 is 10 ms (the estimate
	# counts whole milliseconds).
	sx sh -c 'i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done'
	run --separate-stderr sbx-cost -s s.json --max 0.01
	assert_failure 4
	[[ $stderr == "sbx-cost: budget reached: "* ]]
	local est
	est=$(jq -r .estimated <<<"$output")
	[ "$(jq '(.estimated | tonumber) >= 0.01 and ((.estimated | tonumber) - .cpu_s | fabs) < 0.001' <<<"$output")" = true ]
	# The CPU time seen is kept in the state: a killed sandbox costs
	# what it cost.
	sbx-kill -s s.json >/dev/null
	run --separate-stderr sbx-cost -s s.json --max 0.01
	assert_failure 4
	[ "$(jq -c .cpu_s <<<"$output")" = null ]
	[ "$(jq -r .estimated <<<"$output")" = "$est" ]
}

# State files of team a (two), team b and none: $1 more jq for each.
teams() {
	mkstate a1.json '[[0, 3600]]' local '{"ref":{"backend":"local","id":"aaaaaaaaaaa1"},"labels":{"team":"a"}}'
	mkstate a2.json '[[0, 7200], [9000, 9900]]' local '{"ref":{"backend":"local","id":"aaaaaaaaaaa2"},"labels":{"team":"a","other":"x"}}'
	mkstate b.json '[[0, 1800]]' local '{"ref":{"backend":"local","id":"bbbbbbbbbbbb"},"labels":{"team":"b"}}'
	mkstate n.json '[[0, 360]]' local '{"ref":{"backend":"local","id":"nnnnnnnnnnnn"},"labels":{"other":"x"}}'
}

@test "sbx-cost --by label=KEY sums the sandboxes of each value, those without the label as null" {
	teams
	# The per-sandbox figures, each line with its labels.
	run --separate-stderr sbx-cost -r 0.37 a1.json a2.json b.json n.json
	assert_success
	per=$output
	[ "$(jq -sc '[.[] | select(.id) | .labels.team]' <<<"$per")" = '["a","a","b",null]' ]
	# What the lines say, summed by team with jq.
	want=$(jq -sc '[.[] | select(.id)] | group_by(.labels.team) |
	    map({value: .[0].labels.team, count: length,
	         running_s: (map(.running_s) | add),
	         units: (map(.estimated | sub("\\."; "") | tonumber) | add)})' <<<"$per")
	[ "$(jq length <<<"$want")" -eq 3 ]
	run --separate-stderr sbx-cost -r 0.37 --by label=team a1.json a2.json b.json n.json
	assert_success
	[ -z "$stderr" ]
	[ "${#lines[@]}" -eq 4 ]
	got=$(jq -sc '[.[] | select(.label) | {value, count, running_s,
	    units: (.estimated | sub("\\."; "") | tonumber)}]' <<<"$output")
	# group_by puts null first; sbx-cost puts it last.
	assert_equal "$got" "$(jq -c '.[1:] + .[:1]' <<<"$want")"
	# the values named, with 4 decimals, and the total line as without --by
	assert_equal "$(jq -sc '[.[] | select(.label) | [.label, .value, .estimated]]' <<<"$output")" \
	    '[["team","a","1.2025"],["team","b","0.1850"],["team",null,"0.0370"]]'
	assert_equal "${lines[3]}" "$(tail -n 1 <<<"$per")"
	# Nothing but the state files' own records was written.
	[ "$(jq -r .accrued_cost a2.json)" = 0.8325 ]
}

@test "sbx-cost --by with --max: a budget per value, exit 4 when one reaches it, naming it" {
	teams
	run --separate-stderr sbx-cost -r 1 --by label=team --max 1.5 a1.json a2.json b.json n.json
	assert_failure 4
	assert_equal "$(jq -sc '[.[] | select(.label) | [.value, .estimated, .exceeded]]' <<<"$output")" \
	    '[["a","3.2500",true],["b","0.5000",false],[null,"0.1000",false]]'
	assert_equal "$stderr" "sbx-cost: budget reached: 3.2500 >= 1.5000 (team=a)"
	# Without the label, the group is named so.
	run --separate-stderr sbx-cost -r 1 --by label=other --max 0.5 b.json
	assert_failure 4
	assert_equal "$stderr" "sbx-cost: budget reached: 0.5000 >= 0.5000 (no label other)"
	# The total (3.85) over the budget, no value over it: exit 0.
	run --separate-stderr sbx-cost -r 1 --by label=team --max 3.3 a1.json a2.json b.json n.json
	assert_success
	assert_equal "$(jq -sc '[.[] | select(.label) | .exceeded]' <<<"$output")" '[false,false,false]'
	[ -z "$stderr" ]
	run sbx-cost -q -r 1 --by label=team --max 0.9 a1.json b.json
	assert_failure 4
	assert_output ''
}

@test "sbx-cost --by counts the sandboxes only the log knows, at their last line, and no sandbox twice" {
	teams
	sbx-cost -r 1 -l cost.log a1.json a2.json b.json n.json >/dev/null
	sbx-cost -r 2 -l cost.log b.json >/dev/null
	# b's state file goes: the log keeps its cost (its last line, at 2).
	rm b.json
	run --separate-stderr sbx-cost -r 1 --by label=team -l cost.log a1.json a2.json n.json
	assert_success
	assert_equal "$(jq -sc '[.[] | select(.label) | [.value, .count, .estimated]]' <<<"$output")" \
	    '[["a",2,"3.2500"],["b",1,"1.0000"],[null,1,"0.1000"]]'
	# The call's own lines were appended after it read the log.
	[ "$(wc -l <cost.log)" -eq 8 ]
	# A line of an older sbx-cost (no state) counts by its id, unless a
	# state file of the call has that id.
	echo '{"id":"cccccccccccc","backend":"local","running_s":10,"estimated":"0.0500","labels":{"team":"b"}}' >>cost.log
	echo '{"id":"aaaaaaaaaaa1","backend":"local","running_s":10,"estimated":"9.0000","labels":{"team":"a"}}' >>cost.log
	run --separate-stderr sbx-cost -r 1 --by label=team -l cost.log a1.json a2.json n.json
	assert_success
	assert_equal "$(jq -sc '[.[] | select(.label) | [.value, .count, .estimated]]' <<<"$output")" \
	    '[["a",2,"3.2500"],["b",2,"1.0500"],[null,1,"0.1000"]]'
	# A line that is not sbx-cost's: exit 6, the rest still summed.
	echo 'not json' >>cost.log
	run --separate-stderr sbx-cost -r 1 --by label=team -l cost.log a1.json
	assert_failure 6
	[[ $stderr == *"'cost.log' line 14: not a line of sbx-cost"* ]]
	[ "$(jq -sc '[.[] | select(.label) | .value]' <<<"$output")" = '["a","b",null]' ]
}

@test "sbx-cost --by on a terminal prints a table, with -j JSON lines" {
	teams
	run bash -c "script -qec 'sbx-cost -r 1 --by label=team --max 1.5 a1.json b.json n.json' /dev/null </dev/null | tr -d '\r'"
	assert_line --index 0 --regexp '^team +COUNT +RUNNING_S +ESTIMATED +BUDGET$'
	assert_line --regexp '^a +1 +3600 +1\.0000 +-$'
	assert_line --regexp '^b +1 +1800 +0\.5000 +-$'
	assert_line --regexp '^- +1 +360 +0\.1000 +-$'
	assert_line --regexp '^TOTAL +3 +5760 +1\.6000$'
	run bash -c "script -qec 'sbx-cost -j -r 1 --by label=team a1.json' /dev/null </dev/null | tr -d '\r'"
	assert_output '{"label":"team","value":"a","count":1,"running_s":3600,"estimated":"1.0000"}'
}

@test "sbx-cost --by refuses what is not label=KEY, a key a label cannot have, with exit 2 and one line" {
	teams
	for by in foo label label= 'label=a b' 'label=a=b' team=a; do
		run --separate-stderr sbx-cost -r 1 --by "$by" a1.json
		assert_failure 2
		assert_output ''
		[ "$(wc -l <<<"$stderr")" -eq 1 ]
		[[ $stderr == "sbx-cost: --by"* ]]
	done
	run --separate-stderr sbx-cost -r 1 --by 'label=a b' a1.json
	assert_equal "$stderr" "sbx-cost: --by: invalid label key 'a b'"
	run --separate-stderr sbx-cost -r 1 --by foo a1.json
	assert_equal "$stderr" "sbx-cost: --by wants label=key, not 'foo'"
	# Nothing was estimated: the state is as it was.
	[ "$(jq -r .accrued_cost a1.json)" = 0 ]
}
