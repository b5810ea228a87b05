#!/usr/bin/env bats
# The README's shell blocks, as written: each block marked with
# "<!-- test: NAME -->" before its fence is taken out of README.md and run,
# so that the README cannot drift from the tools. The tour and the loop
# (with a stub agent) on local, the docker example on a private engine.

load lib/helper
load lib/dockerd

README=$BATS_TEST_DIRNAME/../README.md

setup_file() { sbx_setup_file; }
teardown_file() { sbx_teardown_file; }
setup() {
	sbx_setup
	# No rate from the user's own configuration or environment.
	export XDG_CONFIG_HOME=$BATS_TEST_TMPDIR/config
	unset SBX_COST_PER_HOUR SBX_COST_LOCAL_PER_HOUR \
	    SBX_COST_LOCAL_CPU_SECOND
	P=$BATS_TEST_TMPDIR/proj
	project
}
teardown() {
	sbx-ls -j 2>/dev/null | sbx-kill -q >/dev/null 2>&1 || true
	if [ -n "${SBX_TEST_DOCKERD_DIR:-}" ]; then
		sbx_dockerd_stop
	fi
}

# The lines of the block marked NAME, into file $2; fails without one.
block() {
	awk -v m="<!-- test: $1 -->" '
	    $0 == m { f = 1; next }
	    f == 1 && /^```/ { f = 2; next }
	    f == 2 && /^```/ { exit }
	    f == 2 { print }' "$README" >"$2"
	[ -s "$2" ] || fail "README.md has no block '$1'"
}

# A project as a user has it: a git work tree, the tools in ./bin (the
# tour puts $PWD/bin first in PATH), and a stub agent that appends its
# task to notes.txt, in a directory of its own.
project() {
	mkdir -p "$P" "$BATS_TEST_TMPDIR/stub"
	git -C "$P" init -q
	echo start >"$P/notes.txt"
	echo 'int main(void) { return 0; }' >"$P/main.c"
	git -C "$P" add notes.txt main.c
	git -C "$P" -c user.name=t -c user.email=t@localhost commit -qm first
	ln -s "$SBX_BIN" "$P/bin"
	echo /bin >>"$P/.git/info/exclude"
	cat >"$BATS_TEST_TMPDIR/stub/agent" <<-'EOF'
	#!/bin/sh
	[ "$1" = -p ] || exit 2
	echo "$2" >>notes.txt
	EOF
	chmod 755 "$BATS_TEST_TMPDIR/stub/agent"
}

# The loop block run in $P with the tasks of stdin: the stub agent is
# put where a local sandbox's PATH finds it, /usr/local/sbin, by a bind
# mount in a mount namespace of this run alone.
run_loop() {
	block loop "$BATS_TEST_TMPDIR/loop.sh"
	cd "$P" || return 1
	run --separate-stderr unshare -m --propagation private sh -c \
	    'mount --bind "$1" /usr/local/sbin && exec bash "$2"' sh \
	    "$BATS_TEST_TMPDIR/stub" "$BATS_TEST_TMPDIR/loop.sh"
}

@test "README: the tour runs as written on local" {
	block tour "$BATS_TEST_TMPDIR/tour.sh"
	cd "$P"
	# Its shell inside wants a terminal, and an "exit" to leave.
	run script -qec "bash '$BATS_TEST_TMPDIR/tour.sh'; echo rc=\$?" \
	    /dev/null <<<exit
	assert_success
	assert_line --regexp $'^hi\r?$'
	assert_line --regexp $'^7\r?$'
	assert_line --partial '"output":"42 in /tmp\n","status":"completed"'
	assert_line --partial '"rate_source":"flag"'
	assert_line --partial '"status":"killed"'
	assert_line --regexp $'^rc=0\r?$'
	# No diagnostic; on a terminal, the progress line of sbx-sync.
	refute_output --regexp 'sbx-[a-z]+: [^0-9]'
	[ -f stamp ]
	# .sbx/ is not git's: the pulled file is all it sees.
	assert_equal "$(git status --porcelain)" '?? stamp'
}

@test "README: the agent loop runs on local, prints nothing of its own, and leaves .sbx/ out of git" {
	run_loop <<<$'fix a\nfix b\nfix c'
	assert_success
	# Only sbx-kill's line: not one line per task.
	assert_output --partial '"status":"killed"'
	assert_equal "${#lines[@]}" 1
	assert_equal "$(cat notes.txt)" $'start\nfix a\nfix b\nfix c'
	assert_equal "$(git status --porcelain)" ' M notes.txt'
	[ -z "$(sbx-ls -j)" ]
}

@test "README: the agent loop on local stops once the budget is spent" {
	# A CPU-second so dear that the first task spends the budget.
	export SBX_COST_LOCAL_CPU_SECOND=100000
	run_loop <<<$'fix a\nfix b\nfix c'
	assert_success
	assert_equal "$(cat notes.txt)" $'start\nfix a'
	[ -z "$(sbx-ls -j)" ]
}

@test "README: the agent loop goes on after a conflict, which keeps both versions" {
	# The host changes notes.txt after the push, before the first task.
	run_loop < <(
		i=0
		while [ ! -e "$P/.sbx/run.json.baseline" ] && [ $i -lt 600 ]; do
			sleep 0.1
			i=$((i + 1))
		done
		echo mine >>"$P/notes.txt"
		printf '%s\n' 'fix a' 'fix b'
	)
	assert_equal "$(cat notes.txt)" $'start\nmine'
	assert_equal "$(cat notes.txt.sbx-conflict)" $'start\nfix a\nfix b'
	[[ $stderr == *"conflict: 'notes.txt' changed on both sides"* ]] ||
	    fail "$stderr"
	# A conflict left at the end keeps the sandbox (--final-sync).
	assert_failure 1
	[[ $stderr == *"not killed: the final sync into '.' failed"* ]] ||
	    fail "$stderr"
	[ -n "$(sbx-ls -j)" ]
	assert_equal "$(git status --porcelain)" $' M notes.txt\n?? notes.txt.sbx-conflict'
}

@test "README: the docker example runs on a fresh engine with no image and no registry" {
	sbx_dockerd_start
	block docker "$BATS_TEST_TMPDIR/docker.sh"
	cd "$P"
	run --separate-stderr bash -e "$BATS_TEST_TMPDIR/docker.sh"
	[ "$status" -eq 0 ] || fail "exit $status: $stderr"
	# The same directory, a local sandbox and a container.
	[ "$(grep -c '^Linux ' <<<"$output")" -eq 2 ] || fail "$output"
	assert_line --regexp '^\{"backend":"local",'
	assert_line --regexp '^\{"backend":"docker",.*"image":"sbx-import:[0-9a-f]{12}"'
	[ "$(grep -c '"status":"killed"' <<<"$output")" -eq 2 ] ||
	    fail "$output"
	docker image inspect "$(jq -r .ref.image .sbx/d.json)" >/dev/null
}

# The project of project() with sandbox/Dockerfile over a busybox image
# named base (in the local store, and in the engine when $1 is docker):
# the agent, claude, is a stub that the image puts in /usr/local/bin; it
# wants its key and appends its task to notes.txt.
image_project() {
	local r=$BATS_TEST_TMPDIR/root
	mkdir -p "$r"/usr/bin "$r"/etc "$r"/root "$r"/tmp "$P/sandbox"
	ln -s usr/bin "$r/bin"
	/bin/busybox --install -s "$r/usr/bin"
	rm -f "$r/usr/bin/busybox"
	cp /bin/busybox "$r/usr/bin/busybox"
	echo 'root:x:0:0:root:/root:/bin/sh' >"$r/etc/passwd"
	export SBX_IMAGE_DIR=$BATS_TEST_TMPDIR/store
	if [ "$1" = docker ]; then
		tar -C "$r" --numeric-owner -cf - . |
		    docker import - base >/dev/null || return 1
	else
		sbx-image import -t base "$r" >/dev/null || return 1
	fi
	printf '%s\n' 'FROM base' 'ENV PATH=/usr/local/bin:/usr/bin:/bin' \
	    'COPY claude /usr/local/bin/claude' 'WORKDIR /workspace' \
	    >"$P/sandbox/Dockerfile"
	cat >"$P/sandbox/claude" <<-'EOF'
	#!/bin/sh
	[ "$1" = -p ] && [ "$ANTHROPIC_API_KEY" = test-key ] || exit 2
	echo "$2" >>notes.txt
	EOF
	chmod 755 "$P/sandbox/claude"
	echo /sandbox >>"$P/.git/info/exclude"
}

# The image-loop block in $P with the tasks of stdin, on backend $1 (the
# README's text is for local; -b is added to its sbx-create).
run_image_loop() {
	block image-loop "$BATS_TEST_TMPDIR/il.sh"
	if [ "$1" != local ]; then
		sed -i "s/^sbx-create /sbx-create -b $1 /" "$BATS_TEST_TMPDIR/il.sh"
		grep -q "^sbx-create -b $1 " "$BATS_TEST_TMPDIR/il.sh" ||
		    fail "no sbx-create line in the image-loop block"
	fi
	cd "$P" || return 1
	ANTHROPIC_API_KEY=test-key run --separate-stderr \
	    bash "$BATS_TEST_TMPDIR/il.sh"
}

@test "README: the agent loop in the project's image builds it once, and runs as written on local" {
	image_project local
	run_image_loop local <<<$'fix a\nfix b'
	[ "$status" -eq 0 ] || fail "exit $status: $stderr"
	assert_equal "${#lines[@]}" 1
	assert_output --partial '"status":"killed"'
	assert_equal "$(cat notes.txt)" $'start\nfix a\nfix b'
	grep -qx 'step 3/4: COPY claude /usr/local/bin/claude' \
	    <<<"$stderr" || fail "$stderr"
	hash=$(sbx-image hash sandbox | jq_str .hash)
	assert_equal "$(sbx-image ls | jq -r '.image' | grep '^myagent-')" \
	    "myagent-$hash"
	# A second run finds the image: no step.
	run_image_loop local <<<'fix c'
	[ "$status" -eq 0 ] || fail "exit $status: $stderr"
	[[ $stderr != *step* ]] || fail "$stderr"
	assert_equal "$(cat notes.txt)" $'start\nfix a\nfix b\nfix c'
	[ -z "$(sbx-ls -j)" ]
}

@test "README: the agent loop in the project's image runs on docker, the engine building it" {
	sbx_dockerd_start
	image_project docker
	run_image_loop docker <<<'fix a'
	[ "$status" -eq 0 ] || fail "exit $status: $stderr"
	assert_output --partial '"status":"killed"'
	assert_equal "$(cat notes.txt)" $'start\nfix a'
	hash=$(sbx-image hash sandbox | jq_str .hash)
	docker image inspect "myagent-$hash" >/dev/null
}

@test "README: the agent's Bash tool in five lines keeps its shell's state" {
	block shell "$BATS_TEST_TMPDIR/shell.sh"
	cd "$P"
	sbx-create -s .sbx/s.json >/dev/null
	run --separate-stderr bash -e "$BATS_TEST_TMPDIR/shell.sh"
	sbx-kill -q -s .sbx/s.json >/dev/null
	[ "$status" -eq 0 ] || fail "exit $status: $stderr"
	assert_equal "$stderr" ""
	assert_equal "$(jq -r .output <<<"$output")" "42 in /tmp"
	assert_equal "$(jq -r .status <<<"$output")" completed
}
