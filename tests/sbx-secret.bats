#!/usr/bin/env bats
# sbx-secret: the secret store from the command line, in a throwaway
# XDG_CONFIG_HOME for each test.
load lib/helper

# A value no other test output could hold by chance.
VALUE=tv-$RANDOM$RANDOM-do-not-print

setup() {
	sbx_setup
	export XDG_CONFIG_HOME=$BATS_TEST_TMPDIR/config
	STORE=$XDG_CONFIG_HOME/sbx/credentials/secrets
}

# The mode of a file, as stat prints it (600, 700).
mode() {
	stat -c %a "$1"
}

@test "set reads the value from stdin, prints the metadata, and stores it 0600 in a 0700 store" {
	run --separate-stderr sbx-secret set Api_Key -m team=a <<<"$VALUE"
	assert_success
	[ -n "$output" ]
	run jq -c 'del(.created_at, .updated_at)' <<<"$output"
	assert_output '{"name":"api_key","version":1,"metadata":{"team":"a"}}'
	[ "$(mode "$STORE")" = 700 ]
	[ "$(mode "$STORE/api_key")" = 600 ]
	[ "$(mode "$STORE/api_key.json")" = 600 ]
	# One trailing newline stripped, nothing else.
	[ "$(od -An -c "$STORE/api_key" | tr -d ' \n')" = "$(printf %s "$VALUE" | od -An -c | tr -d ' \n')" ]
}

@test "the options may come before the command: -m k=v set NAME, -q ls" {
	run --separate-stderr sbx-secret -m team=b set early <<<"$VALUE"
	assert_success
	run jq -c .metadata <<<"$output"
	assert_output '{"team":"b"}'
	run --separate-stderr sbx-secret -q ls
	assert_success
	assert_output "$(sbx-secret ls -q)"
	assert_output --partial '"early"'
}

@test "set keeps all of stdin but one trailing newline" {
	printf 'a\nb\n\n' | sbx-secret set multi >/dev/null
	run od -An -c "$STORE/multi"
	assert_output --regexp '^ +a +\\n +b +\\n$'
	printf 'no-newline' | sbx-secret set plain >/dev/null
	[ "$(cat "$STORE/plain")" = no-newline ]
	[ "$(stat -c %s "$STORE/plain")" = 10 ]
}

@test "timestamps are RFC 3339 UTC" {
	run sbx-secret set t <<<"$VALUE"
	assert_success
	run jq -r '.created_at, .updated_at' <<<"$output"
	[ "${#lines[@]}" -eq 2 ]
	[[ ${lines[0]} =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$ ]]
	[[ ${lines[1]} =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$ ]]
}

@test "setting again makes a new version, keeps created_at and the metadata" {
	local first
	first=$(sbx-secret set k -m a=1 <<<"one")
	run sbx-secret set K <<<"two"
	assert_success
	[ -n "$output" ]
	assert_equal "$(jq -c '[.name, .version, .metadata]' <<<"$output")" '["k",2,{"a":"1"}]'
	assert_equal "$(jq -r .created_at <<<"$output")" "$(jq -r .created_at <<<"$first")"
	run sbx-secret set k -m b=2 <<<"three"
	assert_equal "$(jq -c '[.version, .metadata]' <<<"$output")" '[3,{"b":"2"}]'
	[ "$(cat "$STORE/k")" = three ]
}

@test "ls prints metadata only, by name, never a value" {
	sbx-secret set zeta <<<"$VALUE" >/dev/null
	sbx-secret set alpha <<<"$VALUE" >/dev/null
	sbx-secret set mid-1 -m k=v <<<"$VALUE" >/dev/null
	run --separate-stderr sbx-secret ls
	assert_success
	[ "${#lines[@]}" -eq 3 ]
	assert_equal "$(jq -r .name <<<"$output" | tr '\n' ' ')" "alpha mid-1 zeta "
	assert_equal "$(jq -c 'keys_unsorted' <<<"${lines[0]}")" \
	    '["name","version","created_at","updated_at","metadata"]'
	refute_output --partial "$VALUE"
	[ -z "$stderr" ]
}

@test "ls with no store prints nothing and exits 0" {
	run --separate-stderr sbx-secret ls
	assert_success
	assert_output ""
	[ ! -e "$STORE" ]
}

@test "a bad name is exit 2 and nothing is written" {
	local n
	for n in 'a b' 'a.b' '../x' '' "$(printf 'a%.0s' {1..65})" sec_x SEC_y; do
		run --separate-stderr sbx-secret set "$n" <<<"$VALUE"
		assert_failure 2
		assert_output ""
		[[ $stderr == "sbx-secret: invalid secret name"* ]] || fail "$n: $stderr"
		[[ $stderr != *"$VALUE"* ]]
	done
	run --separate-stderr sbx-secret set sec_x <<<"$VALUE"
	assert_equal "$stderr" "sbx-secret: invalid secret name 'sec_x': the prefix 'sec_' is reserved"
	[ ! -e "$STORE" ]
}

@test "an empty value is exit 2 and nothing is written" {
	run --separate-stderr sbx-secret set e </dev/null
	assert_failure 2
	assert_equal "$stderr" "sbx-secret: the value of secret 'e' is empty"
	run --separate-stderr sbx-secret set e <<<""
	assert_failure 2
	[ ! -e "$STORE/e" ]
}

@test "a value larger than 65536 bytes is exit 2" {
	run --separate-stderr bash -c 'head -c 65537 /dev/zero | tr "\0" x | sbx-secret set big'
	assert_failure 2
	assert_equal "$stderr" "sbx-secret: the value of secret 'big' is larger than 65536 bytes"
	[ ! -e "$STORE/big" ]
}

@test "bad metadata is exit 2" {
	run --separate-stderr sbx-secret set m -m novalue <<<"$VALUE"
	assert_failure 2
	[[ ${stderr_lines[0]} == "sbx-secret: bad metadata 'novalue' (want key=value)" ]]
	run --separate-stderr sbx-secret ls -m a=b
	assert_failure 2
	[[ ${stderr_lines[0]} == "sbx-secret: --metadata is for sbx-secret set" ]]
	[ ! -e "$STORE" ]
}

@test "no command, or an unknown one, is exit 2" {
	run --separate-stderr sbx-secret
	assert_failure 2
	[[ ${stderr_lines[0]} == "sbx-secret: a command is required (set, ls or rm)" ]]
	run --separate-stderr sbx-secret get x
	assert_failure 2
	[[ ${stderr_lines[0]} == "sbx-secret: unknown command 'get'" ]]
	run --separate-stderr sbx-secret set
	assert_failure 2
	run --separate-stderr sbx-secret set a b
	assert_failure 2
}

@test "rm removes both files; a missing secret is exit 5 and the rest go on" {
	sbx-secret set a <<<"$VALUE" >/dev/null
	sbx-secret set b <<<"$VALUE" >/dev/null
	run --separate-stderr sbx-secret rm A nope b
	assert_failure 5
	assert_output ""
	assert_equal "$stderr" "sbx-secret: no secret 'nope'"
	[ ! -e "$STORE/a" ]
	[ ! -e "$STORE/a.json" ]
	[ ! -e "$STORE/b" ]
	run sbx-secret ls
	assert_output ""
}

@test "rm takes names, or ls's lines, on stdin" {
	sbx-secret set a -m team=x <<<"$VALUE" >/dev/null
	sbx-secret set b -m team=y <<<"$VALUE" >/dev/null
	sbx-secret set c <<<"$VALUE" >/dev/null
	run bash -c 'sbx-secret ls | jq -c "select(.metadata.team == \"x\")" | sbx-secret rm'
	assert_success
	run bash -c 'printf "c\n" | sbx-secret rm'
	assert_success
	run sbx-secret ls
	assert_success
	assert_equal "$(jq -r .name <<<"$output")" b
}

@test "a store open to others is refused with exit 5" {
	sbx-secret set a <<<"$VALUE" >/dev/null
	chmod 755 "$STORE"
	run --separate-stderr sbx-secret ls
	assert_failure 5
	assert_equal "$stderr" "sbx-secret: secret store '$STORE' is open to others (mode 755, want 0700); refusing it"
	run --separate-stderr sbx-secret set b <<<"$VALUE"
	assert_failure 5
	[ ! -e "$STORE/b" ]
}

@test "the value is never in argv, output or a message" {
	run --separate-stderr sbx-secret set v <<<"$VALUE"
	refute_output --partial "$VALUE"
	[[ $stderr != *"$VALUE"* ]]
	run --separate-stderr sbx-secret set v -m k=v <<<"$VALUE"
	refute_output --partial "$VALUE"
	run --separate-stderr sbx-secret ls
	refute_output --partial "$VALUE"
	run grep -c -- "$VALUE" "$STORE/v.json"
	assert_failure 1
	assert_output 0
}
