#!/usr/bin/env bats
# sbxd: envd's filesystem service (Connect RPC) and /files, over plain HTTP.
load ../lib/helper
load ../lib/sbxd

setup_file() {
	sbx_setup_file
	sbxd_start --max-upload 4M
	local out
	out=$(sbxd_create)
	ID=$(jq -r .sandboxID <<<"$out")
	TOK=$(jq -r '.envdAccessToken // empty' <<<"$out")
	[ ${#ID} = 20 ] && [ -n "$TOK" ] || { echo "no sandbox: $out" >&2; return 1; }
	export ID TOK
}

teardown_file() {
	[ -n "${WATCH_PID:-}" ] && kill "$WATCH_PID" 2>/dev/null
	sbxd_stop
	sbx_teardown_file
	rm -rf "$SBXD_DIR"
	[ -z "${MARKER:-}" ] || rm -f "$MARKER"
}

setup() {
	sbx_setup
	WATCH_PID=
}

teardown() {
	if [ -n "${WATCH_PID:-}" ]; then
		kill "$WATCH_PID" 2>/dev/null || true
		wait "$WATCH_PID" 2>/dev/null || true
	fi
	[ -z "${MARKER:-}" ] || rm -f "$MARKER"
	# The 507 test's own sbxd, its sandboxes and its small disk.
	if [ -n "${SMALL:-}" ]; then
		sbxd_stop
		SBX_LOCAL_DIR=$SMALL sbx-ls -j | SBX_LOCAL_DIR=$SMALL sbx-kill -q >/dev/null 2>&1 || true
		umount "$SMALL" || umount -l "$SMALL"
		rmdir "$SMALL"
	fi
}

# A unary filesystem call: rpc METHOD JSON [curl args]; the body goes to
# $BATS_TEST_TMPDIR/body, the status to stdout.
rpc() {
	local m=$1 j=$2
	shift 2
	sbxd_envd "$ID" "$TOK" "/filesystem.Filesystem/$m" \
		-H 'Content-Type: application/json' -d "$j" \
		-o "$BATS_TEST_TMPDIR/body" -w '%{http_code}' "$@"
}

body() {
	cat "$BATS_TEST_TMPDIR/body"
}

# put PATH-QUERY DATA: an octet-stream upload; the status on stdout.
put() {
	sbxd_envd "$ID" "$TOK" "/files?path=$1" \
		-H 'Content-Type: application/octet-stream' --data-binary "$2" \
		-o "$BATS_TEST_TMPDIR/body" -w '%{http_code}'
}

# get QUERY [curl args]: a download into $BATS_TEST_TMPDIR/body.
get() {
	local q=$1
	shift
	sbxd_envd "$ID" "$TOK" "/files?$q" -o "$BATS_TEST_TMPDIR/body" \
		-w '%{http_code}' "$@"
}

# A command in the sandbox (its stdout).
sh_in() {
	sbxd_run "$ID" "$TOK" "$(jq -nc --arg c "$1" \
		'{process:{cmd:"/bin/sh",args:["-c",$c]},stdin:false}')" |
		grep -v '^END ' | jq -r 'select(.event.data.stdout) | .event.data.stdout' |
		base64 -d
}

@test "Stat of the home directory gives envd's EntryInfo: the user's own, as on E2B" {
	run rpc Stat '{"path":"/home/user"}'
	assert_output 200
	run jq -c '.entry | [.name, .type, .path, .mode, .permissions, .owner, .group, (.modifiedTime | test("^[0-9-]+T[0-9:.]+Z$"))]' "$BATS_TEST_TMPDIR/body"
	assert_output '["user","FILE_TYPE_DIRECTORY","/home/user",493,"drwxr-xr-x","user","user",true]'
}

@test "Stat of a missing path is not_found" {
	run rpc Stat '{"path":"/home/user/no-such-file"}'
	assert_output 404
	run jq -c . "$BATS_TEST_TMPDIR/body"
	assert_output '{"code":"not_found","message":"file not found: /home/user/no-such-file"}'
}

@test "Stat without a path is invalid_argument" {
	run rpc Stat '{}'
	assert_output 400
	run jq -r .code "$BATS_TEST_TMPDIR/body"
	assert_output invalid_argument
}

@test "an octet-stream upload answers envd's list and the file is there" {
	run put stat1.txt 'hello world'
	assert_output 200
	run jq -c . "$BATS_TEST_TMPDIR/body"
	assert_output '[{"path":"/home/user/stat1.txt","name":"stat1.txt","type":"file"}]'
	run rpc Stat '{"path":"stat1.txt"}'
	assert_output 200
	run jq -c '.entry | [.name, .type, .path, .size, .mode, .permissions]' "$BATS_TEST_TMPDIR/body"
	assert_output '["stat1.txt","FILE_TYPE_FILE","/home/user/stat1.txt","11",420,"-rw-r--r--"]'
	run sh_in 'cat /home/user/stat1.txt'
	assert_output 'hello world'
}

@test "relative paths are the user's home's: user is /home/user, root /root" {
	run put 'rel/a.txt&username=root' 'for root'
	assert_output 200
	run jq -r '.[0].path' "$BATS_TEST_TMPDIR/body"
	assert_output /root/rel/a.txt
	run rpc Stat '{"path":"rel/a.txt"}' -H "Authorization: Basic $(printf 'root:' | base64)"
	assert_output 200
	run jq -r .entry.path "$BATS_TEST_TMPDIR/body"
	assert_output /root/rel/a.txt
	run rpc Stat '{"path":"rel/a.txt"}'
	assert_output 404
	run sh_in 'cat /root/rel/a.txt'
	assert_output 'for root'
}

@test "an unknown user is 401: on /files with envd's message, on RPCs unauthenticated" {
	run get 'path=x&username=nobody-here'
	assert_output 401
	run jq -c . "$BATS_TEST_TMPDIR/body"
	assert_output '{"code":401,"message":"error looking up user '"'"'nobody-here'"'"'"}'
	run put 'x.txt&username=nobody-here' data
	assert_output 401
	run rpc Stat '{"path":"/"}' -H "Authorization: Basic $(printf 'nobody-here:' | base64)"
	assert_output 401
	run jq -c . "$BATS_TEST_TMPDIR/body"
	assert_output '{"code":"unauthenticated","message":"invalid username: '"'"'nobody-here'"'"'"}'
	run rpc Stat '{"path":"x.txt"}'
	assert_output 404
}

@test "ListDir lists one level, and deeper with depth" {
	sh_in 'mkdir -p /home/user/ls/a/b && touch /home/user/ls/f /home/user/ls/a/g /home/user/ls/a/b/h'
	run rpc ListDir '{"path":"ls"}'
	assert_output 200
	run jq -c '[.entries[] | [.name, .type, .path]] | sort' "$BATS_TEST_TMPDIR/body"
	assert_output '[["a","FILE_TYPE_DIRECTORY","/home/user/ls/a"],["f","FILE_TYPE_FILE","/home/user/ls/f"]]'
	run rpc ListDir '{"path":"ls","depth":2}'
	assert_output 200
	run jq -c '[.entries[].path] | sort' "$BATS_TEST_TMPDIR/body"
	assert_output '["/home/user/ls/a","/home/user/ls/a/b","/home/user/ls/a/g","/home/user/ls/f"]'
	run rpc ListDir '{"path":"/home/user/ls","depth":5}'
	run jq -c '[.entries[].path] | sort' "$BATS_TEST_TMPDIR/body"
	assert_output '["/home/user/ls/a","/home/user/ls/a/b","/home/user/ls/a/b/h","/home/user/ls/a/g","/home/user/ls/f"]'
}

@test "ListDir of / with depth 2 stops at depth 2 and names paths from /" {
	run rpc ListDir '{"path":"/","depth":2}'
	assert_output 200
	run jq -r '.entries[].path' "$BATS_TEST_TMPDIR/body"
	assert_line /home
	assert_line /home/user
	refute_output --partial //
	refute_line /home/user/stat1.txt
	run jq '[.entries[].path | select(split("/") | length > 3)] | length' "$BATS_TEST_TMPDIR/body"
	assert_output 0
}

@test "ListDir of a file is invalid_argument, of a missing path not_found" {
	put lsfile.txt x >/dev/null
	run rpc ListDir '{"path":"lsfile.txt"}'
	assert_output 400
	run jq -r .code "$BATS_TEST_TMPDIR/body"
	assert_output invalid_argument
	run rpc ListDir '{"path":"no-such-dir"}'
	assert_output 404
	run jq -r .code "$BATS_TEST_TMPDIR/body"
	assert_output not_found
}

@test "MakeDir makes the parents; again it is already_exists; over a file invalid_argument" {
	run rpc MakeDir '{"path":"mk/a/b"}'
	assert_output 200
	run jq -c '.entry | [.name, .type, .path]' "$BATS_TEST_TMPDIR/body"
	assert_output '["b","FILE_TYPE_DIRECTORY","/home/user/mk/a/b"]'
	run sh_in 'test -d /home/user/mk/a/b && echo yes'
	assert_output yes
	run rpc MakeDir '{"path":"mk/a/b"}'
	assert_output 409
	run jq -c . "$BATS_TEST_TMPDIR/body"
	assert_output '{"code":"already_exists","message":"directory already exists: /home/user/mk/a/b"}'
	put mk/file x >/dev/null
	run rpc MakeDir '{"path":"mk/file"}'
	assert_output 400
	run jq -r .code "$BATS_TEST_TMPDIR/body"
	assert_output invalid_argument
}

@test "Move renames, making the destination's parents; a missing source is not_found" {
	put mv/src.txt moved >/dev/null
	run rpc Move '{"source":"mv/src.txt","destination":"mv/new/dir/dst.txt"}'
	assert_output 200
	run jq -c '.entry | [.name, .type, .path, .size]' "$BATS_TEST_TMPDIR/body"
	assert_output '["dst.txt","FILE_TYPE_FILE","/home/user/mv/new/dir/dst.txt","5"]'
	run sh_in 'cat /home/user/mv/new/dir/dst.txt; test -e /home/user/mv/src.txt || echo " gone"'
	assert_output 'moved gone'
	run rpc Move '{"source":"mv/src.txt","destination":"mv/x"}'
	assert_output 404
	run jq -r .code "$BATS_TEST_TMPDIR/body"
	assert_output not_found
}

@test "Remove removes a tree; a missing path is no error" {
	sh_in 'mkdir -p /home/user/rm/a/b && echo x >/home/user/rm/a/b/f'
	run rpc Remove '{"path":"rm"}'
	assert_output 200
	run body
	assert_output '{}'
	run sh_in 'test -e /home/user/rm || echo gone'
	assert_output gone
	run rpc Remove '{"path":"rm"}'
	assert_output 200
}

@test "GET /files gives the content, with its name and length" {
	printf 'line 1\nline 2\n' >"$BATS_TEST_TMPDIR/src"
	run put dl/a.txt "@$BATS_TEST_TMPDIR/src"
	assert_output 200
	run get 'path=dl/a.txt' -D "$BATS_TEST_TMPDIR/head"
	assert_output 200
	run cmp "$BATS_TEST_TMPDIR/body" "$BATS_TEST_TMPDIR/src"
	assert_success
	run grep -i '^content-disposition:' "$BATS_TEST_TMPDIR/head"
	assert_output --partial 'inline; filename="a.txt"'
	run grep -i '^content-length:' "$BATS_TEST_TMPDIR/head"
	assert_output --partial ' 14'
}

@test "an empty file goes up and comes down with Content-Length 0" {
	run put empty.txt ''
	assert_output 200
	run get 'path=empty.txt' -D "$BATS_TEST_TMPDIR/head"
	assert_output 200
	run grep -i '^content-length:' "$BATS_TEST_TMPDIR/head"
	assert_output --partial ' 0'
	run rpc Stat '{"path":"empty.txt"}'
	run jq -c '.entry | [.type, .size]' "$BATS_TEST_TMPDIR/body"
	assert_output '["FILE_TYPE_FILE",null]'
}

@test "GET /files with a Range answers 206 with Content-Range; past the end 416" {
	put rg.txt 0123456789 >/dev/null
	run get 'path=rg.txt' -H 'Range: bytes=2-5' -D "$BATS_TEST_TMPDIR/head"
	assert_output 206
	run body
	assert_output 2345
	run grep -i '^content-range:' "$BATS_TEST_TMPDIR/head"
	assert_output --partial 'bytes 2-5/10'
	run get 'path=rg.txt' -H 'Range: bytes=-3'
	assert_output 206
	run body
	assert_output 789
	run get 'path=rg.txt' -H 'Range: bytes=7-'
	assert_output 206
	run body
	assert_output 789
	run get 'path=rg.txt' -H 'Range: bytes=10-20' -D "$BATS_TEST_TMPDIR/head"
	assert_output 416
	run grep -i '^content-range:' "$BATS_TEST_TMPDIR/head"
	assert_output --partial 'bytes */10'
}

@test "GET /files names an odd file safely in Content-Disposition" {
	sh_in 'printf x >"/home/user/q\"uote.txt"'
	run get 'path=q%22uote.txt' -D "$BATS_TEST_TMPDIR/head"
	assert_output 200
	run grep -i '^content-disposition:' "$BATS_TEST_TMPDIR/head"
	assert_output --partial 'inline; filename="q_uote.txt"'
}

@test "GET /files of a missing path is 404, of a directory 400" {
	run get 'path=/home/user/none.txt'
	assert_output 404
	run jq -c . "$BATS_TEST_TMPDIR/body"
	assert_output '{"code":404,"message":"path '"'"'/home/user/none.txt'"'"' does not exist"}'
	run get 'path=/home/user'
	assert_output 400
	run jq -c . "$BATS_TEST_TMPDIR/body"
	assert_output '{"code":400,"message":"path '"'"'/home/user'"'"' is a directory"}'
}

@test "a large file goes up and comes down whole (streamed)" {
	head -c 3500000 /dev/urandom >"$BATS_TEST_TMPDIR/big"
	run put big.bin "@$BATS_TEST_TMPDIR/big"
	assert_output 200
	run get 'path=big.bin'
	assert_output 200
	run cmp "$BATS_TEST_TMPDIR/body" "$BATS_TEST_TMPDIR/big"
	assert_success
}

@test "a multipart upload writes each part to its filename" {
	printf one >"$BATS_TEST_TMPDIR/1"
	printf two >"$BATS_TEST_TMPDIR/2"
	run sbxd_envd "$ID" "$TOK" "/files" \
		-F "file=@$BATS_TEST_TMPDIR/1;filename=mp/one.txt" \
		-F "file=@$BATS_TEST_TMPDIR/2;filename=/tmp/mp-two.txt" \
		-o "$BATS_TEST_TMPDIR/body" -w '%{http_code}'
	assert_output 200
	run jq -c . "$BATS_TEST_TMPDIR/body"
	assert_output '[{"path":"/home/user/mp/one.txt","name":"one.txt","type":"file"},{"path":"/tmp/mp-two.txt","name":"mp-two.txt","type":"file"}]'
	run sh_in 'cat /home/user/mp/one.txt /tmp/mp-two.txt'
	assert_output onetwo
}

@test "a multipart upload with a path query writes there (the SDK's write)" {
	printf 'sdk data' >"$BATS_TEST_TMPDIR/1"
	run sbxd_envd "$ID" "$TOK" "/files?path=mp2/x.txt" \
		-F "file=@$BATS_TEST_TMPDIR/1;filename=mp2/x.txt" \
		-o "$BATS_TEST_TMPDIR/body" -w '%{http_code}'
	assert_output 200
	run jq -r '.[0].path' "$BATS_TEST_TMPDIR/body"
	assert_output /home/user/mp2/x.txt
	run sh_in 'cat /home/user/mp2/x.txt'
	assert_output 'sdk data'
}

@test "an octet-stream upload with Content-Encoding gzip is inflated" {
	printf 'packed text\n%.0s' {1..1000} >"$BATS_TEST_TMPDIR/plain"
	gzip -c "$BATS_TEST_TMPDIR/plain" >"$BATS_TEST_TMPDIR/plain.gz"
	run sbxd_envd "$ID" "$TOK" "/files?path=gz/p.txt" -H 'Content-Type: application/octet-stream' \
		-H 'Content-Encoding: gzip' --data-binary @"$BATS_TEST_TMPDIR/plain.gz" \
		-o "$BATS_TEST_TMPDIR/body" -w '%{http_code}'
	assert_output 200
	run get 'path=gz/p.txt'
	assert_output 200
	run cmp "$BATS_TEST_TMPDIR/body" "$BATS_TEST_TMPDIR/plain"
	assert_success
	run sbxd_envd "$ID" "$TOK" "/files?path=gz/bad.txt" -H 'Content-Type: application/octet-stream' \
		-H 'Content-Encoding: gzip' --data-binary 'not gzip at all' \
		-o "$BATS_TEST_TMPDIR/body" -w '%{http_code}'
	assert_output 400
	run jq -r .message "$BATS_TEST_TMPDIR/body"
	assert_output 'the body is not valid gzip'
	run rpc Stat '{"path":"gz/bad.txt"}'
	assert_output 404
}

@test "X-Metadata headers become the file's metadata, shown by Stat and the upload" {
	run sbxd_envd "$ID" "$TOK" "/files?path=meta.txt" -H 'Content-Type: application/octet-stream' \
		-H 'X-Metadata-Owner: Alice' -H 'x-metadata-run: 42' --data-binary x \
		-o "$BATS_TEST_TMPDIR/body" -w '%{http_code}'
	assert_output 200
	run jq -c '.[0].metadata' "$BATS_TEST_TMPDIR/body"
	assert_output '{"owner":"Alice","run":"42"}'
	run rpc Stat '{"path":"meta.txt"}'
	assert_output 200
	run jq -c .entry.metadata "$BATS_TEST_TMPDIR/body"
	assert_output '{"owner":"Alice","run":"42"}'
	run sbxd_envd "$ID" "$TOK" "/files?path=meta2.txt" -H 'Content-Type: application/octet-stream' \
		-H $'X-Metadata-k: caf\xc3\xa9' --data-binary x \
		-o "$BATS_TEST_TMPDIR/body" -w '%{http_code}'
	assert_output 400
	run rpc Stat '{"path":"meta2.txt"}'
	assert_output 404
}

@test "an upload without a path, or of another content type, is 400" {
	run sbxd_envd "$ID" "$TOK" "/files" -H 'Content-Type: application/octet-stream' \
		--data-binary x -o "$BATS_TEST_TMPDIR/body" -w '%{http_code}'
	assert_output 400
	run sbxd_envd "$ID" "$TOK" "/files?path=ct.txt" -H 'Content-Type: text/plain' \
		--data-binary x -o "$BATS_TEST_TMPDIR/body" -w '%{http_code}'
	assert_output 400
	run jq -c . "$BATS_TEST_TMPDIR/body"
	assert_output '{"code":400,"message":"unsupported content type"}'
	run rpc Stat '{"path":"ct.txt"}'
	assert_output 404
}

@test "an upload over a file replaces it and leaves no temporary file" {
	put ow/f.txt 'first version, long' >/dev/null
	run put ow/f.txt second
	assert_output 200
	run sh_in 'cat /home/user/ow/f.txt; echo; ls -A /home/user/ow'
	assert_output $'second\nf.txt'
}

@test "an upload of a dotfile (its temporary file starts with two dots) works" {
	run put .profile-test 'dots'
	assert_output 200
	run put '..two' 'two'
	assert_output 200
	run sh_in 'cat /home/user/.profile-test /home/user/..two; ls -A /home/user | grep -c sbxd-'
	assert_output $'dotstwo0'
}

@test "an upload onto a directory is 400" {
	sh_in 'mkdir -p /home/user/isdir'
	run put isdir x
	assert_output 400
	run jq -r .message "$BATS_TEST_TMPDIR/body"
	assert_output "path '/home/user/isdir' is a directory"
}

@test "an upload over --max-upload is 413 and writes nothing" {
	head -c 5000000 /dev/zero >"$BATS_TEST_TMPDIR/huge"
	sh_in 'mkdir -p /home/user/big413'
	run put big413/f "@$BATS_TEST_TMPDIR/huge"
	assert_output 413
	run jq -r .code "$BATS_TEST_TMPDIR/body"
	assert_output 413
	run sh_in 'ls -A /home/user/big413 | wc -l'
	assert_output 0
}

@test "an upload that fills the sandbox's disk is 507 with envd's message, and leaves nothing" {
	# A sbxd of its own whose sandboxes live on a 4 MiB tmpfs: their
	# overlay's upper layer, what a sandbox writes, is there.
	SMALL=$(mktemp -d /tmp/sbx-small.XXXXXX)
	chmod 711 "$SMALL"
	mount -t tmpfs -o size=4M,mode=711 tmpfs "$SMALL"
	export SBX_LOCAL_DIR=$SMALL
	# No disk image of its own (limits.disk): the store's tmpfs is what
	# fills (a quota filling is tests/disk.bats's).
	export SBX_LIMITS_DISK=0
	SBXD_DIR=$BATS_TEST_TMPDIR/sbxd2
	mkdir "$SBXD_DIR"
	sbxd_start
	out=$(sbxd_create)
	ID=$(jq -r .sandboxID <<<"$out")
	TOK=$(jq -r .envdAccessToken <<<"$out")
	head -c 8M /dev/urandom >"$BATS_TEST_TMPDIR/big"
	run put /home/user/big "@$BATS_TEST_TMPDIR/big"
	assert_output 507
	run jq -c . "$BATS_TEST_TMPDIR/body"
	assert_output '{"code":507,"message":"not enough disk space available"}'
	# No file, and no temporary one beside it.
	run rpc ListDir '{"path":"/home/user"}'
	assert_output 200
	assert_equal "$(jq -c '[.entries[]?.name]' "$BATS_TEST_TMPDIR/body")" '[]'
	# A small file still fits.
	run put /home/user/small hello
	assert_output 200
	assert_equal "$(sh_in 'cat /home/user/small')" hello
}

@test "a path cannot leave the sandbox: .., absolute paths and symlinks stay inside" {
	MARKER=$(mktemp /tmp/sbxd-host-marker.XXXXXX)
	echo 'host secret' >"$MARKER"
	local name=${MARKER#/tmp/}
	run get "path=../../../../tmp/$name"
	assert_output 404
	run get "path=$MARKER"
	assert_output 404
	sh_in "ln -sfn / /home/user/to-root; echo sandbox >/tmp/$name"
	run get "path=../../../../tmp/$name"
	assert_output 200
	run body
	assert_output sandbox
	run get "path=to-root/tmp/$name"
	assert_output 200
	run body
	assert_output sandbox
	run put "to-root/../../tmp/$name" overwritten
	assert_output 200
	run cat "$MARKER"
	assert_output 'host secret'
	run rpc Stat '{"path":"to-root"}'
	run jq -c '.entry | [.type, .symlinkTarget]' "$BATS_TEST_TMPDIR/body"
	assert_output '["FILE_TYPE_SYMLINK","/"]'
}

@test "a wrong access token is 401 on /files and on the RPCs" {
	run curl -s -o "$BATS_TEST_TMPDIR/body" -w '%{http_code}' \
		-H "E2b-Sandbox-Id: $ID" -H 'E2b-Sandbox-Port: 49983' \
		-H 'X-Access-Token: wrong' "$SBXD_URL/files?path=stat1.txt"
	assert_output 401
	run curl -s -o "$BATS_TEST_TMPDIR/body" -w '%{http_code}' \
		-H "E2b-Sandbox-Id: $ID" -H 'E2b-Sandbox-Port: 49983' \
		-H 'Content-Type: application/json' -d '{"path":"/"}' \
		"$SBXD_URL/filesystem.Filesystem/Stat"
	assert_output 401
}

# v1_ + unpadded base64 of sha256("path:op:user:token[:expiration]")
sign() {
	printf '%s' "$1" | openssl dgst -sha256 -binary | base64 | tr -d '=\n' | sed 's/^/v1_/'
}

@test "a signed URL reads and writes without the token; an expired one is 401" {
	local exp=$(($(date +%s) + 600)) sig
	sig=$(sign "signed.txt:write::$TOK:$exp")
	run curl -s -o "$BATS_TEST_TMPDIR/body" -w '%{http_code}' \
		-H "E2b-Sandbox-Id: $ID" -H 'E2b-Sandbox-Port: 49983' \
		-H 'Content-Type: application/octet-stream' --data-binary signed \
		"$SBXD_URL/files?path=signed.txt&signature=$(jq -rn --arg s "$sig" '$s|@uri')&signature_expiration=$exp"
	assert_output 200
	sig=$(sign "signed.txt:read::$TOK:$exp")
	run curl -s -o "$BATS_TEST_TMPDIR/body" -w '%{http_code}' \
		-H "E2b-Sandbox-Id: $ID" -H 'E2b-Sandbox-Port: 49983' \
		"$SBXD_URL/files?path=signed.txt&signature=$(jq -rn --arg s "$sig" '$s|@uri')&signature_expiration=$exp"
	assert_output 200
	run body
	assert_output signed
	run curl -s -o "$BATS_TEST_TMPDIR/body" -w '%{http_code}' \
		-H "E2b-Sandbox-Id: $ID" -H 'E2b-Sandbox-Port: 49983' \
		"$SBXD_URL/files?path=stat1.txt&signature=$(jq -rn --arg s "$sig" '$s|@uri')&signature_expiration=$exp"
	assert_output 401
	exp=$(($(date +%s) - 10))
	sig=$(sign "signed.txt:read::$TOK:$exp")
	run curl -s -o "$BATS_TEST_TMPDIR/body" -w '%{http_code}' \
		-H "E2b-Sandbox-Id: $ID" -H 'E2b-Sandbox-Port: 49983' \
		"$SBXD_URL/files?path=signed.txt&signature=$(jq -rn --arg s "$sig" '$s|@uri')&signature_expiration=$exp"
	assert_output 401
	run jq -r .message "$BATS_TEST_TMPDIR/body"
	assert_output 'signature is already expired'
}

# Start a WatchDir stream in the background into $BATS_TEST_TMPDIR/watch
# and wait for its start event. watch JSON [curl args]
watch() {
	local j=$1 i
	shift
	sbxd_frame "$j" >"$BATS_TEST_TMPDIR/watch.req"
	sbxd_envd "$ID" "$TOK" /filesystem.Filesystem/WatchDir -N \
		-H 'Content-Type: application/connect+json' \
		--data-binary @"$BATS_TEST_TMPDIR/watch.req" "$@" \
		-o "$BATS_TEST_TMPDIR/watch" &
	WATCH_PID=$!
	for ((i = 0; i < 200; i++)); do
		grep -q start "$BATS_TEST_TMPDIR/watch" 2>/dev/null && return 0
		sleep 0.05
	done
	return 1
}

@test "WatchDir streams a start event, then the directory's events" {
	sh_in 'mkdir -p /home/user/wd'
	watch '{"path":"wd","recursive":true}' -H 'Connect-Timeout-Ms: 3000'
	put wd/new.txt data >/dev/null
	sh_in 'mkdir /home/user/wd/sub && echo x >/home/user/wd/sub/deep && rm /home/user/wd/new.txt'
	wait "$WATCH_PID"
	WATCH_PID=
	run sbxd_unframe <"$BATS_TEST_TMPDIR/watch"
	assert_line --index 0 '{"start":{}}'
	assert_line '{"filesystem":{"name":"new.txt","type":"EVENT_TYPE_CREATE"}}'
	assert_line '{"filesystem":{"name":"sub","type":"EVENT_TYPE_CREATE"}}'
	assert_line '{"filesystem":{"name":"sub/deep","type":"EVENT_TYPE_CREATE"}}'
	assert_line '{"filesystem":{"name":"new.txt","type":"EVENT_TYPE_REMOVE"}}'
	assert_line 'END {"error":{"code":"deadline_exceeded","message":"the operation timed out"}}'
	refute_output --partial sbxd-
}

@test "WatchDir with includeEntry sends each event's EntryInfo" {
	sh_in 'mkdir -p /home/user/wde'
	watch '{"path":"wde","includeEntry":true}' -H 'Connect-Timeout-Ms: 2000'
	put wde/e.txt abc >/dev/null
	wait "$WATCH_PID"
	WATCH_PID=
	run bash -c "sbxd_unframe <'$BATS_TEST_TMPDIR/watch' | grep filesystem | head -1 | jq -c '.filesystem | [.name, .type, .entry.path, .entry.type]'"
	assert_output '["e.txt","EVENT_TYPE_CREATE","/home/user/wde/e.txt","FILE_TYPE_FILE"]'
	# The file as it is when its write is seen (made empty, then
	# written: the size of its creation's entry is a race, as envd's).
	run bash -c "sbxd_unframe <'$BATS_TEST_TMPDIR/watch' | grep EVENT_TYPE_WRITE | tail -1 | jq -c '.filesystem | [.name, .entry.size]'"
	assert_output '["e.txt","3"]'
}

@test "WatchDir of a missing directory ends with not_found" {
	run bash -c "sbxd_frame '{\"path\":\"no-such-dir\"}' | sbxd_envd $ID $TOK /filesystem.Filesystem/WatchDir -H 'Content-Type: application/connect+json' --data-binary @- | sbxd_unframe"
	assert_output 'END {"error":{"code":"not_found","message":"path /home/user/no-such-dir not found"}}'
}

@test "a watcher collects events until it is removed" {
	sh_in 'mkdir -p /home/user/wt'
	run rpc CreateWatcher '{"path":"wt"}'
	assert_output 200
	local wid
	wid=$(jq -r .watcherId "$BATS_TEST_TMPDIR/body")
	[ ${#wid} = 20 ]
	put wt/a.txt a >/dev/null
	put wt/b.txt b >/dev/null
	local i got=
	for ((i = 0; i < 100; i++)); do
		rpc GetWatcherEvents "{\"watcherId\":\"$wid\"}" >/dev/null
		got+=$(jq -c '.events[]' "$BATS_TEST_TMPDIR/body" | tr -d '\n')
		[[ $got == *'b.txt","type":"EVENT_TYPE_WRITE'* ]] && break
		sleep 0.05
	done
	# Each upload as envd's: the file made, given to the user (its
	# chown, a chmod event), then written.
	run echo "$got"
	assert_output '{"name":"a.txt","type":"EVENT_TYPE_CREATE"}{"name":"a.txt","type":"EVENT_TYPE_CHMOD"}{"name":"a.txt","type":"EVENT_TYPE_WRITE"}{"name":"b.txt","type":"EVENT_TYPE_CREATE"}{"name":"b.txt","type":"EVENT_TYPE_CHMOD"}{"name":"b.txt","type":"EVENT_TYPE_WRITE"}'
	run rpc RemoveWatcher "{\"watcherId\":\"$wid\"}"
	assert_output 200
	run rpc GetWatcherEvents "{\"watcherId\":\"$wid\"}"
	assert_output 404
	run jq -r .code "$BATS_TEST_TMPDIR/body"
	assert_output not_found
}
