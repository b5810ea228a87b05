#!/usr/bin/env bats
# sbx-snapshot --memory and sbx-fork --memory on the local backend: no
# memory snapshot is taken (sbx does not checkpoint processes; CRIU
# 3.17 cannot run on this host's kernel), so both refuse, exit 2, with
# the reason in one line (CRIU missing, or what `criu check` says), and
# nothing is made: no snapshot, no copy. Without --memory a snapshot
# says "memory": false and a fork "processes": false.

load lib/helper

setup_file() { sbx_setup_file; }
teardown_file() { sbx_teardown_file; }
setup() {
	sbx_setup
	FAKE=$BATS_TEST_TMPDIR/fakebin
	mkdir -p "$FAKE"
}
teardown() {
	[ -e "$BATS_TEST_TMPDIR/s.json" ] &&
	    sbx-kill -q -s "$BATS_TEST_TMPDIR/s.json" >/dev/null 2>&1
	sbx-snapshot ls -j 2>/dev/null | jq -r .snapshot |
	    xargs -r sbx-snapshot rm >/dev/null 2>&1 || true
}

# A criu in $FAKE that records its arguments and answers `check` with
# status $1 and, on stderr, the lines after it.
fake_criu() {
	local rc=$1
	shift
	{
		echo '#!/bin/sh'
		echo "echo \"\$*\" >>'$BATS_TEST_TMPDIR/criu.args'"
		printf 'printf "%%s\\n" %s >&2\n' "$(printf "'%s' " "$@")"
		echo "exit $rc"
	} >"$FAKE/criu"
	chmod +x "$FAKE/criu"
}

# Nothing was made: no snapshot in the store, no sandbox but s.json's.
nothing_made() {
	[ "$(sbx-snapshot ls -j | wc -l)" -eq 0 ]
	[ "$(sbx-ls -j | wc -l)" -eq 1 ]
}

@test "--memory where criu check fails: exit 2 with CRIU's error, nothing made" {
	new_sandbox
	fake_criu 1 "(00.01) starting" \
	    "Error (criu/vdso.c:381): vdso: Unexpected rt vDSO area bounds" \
	    "Error (criu/crtools.c:260): Could not initialize kernel features detection."
	PATH=$FAKE:$PATH run --separate-stderr sbx-snapshot --memory -s s.json
	assert_failure 2
	assert_output ''
	[ "${#stderr_lines[@]}" -eq 1 ]
	[ "$stderr" = "sbx-snapshot: memory snapshots are not available on this host: 'criu check' fails (vdso: Unexpected rt vDSO area bounds)" ]
	[ "$(cat "$BATS_TEST_TMPDIR/criu.args")" = check ]
	nothing_made
}

@test "--memory without criu: exit 2 saying CRIU is missing, nothing made" {
	new_sandbox
	# A PATH where no criu is.
	run --separate-stderr env PATH="$FAKE" "$SBX_BIN/sbx-snapshot" \
	    --memory -s s.json
	assert_failure 2
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == *"memory snapshots are not available on this host: they need CRIU, and criu is not installed" ]]
	nothing_made
}

@test "--memory where criu check passes: still exit 2, files only said" {
	new_sandbox
	fake_criu 0 "Looks good."
	PATH=$FAKE:$PATH run --separate-stderr sbx-snapshot --memory -s s.json
	assert_failure 2
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == *"sbx does not checkpoint a local sandbox's processes with CRIU (snapshots keep files only)" ]]
	nothing_made
}

@test "--memory with this host's criu (or none): exit 2, one line, nothing made" {
	new_sandbox
	run --separate-stderr sbx-snapshot --memory -s s.json
	assert_failure 2
	assert_output ''
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == "sbx-snapshot: memory snapshots are not available"* ]]
	nothing_made
	# The sandbox runs on, untouched.
	run sbx-exec -s s.json -- true
	assert_success
}

@test "sbx-fork --memory: exit 2 with the reason, no copy and no snapshot" {
	new_sandbox
	fake_criu 1 "Error (criu/x.c:1): fake: no checkpoint here"
	PATH=$FAKE:$PATH run --separate-stderr sbx-fork --memory -c 2 \
	    -s s.json -o "$BATS_TEST_TMPDIR/f"
	assert_failure 2
	assert_output ''
	[ "$stderr" = "sbx-fork: memory snapshots are not available on this host: 'criu check' fails (fake: no checkpoint here)" ]
	[ ! -e f1.json ] && [ ! -e f2.json ]
	nothing_made
}

@test "without --memory: the snapshot says memory false, the fork processes false; criu not run" {
	new_sandbox
	fake_criu 0 "Looks good."
	PATH=$FAKE:$PATH run --separate-stderr sbx-snapshot -s s.json
	assert_success
	jq_true '.memory == false' <<<"$output"
	PATH=$FAKE:$PATH run --separate-stderr sbx-fork -s s.json
	assert_success
	jq_true '.processes == false' <<<"$output"
	[ ! -e "$BATS_TEST_TMPDIR/criu.args" ]
	sbx-kill -q -I "$(jq -r .id <<<"$output")" >/dev/null
}

@test "--memory is for taking a snapshot: with ls, rm, export, import a usage error" {
	for sub in ls rm export import; do
		run --separate-stderr sbx-snapshot --memory "$sub"
		assert_failure 2
		[[ "$stderr" == *"--memory is for taking a snapshot"* ]]
	done
}
