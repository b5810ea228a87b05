#!/usr/bin/env bats
# sbx-create, what only the local backend does: its ref and its store.
# What every backend does is in conformance/sbx-create.bats.

load lib/helper

setup_file() { sbx_setup_file; }
teardown_file() { sbx_teardown_file; }
setup() { sbx_setup; }
teardown() { sbx-ls -j 2>/dev/null | sbx-kill -q >/dev/null 2>&1 || true; }

@test "a local ref has a 12-digit id and names the sandbox directory in the store" {
	run --separate-stderr sbx-create -s s.json
	assert_success
	[ "$(jq -c 'keys_unsorted' <<<"$output")" = '["backend","id","dir"]' ]
	[[ "$(jq -r .id <<<"$output")" =~ ^[0-9a-f]{12}$ ]]
	[ "$(jq -r .dir <<<"$output")" = "$SBX_LOCAL_DIR/$(jq -r .id <<<"$output")" ]
	[ -d "$(jq -r .dir <<<"$output")" ]
}

@test "sbx-create -e NAME's value is neither in the sandbox directory nor in the agent's argv" {
	export SBX_TEST_SECRET=s3cr3t-value-91
	run --separate-stderr sbx-create -s s.json -e SBX_TEST_SECRET
	assert_success
	run sbx-exec -s s.json -- sh -c 'echo "$SBX_TEST_SECRET"'
	assert_output "s3cr3t-value-91"
	run grep -rl s3cr3t-value-91 "$(jq -r .ref.dir s.json)"
	assert_failure
	run grep -c s3cr3t-value-91 "/proc/$(init_pid)/cmdline"
	assert_output 0
}

@test "sbx-create refuses a store that sandbox users cannot search" {
	d=$(mktemp -d /tmp/sbx-closed.XXXXXX)
	chmod 700 "$d"
	SBX_LOCAL_DIR=$d/store run --separate-stderr sbx-create -s s.json
	rm -rf "$d"
	assert_failure 1
	[[ "$stderr" == *"not searchable"* ]]
	[ ! -e s.json ]
}

@test "sbx-create --timeout takes a duration: 90, 90s, 15m, 1h, 2d, 1h30m" {
	local d
	for d in 90:90 90s:90 15m:900 1h:3600 2d:172800 1h30m:5400; do
		run --separate-stderr sbx-create -s "${d%%:*}.json" --timeout "${d%%:*}"
		[ "$status" -eq 0 ] || fail "--timeout ${d%%:*}: exit $status: $stderr"
		[ "$(jq -r .timeout "${d%%:*}.json")" = "${d#*:}" ] ||
		    fail "--timeout ${d%%:*}: $(jq -c .timeout "${d%%:*}.json")"
	done
	SBX_TIMEOUT=2h run sbx-create -s env.json
	assert_success
	[ "$(jq -r .timeout env.json)" = 7200 ]
}

@test "sbx-create --timeout over the maximum or not a duration: exit 2, the limit said, nothing made" {
	run --separate-stderr sbx-create -s s.json --timeout 400d
	assert_failure 2
	assert_output ''
	assert_equal "$stderr" "sbx-create: --timeout: 400d is over the maximum, 365d"
	run --separate-stderr sbx-create -s s.json --timeout 1y
	assert_failure 2
	assert_equal "$stderr" "sbx-create: --timeout: invalid duration '1y' (want 90, 90s, 15m, 1h, 2d)"
	SBX_TIMEOUT=366d run --separate-stderr sbx-create -s s.json
	assert_failure 2
	assert_equal "$stderr" "sbx-create: timeout in the configuration: 366d is over the maximum, 365d"
	[ ! -e s.json ]
	[ -z "$(sbx-ls -j)" ]
}

@test "a create the backend refuses leaves no state file, no temp and no lock file" {
	mkdir -p img p
	run --separate-stderr sbx-create -s p/s.json --image "$PWD/img"
	assert_failure
	assert_equal "$stderr" "sbx-create: image '$PWD/img' has no /bin/sh"
	run ls -A p
	assert_output ''
	[ -z "$(sbx-ls -j)" ]
}

@test "a failed create with the default state file leaves no .sbx/ it made, and keeps one that was there" {
	mkdir -p p/noshell/etc && cd p
	run --separate-stderr sbx-create -i ./noshell
	assert_failure 2
	assert_output ''
	[ "$stderr" = "sbx-create: image './noshell' has no /bin/sh" ]
	run ls -A
	assert_output noshell
	mkdir .sbx
	run --separate-stderr sbx-create -i ./noshell
	assert_failure 2
	# Kept (its .gitignore made as for any .sbx/).
	run ls -A .sbx
	assert_success
	assert_output .gitignore
}

@test "a relative SBX_LOCAL_DIR is the current directory's: the ref names the sandbox by an absolute path, which works from elsewhere" {
	d=$(mktemp -d /tmp/sbx-rel.XXXXXX)
	chmod 711 "$d"
	mkdir -m 711 "$d/store"
	cd "$d"
	SBX_LOCAL_DIR=store run --separate-stderr sbx-create -s "$d/s.json"
	id=$(jq -r .id <<<"$output")
	cd /
	dir=$(jq -r .ref.dir "$d/s.json")
	SBX_LOCAL_DIR=store run --separate-stderr sbx-exec -s "$d/s.json" -- echo hi
	SBX_LOCAL_DIR=$d/store sbx-kill -q -s "$d/s.json" >/dev/null 2>&1 || true
	trash_emptied "$d/store" || true
	rm -rf "$d"
	[[ "$id" =~ ^[0-9a-f]{12}$ ]]
	assert_equal "$dir" "$d/store/$id"
	assert_success
	assert_output hi
}

@test "a directory as the state file: one line saying so, exit 6, nothing made" {
	mkdir dir
	before=$(store_paths)
	run --separate-stderr sbx-create -s dir
	assert_failure 6
	assert_equal "$stderr" "sbx-create: 'dir' is a directory, not a JSON file"
	assert_output ""
	assert_equal "$(store_paths)" "$before"
	run -125 --separate-stderr sbx-exec -s dir -- true
	assert_equal "$stderr" "sbx-exec: 'dir' is a directory, not a JSON file"
}
