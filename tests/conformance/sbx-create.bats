#!/usr/bin/env bats
# sbx-create on the backend under test: the ref, the state file, where
# defaults come from, and refusing bad input with nothing made.

load conformance

setup_file() { conf_setup_file; }
teardown_file() { conf_teardown_file; }
setup() { conf_setup; }
teardown() { sbx-ls -j 2>/dev/null | sbx-kill -q >/dev/null 2>&1 || true; }

# How many sandboxes the backend under test lists.
count() {
	sbx-ls -j | wc -l
}

@test "$B: sbx-create prints the ref as one JSON line and writes the state file" {
	local idre='^[0-9a-f]{12,}$'
	# E2B's own ids: 20 of lower-case letters and digits.
	[ "$BACKEND" = e2b ] && idre='^[0-9a-z]{20}$'
	# Daytona's: UUIDs (sbxd's: its own ids).
	[ "$BACKEND" = daytona ] && idre='^[0-9a-z-]{12,64}$'
	run --separate-stderr create -s .sbx/s.json --label owner=me --timeout 600
	assert_success
	[ -z "$stderr" ]
	[ "${#lines[@]}" -eq 1 ]
	[ "$(jq -r .backend <<<"$output")" = "$BACKEND" ]
	[[ "$(jq -r .id <<<"$output")" =~ $idre ]]
	[ "$(jq -r .schema .sbx/s.json)" = 1 ]
	[ "$(jq -r .status .sbx/s.json)" = running ]
	[ "$(jq -r .labels.owner .sbx/s.json)" = me ]
	[ "$(jq -r .timeout .sbx/s.json)" = 600 ]
	[ "$(jq -r .workdir .sbx/s.json)" = /workspace ]
	[ "$(jq -c .ref .sbx/s.json)" = "$(jq -c . <<<"$output")" ]
	[ "$(jq -r '.segments | length' .sbx/s.json)" = 1 ]
	[ "$(jq -r '.segments[0][1]' .sbx/s.json)" = null ]
	# The sandbox it names is there, running, with its label.
	[ "$(sbx-ls -j -l owner=me | jq -r '.id, .status')" = \
	    "$(jq -r .id <<<"$output")"$'\nrunning' ]
}

@test "$B: sbx-create -e NAME takes the value from the environment and writes it nowhere" {
	export SBX_TEST_SECRET=s3cr3t-value-91
	run --separate-stderr create -s s.json -e SBX_TEST_SECRET -e PLAIN=1
	assert_success
	refute_output --partial s3cr3t-value-91
	[ -z "$stderr" ]
	run sx sh -c 'echo "$SBX_TEST_SECRET $PLAIN"'
	assert_output "s3cr3t-value-91 1"
	# Not in the state file, the listing, or sbx's own store.
	run grep -rl s3cr3t-value-91 s.json "$SBX_LOCAL_DIR"
	assert_failure
	run sbx-ls -j
	assert_success
	refute_output --partial s3cr3t-value-91
}

@test "$B: sbx-create -e with a name that is not set fails with exit 2 and creates nothing" {
	unset SBX_NOT_SET_ANYWHERE
	run --separate-stderr create -s s.json -e SBX_NOT_SET_ANYWHERE
	assert_failure 2
	assert_output ''
	[[ "$stderr" == "sbx-create: "*SBX_NOT_SET_ANYWHERE* ]]
	[ ! -e s.json ]
	[ "$(count)" -eq 0 ]
}

@test "$B: sbx-create makes the state file's directory and honours SBX_STATE" {
	SBX_STATE=$BATS_TEST_TMPDIR/deep/er/s.json run create
	assert_success
	[ "$(jq -r .status deep/er/s.json)" = running ]
	[ "$(jq -c .ref deep/er/s.json)" = "$(jq -c . <<<"$output")" ]
	SBX_STATE=$BATS_TEST_TMPDIR/deep/er/s.json run sbx-exec -- true
	assert_success
}

@test "$B: sbx-create reads its default timeout from SBX_TIMEOUT and from .sbxrc" {
	SBX_TIMEOUT=123 run create -s a.json
	assert_success
	[ "$(jq -r .timeout a.json)" = 123 ]
	printf '# project settings\ntimeout = 77\n' > .sbxrc
	run create -s b.json
	assert_success
	[ "$(jq -r .timeout b.json)" = 77 ]
	run create -s c.json --timeout 5
	assert_success
	[ "$(jq -r .timeout c.json)" = 5 ]
	[ "$(sbx-ls -j | jq -r .timeout | sort -n | paste -sd ' ')" = "5 77 123" ]
}

@test "$B: sbx-create --name sets the hostname and a state file records the workdir" {
	if refused_name web-1; then
		run create -s s.json --workdir /srv/app
		assert_success
		[ "$(jq -r .workdir s.json)" = /srv/app ]
		run sx pwd
		assert_success
		assert_output /srv/app
		return
	fi
	run create -s s.json --name web-1 --workdir /srv/app
	assert_success
	[ "$(jq -r .workdir s.json)" = /srv/app ]
	if [ "$BACKEND" = daytona ]; then
		# Daytona's name is the API's, not the hostname (Daytona's
		# cloud sets its own).
		run sx pwd
		assert_success
		assert_output /srv/app
		[ "$(sbx-ls -j | jq -r 'select(.name == "web-1") | .id')" = "$(jq -r .ref.id s.json)" ]
		return
	fi
	run sx sh -c 'hostname; pwd'
	assert_success
	assert_output $'web-1\n/srv/app'
}

@test "$B: sbx-create with an invalid workdir fails with exit 2 and creates nothing" {
	run --separate-stderr create -s s.json --workdir relative/dir
	assert_failure 2
	assert_output ''
	[[ "$stderr" == "sbx-create: "*"relative/dir"* ]]
	[ ! -e s.json ]
	[ "$(count)" -eq 0 ]
}

@test "$B: a workdir must be absolute and plain on every backend; a trailing slash is dropped" {
	local w
	for w in / /a/../b /a//b /a/./b /a/. /a/..; do
		run --separate-stderr create -s s.json --workdir "$w"
		assert_failure 2
		[ "$stderr" = "sbx-create: invalid workdir '$w' (want an absolute, plain path)" ] ||
		    fail "$w: $stderr"
		[ ! -e s.json ]
	done
	[ "$(count)" -eq 0 ]
	run --separate-stderr create -s s.json --workdir /srv/app/
	assert_success
	run sx pwd
	assert_output /srv/app
}

@test "$B: sbx-create without -s writes ./.sbx/state.json, hidden from git, and the other tools find it" {
	git init -q .
	run --separate-stderr create
	assert_success
	[ "$(jq -c .ref .sbx/state.json)" = "$(jq -c . <<<"$output")" ]
	[ "$(cat .sbx/.gitignore)" = '*' ]
	run git status --porcelain -uall -- .sbx
	assert_success
	assert_output ''
	run sbx-exec -- echo found
	assert_success
	assert_output found
	# A second one would leave the first untracked: refused, nothing made.
	run --separate-stderr create
	assert_failure 1
	[[ $stderr == "sbx-create: state file '.sbx/state.json' tracks running sandbox"* ]]
	[ "$(count)" -eq 1 ]
	run sbx-kill
	assert_success
	[ "$(count)" -eq 0 ]
}

@test "$B: sbx-create keeps a .gitignore that .sbx/ has, and -s - writes no state file" {
	mkdir .sbx
	echo '!keep.json' >.sbx/.gitignore
	run create -s .sbx/run.json
	assert_success
	[ "$(cat .sbx/.gitignore)" = '!keep.json' ]
	run --separate-stderr create -s -
	assert_success
	[ "$(jq -r .backend <<<"$output")" = "$BACKEND" ]
	[ ! -e .sbx/state.json ]
	[ ! -e ./- ]
	[ "$(count)" -eq 2 ]
	run --separate-stderr create -s - --reuse
	assert_failure 2
	[ "$stderr" = "sbx-create: --reuse needs a state file (not -s -)" ]
}
