# helper.bash - shared setup for the bats suites: the freshly built tools
# first in PATH, and a private sandbox store that is emptied afterwards.
bats_require_minimum_version 1.5.0
# bats-support and bats-assert: their files sourced here, not through their
# load.bash, which forks a dirname for each file. bats sources this helper
# again for every test, and those 15 forks made ~0.2 s of each test's time
# (7 min of a CI run, over its ~2,200 tests). Their files only define
# functions, in any order.
for _sbx_f in /usr/lib/bats/bats-support/src/*.bash \
    /usr/lib/bats/bats-assert/src/*.bash; do
	# shellcheck disable=SC1090
	source "$_sbx_f" || return 1
done
unset _sbx_f

# No fork either for the default (scripts/check always sets SBX_BIN).
_sbx_top=${BASH_SOURCE[0]%/*}/../..
SBX_BIN=${SBX_BIN:-$(cd "$_sbx_top" && pwd)/bin}
unset _sbx_top
PATH=$SBX_BIN:$PATH
export PATH

# One store per test file; sandbox root must be able to search its path.
sbx_setup_file() {
	SBX_LOCAL_DIR=$(mktemp -d /tmp/sbx-test.XXXXXX)
	chmod 711 "$SBX_LOCAL_DIR"
	export SBX_LOCAL_DIR
	# sbx-exec's command logs (sbx-logs(1)), off the system's directory.
	SBX_LOG_DIR=$(mktemp -d /tmp/sbx-log.XXXXXX)
	export SBX_LOG_DIR
	# The qemu backend's sandboxes, off the system's directory too, and
	# its guest directory, whose disks sbx-image rm and prune remove (a
	# qemu test names the tests' shared one after this; the conformance
	# suite on qemu, before).
	export SBX_QEMU_DIR=$SBX_LOCAL_DIR/.qemu
	export SBX_QEMU_GUEST=${SBX_QEMU_GUEST:-$SBX_LOCAL_DIR/.qemu-guest}
}

# Kill whatever a file's tests left running, then remove the store.
sbx_teardown_file() {
	[ -n "${SBX_LOCAL_DIR:-}" ] && [ -d "$SBX_LOCAL_DIR" ] || return 0
	sbx-ls -j 2>/dev/null | sbx-kill -q >/dev/null 2>&1 || true
	# The kills' removers end the sandboxes and remove their cgroups:
	# the store goes after them, or those cgroups stay on the host.
	trash_emptied 2>/dev/null || sbx-gc -g 0 >/dev/null 2>&1 || true
	rm -rf "$SBX_LOCAL_DIR"
	[ -z "${SBX_LOG_DIR:-}" ] || rm -rf "$SBX_LOG_DIR"
}

# Each test works in its own directory (state files go there).
sbx_setup() {
	cd "$BATS_TEST_TMPDIR" || return 1
	unset SBX_STATE
}

# sbx_setup, and for tests of one address space over several backends: a
# configuration file of the test's own (config/sbx/config in its
# directory, none yet), no backend chosen and no endpoint given by the
# environment (local stays the default; the others are found by what the
# test configures).
sbx_setup_backends() {
	sbx_setup || return 1
	unset SBX_BACKEND SBX_DOCKER_HOST E2B_API_URL E2B_SANDBOX_URL \
	    SBX_E2B_ENDPOINT
	export XDG_CONFIG_HOME=$BATS_TEST_TMPDIR/config
	mkdir -p "$XDG_CONFIG_HOME/sbx"
}

# Every path of the local store, sorted, but its trash: what kills put
# there a remover of their own removes a moment later. Once that remover
# is done (it lets go of the trash's lock): it frees the uid slots (and
# removes the cgroups) of what it removes.
store_paths() {
	if [ -d "$SBX_LOCAL_DIR/.trash" ]; then
		flock -w 20 "$SBX_LOCAL_DIR/.trash" true ||
			echo "the trash's lock is still held" >&2
	fi
	find "$SBX_LOCAL_DIR" -path "$SBX_LOCAL_DIR/.trash" -prune -o -print | sort
}

# True when the store's trash holds nothing within 5 s: a kill's remover
# has ended what the kill left to it (the sandboxes' processes, their
# cgroups, loop devices and uid slots) and removed their directories.
trash_emptied() {
	local i t=${1:-$SBX_LOCAL_DIR}/.trash
	for ((i = 0; i < 100; i++)); do
		[ -n "$(ls -A "$t" 2>/dev/null)" ] || return 0
		sleep 0.05
	done
	echo "left in the trash: $(ls -A "$t")" >&2
	return 1
}

# A stand-in for a kill's remover at work: a process holding the lock of
# the store's trash, its pid printed (and in $BATS_TEST_TMPDIR/holder, for
# teardown), once it holds it.
hold_trash() {
	local i
	mkdir -p "$SBX_LOCAL_DIR/.trash"
	(
		exec 9<"$SBX_LOCAL_DIR/.trash" >/dev/null
		flock -x 9
		exec sleep 300
	) &
	echo "$!" >"$BATS_TEST_TMPDIR/holder"
	for ((i = 0; i < 100; i++)); do
		flock -n -x "$SBX_LOCAL_DIR/.trash" true || break
		sleep 0.02
	done
	cat "$BATS_TEST_TMPDIR/holder"
}

# Kill hold_trash's process $1 with signal $2; return once the lock is
# free (it is no child of ours to wait for).
release_trash() {
	local i
	kill -s "$2" "$1"
	for ((i = 0; i < 250; i++)); do
		flock -n -x "$SBX_LOCAL_DIR/.trash" true && return 0
		sleep 0.02
	done
	echo "the trash's lock is still held" >&2
	return 1
}

# A sandbox for this test: its state file is $BATS_TEST_TMPDIR/s.json.
new_sandbox() {
	sbx-create -s "$BATS_TEST_TMPDIR/s.json" "$@" >/dev/null
}

# SUM_SH, a shell command: the tree under the current directory, for
# comparing two trees. Every file and symlink with its type, mode and size,
# sorted; then one hash of the files' contents in that order (the sizes
# say where each ends); then each symlink's target; the state's .sbx/ left
# out. The same on the host (GNU) and in a sandbox (GNU or busybox, whose
# sha256sum quotes no names and whose readlink takes one), and a few
# processes whatever the number of files: 3000 forks in a sandbox took
# minutes on a loaded VM.
SUM_SH='find . -name .sbx -prune -o \( -type f -o -type l \) -print0 |
    LC_ALL=C sort -z | xargs -0 -r stat -c "%n|%F|%a|%s" &&
    find . -name .sbx -prune -o -type f -print0 | LC_ALL=C sort -z |
    xargs -0 -r cat | sha256sum &&
    find . -name .sbx -prune -o -type l -print0 | LC_ALL=C sort -z |
    xargs -0 -r -n 1 readlink'
# SUM_SH of the host's tree $1.
tree_sum() { (cd "$1" && sh -c "$SUM_SH"); }

# sbx-ls ARGS on a terminal (script(1) gives it one); \r taken out.
on_tty() {
	script -qec "sbx-ls $*" /dev/null </dev/null | tr -d '\r'
}

# The host pid of a sandbox's init, from its directory.
init_pid() {
	jq -r .pid "$(jq -r .ref.dir "${1:-$BATS_TEST_TMPDIR/s.json}")/meta.json"
}

# True when the process exists and is not a zombie.
alive() {
	local st
	st=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
	[ "$st" != Z ] && [ "$st" != X ]
}

# True when the process is gone (or a zombie); a plain `! alive` would
# not fail a test.
dead() {
	! alive "$1"
}

# Run a command in this test's sandbox (s.json).
sx() {
	sbx-exec -s "$BATS_TEST_TMPDIR/s.json" -- "$@"
}

# jq -e [ARGS...] FILTER on stdin, and a failure on empty input too
# (Debian's jq 1.6 exits 0 for -e when there is nothing to read).
jq_true() {
	local in
	in=$(cat)
	[ -n "$in" ] || { echo "jq_true: no input for $*" >&2; return 1; }
	jq -e "$@" <<<"$in"
}

# jq -er FILTER on stdin, printing the string; fails on empty input too.
jq_str() {
	local in
	in=$(cat)
	[ -n "$in" ] || { echo "jq_str: no input for $*" >&2; return 1; }
	jq -er "$@" <<<"$in"
}

# The id in a state file (this test's s.json by default).
sid() {
	jq -r .ref.id "${1:-$BATS_TEST_TMPDIR/s.json}"
}

# A new sandbox, with no state file; prints its id. Extra arguments go to
# sbx-create.
mk() {
	sbx-create -s - "$@" | jq -r .id
}

# sbx-ls's line for sandbox $1.
ls_line() {
	sbx-ls -j | jq -c --arg id "$1" 'select(.id == $id)'
}

# Wait (bounded, 60 s) until sbx-ls gives sandbox $1 the status $2.
wait_status() {
	local i
	for ((i = 0; i < 240; i++)); do
		[ "$(ls_line "$1" | jq -r .status)" = "$2" ] && return 0
		sleep 0.25
	done
	echo "sandbox $1 never became $2: $(ls_line "$1")" >&2
	return 1
}

# Whether process $1 waits for a lock (a "->" line of /proc/locks), within
# 20 s.
lock_waiter() {
	local i
	for ((i = 0; i < 200; i++)); do
		grep -q -- "-> FLOCK  ADVISORY  [A-Z]* *$1 " /proc/locks && return 0
		kill -0 "$1" 2>/dev/null || break
		sleep 0.1
	done
	echo "process $1 took no lock, or ended:" >&2
	cat /proc/locks >&2
	return 1
}
