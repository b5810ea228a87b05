# conformance.bash - what every file of the conformance suite loads: the
# backend under test, and how to make sandboxes on it.
#
# The suite holds what every backend must do the same way. It runs against
# the backend SBX_TEST_BACKEND names:
#   local          (the default)
#   docker         a private Docker engine (../lib/dockerd.bash), started once
#                  for the whole run by setup_suite.bash
#   docker:runsc   the same, each sandbox under gVisor (--runtime runsc)
#   e2b            a private sbxd on loopback (../lib/sbxd.bash), started once
#                  for the whole run by setup_suite.bash, reached through
#                  E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY
#   daytona        the same sbxd, through Daytona's API (DAYTONA_API_URL and
#                  DAYTONA_API_KEY)
#   qemu           a microVM per sandbox under TCG, of a busybox image (with
#                  GNU find and sha256sum, which an export of a snapshot
#                  needs) that setup_suite.bash imports into a store of the
#                  run's
# `make check` runs it for each of them but qemu, whose boots take ~10 s
# each: `make check-qemu` runs it there (BACKENDS= narrows either).
#
# A file:
#   load conformance
#   setup_file()    { conf_setup_file; }
#   teardown_file() { conf_teardown_file; }
#   setup()         { conf_setup; }
#   @test "$B: sbx-exec passes exit codes through" { ... }
#
# Test names start with "$B: " so that a failure says which backend.
# A capability a backend may lack is asked of it (has_cap NAME, from
# sbx-ls -B): where it has it, the test checks that it works; where it
# does not, that the tool refuses it cleanly (exit 2, or 125 for
# sbx-exec). Nothing is skipped.

load ../lib/helper
load ../lib/dockerd

B=${SBX_TEST_BACKEND:-local}
case $B in
local)
	BACKEND=local
	CREATE=()
	;;
docker)
	BACKEND=docker
	CREATE=(-b docker -i "$SBX_TEST_IMAGE")
	;;
docker:runsc)
	BACKEND=docker
	CREATE=(-b docker -i "$SBX_TEST_IMAGE" -R runsc)
	;;
e2b)
	BACKEND=e2b
	CREATE=(-b e2b -i base)
	;;
daytona)
	BACKEND=daytona
	CREATE=(-b daytona -i base)
	;;
qemu)
	BACKEND=qemu
	CREATE=(-b qemu -i sbx-test/busybox)
	;;
*)
	echo "conformance: unknown SBX_TEST_BACKEND '$B' (local, docker, docker:runsc, e2b, daytona or qemu)" >&2
	exit 1
	;;
esac
export BACKEND

conf_setup_file() {
	sbx_setup_file
	# The tools' default backend: sbx-ls, sbx-gc, sbx-kill -I see it.
	export SBX_BACKEND=$BACKEND
	if [ "$BACKEND" = docker ] && [ -z "${DOCKER_HOST:-}" ]; then
		echo "conformance: no private engine (setup_suite.bash)" >&2
		return 1
	fi
	if { [ "$BACKEND" = e2b ] && [ -z "${E2B_API_URL:-}" ]; } ||
	    { [ "$BACKEND" = daytona ] && [ -z "${DAYTONA_API_URL:-}" ]; }; then
		echo "conformance: no private sbxd (setup_suite.bash)" >&2
		return 1
	fi
}

conf_teardown_file() {
	sbx_teardown_file
}

conf_setup() {
	sbx_setup
}

# A sandbox for this test on the backend under test: its state file is
# $BATS_TEST_TMPDIR/s.json. Extra arguments go to sbx-create.
new_sandbox() {
	sbx-create "${CREATE[@]}" -s "$BATS_TEST_TMPDIR/s.json" "$@" >/dev/null
}

# A new sandbox on the backend under test, with no state file; prints
# its id.
mk() {
	sbx-create -s - "${CREATE[@]}" "$@" | jq -r .id
}

# sbx-create with the flags the backend under test needs.
create() {
	sbx-create "${CREATE[@]}" "$@"
}

# The flags of sbx-snapshot import on the backend under test: its backend
# and image (as CREATE has them), not docker:runsc's runtime.
import_flags() {
	local a
	for a in "${CREATE[@]}"; do
		[ "$a" = -R ] && break
		printf '%s\n' "$a"
	done
}

# True when the backend under test declares capability $1 (sbx-ls -B).
has_cap() {
	local v
	v=$(sbx-ls -B | jq -rs --arg b "$BACKEND" --arg c "$1" \
	    'map(select(.backend == $b))[0].caps[$c]')
	case $v in
	true) return 0 ;;
	false) return 1 ;;
	esac
	echo "has_cap: backend '$BACKEND' declares no capability '$1'" >&2
	exit 1
}

# Wait (bounded, 60 s; 150 s on daytona, whose idle timeout is in whole
# minutes) until sbx-ls no longer lists sandbox $1: on a backend without
# keep, the server removes a sandbox that ended on its own (its timeout,
# its death) instead of listing it expired or dead.
wait_unlisted() {
	local i n=240
	[ "$BACKEND" != daytona ] || n=600
	for ((i = 0; i < n; i++)); do
		[ -z "$(sbx-ls -j | jq -r --arg id "$1" 'select(.id == $id) | .id')" ] &&
			return 0
		sleep 0.25
	done
	echo "sandbox $1 is still listed: $(sbx-ls -j | jq -c --arg id "$1" 'select(.id == $id)')" >&2
	return 1
}

# On a backend without names (has_cap name): sbx-create --name $1 is
# refused (2), one line saying so, with nothing made. True then: the
# test goes on without the name; false on a backend that has names.
refused_name() {
	has_cap name && return 1
	run --separate-stderr create --name "$1" -l refused=name \
	    -s "$BATS_TEST_TMPDIR/named.json"
	assert_failure 2
	assert_output ''
	[ "$stderr" = "sbx-create: backend '$BACKEND' cannot name a sandbox (--name)" ]
	[ ! -e "$BATS_TEST_TMPDIR/named.json" ]
	[ -z "$(sbx-ls -j -l refused=name)" ]
}
