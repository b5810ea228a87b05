#!/usr/bin/env bats
# sbx-cp on the backend under test: files and directories into, out of and
# between sandboxes by cp -r's rules, modes and symlinks kept, tar streams
# on stdin and stdout, and its errors. (../sbx-cp.bats holds what only the
# local backend shows: usage errors, and symlinks planted in the sandbox.)

load conformance

setup_file() { conf_setup_file; }
teardown_file() { conf_teardown_file; }
setup() {
	conf_setup
	S=$BATS_TEST_TMPDIR/s.json
	S2=$BATS_TEST_TMPDIR/s2.json
	H=$BATS_TEST_TMPDIR/h
	mkdir -p "$H"
	new_sandbox
	ID=$(sid)
}
teardown() {
	local s
	for s in "$S" "$S2"; do
		if [ -f "$s" ]; then sbx-kill -q -s "$s" >/dev/null 2>&1 || true; fi
	done
}

in_sbx() { sx sh -c "$1"; }

sandbox_sum() { in_sbx "cd '$1' && $SUM_SH"; }

# A tree with awkward names, an executable, a private file, a symlink, an
# empty file.
make_tree() {
	mkdir -p "$1/src/deep/er" "$1/with space"
	echo 'int main(void) { return 0; }' >"$1/src/main.c"
	echo nested >"$1/src/deep/er/x.txt"
	printf 'spaced' >"$1/with space/a file"
	printf 'nl' >"$1/$(printf 'new\nline')"
	echo 'ütf-8' >"$1/ünïcødé.txt"
	printf '#!/bin/sh\necho run\n' >"$1/run.sh"
	chmod 755 "$1/run.sh"
	echo secret >"$1/private"
	chmod 600 "$1/private"
	: >"$1/empty"
	ln -s src/main.c "$1/link"
}

@test "$B: sbx-cp copies a file into a sandbox and back out, mode and content kept" {
	printf 'one\ntwo\n' >"$H/f.sh"
	chmod 750 "$H/f.sh"
	run sbx-cp "$H/f.sh" "$ID:/tmp/g.sh"
	assert_success
	assert_output ''
	run in_sbx 'stat -c %a /tmp/g.sh && cat /tmp/g.sh'
	assert_output "$(printf '750\none\ntwo')"
	run sbx-cp "$ID:/tmp/g.sh" "$H/back"
	assert_success
	assert_equal "$(stat -c %a "$H/back")" 750
	cmp "$H/f.sh" "$H/back"
}

@test "$B: sbx-cp copies a directory tree in and out: names, modes, symlinks and contents the same" {
	make_tree "$H/t"
	mkdir -m 700 "$H/t/closed" "$H/t/void"
	echo in >"$H/t/closed/x"
	run sbx-cp "$H/t" "$ID:/tmp/new"
	assert_success
	assert_equal "$(sandbox_sum /tmp/new)" "$(tree_sum "$H/t")"
	# Into the sandbox, directories keep their modes, empty ones too.
	run in_sbx 'stat -c %a /tmp/new/closed /tmp/new/void'
	assert_output "$(printf '700\n700')"
	run sbx-cp "$ID:/tmp/new" "$H/out"
	assert_success
	assert_equal "$(tree_sum "$H/out")" "$(tree_sum "$H/t")"
	[ -L "$H/out/link" ]
}

@test "$B: sbx-cp into a directory that exists puts the copy inside it; to a new name, makes it" {
	mkdir "$H/d"
	echo a >"$H/d/a"
	in_sbx 'mkdir -p /tmp/exists'
	sbx-cp "$H/d" "$ID:/tmp/exists"
	sbx-cp "$H/d" "$ID:/tmp/fresh"
	sbx-cp "$H/d/a" "$ID:/tmp/exists/"
	run in_sbx 'cd /tmp && find exists fresh | LC_ALL=C sort'
	assert_output "$(printf 'exists\nexists/a\nexists/d\nexists/d/a\nfresh\nfresh/a')"
	mkdir "$H/here"
	sbx-cp "$ID:/tmp/fresh" "$H/here"
	sbx-cp "$ID:/tmp/fresh" "$H/there"
	sbx-cp "$ID:/tmp/fresh/a" "$H/here/"
	run sh -c "cd '$H' && find here there | LC_ALL=C sort"
	assert_output "$(printf 'here\nhere/a\nhere/fresh\nhere/fresh/a\nthere\nthere/a')"
}

@test "$B: sbx-cp DIR/. copies what is in DIR, into a directory that exists" {
	mkdir -p "$H/d/s"
	echo a >"$H/d/a"
	echo b >"$H/d/s/b"
	in_sbx 'mkdir -p /tmp/in && echo old >/tmp/in/old'
	sbx-cp "$H/d/." "$ID:/tmp/in"
	run in_sbx 'cd /tmp/in && find . | LC_ALL=C sort'
	assert_output "$(printf '.\n./a\n./old\n./s\n./s/b')"
	mkdir "$H/o"
	echo keep >"$H/o/keep"
	sbx-cp "$ID:/tmp/in/." "$H/o"
	run sh -c "cd '$H/o' && find . | LC_ALL=C sort"
	assert_output "$(printf '.\n./a\n./keep\n./old\n./s\n./s/b')"
}

@test "$B: sbx-cp: a path relative to the sandbox is its workdir's; :PATH is the sandbox of -s" {
	echo rel >"$H/r"
	sbx-cp "$H/r" "$ID:r.txt"
	run in_sbx 'cat /workspace/r.txt'
	assert_output rel
	run sbx-cp -s "$S" :r.txt "$H/r2"
	assert_success
	assert_equal "$(cat "$H/r2")" rel
}

@test "$B: sbx-cp - takes a tar stream on stdin and gives one on stdout, named by the source" {
	make_tree "$H/t"
	in_sbx 'mkdir -p /tmp/x'
	run sh -c "cd '$H' && tar -cf - t | sbx-cp - '$ID:/tmp/x'"
	assert_success
	assert_equal "$(sandbox_sum /tmp/x/t)" "$(tree_sum "$H/t")"
	mkdir "$H/un"
	run sh -c "sbx-cp '$ID:/tmp/x/t' - | tar -xf - -C '$H/un'"
	assert_success
	assert_equal "$(tree_sum "$H/un/t")" "$(tree_sum "$H/t")"
	run sh -c "sbx-cp '$ID:/tmp/x/t/run.sh' - | tar -tvf -"
	assert_success
	assert_output --regexp '^-rwxr-xr-x .* run\.sh$'
}

@test "$B: sbx-cp - refuses a stream with a member outside the directory (exit 6) and writes nothing" {
	python3 - "$H/evil.tar" <<'PY'
import io, sys, tarfile
with tarfile.open(sys.argv[1], "w") as t:
    for name in ("ok", "../escaped"):
        i = tarfile.TarInfo(name); data = b"x\n"; i.size = len(data)
        t.addfile(i, io.BytesIO(data))
PY
	in_sbx 'mkdir -p /tmp/x/in'
	run -6 sbx-cp - "$ID:/tmp/x/in" <"$H/evil.tar"
	assert_output --partial "refused archive member '../escaped'"
	run in_sbx 'ls -A /tmp/x/in && echo end'
	assert_output end
	run -6 sbx-cp - "$ID:/tmp/x/in" <<<'not a tar stream at all'
	assert_output --partial 'not a tar stream'
}

@test "$B: sbx-cp copies from one sandbox to another" {
	create -s "$S2" >/dev/null
	make_tree "$H/t"
	sbx-cp "$H/t" "$ID:/tmp/t"
	run sbx-cp "$ID:/tmp/t" "$(sid "$S2"):/tmp/copy"
	assert_success
	run sbx-exec -s "$S2" -- sh -c "cd /tmp/copy && $SUM_SH"
	assert_equal "$output" "$(tree_sum "$H/t")"
}

@test "$B: sbx-cp: a missing source exits 1 naming it, and writes nothing" {
	run -1 sbx-cp "$ID:/tmp/nope" "$H/x"
	assert_output "sbx-cp: cannot stat '$ID:/tmp/nope': No such file or directory"
	[ ! -e "$H/x" ]
	run -1 sbx-cp "$H/nope" "$ID:/tmp/x"
	assert_output --partial "cannot stat '$H/nope'"
	run in_sbx 'test -e /tmp/x || echo none'
	assert_output none
}

@test "$B: sbx-cp: into a directory that does not exist, or a directory over a file, exits 1" {
	echo a >"$H/a"
	mkdir "$H/d"
	run -1 sbx-cp "$H/a" "$ID:/tmp/no/such"
	assert_output "sbx-cp: cannot create '$ID:/tmp/no/such': No such file or directory"
	in_sbx 'mkdir -p /tmp/d && echo f >/tmp/f'
	run -1 sbx-cp "$ID:/tmp/d" "$H/a"
	assert_output "sbx-cp: cannot overwrite non-directory '$H/a' with directory '$ID:/tmp/d'"
	assert_equal "$(cat "$H/a")" a
	run -1 sbx-cp "$ID:/tmp/f" "$H/no/such"
	[ ! -e "$H/no" ]
}

@test "$B: sbx-cp: a sandbox that does not exist exits 3" {
	echo a >"$H/a"
	run -3 sbx-cp "$H/a" "nosuchsandbox:/tmp/a"
	assert_output --partial "nosuchsandbox"
	run -3 sbx-cp "nosuchsandbox:/tmp/a" "$H/b"
	[ ! -e "$H/b" ]
}
