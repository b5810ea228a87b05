#!/usr/bin/env bats
# sbx-gc on the backend under test: what it reaps and why, what it leaves
# alone, the lock, bad values.

load conformance

setup_file() { conf_setup_file; }
teardown_file() { conf_teardown_file; }
setup() { conf_setup; }
# Whatever a test left; a second kill also removes what --keep kept.
teardown() {
	exec 9>&- || true
	sbx-ls -j 2>/dev/null | sbx-kill -q >/dev/null 2>&1 || true
}

# The status sbx-ls gives sandbox $1 (empty when not listed).
ls_status() {
	sbx-ls -j | jq -r --arg id "$1" 'select(.id == $id) | .status'
}

# True when sandbox $1 is no longer listed.
gone() {
	local st
	st=$(ls_status "$1")
	[ -z "$st" ] || fail "sandbox $1 is still there, $st"
}

# The JSON line sbx-gc printed for sandbox $1 (from $output).
gc_line() {
	jq -c --arg id "$1" 'select(.id == $id)' <<<"$output"
}

# A state file for sandbox $1 at $2, updated $3 seconds ago (default 0).
state_for() {
	mkdir -p "$(dirname "$2")"
	jq -n --arg be "$BACKEND" --arg id "$1" \
	    --argjson t "$(($(date +%s) - ${3:-0}))" \
	    '{schema: 1, ref: {backend: $be, id: $id}, status: "running",
	      updated_at_epoch: $t}' >"$2"
}

# Wait (bounded, 60 s) until sbx-ls gives sandbox $1 an age of $2 s.
wait_age() {
	local i
	for ((i = 0; i < 240; i++)); do
		[ "$(ls_line "$1" | jq --argjson n "$2" '.age >= $n')" = true ] &&
			return 0
		sleep 0.25
	done
	fail "sandbox $1 never got $2 s old: $(ls_line "$1")"
}

# Make sandbox $1 die behind sbx's back, the way its backend can.
break_sandbox() {
	case $BACKEND in
	local)
		kill -9 "$(jq -r .pid "$SBX_LOCAL_DIR/$1/meta.json")"
		;;
	docker)
		curl -sf --unix-socket "${DOCKER_HOST#unix://}" -X POST \
		    "http://d/containers/$1/kill"
		;;
	qemu)
		# Its QEMU dies (a crash of the VM): its keeper sees it.
		kill -9 "$(awk '{print $3}' "$SBX_QEMU_DIR/$1/keeper.pid")"
		;;
	e2b)
		# Killed through the API, as E2B ends one that died.
		curl -sf -o /dev/null -X DELETE -H @- "$E2B_API_URL/sandboxes/$1" \
		    <<<"X-API-Key: $E2B_API_KEY"
		;;
	daytona)
		# Deleted through the API, as Daytona ends one that died.
		curl -sf -o /dev/null -X DELETE -H @- "$DAYTONA_API_URL/sandbox/$1" \
		    <<<"Authorization: Bearer $DAYTONA_API_KEY"
		;;
	esac
}

@test "$B: sbx-gc kills an expired sandbox and says so on stdout" {
	local id
	id=$(mk --timeout 1)
	if ! has_cap keep; then
		# Its server removed it: nothing left to do.
		wait_unlisted "$id"
		run --separate-stderr sbx-gc
		assert_success
		assert_output ''
		[ "$stderr" = "sbx-gc: 0 killed, 0 kept (grace), 0 checked" ]
		return
	fi
	wait_status "$id" expired
	run --separate-stderr sbx-gc
	assert_success
	[ "${#lines[@]}" -eq 1 ]
	[ "$output" = "{\"id\":\"$id\",\"reason\":\"expired\",\"action\":\"killed\"}" ]
	[ "$stderr" = "sbx-gc: 1 killed, 0 kept (grace), 1 checked" ]
	gone "$id"
}

@test "$B: sbx-gc kills a dead sandbox once past the grace period" {
	local id
	id=$(mk)
	break_sandbox "$id"
	if ! has_cap keep; then
		wait_unlisted "$id"
		run --separate-stderr sbx-gc --grace 0
		assert_success
		assert_output ''
		[ "$stderr" = "sbx-gc: 0 killed, 0 kept (grace), 0 checked" ]
		return
	fi
	wait_status "$id" dead
	run --separate-stderr sbx-gc --grace 0
	assert_success
	[ "$output" = "{\"id\":\"$id\",\"reason\":\"dead\",\"action\":\"killed\"}" ]
	gone "$id"
}

@test "$B: sbx-gc kills a sandbox killed with --keep as dead" {
	local id
	id=$(mk)
	if ! has_cap keep; then
		run --separate-stderr sbx-kill -k "$id"
		assert_failure 2
		[ "$(ls_status "$id")" = running ]
		run --separate-stderr sbx-gc -g 0
		assert_success
		assert_output ''
		[ "$(ls_status "$id")" = running ]
		return
	fi
	sbx-kill -k "$id" >/dev/null
	wait_status "$id" killed
	run --separate-stderr sbx-gc -g 0
	assert_success
	[ "$(gc_line "$id" | jq -r .reason)" = dead ]
	gone "$id"
}

@test "$B: sbx-gc keeps a dead sandbox created within the grace period" {
	local id
	id=$(mk)
	break_sandbox "$id"
	if ! has_cap keep; then
		wait_unlisted "$id"
		run --separate-stderr sbx-gc
		assert_success
		assert_output ''
		[ "$stderr" = "sbx-gc: 0 killed, 0 kept (grace), 0 checked" ]
		return
	fi
	wait_status "$id" dead
	run --separate-stderr sbx-gc
	assert_success
	assert_output ""
	[ "$stderr" = "sbx-gc: 0 killed, 1 kept (grace), 1 checked" ]
	[ "$(ls_status "$id")" = dead ]
}

@test "$B: sbx-gc --older-than kills the old sandbox and leaves the young one" {
	local old young t=3
	# A VM's age counts from the create's start: its boot takes seconds.
	[ "$BACKEND" != qemu ] || t=20
	old=$(mk)
	wait_age "$old" "$t"
	young=$(mk)
	run --separate-stderr sbx-gc --older-than "${t}s"
	assert_success
	[ "${#lines[@]}" -eq 1 ]
	[ "$(gc_line "$old" | jq -r .reason)" = older-than ]
	gone "$old"
	[ "$(ls_status "$young")" = running ]
}

@test "$B: sbx-gc --older-than 1h leaves a young sandbox alone" {
	local id
	id=$(mk)
	run --separate-stderr sbx-gc -o 1h
	assert_success
	assert_output ""
	[ "$stderr" = "sbx-gc: 0 killed, 0 kept (grace), 1 checked" ]
	[ "$(ls_status "$id")" = running ]
}

@test "$B: sbx-gc --idle-for kills an idle sandbox and leaves a busy one, or is refused (2)" {
	local idle busy
	idle=$(mk) busy=$(mk)
	if has_cap idle; then
		wait_age "$busy" 2
		sbx-exec -I "$busy" -- true
		run --separate-stderr sbx-gc --idle-for 2s
		assert_success
		[ "${#lines[@]}" -eq 1 ]
		[ "$(gc_line "$idle" | jq -r .reason)" = idle ]
		gone "$idle"
	else
		run --separate-stderr sbx-gc --idle-for 2s
		assert_failure 2
		assert_output ""
		[ "$stderr" = "sbx-gc: backend '$BACKEND' cannot tell how long a sandbox was idle (--idle-for)" ]
		[ "$(ls_status "$idle")" = running ]
	fi
	[ "$(ls_status "$busy")" = running ]
}

@test "$B: sbx-gc --state-dir kills an unreferenced sandbox and keeps referenced ones" {
	local ref nested named orphan
	mkdir -p work/a/b
	ref=$(create -s "$BATS_TEST_TMPDIR/work/s.json" | jq -r .id)
	nested=$(create -s "$BATS_TEST_TMPDIR/work/a/b/deep.json" | jq -r .id)
	if has_cap name; then
		named=$(mk --name gc-named)
		state_for gc-named work/a/named.json 600
	else
		named=$(mk)
		state_for "$named" work/a/named.json 600
	fi
	orphan=$(mk)
	echo '{"name":"not a state","ref":"x"}' >work/package.json
	echo 'not json at all' >work/a/broken.json
	wait_age "$orphan" 2
	run --separate-stderr sbx-gc --state-dir work --grace 1s
	assert_success
	[ "${#lines[@]}" -eq 1 ]
	[ "$output" = "{\"id\":\"$orphan\",\"reason\":\"unreferenced\",\"action\":\"killed\"}" ]
	gone "$orphan"
	[ "$(ls_status "$ref")" = running ]
	[ "$(ls_status "$nested")" = running ]
	[ "$(ls_status "$named")" = running ]
}

@test "$B: sbx-gc does not kill a sandbox whose state was updated within --grace" {
	local busy stale
	busy=$(mk) stale=$(mk)
	wait_age "$stale" 1
	state_for "$busy" states/busy.json 10
	state_for "$stale" states/stale.json 120
	run --separate-stderr sbx-gc -d states --grace 1m --older-than 1s
	assert_success
	[ "${#lines[@]}" -eq 1 ]
	[ "$(gc_line "$stale" | jq -r .reason)" = older-than ]
	gone "$stale"
	[ "$(ls_status "$busy")" = running ]
	[ "$stderr" = "sbx-gc: 1 killed, 1 kept (grace), 2 checked" ]
	# Past its grace, the same sandbox goes.
	run --separate-stderr sbx-gc -d states --grace 5s --older-than 1s
	assert_success
	[ "$(gc_line "$busy" | jq -r .reason)" = older-than ]
	gone "$busy"
}

@test "$B: sbx-gc keeps an unreferenced sandbox created within the grace period" {
	local id
	id=$(mk)
	mkdir states
	run --separate-stderr sbx-gc -d states
	assert_success
	assert_output ""
	[ "$stderr" = "sbx-gc: 0 killed, 1 kept (grace), 1 checked" ]
	[ "$(ls_status "$id")" = running ]
}

@test "$B: sbx-gc --dry-run prints would-kill and kills nothing" {
	local id
	id=$(mk --timeout 1)
	if ! has_cap keep; then
		wait_unlisted "$id"
		run --separate-stderr sbx-gc --dry-run
		assert_success
		assert_output ''
		[ "$stderr" = "sbx-gc: 0 to kill (dry run), 0 kept (grace), 0 checked" ]
		return
	fi
	wait_status "$id" expired
	run --separate-stderr sbx-gc --dry-run
	assert_success
	[ "$output" = "{\"id\":\"$id\",\"reason\":\"expired\",\"action\":\"would-kill\"}" ]
	[ "$stderr" = "sbx-gc: 1 to kill (dry run), 0 kept (grace), 1 checked" ]
	[ "$(ls_status "$id")" = expired ]
}

@test "$B: sbx-gc --label considers only the sandboxes with all those labels" {
	local a1 a2 b
	a1=$(mk -l team=a -l tier=web) a2=$(mk -l team=a) b=$(mk -l team=b)
	run --separate-stderr sbx-gc -l team=a -l tier=web -o 0
	assert_success
	[ "${#lines[@]}" -eq 1 ]
	[ "$(gc_line "$a1" | jq -r .reason)" = older-than ]
	[ "$stderr" = "sbx-gc: 1 killed, 0 kept (grace), 1 checked" ]
	gone "$a1"
	[ "$(ls_status "$a2")" = running ]
	[ "$(ls_status "$b")" = running ]
}

@test "$B: sbx-gc does nothing and exits 0 while another sbx-gc holds the lock" {
	local id
	id=$(mk)
	exec 9>"$SBX_LOCAL_DIR/.gc.lock"
	flock -n 9
	run --separate-stderr sbx-gc -o 0
	assert_success
	assert_output ""
	[ "$stderr" = "sbx-gc: another sbx-gc is running: leaving the work to it" ]
	[ "$(ls_status "$id")" = running ]
	run --separate-stderr sbx-gc -q -o 0
	assert_success
	assert_output ""
	[ -z "$stderr" ]
	exec 9>&-
	run --separate-stderr sbx-gc -o 0
	assert_success
	[ "$(gc_line "$id" | jq -r .action)" = killed ]
	gone "$id"
}

@test "$B: sbx-gc -q prints the results but no summary" {
	local id
	id=$(mk)
	run --separate-stderr sbx-gc -q -o 0
	assert_success
	[ "$(gc_line "$id" | jq -r .action)" = killed ]
	[ -z "$stderr" ]
	gone "$id"
}

@test "$B: sbx-gc with a bad duration exits 2, names it and kills nothing" {
	local id d opt
	id=$(mk)
	for opt in --older-than --idle-for --grace; do
		for d in 5x -1 '' 1h30 1.5h; do
			# -o 0 alone would kill it.
			run --separate-stderr sbx-gc -o 0 "$opt" "$d"
			[ "$status" -eq 2 ] || fail "$opt '$d': exit $status"
			[ -z "$output" ] || fail "$opt '$d' printed $output"
			[ "$stderr" = "sbx-gc: $opt: invalid duration '$d' (want 90, 90s, 15m, 1h, 2d)" ] ||
			    fail "$opt '$d': $stderr"
		done
		run --separate-stderr sbx-gc -o 0 "$opt" 3651d
		[ "$status" -eq 2 ] || fail "$opt 3651d: exit $status"
		[ "$stderr" = "sbx-gc: $opt: 3651d is over the maximum, 3650d" ] ||
		    fail "$opt 3651d: $stderr"
	done
	[ "$(ls_status "$id")" = running ]
}

@test "$B: sbx-gc with a state directory that does not exist exits 2 and kills nothing" {
	local id
	id=$(mk)
	run --separate-stderr sbx-gc -o 0 --state-dir no-such-dir
	assert_failure 2
	assert_output ""
	[[ $stderr == "sbx-gc: cannot use state directory 'no-such-dir': "* ]]
	[ "$(ls_status "$id")" = running ]
}

@test "$B: sbx-gc takes a paused or stopped sandbox for live: --older-than applies, --idle-for does not" {
	local mode id ids=()
	for mode in suspend stop; do
		if has_cap "$mode"; then
			id=$(mk)
			sbx-pause -q -m "$mode" "$id" >/dev/null
			ids+=("$id")
		else
			run --separate-stderr sbx-pause -m "$mode" 0123456789ab
			assert_failure 2
		fi
	done
	[ "${#ids[@]}" -gt 0 ] || return 0
	wait_age "${ids[-1]}" 1
	# Not dead, whatever the grace.
	run --separate-stderr sbx-gc --grace 0
	assert_success
	assert_output ""
	if has_cap idle; then
		run --separate-stderr sbx-gc --idle-for 1s --grace 0
		assert_success
		assert_output ""
	fi
	for id in "${ids[@]}"; do
		[[ "$(ls_status "$id")" == @(paused|stopped) ]] ||
			fail "$id is $(ls_status "$id")"
	done
	run --separate-stderr sbx-gc --older-than 1s --grace 0
	assert_success
	for id in "${ids[@]}"; do
		[ "$(gc_line "$id" | jq -r .reason)" = older-than ]
		gone "$id"
	done
}
