#!/usr/bin/env bats
# sbx-exec with the local backend only: what sbx-exec(1) says of the local
# backend alone. What every backend must do the same way (exit codes, argv,
# streams, the tty, --json, --timeout, the environment, the working
# directory, signals, finding the sandbox) is in conformance/sbx-exec.bats.

load lib/helper

setup_file() { sbx_setup_file; }
teardown_file() { sbx_teardown_file; }
setup() { sbx_setup; }

teardown() {
	[ -f "$BATS_TEST_TMPDIR/s.json" ] &&
	    sbx-kill -q -s "$BATS_TEST_TMPDIR/s.json" >/dev/null 2>&1
	return 0
}

# The agent is handed sbx-exec's own stdio: the command writes to the very
# pipe the caller reads, with no copy in between (a docker exec gets pipes
# of the engine's).
@test "local: sbx-exec hands the command its own stdout and stderr, not copies" {
	new_sandbox
	{
		readlink /proc/self/fd/1
		sbx-exec -s s.json -- readlink /proc/self/fd/1
	} | cat >out
	[[ "$(head -n 1 out)" == pipe:* ]]
	[ "$(wc -l <out)" -eq 2 ]
	[ "$(sort -u out | wc -l)" -eq 1 ]
	{
		readlink /proc/self/fd/2 >&2
		sbx-exec -s s.json -- sh -c 'readlink /proc/self/fd/2 >&2'
	} 2>&1 >/dev/null | cat >err
	[[ "$(head -n 1 err)" == pipe:* ]]
	[ "$(wc -l <err)" -eq 2 ]
	[ "$(sort -u err | wc -l)" -eq 1 ]
}

@test "local: sbx-exec -i hands the command its own stdin, not a copy" {
	new_sandbox
	echo x | {
		readlink /proc/self/fd/0
		sbx-exec -s s.json -i -- readlink /proc/self/fd/0
	} >out
	[[ "$(head -n 1 out)" == pipe:* ]]
	[ "$(wc -l <out)" -eq 2 ]
	[ "$(sort -u out | wc -l)" -eq 1 ]
}

# A directory of the host as an fd would let the command walk the host's
# tree past every mount of the sandbox (openat(fd, "..")): it gets
# /dev/null there instead, so such a stdin reads as empty (as through the
# docker engine's exec) and such an stdout or stderr takes nothing.
@test "local: sbx-exec never hands the command a directory of the host as stdin, stdout or stderr" {
	new_sandbox
	mkdir -p host/inner
	echo secret >host/inner/marker
	run sbx-exec -s s.json -i -- sh -c 'readlink /proc/self/fd/0; cat /proc/self/fd/0/inner/marker; cat; echo rc=$?' <host
	assert_success
	[ "${lines[0]}" = /dev/null ]
	[ "${lines[-1]}" = rc=0 ]
	refute_output --partial secret
	sbx-exec -s s.json -- sh -c 'exec 3>&1; readlink /proc/self/fd/3 >&2; cat /proc/self/fd/3/inner/marker >&2' 1<host 2>err || true
	[ "$(head -n 1 err)" = /dev/null ]
	run grep secret err
	assert_failure 1
	sbx-exec -s s.json -- sh -c 'exec 3>&2; readlink /proc/self/fd/3; cat /proc/self/fd/3/inner/marker' 2<host >out || true
	[ "$(head -n 1 out)" = /dev/null ]
	run grep secret out
	assert_failure 1
	# A file and a pipe are still handed over as they are.
	run sbx-exec -s s.json -i -- cat <host/inner/marker
	assert_output secret
}

@test "local: sbx-exec -t with stdin at its end: bash's prompt (raw mode) sees end of file and bash exits" {
	new_sandbox
	# KILL: sbx-exec passes TERM on to bash, which ignores it.
	run --separate-stderr timeout -s KILL 30 sbx-exec -t -s s.json -- bash -i </dev/null
	assert_success
	assert_output --partial exit
	# The same with what came before the end read first.
	run --separate-stderr timeout -s KILL 30 sbx-exec -t -s s.json -- bash -i \
	    < <(printf 'echo one-$((1 + 1))\n')
	assert_success
	assert_output --partial one-2
	# A reader in canonical mode still gets one end of file.
	run --separate-stderr timeout -s KILL 30 sbx-exec -t -s s.json -- sh -c 'cat; echo done' </dev/null
	assert_success
	assert_output --partial done
}

# The agent gives a connection 2 s for its request, then drops it (a stuck
# client must not stall it). A sandbox that is running is never "not
# running" for that. strace holds sbx-exec back, longer than the agent
# waits (a delay, not a measure: nothing here is timed).
# LeakSanitizer cannot run under ptrace: no leak check for the traced tool
# (the sanitizer build's; nothing in the default one).
traced() {
	ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 \
	    strace -qq -o /dev/null "$@"
}

@test "local: sbx-exec whose connection the agent dropped before its request sends it again on a new one" {
	new_sandbox
	run --separate-stderr traced -e inject=sendmsg:delay_enter=4000000:when=1 \
	    sbx-exec -s s.json -- echo hi
	assert_success
	assert_output hi
	assert_equal "$stderr" ''
}

@test "local: sbx-exec -T connects once its request is ready: a slow cgroup mkdir does not get it dropped" {
	new_sandbox
	run --separate-stderr traced -e inject=mkdir:delay_enter=4000000:when=1 \
	    sbx-exec -s s.json -T 60s -- echo hi
	assert_success
	assert_output hi
	assert_equal "$stderr" ''
}

@test "local: sbx-exec that cannot send its request says so (125), not that the sandbox is not running" {
	new_sandbox
	run --separate-stderr traced -e inject=sendmsg:error=EPIPE \
	    sbx-exec -s s.json -- echo hi
	assert_failure 125
	assert_output ''
	assert_equal "$stderr" "sbx-exec: cannot send the command to the sandbox: Broken pipe"
}

@test "local: the host image has an account user (uid and gid 1000, its own /home/user) for sbx-exec -u" {
	sbx-create -s "$BATS_TEST_TMPDIR/s.json" >/dev/null
	run sbx-exec -s "$BATS_TEST_TMPDIR/s.json" -u user -- sh -c \
	    'id -un; id -u; id -g; id -G; echo "$HOME"; stat -c "%u:%g %a" /home/user; cd && touch f && stat -c %u:%g f'
	assert_success
	assert_output $'user\n1000\n1000\n1000\n/home/user\n1000:1000 755\n1000:1000'
	# Root's as ever without -u, and the host's /etc/passwd is untouched.
	run sx id -un
	assert_output root
	run grep -c '^user:x:1000:1000::/home/user:' /etc/passwd
	assert_output 0
}

@test "local: sbx-exec -u looks names up in the sandbox's own /etc/passwd and /etc/group, supplementary groups included" {
	local r=$BATS_TEST_TMPDIR/root
	mkdir -p "$r"/usr/bin "$r"/etc "$r"/root "$r"/tmp "$r"/home/app
	ln -s usr/bin "$r/bin"
	/bin/busybox --install -s "$r/usr/bin"
	rm -f "$r/usr/bin/busybox"
	cp /bin/busybox "$r/usr/bin/busybox"
	printf '%s\n' 'root:x:0:0:root:/root:/bin/sh' \
	    'app:x:1500:1500::/home/app:/bin/sh' >"$r/etc/passwd"
	printf '%s\n' 'root:x:0:' 'app:x:1500:' 'extra:x:2500:root,app' \
	    'other:x:3500:root' >"$r/etc/group"
	sbx-create -i "$r" -s "$BATS_TEST_TMPDIR/s.json" >/dev/null
	run sbx-exec -s "$BATS_TEST_TMPDIR/s.json" -u app -- sh -c \
	    'id -u; id -g; id -G; echo "$HOME"'
	assert_success
	assert_output $'1500\n1500\n1500 2500\n/home/app'
	run sbx-exec -s "$BATS_TEST_TMPDIR/s.json" -u app:other -- id -g
	assert_output 3500
	# The host's accounts are not the sandbox's.
	run -125 --separate-stderr sbx-exec -s "$BATS_TEST_TMPDIR/s.json" \
	    -u user -- true
	assert_equal "$stderr" "sbx-exec: no user 'user' in the sandbox's /etc/passwd"
	run -125 --separate-stderr sbx-exec -s "$BATS_TEST_TMPDIR/s.json" \
	    -u app:nosuch -- true
	assert_equal "$stderr" "sbx-exec: no group 'nosuch' in the sandbox's /etc/group"
}
