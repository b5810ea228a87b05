#!/usr/bin/env bats
# Fault injection: each tool killed with SIGKILL at points drawn from a
# seeded generator, then the invariants: the state file is absent, the old
# one or a whole new one; sbx-gc (and sbx-kill of what a state file still
# names) leaves no directory, uid slot, cgroup, mount or process of the
# sandbox. A kill point is exact: strace stops the tool as it enters its
# Nth call of one syscall (a pilot run lists them). Replay a failure with
# FAULT_SEED=<the seed printed> bats tests/fault.bats.

load lib/helper
load lib/sbxd

# The syscalls a kill point may fall on: what writes state or tree.
CALLS=mkdir,rename,renameat,renameat2,openat,write,unlink,unlinkat,rmdir,clone,kill
# Kill points per tool run: the last TAIL and POINTS drawn. The sanitizer
# run (every tool several times slower under strace) takes fewer; the
# default run covers the rest.
if [ "${SBX_SAN:-}" = 1 ]; then
	POINTS=${FAULT_POINTS:-1}
	TAIL=${FAULT_TAIL:-3}
else
	POINTS=${FAULT_POINTS:-3}
	TAIL=${FAULT_TAIL:-5}
fi

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
	FULL= STORE2=
}
teardown() {
	strace_off
	sbxd_stop
	sbx-ls -j 2>/dev/null | sbx-kill -q >/dev/null 2>&1 || true
	if [ -n "${STORE2:-}" ]; then
		trash_emptied "$STORE2" 2>/dev/null || true
		rm -rf "$STORE2"
	fi
	if [ -n "${FULL:-}" ]; then
		umount "$FULL" 2>/dev/null || true
		rmdir "$FULL"
	fi
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
	local store=$1 id ids d p f busy bad=0
	shift
	ids=$(store_ids "$store" | sort -u)
	# What the killed tool had started may still be at work for a moment
	# (a forked sbx-netd, not yet exec'd or not yet seen its create gone,
	# makes its socket in the unfinished sandbox's directory): wait for it
	# to go (2 s at most; what stays is reported below), or the directory
	# is young again after it was aged and sbx-gc rightly spares it.
	for ((p = 0; p < 40; p++)); do
		busy=$(find /proc/[0-9]*/cwd -maxdepth 0 -lname "$T/w*" 2>/dev/null || true)
		for d in "$store"/*/; do
			[ -d "$d" ] && [ ! -e "$d/meta.json" ] || continue
			grep -qsF -- "${d%/}" /proc/[0-9]*/cmdline && busy=1
		done
		[ -n "$busy" ] || break
		sleep 0.05
	done
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
	# A kill's remover (the processes' end, the cgroups, the slot) is
	# done once it lets go of the trash's lock; sbx-netd goes when its
	# sandbox's init does: give it a moment.
	if [ -d "$store/.trash" ]; then
		flock -w 20 "$store/.trash" true || { echo "the trash's lock is still held"; return 1; }
	fi
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
	local store=$1 ids=$2 id p c st out
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
		for p in /sys/block/loop*/loop/backing_file; do
			grep -sF -- "$store" "$p" | sed "s,^,loop: $p ,"
		done
		for p in $(grep -lsF -- "$store" /proc/[0-9]*/cmdline); do
			echo "process: $p $(tr '\0' ' ' 2>/dev/null <"$p")"
		done
		# A zombie is dead: reaping the orphans of a killed sandbox is
		# pid 1's, which takes a second or two on some machines.
		for id in $ids; do
			for p in $(grep -lsF "/sbx/$id" /proc/[0-9]*/cgroup); do
				p=${p%/cgroup}
				st=$(awk '{ print $3 }' "$p/stat" 2>/dev/null) ||
					continue # gone since
				[ "$st" = Z ] ||
					echo "process in $id: $p $(tr '\0' ' ' 2>/dev/null <"$p/cmdline")"
			done
		done
		# One find, not a readlink per process: this runs many times.
		find /proc/[0-9]*/cwd -maxdepth 0 -lname "$T/w*" 2>/dev/null |
			sed 's,^,process in w/: ,'
	)
	[ -n "$out" ] || return 1
	echo "$out"
}

# No temp file of a state write is left in st/ (sbx-gc -d or the next
# writer of the state removes those of killed writers).
no_temps() { no_temps_in "$T/st"; }
no_temps_in() {
	local left
	left=$(find "$1" -name '*.tmp??????')
	[ -z "$left" ] || { echo "temp files left: $left"; return 1; }
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
		no_temps
		rm -f "$S" "$S".*
	done < <(draw)
}

@test "sbx-create killed anywhere: no half state; sbx-gc leaves nothing" {
	create_killed
}

@test "sbx-create --network allow killed anywhere: no sbx-netd left" {
	create_killed --network allow
}

@test "a state write killed before its rename: the next writer, or sbx-gc -d, removes its temp file" {
	local n
	pilot sbx-create -s "$S"
	sbx-kill -q -s "$S"
	rm -f "$S"*
	n=$(point_of rename "$S.tmp")
	[ -n "$n" ]
	kill_at rename "$n" sbx-create -s "$S"
	[ -n "$(find "$T/st" -name '*.tmp??????')" ]
	run --separate-stderr sbx-create -s "$S"
	assert_success
	no_temps
	sbx-kill -q -s "$S"
	rm -f "$S"
	kill_at rename "$n" sbx-create -s "$S"
	[ -n "$(find "$T/st" -name '*.tmp??????')" ]
	gc_clean "$SBX_LOCAL_DIR"
	no_temps
	[ ! -e "$S.lock" ]
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

@test "sbx-pause -m stop killed after its mark, its cgroup.kill, or before its cgroup went: resume, exec and a second stop work" {
	local id n
	sbx-create -s "$S" >/dev/null
	id=$(jq -r .ref.id "$S")
	pilot sbx-pause -m stop -s "$S"
	sbx-pause -q -r -s "$S"
	# Marked stopped, nothing stopped yet: resume finishes the stop and
	# starts it again.
	n=$(point_of openat cgroup.kill)
	[ -n "$n" ]
	kill_at openat "$n" sbx-pause -m stop -s "$S"
	run --separate-stderr sbx-pause -q -r -s "$S"
	assert_success
	run --separate-stderr sbx-exec -s "$S" -- echo alive
	assert_output alive
	# Killed just after its cgroup.kill, the sandbox's init still dying
	# (resume once took it for running): three times, as it is a race.
	for _ in 1 2 3; do
		kill_at openat "$((n + 1))" sbx-pause -m stop -s "$S"
		run --separate-stderr sbx-pause -q -r -s "$S"
		assert_success
		run --separate-stderr sbx-exec -s "$S" -- echo alive
		assert_output alive
	done
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

# --- sbx-sync ---------------------------------------------------------------

# What a tree holds, one line a path: "f PATH MODE SHA256" or "l PATH
# TARGET"; the state dir .sbx left out. The same script runs in a sandbox.
TREE='find . -path ./.sbx -prune -o \( -type f -o -type l \) -print |
	LC_ALL=C sort | while read -r f; do
		if [ -L "$f" ]; then echo "l $f $(readlink "$f")"
		else echo "f $f $(stat -c %a "$f") $(sha256sum <"$f" | cut -c1-64)"
		fi
	done'
tree_of() { (cd "$1" && sh -c "$TREE"); }

# Each path of tree $1 is as listed in $2 (before) or in $3 (after):
# never half-written, never a third content.
per_path_whole() {
	local cur=$1 before=$2 after=$3
	awk 'FILENAME == ARGV[1] { b[$2] = $0; next }
		FILENAME == ARGV[2] { a[$2] = $0; next }
		{ seen[$2] = 1
		  if ($0 != b[$2] && $0 != a[$2]) { print "neither: " $0; bad = 1 } }
		END { for (p in b) if (!(p in seen) && (p in a)) {
			print "vanished: " p; bad = 1 }
		  for (p in a) if (!(p in seen) && (p in b)) {
			print "vanished: " p; bad = 1 }
		  exit bad }' "$before" "$after" "$cur"
}

# The project both sync tests start from: files, a directory, a link.
project() {
	rm -rf "$1"
	mkdir -p "$1/sub/deeper"
	echo one >"$1/a"
	echo two >"$1/b"
	seq 1 20000 >"$1/c"
	echo four >"$1/sub/d"
	echo five >"$1/sub/deeper/e"
	ln -s a "$1/l"
}

# No staging directory of a pull is left in project $1.
no_stage() {
	local left
	left=$(find "$1" -maxdepth 2 -name 'pull-*')
	[ -z "$left" ] || { echo "staging left: $left"; return 1; }
}

@test "sbx-sync pull killed anywhere: each file before or after, the next pull delivers all, no staging left" {
	local sc n P=$T/w/p
	project "$P"
	sbx-create -s "$S" >/dev/null
	(cd "$T/w" && sbx-sync push -q -s "$S" p >/dev/null)
	tree_of "$P" >"$T/before"
	cp -a "$P" "$T/p0"
	cp "$S" "$T/old.json"
	cp "$S.baseline" "$T/old.baseline"
	sbx-exec -s "$S" -- sh -c 'echo changed >a && rm b && seq 5 30000 >c &&
		echo more >>sub/d && mkdir -p n/m && echo new >n/m/f &&
		ln -sf c l2 && rm sub/deeper/e && echo six >sub/g'
	pilot sbx-sync pull -s "$S" p
	tree_of "$P" >"$T/after"
	! cmp -s "$T/before" "$T/after"
	while read -r sc n; do
		rm -rf "$P"
		cp -a "$T/p0" "$P"
		cp "$T/old.json" "$S"
		cp "$T/old.baseline" "$S.baseline"
		kill_at "$sc" "$n" sbx-sync pull -s "$S" p
		state_whole "$S" "$T/old.json"
		tree_of "$P" >"$T/now"
		per_path_whole "$T/now" "$T/before" "$T/after"
		# The baseline advanced only past what was written: the next
		# pull makes the tree the sandbox's, and takes the staging.
		run --separate-stderr sbx-sync pull -q -s "$S" "$P"
		assert_success
		tree_of "$P" >"$T/now"
		diff "$T/after" "$T/now"
		no_stage "$P"
		no_temps
	done < <(draw)
	gc_clean "$SBX_LOCAL_DIR" "$S"
}

@test "sbx-sync push killed anywhere: the project untouched, the next push delivers all" {
	local sc n P=$T/w/p wd POINTS=${FAULT_POINTS:-2} TAIL=3
	project "$P"
	sbx-create -s "$S" >/dev/null
	(cd "$T/w" && sbx-sync push -q -s "$S" p >/dev/null)
	cp -a "$P" "$T/p0"
	change() {
		echo changed >"$P/a"
		rm "$P/b"
		seq 5 30000 >"$P/c"
		echo more >>"$P/sub/d"
		mkdir -p "$P/n/m"
		echo new >"$P/n/m/f"
		ln -s c "$P/l2"
	}
	change
	pilot sbx-sync push --delete -s "$S" p
	sbx-kill -q -s "$S"
	while read -r sc n; do
		rm -rf "$P" "$S"*
		cp -a "$T/p0" "$P"
		sbx-create -s "$S" >/dev/null
		wd=$(jq -r .workdir "$S")
		(cd "$T/w" && sbx-sync push -q -s "$S" p >/dev/null)
		change
		tree_of "$P" >"$T/before"
		cp "$S" "$T/old.json"
		kill_at "$sc" "$n" sbx-sync push --delete -s "$S" p
		state_whole "$S" "$T/old.json"
		tree_of "$P" >"$T/now"
		diff "$T/before" "$T/now"
		run --separate-stderr sbx-sync push -q --delete -s "$S" "$P"
		assert_success
		sbx-exec -s "$S" -- sh -c "cd '$wd' && $TREE" >"$T/there"
		diff "$T/before" "$T/there"
		no_stage "$P"
		gc_clean "$SBX_LOCAL_DIR" "$S"
	done < <(draw)
}

# --- sbxd -------------------------------------------------------------------

# The pid of sbxd's spawner, which forks the worker of each create.
spawner_of() {
	ps -o pid= --ppid "$1" | head -n 1 | tr -d ' '
}

# strace_on PID ARGS...: strace -f attached to PID in the background
# (STRACE_PID), returning once it traces.
strace_on() {
	local pid=$1 i
	shift
	strace -f -qq -p "$pid" "$@" 2>/dev/null &
	STRACE_PID=$!
	for ((i = 0; i < 200; i++)); do
		[ "$(awk '/^TracerPid/ { print $2 }' "/proc/$pid/status")" != 0 ] &&
			return 0
		sleep 0.01
	done
	return 1
}

strace_off() {
	[ -n "${STRACE_PID:-}" ] || return 0
	kill "$STRACE_PID" 2>/dev/null || true
	wait "$STRACE_PID" 2>/dev/null || true
	STRACE_PID=
}

@test "sbxd killed mid-create: after its restart and sbx-gc no sandbox, cgroup, mount, loop device or process is left" {
	local sc n store spawner worker ids id d i
	local POINTS=${FAULT_POINTS:-2} TAIL=3
	# Its own store (sandbox users must search its path).
	store=$(mktemp -d /tmp/sbx-test.XXXXXX)
	STORE2=$store
	chmod 711 "$store"
	export SBX_LOCAL_DIR=$store
	SBXD_DIR=$T/sbxd
	mkdir -p "$SBXD_DIR"
	# The pilot: the worker's calls while it creates (the spawner's
	# child that touches the store).
	sbxd_start
	spawner=$(spawner_of "$SBXD_PID")
	strace_on "$spawner" -o "$T/pilot.all" -e trace="$CALLS"
	id=$(sbxd_create | jq_str .sandboxID)
	strace_off
	worker=$(awk -v s="$store" -v sp="$spawner" '$1 != sp &&
		index($0, s) { print $1; exit }' "$T/pilot.all")
	[ -n "$worker" ]
	awk -v w="$worker" '$1 == w { sub(/^[0-9]+ +/, ""); print }' \
		"$T/pilot.all" >"$T/pilot"
	awk -F'(' '/^[a-z_0-9]+\(/ { n[$1]++; print $1, n[$1] }' "$T/pilot" \
		>"$T/points"
	sbxd_api DELETE "/sandboxes/$id" >/dev/null
	sbxd_stop
	while read -r sc n; do
		echo "kill point: worker's $sc #$n"
		sbxd_start
		spawner=$(spawner_of "$SBXD_PID")
		strace_on "$spawner" -o /dev/null -e trace="$sc" \
			-e inject="$sc":signal=KILL:when="$n"
		curl -s -m 30 -o /dev/null -X POST -H "X-API-Key: $SBXD_KEY" \
			-H 'Content-Type: application/json' \
			-d '{"templateID":"base","timeout":300}' \
			"$SBXD_URL/sandboxes" || true
		# sbxd, and its spawner and worker with it.
		kill -KILL "$SBXD_PID"
		wait "$SBXD_PID" 2>/dev/null || true
		strace_off
		ids=$(store_ids "$store" | sort -u)
		# Restarted, it adopts what it recorded: those go by its API.
		sbxd_start
		for id in $(sbxd_api GET /sandboxes | jq -r '.[].sandboxID'); do
			sbxd_api DELETE "/sandboxes/$id" >/dev/null
		done
		sbxd_stop
		# sbx-gc as cron runs it: no state directory names sbxd's
		# sandboxes, so none is taken for unreferenced.
		for d in "$store"/*/; do
			if [ -d "$d" ] && [ ! -e "$d/meta.json" ]; then
				touch -d '1 hour ago' "$d"
			fi
		done
		run --separate-stderr sbx-gc -g 0
		assert_success
		for ((i = 0; i < 20; i++)); do
			leftovers "$store" "$ids" >/dev/null || break
			sleep 0.05
		done
		if leftovers "$store" "$ids"; then false; fi
	done < <(draw)
}

# --- a full disk ------------------------------------------------------------

# fill DIR: the filesystem of DIR has no block left.
fill() {
	dd if=/dev/zero of="$1/fill" bs=4k 2>/dev/null || true
	[ "$(df --output=avail -k "$1" | tail -n 1 | tr -d ' ')" -eq 0 ]
}

# One line on stderr, "TOOL: ... No space left on device", and exit 1.
enospc() {
	[ "$status" -eq 1 ] || { echo "exit $status: $stderr"; return 1; }
	[ "$(printf '%s\n' "$stderr" | wc -l)" -eq 1 ] ||
		{ echo "not one line: $stderr"; return 1; }
	[[ $stderr == "$1: "*"No space left on device" ]] ||
		{ echo "message: $stderr"; return 1; }
}

@test "a full disk under the store, the state and the project: one-line errors, exit 1, nothing half-written, usable once freed" {
	local F store id ids
	# Sandbox users must be able to search the path to the store.
	F=$(mktemp -d /tmp/sbx-full.XXXXXX)
	FULL=$F
	chmod 711 "$F"
	# Room for a small disk quota (limits.disk is cut to fit: tests/disk.bats).
	mount -t tmpfs -o size=40m,mode=0711 tmpfs "$F"
	store=$F/local
	mkdir -p "$store" "$F/st" "$F/p"
	chmod 711 "$store"
	export SBX_LOCAL_DIR=$store
	S=$F/st/s.json
	echo one >"$F/p/a"

	# sbx-create: the store is full.
	fill "$F"
	run --separate-stderr sbx-create -s "$S"
	enospc sbx-create
	[ ! -e "$S" ]
	no_temps_in "$F/st"
	[ -z "$(store_ids "$store")" ]
	rm "$F/fill"
	run --separate-stderr sbx-create -s "$S"
	assert_success
	ids=$(store_ids "$store")

	# sbx-sync pull: the project is full; nothing of the pull is in it,
	# and the baseline has not moved.
	(cd "$F/p" && sbx-sync push -q -s "$S" . >/dev/null)
	sbx-exec -s "$S" -- sh -c 'head -c 1500000 /dev/zero >big && echo x >small'
	tree_of "$F/p" >"$T/before"
	cp "$S.baseline" "$T/old.baseline"
	fill "$F"
	run --separate-stderr sbx-sync pull -s "$S" "$F/p"
	enospc sbx-sync
	tree_of "$F/p" >"$T/now"
	diff "$T/before" "$T/now"
	cmp "$S.baseline" "$T/old.baseline"
	no_stage "$F/p"
	no_temps_in "$F/st"
	rm "$F/fill"
	run --separate-stderr sbx-sync pull -q -s "$S" "$F/p"
	assert_success
	[ "$(wc -c <"$F/p/big")" -eq 1500000 ]
	[ "$(cat "$F/p/small")" = x ]

	# sbx-sync push: the state directory is full, the baseline cannot
	# be written: the next push sends it all again.
	echo two >"$F/p/b"
	cp "$S.baseline" "$T/old.baseline"
	fill "$F"
	run --separate-stderr sbx-sync push -s "$S" "$F/p"
	enospc sbx-sync
	cmp "$S.baseline" "$T/old.baseline"
	no_temps_in "$F/st"
	rm "$F/fill"
	run --separate-stderr sbx-sync push -s "$S" "$F/p"
	assert_success
	[ "$(jq_str .files <<<"$output")" -eq 1 ]

	# The state file: a full disk leaves it whole, and as it was.
	cp "$S" "$T/old.json"
	fill "$F"
	run --separate-stderr sbx-pause -s "$S"
	[ "$status" -ne 0 ]
	cmp "$S" "$T/old.json"
	no_temps_in "$F/st"
	rm "$F/fill"
	run --separate-stderr sbx-pause -q -r -s "$S"
	run --separate-stderr sbx-exec -s "$S" -- echo alive
	assert_output alive
	run --separate-stderr sbx-kill -s "$S"
	assert_success
	gc_clean "$store"
}
