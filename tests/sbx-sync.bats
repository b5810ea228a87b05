#!/usr/bin/env bats
# sbx-sync on the local backend, where a pull after a pull asks the
# sandbox's agent only for the directories its watcher saw change (the
# summary's "listed":"changed"), and where the portable path through the
# sandbox's shell can be held against that fast path. What every backend
# does is in conformance/sbx-sync.bats.

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

push() { sbx-sync push -s "$S" "$@" "$P"; }
pull() { sbx-sync pull -s "$S" "$@" "$P"; }
status() { sbx-sync status -s "$S" "$@" "$P"; }
# A shell command in the sandbox's workdir.
in_sbx() { sx sh -c "cd /workspace && $1"; }

# Every file and symlink under a tree with its type, mode, size and (for
# files) content hash, sorted; the state's .sbx/ left out.
tree_sum() {
	(cd "$1" && find . -name .sbx -prune -o \( -type f -o -type l \) \
	    -print0 | LC_ALL=C sort -z | xargs -0 -r stat -c '%n|%F|%a|%s' &&
	    find . -name .sbx -prune -o -type f -print0 | LC_ALL=C sort -z |
	    xargs -0 -r sha256sum &&
	    find . -type l -print0 | LC_ALL=C sort -z | xargs -0 -r readlink)
}
sandbox_sum() {
	in_sbx "find . -name .sbx -prune -o \( -type f -o -type l \) -print0 |
	    LC_ALL=C sort -z | xargs -0 -r stat -c '%n|%F|%a|%s' &&
	    find . -name .sbx -prune -o -type f -print0 | LC_ALL=C sort -z |
	    xargs -0 -r sha256sum &&
	    find . -type l -print0 | LC_ALL=C sort -z | xargs -0 -r readlink"
}

# A tree with awkward names, an executable, a symlink, an empty file.
make_tree() {
	mkdir -p "$P/src/deep/er" "$P/with space"
	echo 'int main(void) { return 0; }' >"$P/src/main.c"
	echo nested >"$P/src/deep/er/x.txt"
	printf 'spaced' >"$P/with space/a file"
	printf 'nl' >"$P/$(printf 'new\nline')"
	echo 'ütf-8' >"$P/ünïcødé.txt"
	printf '#!/bin/sh\necho run\n' >"$P/run.sh"
	chmod 755 "$P/run.sh"
	: >"$P/empty"
	ln -s src/main.c "$P/link"
}

@test "sbx-sync: through the sandbox's shell (busybox only), status and pull agree with the fast path" {
	img=$BATS_TEST_TMPDIR/img
	mkdir -p "$img/bin" "$img/tmp" "$img/workspace"
	chmod 1777 "$img/tmp"
	cp "$(command -v busybox)" "$img/bin/"
	for c in sh find stat xargs sha256sum rm mktemp cat printf mkdir mv \
	    ln chmod touch head; do ln -s busybox "$img/bin/$c"; done
	new_sandbox --image "$img"
	make_tree
	push >/dev/null
	in_sbx 'echo more >>src/main.c && touch run.sh && mv empty empty2 && chmod +x src/deep/er/x.txt && rm "with space/a file"'
	fast=$(status)
	run "$SBX_BIN/test/sbx-sync" status -s "$S" "$P"
	assert_success
	assert_equal "$output" "$fast"
	assert_equal "$(wc -l <<<"$output")" 5
	run "$SBX_BIN/test/sbx-sync" pull -s "$S" "$P"
	assert_success
	assert_equal "$(jq -c '[.files, .deleted]' <<<"$output")" '[3,2]'
	run "$SBX_BIN/test/sbx-sync" status -s "$S" "$P"
	assert_output ''
	# And push --delete removes through rm.
	rm "$P/run.sh"
	run "$SBX_BIN/test/sbx-sync" push --delete -s "$S" "$P"
	assert_equal "$(jq .deleted <<<"$output")" 1
	run in_sbx 'ls run.sh'
	assert_failure
}

# The "listed" field of a pull's summary: "changed" or "all".
listed() { jq -r .listed <<<"${output##*$'\n'}"; }

@test "sbx-sync: a pull after a pull lists only changed directories, and misses nothing" {
	make_tree
	mkdir -p "$P/keep/a" "$P/gone/b"
	echo k >"$P/keep/a/k"
	echo g >"$P/gone/b/g"
	new_sandbox
	push
	run pull
	assert_success
	[ "$(listed)" = all ]
	# Files changed, made in new nested directories, a directory removed,
	# a mode changed, a file replaced by a symlink, a file at the top.
	in_sbx 'echo more >>src/deep/er/x.txt && mkdir -p new/a/b &&
	    echo c >new/a/b/c.txt && rm -r gone && chmod 700 run.sh &&
	    rm empty && ln -s run.sh empty && echo top >top.txt'
	run pull -v
	assert_success
	[ "$(listed)" = changed ]
	assert_output --partial "sbx-sync: the sandbox listed"
	assert_output --partial "add 'new/a/b/c.txt'"
	assert_output --partial "delete 'gone/b/g'"
	[ "$(tree_sum "$P")" = "$(sandbox_sum)" ]
	# A directory moved, then a file in it changed: the watcher learns
	# the new paths.
	in_sbx 'mv src src2 && echo moved >>src2/deep/er/x.txt'
	run pull
	assert_success
	[ "$(tree_sum "$P" | grep -v '^\./src/')" = "$(sandbox_sum | grep -v '^\./src/')" ]
	[ "$(cat "$P/src2/deep/er/x.txt")" = "$(in_sbx 'cat src2/deep/er/x.txt')" ]
	in_sbx 'echo again >>src2/deep/er/x.txt && echo k2 >>keep/a/k'
	run pull
	assert_success
	[ "$(listed)" = changed ]
	[ "$(tail -n 1 "$P/src2/deep/er/x.txt")" = again ]
	[ "$(cat "$P/keep/a/k")" = "$(printf 'k\nk2')" ]
	# Nothing changed: nothing listed, nothing written.
	run pull
	assert_success
	[ "$(listed)" = changed ]
	[ "$(jq -r .files <<<"${output##*$'\n'}")" = 0 ]
}

@test "sbx-sync: --full, other excludes, a conflict or a restarted sandbox list everything again" {
	make_tree
	new_sandbox
	push
	run pull
	[ "$(listed)" = all ]
	run pull
	[ "$(listed)" = changed ]
	run pull --full
	assert_success
	[ "$(listed)" = all ]
	run pull -x '*.tmp'
	[ "$(listed)" = all ]
	run pull -x '*.tmp'
	[ "$(listed)" = changed ]
	run pull
	[ "$(listed)" = all ]
	echo '*.log' >"$P/.sbxignore"
	run pull
	[ "$(listed)" = all ]
	run pull
	[ "$(listed)" = changed ]
	# A conflict stays until resolved: every pull looks at everything.
	echo host >>"$P/src/main.c"
	in_sbx 'echo sandbox >>src/main.c'
	run pull --strict
	assert_failure 1
	run pull --strict
	assert_failure 1
	[ "$(listed)" = all ]
	run pull --theirs
	assert_success
	run pull
	[ "$(listed)" = changed ]
	# A sandbox stopped and started again has a new agent, which knows
	# nothing of the old one's listing.
	sbx-pause -q -m stop -s "$S" >/dev/null
	sbx-pause -q -r -s "$S" >/dev/null
	in_sbx 'echo after >>src/main.c'
	run pull
	assert_success
	[ "$(listed)" = all ]
	[ "$(tail -n 1 "$P/src/main.c")" = after ]
	run pull --full -x x
	assert_success
	run sbx-sync push --full -s "$S" "$P"
	assert_failure 2
	assert_output --partial 'sbx-sync: --full is an option of pull and status'
}

@test "sbx-sync: a file changed right after each pull arrives with the next, each listed by the watcher" {
	mkdir -p "$P/a/b"
	echo 0 >"$P/a/b/f"
	new_sandbox
	push
	run pull
	assert_success
	for i in 1 2 3 4 5 6; do
		in_sbx "echo $i >>a/b/f"
		run pull
		assert_success
		[ "$(listed)" = changed ]
		[ "$(tail -n 1 "$P/a/b/f")" = "$i" ]
	done
}

@test "sbx-sync: options may come before the command, as git's: -s FILE push, -qs FILE pull, --state=FILE status" {
	new_sandbox
	make_tree
	run --separate-stderr sbx-sync -s "$S" -x '*.txt' push "$P"
	assert_success
	run sx cat /workspace/src/main.c
	assert_output 'int main(void) { return 0; }'
	run sx test -e /workspace/src/deep/er/x.txt
	assert_failure
	in_sbx 'echo back >new.c'
	run --separate-stderr sbx-sync -qs "$S" pull "$P"
	assert_success
	assert_equal "$(cat "$P/new.c")" back
	run --separate-stderr sbx-sync --state="$S" status "$P"
	assert_success
	# No command among the options: the usage error, as before.
	run --separate-stderr sbx-sync -s "$S"
	assert_failure 2
	assert_equal "$stderr" "sbx-sync: a command is required: push, pull or status"
	# An option's value that reads as a command is a value.
	run --separate-stderr sbx-sync -s push
	assert_failure 2
}
