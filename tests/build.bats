#!/usr/bin/env bats
# The build: no linker warning.

load lib/helper

TOP=$(cd "$BATS_TEST_DIRNAME/.." && pwd)

# A copy of the sources to build in, with the objects of the tree's default
# build when there are some (so that a link need not compile everything).
copy_tree() {
	T=$BATS_TEST_TMPDIR/tree
	mkdir -p "$T/build"
	cp -a "$TOP/Makefile" "$TOP/lib" "$TOP/cmd" "$T/"
	if [ -d "$TOP/build/default" ]; then
		cp -a "$TOP/build/default" "$T/build/"
	fi
}

@test "the static sbx-sync links without a linker warning" {
	copy_tree
	rm -f "$T/bin/sbx-sync"
	run make -C "$T" --no-print-directory -j2 bin/sbx-sync
	assert_success
	[ -x "$T/bin/sbx-sync" ] || fail "no bin/sbx-sync"
	refute_output --partial warning
}
