#!/usr/bin/env bats
# make install / uninstall: a packaged tree that works where it lands.

load lib/helper

setup_file() { sbx_setup_file; }
teardown_file() { sbx_teardown_file; }
setup() { sbx_setup; }

@test "make install puts tools, agent, man pages and completions under DESTDIR/PREFIX" {
	top=$(cd "$BATS_TEST_DIRNAME/.." && pwd)
	run make -s -C "$top" install DESTDIR="$BATS_TEST_TMPDIR/pkg" PREFIX=/usr
	assert_success
	for f in bin/sbx-create bin/sbx-exec bin/sbx-kill bin/sbx-ls \
	    sbin/sbxd share/man/man8/sbxd.8 share/bash-completion/completions/sbxd \
	    libexec/sbx/sbx-init share/man/man1/sbx-exec.1 \
	    share/man/man5/sbx-state.5 share/man/man7/sbx.7 \
	    share/man/man8/sbx-init.8 share/zsh/site-functions/_sbx \
	    share/bash-completion/completions/sbx-exec; do
		[ -e "$BATS_TEST_TMPDIR/pkg/usr/$f" ] || fail "missing $f"
	done
}

@test "installed tools find their agent in libexec and run a sandbox" {
	top=$(cd "$BATS_TEST_DIRNAME/.." && pwd)
	make -s -C "$top" install DESTDIR="$BATS_TEST_TMPDIR/pkg" PREFIX=/usr
	b=$BATS_TEST_TMPDIR/pkg/usr/bin
	run "$b/sbx-create" -s s.json
	assert_success
	run "$b/sbx-exec" -s s.json -- echo installed
	assert_success
	assert_output installed
	run "$b/sbx-kill" -s s.json
	assert_success
}

@test "make uninstall removes every installed file" {
	top=$(cd "$BATS_TEST_DIRNAME/.." && pwd)
	make -s -C "$top" install DESTDIR="$BATS_TEST_TMPDIR/pkg" PREFIX=/usr
	run make -s -C "$top" uninstall DESTDIR="$BATS_TEST_TMPDIR/pkg" PREFIX=/usr
	assert_success
	run find "$BATS_TEST_TMPDIR/pkg" -type f
	assert_output ""
}
