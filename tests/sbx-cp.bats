#!/usr/bin/env bats
# sbx-cp on the local backend: usage errors, and symlinks planted in the
# sandbox that point out of it (at /etc, at a file of the host), which must
# never make sbx-cp read or write the host's files. What every backend does
# is in conformance/sbx-cp.bats.

load lib/helper

setup_file() { sbx_setup_file; }
teardown_file() { sbx_teardown_file; }
setup() {
	sbx_setup
	S=$BATS_TEST_TMPDIR/s.json
	H=$BATS_TEST_TMPDIR/h
	mkdir -p "$H"
}
teardown() {
	if [ -f "$S" ]; then sbx-kill -q -s "$S" >/dev/null 2>&1 || true; fi
}

# A sandbox of a busybox image whose /etc/passwd is its own.
image_sandbox() {
	local img=$BATS_TEST_TMPDIR/img c
	mkdir -p "$img/bin" "$img/etc" "$img/tmp" "$img/workspace"
	chmod 1777 "$img/tmp"
	cp "$(command -v busybox)" "$img/bin/"
	for c in sh ln cat ls mkdir echo test; do ln -s busybox "$img/bin/$c"; done
	echo 'image:x:0:0::/:/bin/sh' >"$img/etc/passwd"
	new_sandbox --image "$img"
	ID=$(sid)
}

@test "sbx-cp: bad operands are usage errors (exit 2), one line each, and nothing is written" {
	echo a >"$H/a"
	run -2 sbx-cp "$H/a" "$H/b"
	assert_output --partial "sbx-cp: neither '$H/a' nor '$H/b' is in a sandbox"
	assert_equal "${#lines[@]}" 1
	run -2 sbx-cp - -
	assert_output --partial "sbx-cp: neither '-' nor '-' is in a sandbox"
	run -2 sbx-cp "$H/a"
	assert_output --partial 'a source and a destination are required'
	run -2 sbx-cp "$H/a" x:/a y:/b
	assert_output --partial 'one source and one destination, not 3 operands'
	run -2 sbx-cp "" x:/a
	assert_output --partial 'an empty operand'
	run -2 sbx-cp -s "$S" "$H/a" x:/a
	assert_output --partial "no operand has one"
	run -2 sbx-cp -b nosuch "$H/a" x:/a
	assert_output --partial "unknown backend 'nosuch'"
	run -2 sbx-cp "$H/a" "x:/$(printf 'a%.0s' {1..4100})"
	assert_output --partial 'is too long'
	run -2 sbx-cp --nosuchflag "$H/a" x:/a
	[ ! -e "$H/b" ]
	[ -z "$(ls -A "$BATS_TEST_TMPDIR" | grep -v '^h$')" ]
}

@test "sbx-cp: a name with a '/' before its ':' is a path here, not a sandbox" {
	new_sandbox
	mkdir -p "$H/x:y"
	echo in >"$H/x:y/f"
	run sbx-cp "$H/x:y/f" "$(sid):/tmp/f"
	assert_success
	run sx cat /tmp/f
	assert_output in
	cd "$H"
	run sbx-cp ./x:y "$(sid):/tmp/d"
	assert_success
	run sx cat /tmp/d/f
	assert_output in
}

@test "sbx-cp: :PATH without -s is the sandbox of ./.sbx/state.json; with none, exit 3" {
	echo a >"$H/a"
	run -3 sbx-cp "$H/a" :/tmp/a
	assert_output --partial 'no sandbox'
	mkdir .sbx
	sbx-create -s .sbx/state.json >/dev/null
	run sbx-cp "$H/a" :/tmp/a
	assert_success
	run sbx-exec -- cat /tmp/a
	assert_output a
	sbx-kill -q >/dev/null
}

@test "sbx-cp: a sandbox named by its name" {
	new_sandbox --name cp-by-name
	echo a >"$H/a"
	run sbx-cp "$H/a" cp-by-name:/tmp/a
	assert_success
	run sx cat /tmp/a
	assert_output a
}

@test "sbx-cp: a path through a symlink the sandbox planted to /etc reads the sandbox's /etc, never the host's" {
	image_sandbox
	sx ln -s /etc /workspace/etc
	sx ln -s /etc/passwd /workspace/pw
	run sbx-cp "$ID:/workspace/etc/passwd" "$H/p"
	assert_success
	assert_equal "$(cat "$H/p")" 'image:x:0:0::/:/bin/sh'
	# The link itself is copied as a link, as cp -r copies it.
	run sbx-cp "$ID:/workspace/pw" "$H/pw"
	assert_success
	[ -L "$H/pw" ]
	assert_equal "$(readlink "$H/pw")" /etc/passwd
	# Followed (a trailing "/"), still the sandbox's own /etc.
	run sbx-cp "$ID:/workspace/etc/" "$H/e"
	assert_success
	assert_equal "$(ls -A "$H/e")" passwd
	assert_equal "$(cat "$H/e/passwd")" 'image:x:0:0::/:/bin/sh'
}

@test "sbx-cp: a symlink the sandbox planted to a file or directory of the host reads and writes nothing of the host" {
	new_sandbox
	ID=$(sid)
	mkdir -p "$BATS_TEST_TMPDIR/hostdir"
	echo 'host secret' >"$BATS_TEST_TMPDIR/hostdir/secret"
	sx ln -s "$BATS_TEST_TMPDIR/hostdir/secret" /workspace/hf
	sx ln -s "$BATS_TEST_TMPDIR/hostdir" /workspace/hd
	run -1 sbx-cp "$ID:/workspace/hd/secret" "$H/s"
	assert_output --partial 'No such file or directory'
	[ ! -e "$H/s" ]
	run -1 sbx-cp "$ID:/workspace/hd/" "$H/s"
	[ ! -e "$H/s" ]
	run sbx-cp "$ID:/workspace/hf" "$H/s"
	assert_success
	[ -L "$H/s" ]
	run -1 sbx-cp "$ID:/workspace/hf/" "$H/s2"
	[ ! -e "$H/s2" ]
	# Nor does a copy into the sandbox through them reach the host.
	echo evil >"$H/evil"
	run -1 sbx-cp "$H/evil" "$ID:/workspace/hd/secret"
	run -1 sbx-cp "$H/evil" "$ID:/workspace/hd/"
	assert_equal "$(ls -A "$BATS_TEST_TMPDIR/hostdir")" secret
	assert_equal "$(cat "$BATS_TEST_TMPDIR/hostdir/secret")" 'host secret'
}

@test "sbx-cp: a stream on stdin with a member through a symlink of its own is refused in the sandbox, nothing of the host touched" {
	new_sandbox
	ID=$(sid)
	mkdir -p "$BATS_TEST_TMPDIR/hostdir"
	python3 - "$H/evil.tar" "$BATS_TEST_TMPDIR/hostdir" <<'PY'
import io, sys, tarfile
with tarfile.open(sys.argv[1], "w") as t:
    l = tarfile.TarInfo("l"); l.type = tarfile.SYMTYPE; l.linkname = sys.argv[2]
    t.addfile(l)
    i = tarfile.TarInfo("l/planted"); data = b"x\n"; i.size = len(data)
    t.addfile(i, io.BytesIO(data))
PY
	sx mkdir -p /tmp/in
	run -6 sbx-cp - "$ID:/tmp/in" <"$H/evil.tar"
	assert_output "sbx-cp: refused archive member 'l/planted': a path through a symlink"
	run sx ls -A /tmp/in
	assert_output ''
	[ ! -e "$BATS_TEST_TMPDIR/hostdir/planted" ]
}

@test "sbx-cp: a directory copied into itself in one sandbox exits 1" {
	new_sandbox
	sx mkdir -p /tmp/d/sub
	run -1 sbx-cp "$(sid):/tmp/d" "$(sid):/tmp/d/sub"
	assert_output --partial 'into itself'
}

@test "sbx-cp: a reader of the stream on stdout that goes away ends it quietly" {
	new_sandbox
	sx sh -c 'head -c 8000000 /dev/zero >/tmp/big'
	run --separate-stderr bash -c "set -o pipefail; sbx-cp '$(sid):/tmp/big' - | head -c 10 | wc -c"
	assert_success
	assert_output 10
	assert_equal "$stderr" ''
}
