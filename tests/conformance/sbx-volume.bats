#!/usr/bin/env bats
# Named volumes on the backend under test (sbx-volume, sbx-create
# --volume NAME:/path): a directory that outlives the sandboxes that
# mount it, shared by those that mount it at once, owned by each one's
# root. A backend without them refuses them (2) naming itself.

load conformance

setup_file() { conf_setup_file; }
teardown_file() { conf_teardown_file; }
setup() {
	conf_setup
	# A name of this test's own: the docker engine is the whole run's.
	V=v$BATS_TEST_NUMBER-$$
}

vol() {
	sbx-volume -b "$BACKEND" "$@"
}

# Whether the backend has volumes; if not, that --volume and sbx-volume
# are refused (2) naming it, with nothing made.
volumes_or_refused() {
	has_cap volumes && return 0
	run --separate-stderr create --volume "$V:/data" -s s.json
	assert_failure 2
	assert_output ''
	[ "$stderr" = "sbx-create: backend '$BACKEND' cannot mount volumes (--volume, sbx-volume)" ]
	[ ! -e s.json ]
	run --separate-stderr vol create "$V"
	assert_failure 2
	[ "$stderr" = "sbx-volume: backend '$BACKEND' cannot mount volumes (--volume, sbx-volume)" ]
	return 1
}

@test "$B: a file written through one sandbox is read by a later one, and outlives both" {
	volumes_or_refused || return 0
	run --separate-stderr vol create "$V"
	assert_success
	jq_true --arg v "$V" --arg b "$BACKEND" \
	    '.name == $v and .backend == $b' <<<"$output"
	a=$(mk --volume "$V:/data")
	[ -n "$a" ]
	sbx-exec -I "$a" -- sh -c 'echo kept > /data/f'
	b=$(mk --volume "$V:/mnt/v")
	[ -n "$b" ]
	run sbx-exec -I "$b" -- cat /mnt/v/f
	assert_success
	assert_output kept
	sbx-kill "$a" "$b" >/dev/null
	vol ls | jq_true -s --arg v "$V" 'map(select(.name == $v)) | length == 1'
	c=$(mk --volume "$V:/data")
	run sbx-exec -I "$c" -- cat /data/f
	assert_success
	assert_output kept
	sbx-kill "$c" >/dev/null
	vol rm "$V"
}

@test "$B: two sandboxes at once see each other's writes; the volume is made at first use" {
	volumes_or_refused || return 0
	a=$(mk --volume "$V:/data")
	b=$(mk --volume "$V:/data")
	[ -n "$a" ] && [ -n "$b" ]
	vol ls | jq_true -s --arg v "$V" 'map(select(.name == $v)) | length == 1'
	sbx-exec -I "$a" -- sh -c 'echo from-a > /data/a'
	sbx-exec -I "$b" -- sh -c 'echo from-b > /data/b'
	run sbx-exec -I "$b" -- cat /data/a
	assert_output from-a
	run sbx-exec -I "$a" -- cat /data/b
	assert_output from-b
	sbx-kill "$a" "$b" >/dev/null
	vol rm "$V"
}

@test "$B: what a sandbox's root writes there is owned by root inside, in every sandbox" {
	volumes_or_refused || return 0
	a=$(mk --volume "$V:/data")
	sbx-exec -I "$a" -- sh -c 'mkdir /data/d && echo x > /data/d/f'
	run sbx-exec -I "$a" -- stat -c '%u:%g' /data/d /data/d/f
	assert_output $'0:0\n0:0'
	b=$(mk --volume "$V:/data")
	run sbx-exec -I "$b" -- stat -c '%u:%g' /data/d/f
	assert_output '0:0'
	# And root there may write to them.
	run sbx-exec -I "$b" -- sh -c 'echo y >> /data/d/f && cat /data/d/f'
	assert_success
	assert_output $'x\ny'
	sbx-kill "$a" "$b" >/dev/null
	vol rm "$V"
}

@test "$B: rm of a volume in use is refused (1) naming its user; of an unused one it works" {
	volumes_or_refused || return 0
	vol create "$V" >/dev/null
	a=$(mk --volume "$V:/data")
	[ -n "$a" ]
	run --separate-stderr vol rm "$V"
	assert_failure 1
	[[ "$stderr" == "sbx-volume: volume '$V' is in use by ${a:0:12}"* ]]
	vol ls | jq_true -s --arg v "$V" 'map(select(.name == $v)) | length == 1'
	sbx-kill "$a" >/dev/null
	run vol rm "$V"
	assert_success
	run vol ls
	assert_success
	[ -z "$(jq -r --arg v "$V" 'select(.name == $v) | .name' <<<"$output")" ]
	run --separate-stderr vol rm "$V"
	assert_failure 3
}

@test "$B: bad volume names exit 2 with nothing made" {
	volumes_or_refused || return 0
	for bad in -x .x _x 'a/b' 'a b' "$(printf 'a%.0s' {1..65})" 'é'; do
		run --separate-stderr vol create -- "$bad"
		assert_failure 2
		run --separate-stderr vol rm -- "$bad"
		assert_failure 2
		run --separate-stderr create --volume "$bad:/data" -s s.json
		assert_failure 2
		[[ "$stderr" == *"invalid volume name"* ]]
	done
	run vol create "$(printf 'a%.0s' {1..64})"
	assert_success
	vol rm "$(printf 'a%.0s' {1..64})"
	[ ! -e s.json ]
}

@test "$B: --volume with a relative path, a missing colon or a path twice exits 2" {
	volumes_or_refused || return 0
	for bad in "$V:data" "$V" "$V:" "$V:/" "$V:/a/../b" "$V:/a//b"; do
		run --separate-stderr create --volume "$bad" -s s.json
		assert_failure 2
		assert_output ''
		[[ "$stderr" == *"invalid volume"* ]]
	done
	run --separate-stderr create --volume "$V:/a" --volume "w$V:/a" -s s.json
	assert_failure 2
	[[ "$stderr" == *"two volumes on '/a'"* ]]
	[ ! -e s.json ]
	run vol ls
	[ -z "$(jq -r --arg v "$V" 'select(.name == $v) | .name' <<<"$output")" ]
}

@test "$B: a stopped sandbox keeps using its volume: rm refused, and it is mounted again on resume" {
	volumes_or_refused || return 0
	new_sandbox --volume "$V:/data"
	# A backend that cannot stop refuses the stop (2): nothing to see.
	if ! has_cap stop; then
		run --separate-stderr sbx-pause -m stop -s s.json
		assert_failure 2
		sbx-kill -s s.json >/dev/null
		vol rm "$V"
		return 0
	fi
	sx sh -c 'echo before > /data/f'
	sbx-pause -m stop -s s.json >/dev/null
	run --separate-stderr vol rm "$V"
	assert_failure 1
	sbx-pause --resume -s s.json >/dev/null
	run sx cat /data/f
	assert_success
	assert_output before
	sbx-kill -s s.json >/dev/null
	vol rm "$V"
}
