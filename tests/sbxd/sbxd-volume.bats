#!/usr/bin/env bats
# sbxd: E2B's volume content API (/volumecontent/ID/...) over plain HTTP:
# a volume's own token, and no path, symlink or '..' that reaches out of
# the volume. The symlinks are made in the volume's directory on the host,
# as a sandbox that mounts the volume would make them.
load ../lib/helper
load ../lib/sbxd

setup_file() {
	sbx_setup_file
	sbxd_start --max-upload 16M
	local out
	out=$(sbxd_api POST /volumes '{"name":"vc"}')
	TOK=$(jq -r '.token // empty' <<<"$out")
	out=$(sbxd_api POST /volumes '{"name":"other"}')
	TOK2=$(jq -r '.token // empty' <<<"$out")
	[ ${#TOK} = 64 ] && [ ${#TOK2} = 64 ] || { echo "no volume: $out" >&2; return 1; }
	VOL=$SBX_LOCAL_DIR/volumes/vc/data
	[ -d "$VOL" ] || { echo "no $VOL" >&2; return 1; }
	export TOK TOK2 VOL
}

teardown_file() {
	sbxd_stop
	sbx_teardown_file
	rm -rf "$SBXD_DIR"
}

setup() {
	sbx_setup
	# What the symlinks point at, outside the volume: a file of the
	# store ($VOL/../../.. is SBX_LOCAL_DIR) and the host's passwd.
	VICTIM=$SBX_LOCAL_DIR/victim.txt
	printf 'keep me\n' >"$VICTIM"
	chmod 644 "$VICTIM"
	PASSWD_BEFORE=$(stat -c '%u:%g %a %s %Y' /etc/passwd)$(sha256sum </etc/passwd)
	VICTIM_BEFORE=$(stat -c '%u:%g %a %s %Y' "$VICTIM")$(sha256sum <"$VICTIM")
	find "$VOL" -mindepth 1 -delete
	ln -s /etc/passwd "$VOL/evil"
	ln -s ../../.. "$VOL/up"
}

teardown() {
	rm -f "${VICTIM:-/nonexistent}"
}

# vc METHOD OP QUERY [curl args]: a request of volume vc with its token;
# the body to $BATS_TEST_TMPDIR/body, the status on stdout.
vc() {
	local m=$1 op=$2 q=$3
	shift 3
	curl -s -X "$m" -H "Authorization: Bearer $TOK" \
		-o "$BATS_TEST_TMPDIR/body" -w '%{http_code}' "$@" \
		"$SBXD_URL/volumecontent/vc/$op?$q"
}

body() {
	cat "$BATS_TEST_TMPDIR/body"
}

# Nothing outside the volume changed.
outside_unchanged() {
	assert_equal "$(stat -c '%u:%g %a %s %Y' /etc/passwd)$(sha256sum </etc/passwd)" "$PASSWD_BEFORE"
	assert_equal "$(stat -c '%u:%g %a %s %Y' "$VICTIM")$(sha256sum <"$VICTIM")" "$VICTIM_BEFORE"
	assert [ -d /etc ]
	run ls -A "$SBX_LOCAL_DIR"
	refute_line newdir
	refute_line x.txt
}

@test "volume token: POST /volumes and GET /volumes/ID give the same 64 hex digits; the list none; a volume made again a new one" {
	run sbxd_api GET /volumes/vc
	assert_success
	assert [ -n "$output" ]
	assert_equal "$(jq -r .token <<<"$output")" "$TOK"
	[[ $TOK =~ ^[0-9a-f]{64}$ ]]
	run sbxd_api GET /volumes
	assert [ -n "$output" ]
	assert_equal "$(jq -c '[.[] | has("token")] | unique' <<<"$output")" '[false]'
	out=$(sbxd_api POST /volumes '{"name":"again"}')
	t1=$(jq -r .token <<<"$out")
	run sbxd_api DELETE /volumes/again
	out=$(sbxd_api POST /volumes '{"name":"again"}')
	t2=$(jq -r .token <<<"$out")
	sbxd_api DELETE /volumes/again
	assert [ ${#t1} = 64 ] && assert [ ${#t2} = 64 ]
	assert [ "$t1" != "$t2" ]
	# The log names no token.
	run grep -c -e "$TOK" -e "$t1" "$SBXD_DIR/log"
	assert_output 0
}

@test "volume content: no token, a wrong one, another volume's or the API key is 401; nothing written" {
	for auth in '' 'Bearer nope' "Bearer $TOK2" "Bearer $SBXD_KEY" "Bearer ${TOK:0:63}"; do
		run curl -s -X PUT ${auth:+-H "Authorization: $auth"} \
			--data-binary x -w ' %{http_code}' \
			"$SBXD_URL/volumecontent/vc/file?path=/x.txt"
		assert_output --partial '"code":"unauthorized"'
		assert_output --partial ' 401'
	done
	run curl -s -H "X-API-Key: $SBXD_KEY" -w ' %{http_code}' \
		"$SBXD_URL/volumecontent/vc/dir?path=/"
	assert_output --partial ' 401'
	assert [ ! -e "$VOL/x.txt" ]
}

@test "volume content: an unknown volume is 404, an unknown path 404 on every route" {
	run curl -s -H "Authorization: Bearer $TOK" -w ' %{http_code}' \
		"$SBXD_URL/volumecontent/nosuch/path?path=/"
	assert_output --partial "volume 'nosuch' not found"
	assert_output --partial ' 404'
	run vc GET path 'path=/nope'
	assert_output 404
	run vc GET file 'path=/nope'
	assert_output 404
	run vc GET dir 'path=/nope'
	assert_output 404
	run vc DELETE path 'path=/nope'
	assert_output 404
	run vc PATCH path 'path=/nope' -d '{"mode":420}'
	assert_output 404
	run vc PUT file 'path=/nope/x.txt' --data-binary x
	assert_output 404
	run vc POST dir 'path=/nope/d'
	assert_output 404
	assert [ ! -e "$VOL/nope" ]
}

@test "volume content: '..' in a path is 400 on every route; nothing made or changed" {
	for p in '..' '/../x.txt' 'a/../../x.txt' '/up/../x.txt'; do
		run vc GET path "path=$p"
		assert_output 400
		assert_equal "$(jq -r .message "$BATS_TEST_TMPDIR/body")" "path '$p': '..' is not allowed"
		run vc PUT file "path=$p" --data-binary x
		assert_output 400
		run vc POST dir "path=$p" -G --data-urlencode force=true
		assert_output 400
		run vc DELETE path "path=$p"
		assert_output 400
		run vc PATCH path "path=$p" -d '{"mode":0}'
		assert_output 400
	done
	outside_unchanged
	run ls -A "$VOL"
	assert_output $'evil\nup'
}

@test "volume content: the volume's root cannot be removed (400), however named" {
	for p in '/' '' '.' '//./'; do
		run vc DELETE path "path=$p"
		assert_output 400
		assert_equal "$(jq -r .message "$BATS_TEST_TMPDIR/body")" "the volume's root cannot be removed"
	done
	assert [ -L "$VOL/evil" ]
	assert [ -d "$VOL" ]
}

@test "volume content: a symlink is stat'ed, not followed (its target); reading through one stays in the volume" {
	run vc GET path 'path=/evil'
	assert_output 200
	assert_equal "$(jq -c '[.type, .target, .name, .path]' "$BATS_TEST_TMPDIR/body")" '["symlink","/etc/passwd","evil","/evil"]'
	# /etc/passwd and ../../../victim.txt, resolved inside the volume:
	# not there.
	run vc GET file 'path=/evil'
	assert_output 404
	run vc GET file 'path=/up/victim.txt'
	assert_output 404
	# up is the volume's root, seen from inside.
	run vc GET dir 'path=/up'
	assert_output 200
	assert_equal "$(jq -c '[.[].name]' "$BATS_TEST_TMPDIR/body")" '["evil","up"]'
	# etc -> /etc is etc itself inside: a loop (400).
	ln -s /etc "$VOL/etc"
	run vc GET dir 'path=/etc'
	assert_output 400
	assert_equal "$(jq -r .message "$BATS_TEST_TMPDIR/body")" "cannot list '/etc': a symlink on the way leaves the volume or loops"
	run vc GET file 'path=/etc/passwd'
	assert_output 400
	run vc GET file 'path=/evil'
	assert_output 400
	run grep -c root: "$BATS_TEST_TMPDIR/body"
	assert_output 0
	outside_unchanged
	# A FIFO a sandbox made is not opened (it would block): 400.
	mkfifo "$VOL/fifo"
	run timeout 10 curl -s -H "Authorization: Bearer $TOK" -w ' %{http_code}' \
		"$SBXD_URL/volumecontent/vc/file?path=/fifo"
	assert_output "{\"code\":\"bad_request\",\"message\":\"path '/fifo' is not a file\"} 400"
}

@test "volume content: writing through a symlink never writes outside the volume" {
	# Without force: it exists (the link).
	run vc PUT file 'path=/evil' --data-binary pwned
	assert_output 409
	# With force: the link is replaced by the file, its target untouched.
	run vc PUT file 'path=/evil&force=true' --data-binary pwned
	assert_output 200
	assert [ -f "$VOL/evil" ] && assert [ ! -L "$VOL/evil" ]
	assert_equal "$(cat "$VOL/evil")" pwned
	# Through a directory link: the file lands inside the volume.
	run vc PUT file 'path=/up/x.txt' --data-binary inside
	assert_output 200
	assert_equal "$(cat "$VOL/x.txt")" inside
	run vc PUT file 'path=/up/victim.txt&force=true' --data-binary pwned
	assert_output 200
	assert_equal "$(cat "$VOL/victim.txt")" pwned
	run vc PUT file 'path=/etc/passwd&force=true' --data-binary pwned
	assert_output 404
	run vc POST dir 'path=/up/newdir'
	assert_output 201
	assert [ -d "$VOL/newdir" ]
	run vc POST dir 'path=/up/up/a/b' -G --data-urlencode force=true
	assert_output 201
	assert [ -d "$VOL/a/b" ]
	outside_unchanged
	# No temporary file is left.
	run find "$VOL" -name '.sbxd-upload-*'
	assert_output ''
}

@test "volume content: PATCH of a symlink changes the link alone; its mode cannot be set (400)" {
	run vc PATCH path 'path=/evil' -d '{"mode":511}'
	assert_output 400
	assert_equal "$(jq -r .message "$BATS_TEST_TMPDIR/body")" "path '/evil' is a symlink: its mode cannot be set"
	run vc PATCH path 'path=/evil' -d '{"uid":1234,"gid":1234}'
	assert_output 200
	assert_equal "$(stat -c %u:%g "$VOL/evil")" 1234:1234
	run vc PATCH path 'path=/up' -d '{"uid":1234}'
	assert_output 200
	run vc PATCH path 'path=/up/victim.txt' -d '{"mode":0,"uid":1234}'
	assert_output 404
	run vc PATCH path 'path=/etc/passwd' -d '{"mode":0}'
	assert_output 404
	run vc PATCH path 'path=/evil' -d '{"uid":-1}'
	assert_output 400
	outside_unchanged
}

@test "volume content: DELETE of a symlink removes the link, never what it points at" {
	run vc DELETE path 'path=/evil'
	assert_output 204
	assert [ ! -e "$VOL/evil" ] && assert [ ! -L "$VOL/evil" ]
	run vc DELETE path 'path=/up'
	assert_output 204
	run vc DELETE path 'path=/etc/passwd'
	assert_output 404
	run vc DELETE path 'path=/up/victim.txt'
	assert_output 404
	outside_unchanged
	assert [ -d "$SBX_LOCAL_DIR/volumes/vc/data" ]
	run ls -A "$VOL"
	assert_output ''
}

@test "volume content: a directory is removed with its contents; a file of 12 MiB goes up and down streamed, over --max-body" {
	run vc POST dir 'path=/d/e' -G --data-urlencode force=true
	assert_output 201
	head -c 12M /dev/urandom >"$BATS_TEST_TMPDIR/big"
	run vc PUT file 'path=/d/e/big' --data-binary "@$BATS_TEST_TMPDIR/big" -H 'Content-Type: application/octet-stream'
	assert_output 200
	assert_equal "$(jq -r .size "$BATS_TEST_TMPDIR/body")" 12582912
	run vc GET file 'path=/d/e/big'
	assert_output 200
	cmp "$BATS_TEST_TMPDIR/big" "$BATS_TEST_TMPDIR/body"
	# Over --max-upload (16M): 413, nothing left behind.
	head -c 17M /dev/zero >"$BATS_TEST_TMPDIR/huge"
	run vc PUT file 'path=/d/huge' --data-binary "@$BATS_TEST_TMPDIR/huge"
	assert_output 413
	assert [ ! -e "$VOL/d/huge" ]
	run find "$VOL" -name '.sbxd-upload-*'
	assert_output ''
	run vc DELETE path 'path=/d'
	assert_output 204
	assert [ ! -e "$VOL/d" ]
}
