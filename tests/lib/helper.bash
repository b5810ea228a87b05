# helper.bash - shared setup for the bats suites: the freshly built tools
# first in PATH, and a private sandbox store that is emptied afterwards.
bats_require_minimum_version 1.5.0
load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'

SBX_BIN=${SBX_BIN:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/bin}
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
}

# Kill whatever a file's tests left running, then remove the store.
sbx_teardown_file() {
	[ -n "${SBX_LOCAL_DIR:-}" ] && [ -d "$SBX_LOCAL_DIR" ] || return 0
	sbx-ls -j 2>/dev/null | sbx-kill -q >/dev/null 2>&1 || true
	rm -rf "$SBX_LOCAL_DIR"
	[ -z "${SBX_LOG_DIR:-}" ] || rm -rf "$SBX_LOG_DIR"
}

# Each test works in its own directory (state files go there).
sbx_setup() {
	cd "$BATS_TEST_TMPDIR" || return 1
	unset SBX_STATE
}

# A sandbox for this test: its state file is $BATS_TEST_TMPDIR/s.json.
new_sandbox() {
	sbx-create -s "$BATS_TEST_TMPDIR/s.json" "$@" >/dev/null
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
