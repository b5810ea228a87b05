#!/usr/bin/env bats
# sbxd against the official E2B JavaScript SDK (npm package `e2b`): the
# scripts in tests/sbxd/sdk/ drive a private sbxd through the SDK and print JSON
# that these tests check.
#
# The SDK is installed with the machine's npm (scripts/install-deps brings
# nodejs and npm) into a cache directory that is kept between runs and never
# committed: ${XDG_CACHE_HOME:-$HOME/.cache}/sbx-test/e2b-$E2B_SDK_VERSION.
# Without node or npm, or with a node older than the SDK wants, setup fails.
#
# How the SDK reaches a local server (read in the SDK's ConnectionConfig):
#   E2B_API_URL=http://127.0.0.1:PORT      the control plane. Without it the
#       SDK uses https://api.<domain>.
#   E2B_SANDBOX_URL=http://127.0.0.1:PORT  envd, for every sandbox. The SDK
#       names the sandbox with the headers E2b-Sandbox-Id and
#       E2b-Sandbox-Port: 49983, and sends X-Access-Token. Without it the
#       SDK goes to https://sandbox.<domain> or https://49983-<id>.<domain>:
#       always https, so a plain-HTTP server needs this variable.
#   E2B_API_KEY=e2b_...                    sent as X-API-Key.
# Both URLs may be plain http and the same port (sbxd tells envd requests by
# the E2b-Sandbox-Id header). E2B_DOMAIN, and the "domain" a Sandbox answer
# carries, then play no part; nor does "secure": SDK 2.51 creates with
# POST /v2/sandboxes, always secure, and connects with
# POST /v2/sandboxes/{id}/connect. E2B_DEBUG must stay unset (it sends the
# SDK to localhost:3000 and localhost:49983 and skips API calls).
load ../lib/helper
load ../lib/sbxd
load ../lib/networld

setup_file() {
	sdk_install
	sbx_setup_file
	# First: sbxd's sandboxes take the world's resolver (SBX_NETWORK_DNS),
	# so that no name looked up inside goes off this machine.
	networld_start
	# and their network helpers trust the world's CA (HTTPS with a header
	# rule is theirs to verify).
	export SBX_NETWORK_CA_FILE=$NETWORLD_CA
	sbxd_start
	unset E2B_DEBUG E2B_DOMAIN E2B_ACCESS_TOKEN
	# The key goes to the SDK by the environment, never by argv.
	E2B_API_URL=$SBXD_URL
	E2B_SANDBOX_URL=$SBXD_URL
	E2B_API_KEY=$SBXD_KEY
	export E2B_API_URL E2B_SANDBOX_URL E2B_API_KEY
}

teardown_file() {
	sbxd_stop
	networld_stop
	sbx_teardown_file
	rm -rf "$SBXD_DIR"
}

setup() {
	sbx_setup
}

# A sandbox made by the SDK; sets ID.
box() {
	local out
	out=$(sdk create) || { echo "create failed: $out" >&2; return 1; }
	ID=$(jq -r .sandboxId <<<"$out")
	[ ${#ID} = 20 ]
}

# jq -r FILTER on the JSON a script printed (kept in OUT).
field() {
	jq -r "$1" <<<"$OUT"
}

@test "SDK: Sandbox.create makes a running sandbox, here and locally; a wrong key is AuthenticationError" {
	run sdk create
	assert_success
	OUT=$output
	id=$(field .sandboxId)
	[[ $id =~ ^[a-z0-9]{20}$ ]]
	run field '[.running, .state, .templateId, .metadata.test, .envdVersion, .lifeSecs, .wrongKey] | @tsv'
	assert_output $'true\trunning\tbase\tcreate\t0.6.4\t120\tAuthenticationError'
	run sbx-ls -j
	assert_output --partial "\"sbxd\":\"$id\""
}

@test "SDK: commands.run streams to onStdout and onStderr and gives the exit code" {
	box
	run sdk run "$ID"
	assert_success
	OUT=$output
	run field '[.exitCode, .stdout, .stderr, .callbacks.stdout, .callbacks.stderr, .env, .okExit] | @json'
	assert_output '[0,"out1\nout2\n","err1\n","out1\nout2\n","err1\n","bar /tmp /home/user\n",0]'
}

@test "SDK: a failing command raises CommandExitError with its exit code and stderr" {
	box
	run sdk fail "$ID"
	assert_success
	OUT=$output
	run field '[.threw, .isCommandExitError, .exitCode, .stderr, .stdout, .message] | @json'
	assert_output '[true,true,7,"it broke\n","partial\n","exit status 7"]'
}

@test "SDK: a background command is listed, reads sendStdin, and is killed" {
	box
	run sdk background "$ID"
	assert_success
	OUT=$output
	run field '[.listed, .listedArgs[-1], .echoed, .got, .killed, .stillListed, .killAgain] | @json'
	assert_output '[true,"while read l; do echo \"got:$l\"; done",true,"got:hello\n",true,false,false]'
	# A killed command's wait() raises, as on E2B (exit -1, "signal: killed").
	run field '[.waited.threw, .waited.isCommandExitError, .waited.exitCode, .waited.message] | @json'
	assert_output '[true,true,-1,"signal: killed"]'
}

@test "SDK: a pty answers sendInput through onData, resizes, exits with its code, and is killed" {
	box
	run sdk pty "$ID"
	assert_success
	OUT=$output
	run field '[.answered, .resized, .exit, .killed, .exit2] | @json'
	assert_output '[true,true,3,true,-1]'
}

@test "SDK: files write (multipart, several at once, octet-stream, gzip), read, list, exists, makeDir, rename and remove" {
	box
	run sdk files "$ID"
	assert_success
	OUT=$output
	run field '[.madeDir, .madeDirAgain, .written.name, .written.path, .written.type] | @json'
	assert_output '[true,false,"a.txt","/home/user/sdk/a.txt","file"]'
	run field '[.octet, .gzip, .read, .readBytes, .seenByShell, .list, .exists, .existsNot] | @json'
	assert_output '["octet","zipped","hello from the sdk\n",[0,1,2,255],"deep",["a.txt:file","b.bin:file","sub:dir"],true,false]'
	run field '[.renamed.path, .afterRename.old, .afterRename.new, .afterRemove, .readMissing, .dirGone] | @json'
	assert_output '["/home/user/sdk/renamed.txt",false,"hello from the sdk\n",false,"FileNotFoundError",true]'
}

@test "SDK: setTimeout moves the end, longer and shorter, and the sandbox ends then" {
	run sdk timeout
	assert_success
	OUT=$output
	# seconds left, rounded, a moment after each call
	run field '[.before >= 55 and .before <= 60, .longer >= 595 and .longer <= 600, .shorter >= 0 and .shorter <= 2, .gone, .notFound] | @json'
	assert_output '[true,true,true,true,true]'
	run sbx-ls -j
	refute_output --partial "\"sbxd\":\"$(field .sandboxId)\""
}

@test "SDK: pause, then Sandbox.connect resumes it with its file and process" {
	run sdk pause
	assert_success
	OUT=$output
	run field '[.paused, .state, .pausedAgain, .sameId, .stateAfter, .file, .sleeping, .againRuns] | @json'
	assert_output '[true,"paused",false,true,"running","before-pause\n",true,"ok\n"]'
}

@test "SDK: pause({keepMemory: false}) ends the processes and keeps the files; a plain pause keeps them" {
	run sdk pause-cold
	assert_success
	OUT=$output
	run field '[.before, .warm, .warmState, .afterWarm] | @json'
	assert_output '["1",true,"paused","1"]'
	run field '[.cold, .coldState, .coldAgain, .stateAfter, .afterCold, .file, .runs] | @json'
	assert_output '[true,"paused",false,"running","0","before-pause\n","ok\n"]'
}

@test "SDK: at its end onTimeout pause keeps the processes; with keepMemory false (autoPauseMemory) only the files" {
	run sdk auto-pause
	assert_success
	OUT=$output
	run field '[.before, .states, .after, .files] | @json'
	assert_output '[["1","1"],["paused","paused"],["1","0"],["kept\n","kept\n"]]'
}

@test "SDK: Sandbox.list with a metadata filter lists only the sandboxes that match" {
	run sdk list
	assert_success
	OUT=$output
	a=$(field .a)
	b=$(field .b)
	run field '[.matchA, .matchB, .none, .runningOnly, .pausedOnly] | @json'
	assert_output "[[\"$a\"],[\"$b\"],[],[\"$a\"],[\"$b\"]]"
	run field '.both | length'
	assert_output 2
	run field '.listed["owner name"]'
	assert_output 'a b&c=%d'
}

@test "SDK: after kill the sandbox is not listed, getInfo raises NotFoundError, kill again is false" {
	run sdk kill
	assert_success
	OUT=$output
	id=$(field .sandboxId)
	run field '[.before, .killed, .after, .err.notFound, .err.sandboxNotFound, .running, .killAgain] | @json'
	assert_output "[[\"$id\"],true,[],true,true,false,false]"
	run sbx-ls -j
	refute_output --partial "\"sbxd\":\"$id\""
}

@test "SDK: Secret create, getInfo by name and id, update, list by pages, exists, destroy" {
	local value=tv-$RANDOM$RANDOM-never-returned
	run sdk secrets "$value"
	assert_success
	OUT=$output
	refute_output --partial "$value"
	run field '[.created.secretId, .created.name, .created.version, .created.metadata, .byName, .byId] | @json'
	assert_output '["sec_sdk_key","sdk_key",1,{"team":"a"},"sdk_key","sdk_key"]'
	run field '[.updated, .pages, .dup, .existsBefore, .destroyed, .destroyedAgain, .existsAfter, .missing] | @json'
	assert_output '[{"version":2,"metadata":{"team":"a"}},[["sdk-other"],["sdk_key"]],"SecretError",true,true,false,false,"SecretNotFoundError"]'
	run env XDG_CONFIG_HOME="$SBXD_CONFIG_HOME" sbx-secret ls
	assert_success
	assert_output ""
}

@test "SDK: network at create (allowOut, denyOut, a header rule), getHost of a port, updateNetwork" {
	export SBX_TEST_KEY=key-$RANDOM-$RANDOM-secret
	run sdk network "$SBXD_URL"
	assert_success
	OUT=$output
	run field '[.a.server, .a.key, .c, (.allowOut | join(",")), (.denyOut | join(",")), .host, .page, .c2, .a2] | @tsv'
	assert_output $'a.test\ttrue\ttrue\ta.test\t0.0.0.0/0\t8000-ID.e2b.app\thi from 8000\tc.test\ttrue'
	refute_output --partial "$SBX_TEST_KEY"
}

@test "SDK: updateNetwork gives a sandbox made without internet a network and a header rule, then takes it away" {
	export SBX_TEST_KEY=key-$RANDOM-$RANDOM-secret
	run sdk network-late
	assert_success
	OUT=$output
	run field '[.before, .a, .key, .c, .after] | @tsv'
	assert_output $'true\ta.test\ttrue\ttrue\ttrue'
	refute_output --partial "$SBX_TEST_KEY"
}

@test "SDK: createSnapshot, listSnapshots, Sandbox.create from a snapshot, deleteSnapshot" {
	run sdk snapshot
	assert_success
	OUT=$output
	run field '.snapshotId | test("^snp-[0-9a-f]+$")'
	assert_output true
	run field '[.names, .otherNames, .listedBoth, .bySandbox, .paged] | @json'
	assert_output '[["sdk-snap"],[],true,true,1]'
	run field '[(.byName | length), .byName[0] == .snapshotId] | @json'
	assert_output '[1,true]'
	run field '[.file, .mine, .file2] | @json'
	assert_output '["in-snapshot\n","copy\n","in-snapshot\n"]'
	run field '[.inUse, .deleted, .again, .deletedOther, .left] | @json'
	assert_output '["SandboxError 409",true,false,true,[]]'
}

@test "SDK: Sandbox.list with startedAfter and template lists only the sandboxes that match; a bad startedAfter is 400" {
	run sdk list-filters
	assert_success
	OUT=$output
	a=$(field .a)
	b=$(field .b)
	both=$(jq -c -n --arg a "$a" --arg b "$b" '[$a, $b] | sort')
	run field '[.all, .after, .afterAll, .beforeAll, .base, .other] | @json'
	assert_output "[$both,[\"$b\"],[],$both,$both,[]]"
	run curl -s -w '\n%{http_code}' -H "X-API-Key: $SBXD_KEY" \
		"$SBXD_URL/v2/sandboxes?startedAfter=yesterday"
	assert_line --index 1 400
	run jq -c '[.code, (.message | test("startedAfter"))]' <<<"${lines[0]}"
	assert_output '[400,true]'
}

@test "SDK: files.list with depth walks as envd does: name-sorted, depth-first, no deeper than asked" {
	box
	run sdk list-depth "$ID"
	assert_success
	OUT=$output
	run field '.one | @json'
	assert_output '["a","b","c"]'
	run field '.two | @json'
	assert_output '["a","a/m","a/z","b","b/x","b/y","c"]'
	run field '.three | @json'
	assert_output '["a","a/m","a/m/deep","a/z","b","b/x","b/x/f","b/y","c"]'
}

@test "SDK: watchDir sees files.write as envd's events: create, chmod (its chown) and write for a new file, write (no create) over an old one" {
	box
	run sdk watch-write "$ID"
	assert_success
	OUT=$output
	run field '.content'
	assert_output 'second, longer'
	# A new file: created, given to the user (envd's chown: chmod), then
	# written (each write() is one; the kernel folds two alike in a row
	# that were not read yet).
	run field '[.fresh[0], (.fresh | unique)] | @json'
	assert_output '["create:f.txt",["chmod:f.txt","create:f.txt","write:f.txt"]]'
	# An old one: written (its truncation, then the data), not created.
	run field '.over | unique | @json'
	assert_output '["chmod:f.txt","write:f.txt"]'
}

@test "SDK: downloadUrl and uploadUrl work with curl alone (the one sandbox URL), and an expired one says so" {
	run sdk signed-url
	assert_success
	OUT=$output
	# No header names the sandbox: the signature does.
	run curl -s "$(field .downA)"
	assert_output 'sandbox a'
	run curl -s "$(field .downB)"
	assert_output 'sandbox b'
	run curl -s "$(field .later)"
	assert_output 'sandbox a'
	echo uploaded >"$BATS_TEST_TMPDIR/up.txt"
	run curl -s -o /dev/null -w '%{http_code}' -F "file=@$BATS_TEST_TMPDIR/up.txt" "$(field .upB)"
	assert_output 200
	run curl -s "$(field .upBack)"
	assert_output uploaded
	sleep 2.1
	run curl -s -w '\n%{http_code}' "$(field .expired)"
	assert_line --index 1 401
	run jq -r .message <<<"${lines[0]}"
	assert_output 'signature is already expired'
	# A signature no sandbox made.
	run curl -s -w '\n%{http_code}' "$SBXD_URL/files?path=x&signature=v1_nothing"
	assert_line --index 1 401
	run jq -r .message <<<"${lines[0]}"
	assert_output 'invalid signature'
}

@test "SDK: a sandbox killed (or at its end) while a command runs: the stream breaks and the SDK says the sandbox was killed, as against E2B" {
	run sdk killed
	assert_success
	OUT=$output
	local end='[unknown] terminated: The sandbox was killed or reached its end of life while the request was in flight.'
	run field '[.fg.name, .fg.message, .bg.name, .bg.message] | @tsv'
	assert_output "TimeoutError	$end	TimeoutError	$end"
	run field '[.timedOut.name, .timedOut.message] | @tsv'
	assert_output "TimeoutError	$end"
}

@test "SDK: Template.exists is true for base (GET /templates/aliases/base answers 200), false for a name never built" {
	run sdk template-alias
	assert_success
	OUT=$output
	run field '[.base, .nope] | @json'
	assert_output '[true,false]'
	run curl -s -H "X-API-Key: $SBXD_KEY" "$SBXD_URL/templates/aliases/base"
	assert_output '{"templateID":"base","public":false}'
}

@test "SDK: Sandbox.fork makes count sandboxes with the source's files and metadata, each its own; bad count 400, a killed source not found, one with egress rules 501" {
	run sdk fork
	assert_success
	OUT=$output
	run field '[.n, .ok, .distinct, .files, .inOther, .inSource, .meta.team] | @json'
	assert_output '[2,2,3,["from-source\n","from-source\n"],"from-source\n","from-source\n","a"]'
	run field '[.tooMany, .gone, .ruled] | @json'
	assert_output '["SandboxError 400","SandboxNotFoundError","SandboxError 501"]'
}

@test "SDK: connect with onResume 'reboot' resumes a paused sandbox from its files, its processes gone; 'restore' keeps them" {
	run sdk reboot
	assert_success
	OUT=$output
	run field '[.before, .restored, .state, .rebooted, .file, .running] | @json'
	assert_output '["1","1","running","0","kept\n","1"]'
}

@test "SDK: Volume.create, list, getInfo; volumeMounts share files between sandboxes; destroy refused while mounted, then done" {
	run sdk volume
	assert_success
	OUT=$output
	run field '[.id, .name, .dup, (.listed | index("sdk-vol") != null), .info.name] | @json'
	assert_output '["sdk-vol","sdk-vol","VolumeError 409",true,"sdk-vol"]'
	run field '[.mounts, .read, .busy, .destroyed, .gone] | @json'
	assert_output '[[{"name":"sdk-vol","path":"/data"}],"through-a\n","VolumeError 409",true,"VolumeNotFoundError"]'
}

@test "SDK: a Volume's content (writeFile, readFile, makeDir, list, getInfo, exists, updateMetadata, remove) at E2B_VOLUME_API_URL; a sandbox mounting it sees the same files" {
	E2B_VOLUME_API_URL=$SBXD_URL run sdk volume-content
	assert_success
	OUT=$output
	assert [ -n "$OUT" ]
	assert_equal "$(field '[.tokenSame, .text, .back, .again, .replaced] | @json')" \
		'[true,"hello volume\n",[0,1,2,255,254],"VolumeError","replaced\n"]'
	assert_equal "$(field '.wrote | [.name, .path, .type, .size, .mode, .uid, .mtimeOk] | @json')" \
		'["hello.txt","/hello.txt","file",13,420,0,true]'
	assert_equal "$(field '[.noParent, .made.path, .made.type, .dir.mode, .dir.uid, .dir.gid, .dirAgain] | @json')" \
		'["VolumePathNotFoundError","/a/b/c","directory",488,1000,1000,"VolumeError"]'
	assert_equal "$(field '[.depth1, .depth2, .missingList] | @json')" \
		'[["/a","/bin.dat","/hello.txt","/top"],["/a","/a/b","/bin.dat","/hello.txt","/top"],"VolumePathNotFoundError"]'
	assert_equal "$(field '[.seen, .fromSbx] | @json')" \
		'["replaced\n1000:1000 600\n1000:1000 750\n","from-sandbox\n"]'
	assert_equal "$(field '[.fileInfo.type, .fileInfo.size, .dirInfo.type, .linkInfo.type, .linkInfo.target, .evilRead] | @json')" \
		'["file",9,"directory","symlink","/etc/passwd","VolumePathNotFoundError"]'
	assert_equal "$(field '[.exists, .meta.mode, .meta.uid, .metaSeen, .removed, .removeMissing, .passwd] | @json')" \
		'[[true,false],416,1000,"1000:1000 640\n",[false,false,"bin.dat\nhello.txt\nsbx.txt\ntop\n"],"VolumePathNotFoundError","root:"]'
}

@test "SDK: commands and ptys run as user (uid 1000, home /home/user) unless asked for root; files.write's files are the user's; an unknown user is refused" {
	box
	run sdk user "$ID"
	assert_success
	OUT=$output
	assert [ -n "$OUT" ]
	assert_equal "$(field .def)" $'1000\n1000\nuser\n/home/user\n/home/user'
	assert_equal "$(field .root)" $'0\n0\n/root\n/root'
	assert_equal "$(field .owners)" $'1000:1000 /home/user\n1000:1000 /home/user/by-user.txt\n0:0 /tmp/by-root.txt'
	assert_equal "$(field .made)" '1000:1000'
	assert_equal "$(field '[.owner, .group] | @json')" '["user","user"]'
	assert_equal "$(field .bg)" '0'
	assert_equal "$(field '[.ptyUser, .ptyRoot] | @json')" '["1000","0"]'
	run field .unknown
	assert_output --partial "invalid username: 'nosuch'"
}
