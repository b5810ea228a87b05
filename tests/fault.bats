#!/usr/bin/env bats
# Fault injection: each tool killed with SIGKILL at points drawn from a
# seeded generator, then the invariants: the state file is absent, the old
# one or a whole new one; sbx-gc (and sbx-kill of what a state file still
# names) leaves no directory, uid slot, cgroup, mount or process of the
# sandbox. A kill point is exact: strace stops the tool as it enters its
# Nth call of one syscall (a pilot run lists them). Replay a failure with
# FAULT_SEED=<the seed printed> bats tests/fault.bats.

load lib/helper

# The syscalls a kill point may fall on: what writes state or tree.
CALLS=mkdir,rename,renameat,renameat2,openat,write,unlink,unlinkat,rmdir,clone,kill
# Kill points per tool run.
POINTS=${FAULT_POINTS:-3}
TAIL=5

setup_file() {
	sbx_setup_file
	FAULT_SEED=${FAULT_SEED:-$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')}
	export FAULT_SEED
}
teardown_file() { sbx_teardown_file; }
setup() {
	sbx_setup
	RANDOM=$((FAULT_SEED + BATS_TEST_NUMBER))
	echo "seed $FAULT_SEED (test $BATS_TEST_NUMBER)"
	T=$BATS_TEST_TMPDIR
	# State files live alone in st/ (sbx-gc -d); tools run in w/, so
	# that a process left behind shows by its working directory.
	mkdir -p "$T/st" "$T/w"
	S=$T/st/s.json
}
teardown() {
	sbx-ls -j 2>/dev/null | sbx-kill -q >/dev/null 2>&1 || true
}

# pilot CMD...: run CMD once under strace; its kill points go to $T/points
# as "SYSCALL N" (the Nth call of SYSCALL), one per traced call.
pilot() {
	(cd "$T/w" && strace -qq -o "$T/pilot" -e trace="$CALLS" "$@" \
		>/dev/null 2>&1) || true
	awk -F'(' '/^[a-z_0-9]+\(/ { n[$1]++; print $1, n[$1] }' "$T/pilot" \
		>"$T/points"
	[ -s "$T/points" ]
}

# The kill points for this run: the last $TAIL of $T/points, where the
# tools save their state, and $POINTS drawn from it with $RANDOM.
draw() {
	local n i
	n=$(wc -l <"$T/points")
	tail -n "$TAIL" "$T/points"
	for ((i = 0; i < POINTS; i++)); do
		sed -n "$((RANDOM % n + 1))p" "$T/points"
	done
}

# kill_at SYSCALL N CMD...: run CMD, SIGKILLed as it enters its Nth
# SYSCALL (or finishing, if it makes fewer).
kill_at() {
	local sc=$1 n=$2
	shift 2
	echo "kill point: $sc #$n of: $*"
	(cd "$T/w" && strace -qq -o /dev/null -e trace="$sc" \
		-e inject="$sc":signal=KILL:when="$n" "$@" >/dev/null 2>&1) || true
}

# The state file $1 is absent, the same as $2 (its copy from before), or a
# whole state file that parses.
state_whole() {
	local f=$1 old=${2:-}
	[ -e "$f" ] || return 0
	if [ -n "$old" ] && cmp -s "$f" "$old"; then return 0; fi
	jq_true '.schema == 1 and (.ref.id | type == "string")' <"$f" ||
		{ echo "half-written state file $f:"; cat "$f"; return 1; }
}

# The sandbox ids the store $1 holds now (directories and uid slots).
store_ids() {
	local d
	for d in "$1"/*/; do
		[ -d "$d" ] && basename "$d"
	done
	cat "$1"/.slots/* 2>/dev/null || true
}

# gc_clean STORE [STATE...]: as cron and the user would: sbx-gc with the
# state directory (the creations the kill left unfinished aged past
# sbx-gc's ten minutes), then sbx-kill of what a state file still names;
# then nothing of the sandboxes the store held is left.
gc_clean() {
	local store=$1 id ids d p f bad=0
	shift
	ids=$(store_ids "$store" | sort -u)
	for d in "$store"/*/; do
		[ -d "$d" ] && [ ! -e "$d/meta.json" ] && touch -d '1 hour ago' "$d"
	done
	run --separate-stderr env SBX_LOCAL_DIR="$store" sbx-gc -g 0 -d "$T/st"
	[ "$status" -eq 0 ] || { echo "sbx-gc: $status $stderr"; return 1; }
	for f in "$@"; do
		[ -e "$f" ] || continue
		id=$(jq -r .ref.id "$f")
		if [ -d "$store/$id" ]; then
			run --separate-stderr env SBX_LOCAL_DIR="$store" sbx-kill -q -s "$f"
			[ "$status" -eq 0 ] || { echo "sbx-kill: $status $stderr"; return 1; }
		fi
	done
	# sbx-netd goes when its sandbox's init does: give it a moment.
	for ((p = 0; p < 20; p++)); do
		leftovers "$store" "$ids" >/dev/null || break
		sleep 0.05
	done
	leftovers "$store" "$ids" >/dev/null || return 0
	echo "left behind (ids: $ids):"
	leftovers "$store" "$ids"
	return 1
}

# Print what is left of the sandboxes $2 of store $1; false when nothing.
leftovers() {
	local store=$1 ids=$2 id p c out
	out=$(
		for p in "$store"/*/ "$store"/.slots/*; do
			[ -e "$p" ] && echo "store: $p $(cat "$p" 2>/dev/null)"
		done
		for id in $ids; do
			for c in /sys/fs/cgroup/sbx/"$id" /sys/fs/cgroup/*/sbx/"$id"; do
				[ -e "$c" ] && echo "cgroup: $c"
			done
		done
		grep -F -- "$store" /proc/self/mountinfo | sed 's/^/mount: /'
		for p in $(grep -lsF -- "$store" /proc/[0-9]*/cmdline); do
			echo "process: $p $(tr '\0' ' ' 2>/dev/null <"$p")"
		done
		for id in $ids; do
			grep -lsF "/sbx/$id" /proc/[0-9]*/cgroup | sed "s/^/process in $id: /"
		done
		for p in /proc/[0-9]*/cwd; do
			case $(readlink "$p" 2>/dev/null) in
			"$T/w"*) echo "process in w/: $p" ;;
			esac
		done
	)
	[ -n "$out" ] || return 1
	echo "$out"
}

# Each kill point of a create: with network allow, sbx-netd too.
create_killed() {
	local sc n
	pilot sbx-create -s "$T/pilot.json" "$@"
	gc_clean "$SBX_LOCAL_DIR" "$T/pilot.json"
	rm -f "$T/pilot.json"*
	while read -r sc n; do
		kill_at "$sc" "$n" sbx-create -s "$S" "$@"
		state_whole "$S"
		gc_clean "$SBX_LOCAL_DIR" "$S"
		rm -f "$S" "$S".*
	done < <(draw)
}

@test "sbx-create killed anywhere: no half state; sbx-gc leaves nothing" {
	create_killed
}

@test "sbx-create --network allow killed anywhere: no sbx-netd left" {
	create_killed --network allow
}

@test "sbx-kill killed anywhere: no half state; sbx-gc leaves nothing" {
	local sc n
	sbx-create -s "$S" >/dev/null
	pilot sbx-kill -s "$S"
	while read -r sc n; do
		rm -f "$S"
		sbx-create -s "$S" >/dev/null
		cp "$S" "$T/old.json"
		kill_at "$sc" "$n" sbx-kill -s "$S"
		state_whole "$S" "$T/old.json"
		gc_clean "$SBX_LOCAL_DIR" "$S"
	done < <(draw)
}

# pause_killed MODE: sbx-pause -m MODE and its resume, killed anywhere.
pause_killed() {
	local sc n op POINTS=${FAULT_POINTS:-1} TAIL=2
	for op in pause resume; do
		rm -f "$S"
		sbx-create -s "$S" >/dev/null
		sbx-pause -q -m "$1" -s "$S"
		if [ $op = pause ]; then sbx-pause -q -r -s "$S"; fi
		if [ $op = pause ]; then set -- "$1" -m "$1"; else set -- "$1" -r; fi
		pilot sbx-pause "${@:2}" -s "$S"
		gc_clean "$SBX_LOCAL_DIR" "$S"
		while read -r sc n; do
			rm -f "$S"
			sbx-create -s "$S" >/dev/null
			if [ $op = resume ]; then sbx-pause -q -m "$1" -s "$S"; fi
			cp "$S" "$T/old.json"
			kill_at "$sc" "$n" sbx-pause "${@:2}" -s "$S"
			state_whole "$S" "$T/old.json"
			# Whatever the kill left, resume and exec still work.
			run --separate-stderr sbx-pause -q -r -s "$S"
			run --separate-stderr sbx-exec -s "$S" -- echo alive
			assert_output alive
			gc_clean "$SBX_LOCAL_DIR" "$S"
		done < <(draw)
		set -- "$1"
	done
}

@test "sbx-pause -m suspend and resume killed anywhere: the sandbox works on" {
	pause_killed suspend
}

@test "sbx-pause -m stop and resume killed anywhere: the sandbox works on" {
	pause_killed stop
}

# point_of SYSCALL TEXT: the number N of the pilot's first SYSCALL call
# whose line holds TEXT (as kill_at counts: that syscall's calls only).
point_of() {
	awk -F'(' -v sc="$1" -v t="$2" '$1 == sc { n++; if (index($0, t)) {
		print n; exit } }' "$T/pilot"
}

@test "sbx-pause -m stop killed after its mark or before its cgroup went: resume, exec and a second stop work" {
	local id n
	sbx-create -s "$S" >/dev/null
	id=$(jq -r .ref.id "$S")
	pilot sbx-pause -m stop -s "$S"
	sbx-pause -q -r -s "$S"
	# Marked stopped, nothing stopped yet: resume finds it running.
	n=$(point_of openat cgroup.kill)
	[ -n "$n" ]
	kill_at openat "$n" sbx-pause -m stop -s "$S"
	run --separate-stderr sbx-pause -q -r -s "$S"
	assert_success
	run --separate-stderr sbx-exec -s "$S" -- echo alive
	assert_output alive
	# The same half stop, then a whole one: it finishes the stop.
	kill_at openat "$n" sbx-pause -m stop -s "$S"
	run --separate-stderr sbx-pause -q -m stop -s "$S"
	assert_success
	[ "$(sbx-ls -j | jq -r --arg id "$id" 'select(.id == $id) | .status')" = stopped ]
	run --separate-stderr sbx-pause -q -r -s "$S"
	assert_success
	run --separate-stderr sbx-exec -s "$S" -- echo alive
	assert_output alive
	# Everything stopped but its cgroup: resume makes it again.
	n=$(point_of rmdir "/sbx/$id")
	[ -n "$n" ]
	kill_at rmdir "$n" sbx-pause -m stop -s "$S"
	run --separate-stderr sbx-pause -q -r -s "$S"
	assert_success
	run --separate-stderr sbx-exec -s "$S" -- echo alive
	assert_output alive
}

@test "a resume killed after it started the new agent, before it recorded it: the next resume works" {
	local n id
	sbx-create -s "$S" >/dev/null
	id=$(jq -r .ref.id "$S")
	sbx-pause -q -m stop -s "$S"
	pilot sbx-pause -r -s "$S"
	sbx-pause -q -m stop -s "$S"
	# Its first rename: meta.json, the new agent's pid, already running.
	n=$(point_of rename meta.json)
	[ -n "$n" ]
	kill_at rename "$n" sbx-pause -r -s "$S"
	run --separate-stderr sbx-pause -q -r -s "$S"
	assert_success
	run --separate-stderr sbx-exec -s "$S" -- echo alive
	assert_output alive
	run --separate-stderr sbx-kill -s "$S"
	assert_success
	[ -n "$id" ]
	# No process of it is left (a zombie is dead: reaping the orphans
	# of the killed resume is pid 1's).
	local left
	left=$(grep -lsF "/sbx/$id" /proc/[0-9]*/cgroup |
		sed 's,/cgroup$,/stat,' | xargs -r cat 2>/dev/null |
		awk '$3 != "Z"')
	[ -z "$left" ] || { echo "left: $left"; false; }
}
