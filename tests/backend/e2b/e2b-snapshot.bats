#!/usr/bin/env bats
# sbx-snapshot export on e2b, beyond what every backend does
# (tests/conformance/sbx-snapshot.bats): only e2b's export makes sandboxes
# (one from the snapshot, one from its base), and an export cut by SIGINT
# or SIGTERM leaves none of them running. Against a private sbxd.
load ../../lib/helper
load ../../lib/sbxd

setup_file() {
	sbx_setup_file
	sbxd_start
	export E2B_API_KEY=$SBXD_KEY E2B_API_URL=$SBXD_URL E2B_SANDBOX_URL=$SBXD_URL
	unset E2B_DOMAIN
}

teardown_file() {
	sbxd_stop
	sbx_teardown_file
	rm -rf "${SBXD_DIR:-/nonexistent}"
}

setup() { sbx_setup; }

teardown() {
	sbx-ls -j -b e2b 2>/dev/null | sbx-kill -q -b e2b >/dev/null 2>&1 || true
	sbx-snapshot ls -j -b e2b 2>/dev/null | jq -r .snapshot |
	    xargs -r sbx-snapshot rm -b e2b >/dev/null 2>&1 || true
}

@test "an e2b export cut by SIGINT or SIGTERM leaves no sandbox running" {
	sbx-create -b e2b -s "$BATS_TEST_TMPDIR/s.json" >/dev/null
	sbx-exec -s "$BATS_TEST_TMPDIR/s.json" -- sh -c 'echo A >/workspace/a 2>/dev/null || echo A >"$HOME/a"'
	sbx-snapshot -s "$BATS_TEST_TMPDIR/s.json" -n cut >/dev/null
	before=$(sbx-ls -j -b e2b | jq -s length)
	[ "$before" -ge 1 ]
	for sig in INT TERM; do
		# As a terminal's ^C comes: SIGINT not ignored, as bash's & does.
		python3 -c 'import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.execvp(sys.argv[1], sys.argv[1:])' sbx-snapshot export -b e2b cut >"$BATS_TEST_TMPDIR/cut.tar" &
		pid=$!
		# Its two sandboxes made (or it ended: then this test fails).
		for ((i = 0; i < 400; i++)); do
			[ "$(sbx-ls -j -b e2b | jq -s length)" -ge $((before + 2)) ] && break
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.05
		done
		[ "$(sbx-ls -j -b e2b | jq -s length)" -ge $((before + 2)) ] ||
			fail "the export ended before both its sandboxes were seen"
		kill -"$sig" "$pid"
		rc=0
		wait "$pid" || rc=$?
		[ "$rc" -ne 0 ]
		run sbx-ls -j -b e2b
		assert_success
		[ "$(jq -s length <<<"$output")" -eq "$before" ] || fail "after SIG$sig: $output"
	done
}
