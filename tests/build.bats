#!/usr/bin/env bats
# The build as make demo shows it: quiet, and no linker warning.

load lib/helper

TOP=$(cd "$BATS_TEST_DIRNAME/.." && pwd)

# The make under test is a fresh one: not `make check SAN=1`'s, whose
# command-line variables reach every make below it through MAKEFLAGS.
setup() {
	unset MAKEFLAGS MFLAGS MAKELEVEL MAKEOVERRIDES SAN FUZZ V
}

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

# A compiler that makes empty outputs: every rule of "all" runs, at once.
fake_cc() {
	cat >"$BATS_TEST_TMPDIR/fakecc" <<'CC'
#!/bin/sh
while [ $# -gt 0 ]; do
	if [ "$1" = -o ]; then mkdir -p "$(dirname "$2")"; : >"$2"; fi
	shift
done
CC
	chmod +x "$BATS_TEST_TMPDIR/fakecc"
}

@test "the static sbx-sync links without a linker warning" {
	copy_tree
	rm -f "$T/bin/sbx-sync"
	run make -C "$T" --no-print-directory -j2 bin/sbx-sync
	assert_success
	[ -x "$T/bin/sbx-sync" ] || fail "no bin/sbx-sync"
	refute_output --partial warning
}

@test "the remote sbx-create links libarchive in, without a linker warning" {
	copy_tree
	rm -f "$T/bin/remote/sbx-create"
	run make -C "$T" --no-print-directory -j2 bin/remote/sbx-create
	assert_success
	[ -x "$T/bin/remote/sbx-create" ] || fail "no bin/remote/sbx-create"
	refute_output --partial warning
	# Its --image DIR for docker; no shared libarchive to load at start.
	run nm "$T/bin/remote/sbx-create"
	assert_line --regexp ' T sbx_docker_import$| W sbx_docker_import$'
	run ldd "$T/bin/remote/sbx-create"
	assert_success
	refute_output --partial libarchive
}

@test "make all prints a short line per file, not the compiler's command" {
	copy_tree
	rm -rf "$T/build"
	fake_cc
	run make -C "$T" --no-print-directory -j2 all CC="$BATS_TEST_TMPDIR/fakecc"
	assert_success
	[ "${#lines[@]}" -gt 20 ] || fail "too few lines: $output"
	refute_output --partial fakecc
	assert_line "  LD bin/sbx-create"
	assert_line "  CC build/default/lib/cli.o"
	run grep -vcE '^  (CC|AR|LD) (build|bin)/' <<<"$output"
	assert_output 0
}

@test "make V=1 shows the commands" {
	copy_tree
	rm -rf "$T/build"
	fake_cc
	run make -C "$T" --no-print-directory V=1 build/default/lib/cli.o \
	    CC="$BATS_TEST_TMPDIR/fakecc"
	assert_success
	assert_line --regexp "^$BATS_TEST_TMPDIR/fakecc .* -c -o build/default/lib/cli.o lib/cli.c$"
}

@test "make demo builds in silence, with one line saying so" {
	copy_tree
	rm -rf "$T/build"
	fake_cc
	mkdir "$T/scripts"
	printf '#!/bin/sh\n' >"$T/scripts/install-deps"
	printf '#!/bin/sh\necho "the demo in $1"\n' >"$T/scripts/demo"
	chmod +x "$T/scripts/install-deps" "$T/scripts/demo"
	run make -C "$T" --no-print-directory -j2 demo CC="$BATS_TEST_TMPDIR/fakecc"
	assert_success
	assert_equal "${lines[0]}" \
	    "building the tools (make V=1 demo shows the commands)"
	assert_equal "${lines[1]}" "the demo in $T/bin"
	assert_equal "${#lines[@]}" 2
	[ -e "$T/bin/sbx-create" ] || fail "demo built nothing"
}
