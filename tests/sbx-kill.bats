#!/usr/bin/env bats
# sbx-kill: what it removes, how it finds sandboxes, and refusing bad input.

load helper

setup_file() { sbx_setup_file; }
teardown_file() { sbx_teardown_file; }
setup() { sbx_setup; }
# Whatever a test left running; a second kill also removes --keep dirs.
teardown() { sbx-ls -j 2>/dev/null | sbx-kill -q >/dev/null 2>&1 || true; }

# The cgroup directories of sandbox $1 that exist, one per line.
cgroups_of() {
	local d
	for d in /sys/fs/cgroup/*/sbx/"$1"; do
		if [ -e "$d" ]; then echo "$d"; fi
	done
}

# Host pids of every process in sandbox $1's cgroup tree.
pids_of() {
	find "/sys/fs/cgroup/unified/sbx/$1" -name cgroup.procs \
	    -exec cat {} + 2>/dev/null
}

# The status sbx-ls gives sandbox $1 (empty when not listed).
ls_status() {
	sbx-ls -j | jq -r --arg id "$1" 'select(.id == $id) | .status'
}

# True when sandbox $1 has no directory and no cgroup left.
cleaned_up() {
	local dir=$SBX_LOCAL_DIR/$1
	if [ -e "$dir" ]; then
		echo "$dir still exists" >&2
		return 1
	fi
	if [ -n "$(cgroups_of "$1")" ]; then
		echo "cgroups left: $(cgroups_of "$1")" >&2
		return 1
	fi
}

@test "sbx-kill --state marks the state file killed and closes the open segment" {
	new_sandbox
	[ "$(jq -r '.segments[-1][1]' s.json)" = null ]
	run sbx-kill --state s.json
	assert_success
	[ "$(jq -r .status s.json)" = killed ]
	[ "$(jq -r '.segments[-1][1] | type' s.json)" = number ]
	[ "$(jq '.segments[-1][1] | . == floor' s.json)" = true ]
	[ "$(jq '.segments[-1][1] >= .segments[-1][0]' s.json)" = true ]
	[ "$(jq -r .schema s.json)" = 1 ]
}

@test "sbx-kill removes the sandbox directory, its cgroups and its processes" {
	new_sandbox
	local id dir pid
	id=$(jq -r .ref.id s.json)
	dir=$(jq -r .ref.dir s.json)
	pid=$(init_pid)
	[ -d "$dir" ]
	[ -n "$(cgroups_of "$id")" ]
	alive "$pid"
	run sbx-kill -s s.json
	assert_success
	[ ! -e "$dir" ]
	cleaned_up "$id"
	if alive "$pid"; then
		echo "init $pid still alive" >&2
		return 1
	fi
	[ -z "$(ls_status "$id")" ]
}

@test "sbx-kill prints one JSON line with backend, id and status killed" {
	new_sandbox
	local id
	id=$(jq -r .ref.id s.json)
	run --separate-stderr sbx-kill -s s.json
	assert_success
	[ "${#lines[@]}" -eq 1 ]
	[ "$(jq -r .backend <<<"$output")" = local ]
	[ "$(jq -r .id <<<"$output")" = "$id" ]
	[ "$(jq -r .status <<<"$output")" = killed ]
	[ "$(jq -c 'keys_unsorted[:3]' <<<"$output")" = '["backend","id","status"]' ]
	[ -z "$stderr" ]
}

@test "sbx-kill of a killed sandbox exits 0, notes it on stderr and prints gone" {
	new_sandbox
	local id
	id=$(jq -r .ref.id s.json)
	sbx-kill -s s.json >/dev/null
	run --separate-stderr sbx-kill -s s.json
	assert_success
	[ "${#lines[@]}" -eq 1 ]
	[ "$(jq -r .id <<<"$output")" = "$id" ]
	[ "$(jq -r .status <<<"$output")" = gone ]
	[[ $stderr == sbx-kill:* ]]
	[[ $stderr == *"$id"* ]]
	[ "$(jq -r .status s.json)" = killed ]
}

@test "sbx-kill kills several ids given as operands" {
	local a b c
	a=$(mk) b=$(mk) c=$(mk)
	run --separate-stderr sbx-kill "$a" "$b"
	assert_success
	[ "${#lines[@]}" -eq 2 ]
	[ "$(jq -r .id <<<"${lines[0]}")" = "$a" ]
	[ "$(jq -r .id <<<"${lines[1]}")" = "$b" ]
	[ "$(jq -r .status <<<"${lines[0]}")" = killed ]
	[ "$(jq -r .status <<<"${lines[1]}")" = killed ]
	cleaned_up "$a"
	cleaned_up "$b"
	[ "$(ls_status "$c")" = running ]
}

@test "sbx-kill --id kills that sandbox" {
	local a b
	a=$(mk) b=$(mk)
	run sbx-kill --id "$a" </dev/null
	assert_success
	[ "$(jq -r .id <<<"$output")" = "$a" ]
	[ "$(jq -r .status <<<"$output")" = killed ]
	cleaned_up "$a"
	[ "$(ls_status "$b")" = running ]
}

@test "sbx-kill reads bare ids from stdin, one per line" {
	local a b c
	a=$(mk) b=$(mk) c=$(mk)
	run sbx-kill < <(printf '%s\n' "$a" "" "  $b  ")
	assert_success
	[ "${#lines[@]}" -eq 2 ]
	[ "$(jq -r .id <<<"${lines[0]}")" = "$a" ]
	[ "$(jq -r .id <<<"${lines[1]}")" = "$b" ]
	cleaned_up "$a"
	cleaned_up "$b"
	[ "$(ls_status "$c")" = running ]
}

@test "sbx-kill reads JSON lines with an id from stdin: sbx-ls | sbx-kill" {
	local a b
	a=$(mk) b=$(mk)
	run bash -c 'sbx-ls | sbx-kill'
	assert_success
	[ "${#lines[@]}" -eq 2 ]
	[ "$(jq -r .status <<<"${lines[0]}")" = killed ]
	[ "$(jq -r .status <<<"${lines[1]}")" = killed ]
	cleaned_up "$a"
	cleaned_up "$b"
	[ -z "$(sbx-ls)" ]
}

@test "sbx-kill fed by sbx-ls | jq select kills only the selected sandboxes" {
	local a1 a2 b
	a1=$(mk -l team=a) a2=$(mk -l team=a) b=$(mk -l team=b)
	run bash -c "sbx-ls | jq -c 'select(.labels.team==\"a\")' | sbx-kill"
	assert_success
	[ "${#lines[@]}" -eq 2 ]
	[ "$(printf '%s\n' "${lines[@]}" | jq -r .id | sort)" = "$(printf '%s\n' "$a1" "$a2" | sort)" ]
	cleaned_up "$a1"
	cleaned_up "$a2"
	[ "$(ls_status "$b")" = running ]
}

@test "sbx-kill of an unknown id exits 0 with a note on stderr" {
	run --separate-stderr sbx-kill 0123456789ab
	assert_success
	[ "$(jq -r .id <<<"$output")" = 0123456789ab ]
	[ "$(jq -r .status <<<"$output")" = gone ]
	[[ $stderr == *"sbx-kill: "*"0123456789ab"* ]]
}

@test "sbx-kill with nothing naming a sandbox exits 3 with 'no sandbox'" {
	[ ! -e .sbx/state.json ]
	run --separate-stderr sbx-kill </dev/null
	assert_failure 3
	[[ $stderr == "sbx-kill: no sandbox"* ]]
	[ -z "$output" ]
	[ ! -e .sbx ]
}

@test "sbx-kill with no ids uses ./.sbx/state.json" {
	local id
	id=$(sbx-create -s .sbx/state.json | jq -r .id)
	run sbx-kill </dev/null
	assert_success
	[ "$(jq -r .id <<<"$output")" = "$id" ]
	[ "$(jq -r .status .sbx/state.json)" = killed ]
	cleaned_up "$id"
}

@test "sbx-kill with no ids uses \$SBX_STATE before stdin" {
	local a b
	new_sandbox
	a=$(jq -r .ref.id s.json)
	b=$(mk)
	run env SBX_STATE="$BATS_TEST_TMPDIR/s.json" sbx-kill < <(echo "$b")
	assert_success
	[ "${#lines[@]}" -eq 1 ]
	[ "$(jq -r .id <<<"$output")" = "$a" ]
	[ "$(jq -r .status s.json)" = killed ]
	[ "$(ls_status "$b")" = running ]
}

@test "sbx-kill on a malformed state file exits 6 and leaves it unchanged" {
	printf '{"schema": 1, "ref": {"backend": "local", "id": ' >bad.json
	cp bad.json before.json
	run --separate-stderr sbx-kill -s bad.json
	assert_failure 6
	[[ $stderr == sbx-kill:*bad.json* ]]
	[ -z "$output" ]
	cmp bad.json before.json
	[ -z "$(find . -name 'bad.json.tmp*')" ]
}

@test "sbx-kill on a state file of another schema exits 6 and leaves it unchanged" {
	new_sandbox
	local id
	id=$(jq -r .ref.id s.json)
	jq '.schema = 99' s.json >other.json
	cp other.json before.json
	run --separate-stderr sbx-kill -s other.json
	assert_failure 6
	[[ $stderr == sbx-kill:*other.json* ]]
	[ -z "$output" ]
	cmp other.json before.json
	[ "$(ls_status "$id")" = running ]
}

@test "sbx-kill --keep keeps the directory and its files but no live process" {
	new_sandbox
	local id dir pids p
	id=$(jq -r .ref.id s.json)
	dir=$(jq -r .ref.dir s.json)
	sbx-exec -s s.json -- sh -c 'echo kept >/workspace/kept.txt; sleep 300 >/dev/null 2>&1 &'
	pids=$(pids_of "$id")
	[ "$(wc -w <<<"$pids")" -ge 2 ]
	run sbx-kill --keep -s s.json
	assert_success
	[ "$(jq -r .status <<<"$output")" = killed ]
	[ -d "$dir" ]
	[ "$(cat "$dir/upper/workspace/kept.txt")" = kept ]
	for p in $pids; do
		if alive "$p"; then
			echo "pid $p still alive" >&2
			return 1
		fi
	done
	[ -z "$(cgroups_of "$id")" ]
	[ "$(jq -r .status s.json)" = killed ]
	[ "$(ls_status "$id")" != running ]
}

@test "sbx-kill keeps going after a bad input line and kills the rest" {
	local a b
	a=$(mk) b=$(mk)
	run --separate-stderr sbx-kill < <(printf '%s\n' "$a" '{"name":"x"}' "{\"id\":\"$b\"}")
	assert_failure 6
	[ "${#lines[@]}" -eq 2 ]
	[ "$(jq -r .id <<<"${lines[0]}")" = "$a" ]
	[ "$(jq -r .id <<<"${lines[1]}")" = "$b" ]
	[[ $stderr == *'"id"'* ]]
	cleaned_up "$a"
	cleaned_up "$b"
}

@test "sbx-kill cleans up a sandbox that expired" {
	new_sandbox --timeout 1
	local id
	id=$(jq -r .ref.id s.json)
	wait_status "$id" expired
	run sbx-kill -s s.json
	assert_success
	[ "$(jq -r .status <<<"$output")" = killed ]
	cleaned_up "$id"
	[ "$(jq -r .status s.json)" = killed ]
	[ -z "$(ls_status "$id")" ]
}

@test "a state file whose ref holds a credential is refused by every tool, unchanged" {
	printf '{"schema":1,"ref":{"backend":"local","id":"000000000000","token":"t0ps3cret"},"status":"running"}\n' >bad.json
	cp bad.json before.json
	for t in sbx-kill sbx-pause sbx-cost; do
		run "$t" -s bad.json
		assert_failure 6
		assert_output --partial "the ref holds a credential ('token'); refs must be secret-free"
		refute_output --partial t0ps3cret
	done
	run sbx-exec -s bad.json -- true
	assert_failure 125
	refute_output --partial t0ps3cret
	cmp bad.json before.json
}

@test "a state file of another backend than --backend says so, exit 2, unchanged" {
	printf '{"schema":1,"ref":{"backend":"e2b","id":"abc"},"status":"running"}\n' >other.json
	cp other.json before.json
	for t in sbx-kill sbx-pause; do
		run "$t" -b local -s other.json
		assert_failure 2
		assert_output "$t: state file 'other.json' is of backend 'e2b', not 'local'"
	done
	cmp other.json before.json
}
