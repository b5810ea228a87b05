#!/usr/bin/env bats
# sbx-snapshot export of a local sandbox's snapshot, imported on the
# backend under test (issue 24's portable archives): the same files in the
# workdir (every file's content, type, mode and size, each symlink's
# target, as SUM_SH says), whatever the image; bad archives refused with
# nothing made.
load conformance

setup_file() { conf_setup_file; }
teardown_file() { conf_teardown_file; }

setup() { conf_setup; }

teardown() {
	local f
	for f in "$BATS_TEST_TMPDIR"/*.json; do
		[ -e "$f" ] && sbx-kill -q -s "$f" >/dev/null 2>&1
	done
	sbx-snapshot ls -j -b local 2>/dev/null | jq -r .snapshot |
	    xargs -r sbx-snapshot rm -b local >/dev/null 2>&1 || true
}

@test "$B: sbx-snapshot import of a local export has the same files in the workdir: contents, modes, symlinks" {
	sbx-create -b local -s src.json >/dev/null
	sbx-exec -s src.json -- sh -c 'cd /workspace && mkdir -p d/e "with space" &&
	    echo A >a && ln a b && ln -s a l && ln -s d/e dl && printf "x\n" >x &&
	    chmod 751 x && echo f >d/e/f && chmod 700 d && : >empty &&
	    echo s >"with space/s" && head -c 300000 /dev/urandom >d/big'
	want=$(sbx-exec -s src.json -- sh -c "cd /workspace && $SUM_SH")
	[ -n "$want" ]
	sbx-snapshot -b local -s src.json -n port >/dev/null
	sbx-snapshot export port >"$BATS_TEST_TMPDIR/snap.tar"
	mapfile -t flags < <(import_flags)
	run --separate-stderr sbx-snapshot import "${flags[@]}" -s t.json "$BATS_TEST_TMPDIR/snap.tar"
	[ "$status" -eq 0 ] || fail "import: $status: $stderr"
	jq_true --arg b "$BACKEND" '.backend == $b and (.id | length > 0)' <<<"$output"
	[ -e t.json ]
	run sbx-exec -s t.json -- sh -c "cd /workspace && $SUM_SH"
	assert_success
	assert_output "$want"
	# A hard link pair arrives as two files of the same content.
	run sbx-exec -s t.json -- cat /workspace/b
	assert_output A
	# From stdin, the same.
	run --separate-stderr sbx-snapshot import "${flags[@]}" -s u.json <"$BATS_TEST_TMPDIR/snap.tar"
	assert_success
	run sbx-exec -s u.json -- sh -c "cd /workspace && $SUM_SH"
	assert_output "$want"
}

@test "$B: sbx-snapshot import of what is no export: exit 6, one line, no sandbox made" {
	mapfile -t flags < <(import_flags)
	before=$(sbx-ls -j -b "$BACKEND" | jq -s length)
	tar -C "$BATS_TEST_TMPDIR" -cf "$BATS_TEST_TMPDIR/other.tar" --files-from /dev/null
	echo '{"format":"other"}' >"$BATS_TEST_TMPDIR/sbx-snapshot.json"
	tar -C "$BATS_TEST_TMPDIR" -cf "$BATS_TEST_TMPDIR/wrong.tar" sbx-snapshot.json
	printf 'not a tar at all' >"$BATS_TEST_TMPDIR/junk"
	for f in other.tar wrong.tar junk; do
		run --separate-stderr sbx-snapshot import "${flags[@]}" -s t.json "$BATS_TEST_TMPDIR/$f"
		assert_failure 6
		assert_output ''
		[ "$(wc -l <<<"$stderr")" -eq 1 ]
		[[ "$stderr" == "sbx-snapshot: not a snapshot's export"* || "$stderr" == "sbx-snapshot: cannot read the export"* ]]
		[ ! -e t.json ]
	done
	run --separate-stderr sbx-snapshot import "${flags[@]}" -s t.json "$BATS_TEST_TMPDIR/missing.tar"
	assert_failure 3
	[ ! -e t.json ]
	[ "$(sbx-ls -j -b "$BACKEND" | jq -s length)" -eq "$before" ]
}
