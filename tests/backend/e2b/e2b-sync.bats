#!/usr/bin/env bats
# sbx-sync on the e2b backend, against a private sbxd on loopback: the tar
# goes up through envd's /files and tar unpacks it in the sandbox; a pull
# streams tar's output back through a command. The workdir is the
# sandbox's, /workspace. The API key travels in the environment only.
load ../../lib/helper
load ../../lib/sbxd

setup_file() {
	sbx_setup_file
	sbxd_start
	export E2B_API_KEY=$SBXD_KEY
}

teardown_file() {
	sbxd_stop
	sbx_teardown_file
	rm -rf "${SBXD_DIR:-/nonexistent}"
}

setup() {
	sbx_setup
	unset E2B_API_URL E2B_SANDBOX_URL E2B_DOMAIN
	export XDG_CONFIG_HOME=$BATS_TEST_TMPDIR/config
	P=$BATS_TEST_TMPDIR/p
	S=$BATS_TEST_TMPDIR/s.json
	mkdir -p "$P"
	sbx-create -b e2b -E "$SBXD_URL" -s "$S" >/dev/null
}

teardown() {
	if [ -f "$S" ]; then sbx-kill -q -s "$S" >/dev/null 2>&1 || true; fi
}

push() { sbx-sync push -s "$S" "$@" "$P" 2>>"$BATS_TEST_TMPDIR/stderr"; }
pull() { sbx-sync pull -s "$S" "$@" "$P" 2>>"$BATS_TEST_TMPDIR/stderr"; }
in_sbx() { sbx-exec -s "$S" -- sh -c "cd /workspace && $1"; }

sandbox_sum() { in_sbx "$SUM_SH"; }

make_tree() {
	mkdir -p "$P/src/deep/er" "$P/with space"
	echo 'int main(void) { return 0; }' >"$P/src/main.c"
	echo nested >"$P/src/deep/er/x.txt"
	printf 'spaced' >"$P/with space/a file"
	printf 'nl' >"$P/$(printf 'new\nline')"
	echo 'ütf-8' >"$P/ünïcødé.txt"
	printf 'dash' >"$P/-starts-with-dash"
	printf '#!/bin/sh\necho run\n' >"$P/run.sh"
	chmod 755 "$P/run.sh"
	chmod 600 "$P/src/main.c"
	: >"$P/empty"
	ln -s src/main.c "$P/link"
}

@test "e2b: sbx-ls -B says the backend moves files, without zstd" {
	run sbx-ls -B
	assert_success
	assert_equal "$(jq -c 'select(.backend == "e2b") | [.caps.files, .caps.zstd]' <<<"$output")" '[true,false]'
	run sbx-sync push -z zstd -s "$S" "$P"
	assert_failure 2
}

@test "e2b: sbx-sync push puts the tree in the workdir: content, modes, symlinks, odd names" {
	make_tree
	run push
	assert_success
	assert_equal "$(jq -r '[.files, .deleted] | @csv' <<<"$output")" 9,0
	assert_equal "$(sandbox_sum)" "$(tree_sum "$P")"
	run in_sbx 'readlink link; stat -c %a run.sh src/main.c; ./run.sh'
	assert_output "$(printf 'src/main.c\n755\n600\nrun')"
	# The temporary tar is gone.
	run sbx-exec -s "$S" -- sh -c 'ls -A /tmp | grep -c sbx-sync-'
	assert_output 0
}

@test "e2b: sbx-sync pull brings back changed and new files and deletions" {
	make_tree
	push >/dev/null
	in_sbx 'echo more >>src/main.c && mkdir -p new/dir && echo fresh >new/dir/f &&
	    ln -s ../empty new/l && rm "with space/a file" && chmod 700 run.sh'
	: >"$SBXD_DIR/log"
	run pull
	assert_success
	assert_equal "$(jq -r '[.files, .deleted, .conflicts] | @csv' <<<"$output")" 4,1,0
	# The tar came down through envd's /files, and its temporary files went.
	grep -q " GET /files 200 " "$SBXD_DIR/log" || fail "no download: $(cat "$SBXD_DIR/log")"
	run sbx-exec -s "$S" -- sh -c 'ls /tmp | grep -c "^sbx-sync-" || true'
	assert_output 0
	assert_equal "$(tree_sum "$P")" "$(sandbox_sum)"
	[ ! -e "$P/with space/a file" ]
	assert_equal "$(cat "$P/new/dir/f")" fresh
	assert_equal "$(readlink "$P/new/l")" ../empty
	run sbx-sync status -s "$S" "$P"
	assert_success
	assert_output ''
	run sbx-exec -s "$S" -- sh -c 'ls -A /tmp | grep -c sbx-sync-'
	assert_output 0
}

@test "e2b: sbx-sync pull into an empty project brings the whole tree" {
	make_tree
	push >/dev/null
	mkdir "$BATS_TEST_TMPDIR/q"
	# -I: the endpoint comes from the environment.
	run env E2B_API_URL="$SBXD_URL" sbx-sync pull -I "$(jq -r .ref.id "$S")" \
	    -b e2b "$BATS_TEST_TMPDIR/q"
	assert_success
	assert_equal "$(jq -r .files <<<"$output")" 9
	assert_equal "$(tree_sum "$BATS_TEST_TMPDIR/q")" "$(tree_sum "$P")"
}

@test "e2b: sbx-sync push --delete removes in the sandbox, and gzip or none give the same tree" {
	make_tree
	push -z none >/dev/null
	rm "$P/empty" "$P/link"
	echo changed >"$P/src/deep/er/x.txt"
	run push -z gzip --delete
	assert_success
	assert_equal "$(jq -r '[.files, .deleted] | @csv' <<<"$output")" 1,2
	assert_equal "$(sandbox_sum)" "$(tree_sum "$P")"
}

@test "e2b: sbx-sync to a sandbox whose workdir is gone exits 2 with one line, and writes nothing" {
	echo a >"$P/a"
	sbx-exec -s "$S" -w / -- rm -rf /workspace
	for cmd in push pull status; do
		run sbx-sync "$cmd" -s "$S" "$P"
		assert_failure 2
		assert_output "sbx-sync: no directory '(workdir)' in the sandbox"
	done
	[ ! -e "$S.baseline" ]
	[ "$(ls -A "$P")" = a ]
	run sbx-exec -s "$S" -w / -- sh -c 'ls -A /tmp | grep -c sbx-sync-'
	assert_output 0
}

@test "e2b: sbx-sync of a paused sandbox says so (exit 3) and does not resume it" {
	echo a >"$P/a"
	sbx-pause -q -s "$S" >/dev/null
	run sbx-sync push -s "$S" "$P"
	assert_failure 3
	assert_output --partial "is paused"
	run sbxd_api GET "/sandboxes/$(jq -r .ref.id "$S")"
	assert_equal "$(jq -r .state <<<"$output")" paused
}

@test "e2b: a tree of 3000 small files goes up and comes back down" {
	python3 - "$P" <<'EOF'
import os, sys
for i in range(3000):
    d = os.path.join(sys.argv[1], "d%02d" % (i % 30), "a-rather-long-directory-name-%d" % (i % 7))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "file-with-a-longish-name-%05d.txt" % i), "w") as f:
        f.write("content %d\n" % i)
EOF
	run push
	assert_success
	assert_equal "$(jq -r .files <<<"$output")" 3000
	run in_sbx 'find . -type f | wc -l; cat d07/a-rather-long-directory-name-2/file-with-a-longish-name-02137.txt'
	assert_output "$(printf '3000\ncontent 2137')"
	# Every file changed in the sandbox: the pull's list and tar carry
	# them all.
	in_sbx 'find . -name "*.txt" -exec sh -c "for f; do echo x >>\"\$f\"; done" sh {} +'
	run pull
	assert_success
	assert_equal "$(jq -r .files <<<"$output")" 3000
	assert_equal "$(tail -n 1 "$P/d07/a-rather-long-directory-name-2/file-with-a-longish-name-02137.txt")" x
	assert_equal "$(tree_sum "$P")" "$(sandbox_sum)"
}

@test "e2b: a pull hashes 20,000 touched files in the sandbox, in chunks, and fetches none" {
	# Their names take 1.5 MB: more than one request to envd, or one
	# command's arguments, may carry.
	in_sbx 'mkdir -p a-directory-with-a-rather-long-name-to-fill-the-arguments &&
		cd a-directory-with-a-rather-long-name-to-fill-the-arguments &&
		i=0; while [ $i -lt 20000 ]; do echo $i >file-number-$i; i=$((i + 1)); done'
	run pull
	assert_success
	assert_equal "$(jq -r .files <<<"$output")" 20000
	# New times, the same content: only hashes can tell.
	in_sbx 'find . -type f -exec touch -d 2020-01-01 {} +'
	run pull
	assert_success
	assert_equal "$(jq -r .files <<<"$output")" 0
	d=$P/a-directory-with-a-rather-long-name-to-fill-the-arguments
	assert_equal "$(find "$d" -type f | wc -l)" 20000
	assert_equal "$(cat "$d/file-number-12345")" 12345
}

@test "e2b: the API key is in no state file and no message of sbx-sync" {
	make_tree
	push -v >/dev/null
	in_sbx 'echo more >>src/main.c'
	pull -v >/dev/null
	sbx-exec -s "$S" -w / -- rm -rf /workspace
	echo new >"$P/new"
	run sbx-sync push -s "$S" "$P"
	assert_failure 2
	echo "$output" >>"$BATS_TEST_TMPDIR/stderr"
	grep -q "update 'src/main.c'" "$BATS_TEST_TMPDIR/stderr"
	! grep -rqF "$SBXD_KEY" "$BATS_TEST_TMPDIR"/s.json* "$P" "$BATS_TEST_TMPDIR/stderr"
}
