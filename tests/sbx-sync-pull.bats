#!/usr/bin/env bats
# sbx-sync pull: a pull that fails while it renames files into place
# delivers everything with the next one. Each behaviour is run with the
# tool and with the tests' own sbx-sync (bin/test/sbx-sync), whose files
# go through the sandbox's shell.

load lib/helper

setup_file() { sbx_setup_file; }
teardown_file() { sbx_teardown_file; }
setup() {
	sbx_setup
	P=$BATS_TEST_TMPDIR/p
	S=$BATS_TEST_TMPDIR/s.json
	mkdir -p "$P"
	MNT=
}
teardown() {
	if [ -n "$MNT" ]; then umount "$MNT" 2>/dev/null || true; fi
	if [ -f "$S" ]; then sbx-kill -q -s "$S" >/dev/null 2>&1 || true; fi
}

# The sbx-sync under test: $SYNC, the tool by default.
push() { "${SYNC:-sbx-sync}" push -s "$S" "$@" "$P"; }
pull() { "${SYNC:-sbx-sync}" pull -s "$S" "$@" "$P"; }
status() { "${SYNC:-sbx-sync}" status -s "$S" "$@" "$P"; }
in_sbx() { sx sh -c "cd /workspace && $1"; }

# Every file and symlink, with type, mode, size, content and target.
SUM_SH='find . -name .sbx -prune -o \( -type f -o -type l \) -print0 |
    LC_ALL=C sort -z | xargs -0 -r stat -c "%n|%F|%a|%s" &&
    find . -name .sbx -prune -o -type f -print0 | LC_ALL=C sort -z |
    xargs -0 -r sha256sum &&
    find . -type l -print0 | LC_ALL=C sort -z | xargs -0 -r -n 1 readlink'
tree_sum() { (cd "$1" && sh -c "$SUM_SH"); }
sandbox_sum() { in_sbx "$SUM_SH"; }

# A mount point in the way of one file: the files renamed before it are
# written, the rest not, and the baseline must not say they were.
failed_rename() {
	new_sandbox
	for f in a b c; do echo "$f" >"$P/$f"; done
	push >/dev/null
	in_sbx 'echo a2 >a && echo b2 >b && echo c2 >c && echo n >n'
	# The same file as far as the baseline can tell.
	cp -a "$P/b" "$BATS_TEST_TMPDIR/pin"
	mount --bind "$BATS_TEST_TMPDIR/pin" "$P/b"
	MNT=$P/b
	run pull
	assert_failure 1
	assert_output "sbx-sync: cannot write 'b': Device or resource busy"
	assert_equal "$(cat "$P/a")" a2
	assert_equal "$(cat "$P/c")" c
	umount "$P/b"
	MNT=
	run pull
	assert_success
	assert_equal "$(tree_sum "$P")" "$(sandbox_sum)"
	[ -z "$(ls -A "$P/.sbx")" ]
	run status
	assert_output ''
}

@test "sbx-sync pull: a failure during the renames advances nothing, and the next pull delivers it all" {
	failed_rename
}

@test "sbx-sync pull (through the sandbox's shell): a failure during the renames, then everything next time" {
	SYNC=$SBX_BIN/test/sbx-sync failed_rename
}
