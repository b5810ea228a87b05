#!/usr/bin/env bats
# What the backend under test declares it can do, and that the tools hold
# it to that: what it lacks is refused with nothing made; what it has works.
# (The other files ask has_cap where a backend may differ.)

load conformance

setup_file() { conf_setup_file; }
teardown_file() { conf_teardown_file; }
setup() { conf_setup; }

# Nothing of the backend under test is left.
no_sandboxes() {
	run sbx-ls -j -b "$BACKEND"
	assert_success
	assert_output ''
}

@test "$B: the backend declares every capability, each true or false" {
	run sbx-ls -B -j
	assert_success
	jq -se --arg b "$BACKEND" 'map(select(.backend == $b)) | length == 1
	    and (.[0].caps | length == 26 and all(type == "boolean"))
	    and (.[0].pause | IN("suspend", "stop", "none"))' <<<"$output"
	run sbx-pause -S -b "$BACKEND"
	assert_success
	[ "$(jq -r .pause <<<"$output")" = "$(sbx-ls -B | jq -r --arg b \
	    "$BACKEND" 'select(.backend == $b) | .pause')" ]
}

@test "$B: --runtime is refused (2) with nothing made, or a runtime the backend lacks is" {
	run --separate-stderr create -R nosuchruntime -s s.json
	assert_failure 2
	assert_output ''
	if has_cap runtime; then
		[[ "$stderr" == *"nosuchruntime"* ]]
	else
		[ "$stderr" = "sbx-create: backend '$BACKEND' cannot choose a runtime (--runtime)" ]
	fi
	[ ! -e s.json ]
	no_sandboxes
}

@test "$B: --pull is refused (2), or an image it cannot pull fails (1) naming it, with nothing made" {
	if has_cap pull; then
		# A registry on loopback that is not there: no traffic leaves.
		run --separate-stderr sbx-create -b "$BACKEND" -i \
		    127.0.0.1:9/sbx/none:1 --pull -s s.json
		assert_failure 1
		[[ "$stderr" == *"127.0.0.1:9/sbx/none:1"* ]]
	else
		run --separate-stderr create --pull -s s.json
		assert_failure 2
		[ "$stderr" = "sbx-create: backend '$BACKEND' cannot pull images (--pull)" ]
	fi
	assert_output ''
	[ ! -e s.json ]
	no_sandboxes
}

@test "$B: idle time is reported and sbx-gc --idle-for uses it, or both say they cannot" {
	new_sandbox
	if has_cap idle; then
		jq_true '.idle | type == "number"' <<<"$(ls_line "$(sid)")"
		run sbx-gc --idle-for 1h
		assert_success
		run sx true
		assert_success
	else
		jq_true '.idle == null' <<<"$(ls_line "$(sid)")"
		run --separate-stderr sbx-gc --idle-for 1s
		assert_failure 2
		[ "$stderr" = "sbx-gc: backend '$BACKEND' cannot tell how long a sandbox was idle (--idle-for)" ]
		run sx true
		assert_success
	fi
}

@test "$B: a snapshot, --from and a fork work, or each is refused (2) naming the backend with nothing made" {
	new_sandbox
	local msg="backend '$BACKEND' cannot snapshot a sandbox's files (sbx-snapshot, sbx-fork, --from)"
	local before
	before=$(sbx-ls -j -b "$BACKEND" | jq -s 'length - 1')
	if has_cap snapshot; then
		sx sh -c 'echo c >/workspace/c'
		run --separate-stderr sbx-snapshot -s s.json
		assert_success
		id=$(jq_str .snapshot <<<"$output")
		create --from "$id" -s t.json >/dev/null
		run sbx-exec -s t.json -- cat /workspace/c
		assert_output c
		run --separate-stderr sbx-fork -s t.json -c 2
		assert_success
		[ "$(jq -s 'map(select(.processes == false)) | length' <<<"$output")" -eq 2 ]
		fid=$(jq -rs '.[0].snapshot' <<<"$output")
		[ -n "$fid" ] && [ "$fid" != null ]
		# shellcheck disable=SC2046
		sbx-kill $(jq -r .id <<<"$output") >/dev/null
		# Both listed by the backend's ls, removed by its rm (the
		# fork's first: it stands on the other), then gone.
		run --separate-stderr sbx-snapshot ls -j -b "$BACKEND"
		assert_success
		[ "$(jq -s --arg a "$id" --arg b "$fid" 'map(select(.snapshot == $a or .snapshot == $b)) | length' <<<"$output")" -eq 2 ]
		sbx-kill -s t.json >/dev/null
		run --separate-stderr sbx-snapshot rm -b "$BACKEND" "$fid" "$id"
		assert_success
		run --separate-stderr sbx-snapshot ls -j -b "$BACKEND"
		assert_success
		[ "$(jq -s --arg a "$id" --arg b "$fid" 'map(select(.snapshot == $a or .snapshot == $b)) | length' <<<"$output")" -eq 0 ]
		run --separate-stderr sbx-snapshot rm -b "$BACKEND" "$id"
		assert_failure 3
	else
		run --separate-stderr sbx-snapshot -s s.json
		assert_failure 2
		[ "$stderr" = "sbx-snapshot: $msg" ]
		run --separate-stderr sbx-fork -s s.json -c 2
		assert_failure 2
		[ "$stderr" = "sbx-fork: $msg" ]
		run --separate-stderr create --from snp-000000000000 -s t.json
		assert_failure 2
		[ "$stderr" = "sbx-create: $msg" ]
		assert_output ''
		[ ! -e t.json ]
		run --separate-stderr sbx-snapshot ls -j
		assert_failure 2
		[ "$stderr" = "sbx-snapshot: $msg" ]
		assert_output ''
	fi
	sbx-kill -s s.json >/dev/null
	# (Other tests' sandboxes may be left: none of ours is.)
	run sbx-ls -j -b "$BACKEND"
	assert_success
	[ "$(jq -s 'length' <<<"$output")" -eq "$before" ]
}
