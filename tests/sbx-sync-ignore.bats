#!/usr/bin/env bats
# sbx-sync and a hostile .sbxignore: a pull can bring one back from the
# sandbox, so its matching must stay quick whatever it holds, and its size
# is capped. What the patterns mean is in tests/unit/ignore.c, against
# git check-ignore.

load lib/helper

setup_file() { sbx_setup_file; }
teardown_file() { sbx_teardown_file; }
setup() {
	sbx_setup
	P=$BATS_TEST_TMPDIR/p
	S=$BATS_TEST_TMPDIR/s.json
	mkdir -p "$P"
}
teardown() {
	if [ -f "$S" ]; then sbx-kill -q -s "$S" >/dev/null 2>&1 || true; fi
}

# Nine "**/*/" segments, then name.
bomb() {
	local i
	for ((i = 0; i < 9; i++)); do printf '**/*/'; done
	printf '%s\n' "$1"
}

@test "sbx-sync: a .sbxignore of nine **/*/ segments against a 50-deep tree pushes what it should" {
	local d=$P i
	for ((i = 0; i < 50; i++)); do d=$d/d$i; done
	mkdir -p "$d"
	echo deep >"$d/keep.txt"
	echo deep >"$d/drop.txt"
	echo top >"$P/top.txt"
	{ bomb nomatch; bomb drop.txt; } >"$P/.sbxignore"
	new_sandbox
	# Minutes with a backtracking matcher (more than 5 with 50 levels).
	run timeout 10 sbx-sync push -s "$S" "$P"
	assert_success
	run sx sh -c 'cd /workspace && find . -type f | sort'
	assert_success
	rel=${d#"$P"/}
	assert_output "$(printf './%s\n' .sbxignore "$rel/keep.txt" top.txt |
	    sort)"
}

@test "sbx-sync: a .sbxignore past 64 KiB is a usage error and nothing is pushed" {
	echo top >"$P/top.txt"
	head -c $((64 * 1024 + 1)) /dev/zero | tr '\0' '\n' >"$P/.sbxignore"
	new_sandbox
	run sbx-sync push -s "$S" "$P"
	assert_failure 2
	assert_output "sbx-sync: '.sbxignore' is larger than 64 KiB"
	run sx sh -c 'cd /workspace && find . -type f'
	assert_success
	assert_output ''
	# 64 KiB is allowed.
	head -c $((64 * 1024)) /dev/zero | tr '\0' '\n' >"$P/.sbxignore"
	run sbx-sync push -s "$S" "$P"
	assert_success
	run sx sh -c 'cd /workspace && find . -type f | sort'
	assert_output "$(printf './%s\n' .sbxignore top.txt)"
}
