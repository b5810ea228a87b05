#!/usr/bin/env bats
# local.warm: sbx-create's pool of local sandboxes made ahead (sbx(7),
# sbx-create(1) "MADE AHEAD").

load lib/helper

setup_file() { sbx_setup_file; }
teardown_file() { sbx_teardown_file; }
setup() {
	sbx_setup
	export SBX_LOCAL_WARM=1
	unset SBX_LOCAL_WARM_TIMEOUT
}
# The fillers done (the last create's has taken its lock a moment after
# the create ended), then whatever a test left (the pool's too).
teardown() {
	sleep 0.3
	settled || true
	sbx-ls -j 2>/dev/null | sbx-kill -q >/dev/null 2>&1 || true
}

# Every filler done: each holds its pool's directory locked while at work.
settled() {
	local d
	for d in "$SBX_LOCAL_DIR"/warm/*/; do
		[ -d "$d" ] || continue
		flock -w 30 "$d" true || { echo "a filler of $d never ended" >&2; return 1; }
	done
}

# The ids of the running warm sandboxes, sorted, one a line.
warm_ids() {
	sbx-ls -j | jq -r 'select(.warm == true and .status == "running") | .id' | sort
}

# Wait (bounded, 30 s) until $1 sandboxes made ahead run, their fillers
# done (a filler starts a moment after its create, 250 ms later makes
# one).
warm_wait() {
	local i n
	for ((i = 0; i < 300; i++)); do
		n=$(warm_ids | grep -c .) || true
		if [ "$n" -ge "$1" ]; then
			settled
			return 0
		fi
		sleep 0.1
	done
	echo "$n sandboxes made ahead, not $1" >&2
	return 1
}

@test "local.warm: a create takes a sandbox made ahead and gives it its labels, env and timeout" {
	local a w b w2
	a=$(sbx-create -s a.json | jq -r .id)
	warm_wait 1
	w=$(warm_ids)
	[ -n "$w" ]
	[ "$(echo "$w" | wc -l)" -eq 1 ]
	[ "$w" != "$a" ]
	# On a terminal, sbx-ls names it so.
	on_tty | grep -E "^$w +local +\(warm\) "
	b=$(sbx-create -s b.json -l who=me -e SECRET=abc -T 90 | jq -r .id)
	[ "$b" = "$w" ]
	[ "$(sid b.json)" = "$w" ]
	run sbx-exec -s b.json -- printenv SECRET
	assert_success
	assert_output abc
	# A shell session of it too.
	[ "$(sbx-shell -s b.json 'echo "[$SECRET]"' | jq_str .output)" = "[abc]" ]
	ls_line "$b" | jq_true '.status == "running" and .labels == {"who":"me"}
	    and .timeout == 90 and (has("warm") | not)'
	# Its meta names the variable, never its value.
	jq_true '.env_names == ["SECRET"] and (has("warm") | not)' \
	    <"$SBX_LOCAL_DIR/$b/meta.json"
	# The pool is made full again, with a new one.
	warm_wait 1
	w2=$(warm_ids)
	[ "$(echo "$w2" | wc -l)" -eq 1 ]
	[ "$w2" != "$a" ]
	[ "$w2" != "$b" ]
}

@test "local.warm: a sandbox made ahead holds nothing of the create that made it" {
	local w b
	sbx-create -s a.json -l who=me -e SECRET=abc >/dev/null
	warm_wait 1
	w=$(warm_ids)
	[ -n "$w" ]
	ls_line "$w" | jq_true '.labels == {}'
	jq_true '.env_names == [] and .labels == {}' <"$SBX_LOCAL_DIR/$w/meta.json"
	b=$(sbx-create -s b.json | jq -r .id)
	[ "$b" = "$w" ]
	run sbx-exec -s b.json -- printenv SECRET
	assert_failure 1
	assert_output ""
	# Nor is the create's value anywhere in its directory.
	run grep -r -l abc "$SBX_LOCAL_DIR/$b" --include='*.json'
	assert_failure
}

@test "local.warm: a create asking for other limits, or a name, makes its own" {
	local w b c
	sbx-create -s a.json -m 256M >/dev/null
	warm_wait 1
	w=$(warm_ids)
	[ -n "$w" ]
	b=$(sbx-create -s b.json -m 300M | jq -r .id)
	[ "$b" != "$w" ]
	c=$(sbx-create -s c.json -m 256M -N named-one | jq -r .id)
	[ "$c" != "$w" ]
	ls_line "$c" | jq_true '.name == "named-one"'
	# Still there for a create like its own.
	warm_ids | grep -qx "$w"
	[ "$(sbx-create -s d.json -m 256M | jq -r .id)" = "$w" ]
}

@test "local.warm: a sandbox made ahead and killed from outside is not taken" {
	local w b
	sbx-create -s a.json >/dev/null
	warm_wait 1
	w=$(warm_ids)
	[ -n "$w" ]
	sbx-kill -q -b local "$w"
	run --separate-stderr sbx-create -s b.json
	assert_success
	b=$(sid b.json)
	[ "$b" != "$w" ]
	[ "$stderr" = "" ]
	run sbx-exec -s b.json -- true
	assert_success
}

@test "local.warm: sbx-gc removes a pool's files of sandboxes gone, and the pool left empty" {
	local w pool
	sbx-create -s a.json -m 200M >/dev/null
	warm_wait 1
	w=$(warm_ids)
	pool=$(dirname "$(ls "$SBX_LOCAL_DIR"/warm/*/"$w")")
	run sbx-gc -g 0
	assert_success
	[ -e "$pool/$w" ]
	sbx-kill -q -b local "$w"
	trash_emptied
	[ -e "$pool/$w" ]
	run sbx-gc -g 0
	assert_success
	[ ! -e "$pool" ]
}

@test "local.warm: two creates at once never take the same one" {
	export SBX_LOCAL_WARM=2
	local w x y
	sbx-create -s a.json >/dev/null
	warm_wait 2
	w=$(warm_ids)
	[ "$(echo "$w" | wc -l)" -eq 2 ]
	sbx-create -s x.json >/dev/null &
	local p=$!
	sbx-create -s y.json >/dev/null
	wait "$p"
	x=$(sid x.json)
	y=$(sid y.json)
	[ "$x" != "$y" ]
	echo "$w" | grep -qx "$x"
	echo "$w" | grep -qx "$y"
}

@test "local.warm: an unused one ends after local.warm_timeout, sbx-gc keeps it till then" {
	export SBX_LOCAL_WARM_TIMEOUT=3
	local w
	sbx-create -s a.json >/dev/null
	warm_wait 1
	w=$(warm_ids)
	[ -n "$w" ]
	ls_line "$w" | jq_true '.timeout == 3'
	mkdir states
	run --separate-stderr sbx-gc -g 0 -i 1s -d states
	assert_success
	refute_output --partial "$w"
	warm_ids | grep -qx "$w"
	wait_status "$w" expired
	run --separate-stderr sbx-gc -g 0
	assert_success
	assert_output --partial "{\"id\":\"$w\",\"reason\":\"expired\",\"action\":\"killed\"}"
	[ ! -e "$SBX_LOCAL_DIR/$w" ]
}

@test "local.warm: a bad count or timeout is refused and makes nothing" {
	local v
	for v in x 17 -1 1.5; do
		SBX_LOCAL_WARM=$v run --separate-stderr sbx-create -s a.json
		assert_failure 2
		[ "$stderr" = "sbx-create: local.warm: '$v' is not a count from 0 to 16" ]
		[ ! -e a.json ]
	done
	SBX_LOCAL_WARM_TIMEOUT=soon run --separate-stderr sbx-create -s a.json
	assert_failure 2
	[ "$(echo "$stderr" | wc -l)" -eq 1 ]
	[[ $stderr == "sbx-create: local.warm_timeout: "* ]]
	[ ! -e a.json ]
	[ -z "$(sbx-ls -j)" ]
}

@test "local.warm 0 (the default) makes nothing ahead" {
	unset SBX_LOCAL_WARM
	sbx-create -s a.json >/dev/null
	sleep 0.4
	settled
	[ -z "$(warm_ids)" ]
	[ "$(sbx-ls -j | jq -s length)" -eq 1 ]
}
