#!/usr/bin/env bats
# sbx-pause on the daytona backend by the sandbox's class: a VM class
# (linux-vm) keeps its processes through Daytona's pause, so sbx-pause
# suspends it by default; a container can only stop (--mode suspend is
# exit 2). Against a private sbxd on loopback, whose linux-vm snapshots'
# sandboxes pause frozen (sbxd(8)).
load ../../lib/helper
load ../../lib/sbxd
load ../../lib/registry

setup_file() {
	sbx_setup_file
	sbx_registry_start || return 1
	sbxd_bash_image || return 1
	sbxd_start
	export DAYTONA_API_URL=$SBXD_URL/api DAYTONA_API_KEY=$SBXD_KEY
	local i st
	dapi POST /api/snapshots "{\"name\":\"vm\",\"imageName\":\"$BASE\",\"sandboxClass\":\"linux-vm\"}" >/dev/null
	for ((i = 0; i < 600; i++)); do
		st=$(dapi GET /api/snapshots/vm | jq -r .state)
		[ "$st" = building ] || [ "$st" = pending ] || break
		sleep 0.2
	done
	[ "$st" = active ] || { echo "snapshot vm: $st" >&2; return 1; }
}

teardown_file() {
	sbxd_stop
	sbx_registry_stop
	sbx_teardown_file
	rm -rf "${SBXD_DIR:-/nonexistent}"
}

setup() {
	sbx_setup
	unset SBX_DAYTONA_ENDPOINT
	export XDG_CONFIG_HOME=$BATS_TEST_TMPDIR/config
	S=$BATS_TEST_TMPDIR/s.json
}

teardown() {
	[ -f "$S" ] && sbx-kill -q -s "$S" >/dev/null 2>&1 || true
}

# A process in the sandbox of $S that counts into /tmp/n (detached: an
# exec's session ends with it); its pid in /tmp/pid.
counter() {
	sbx-exec -d -s "$S" -- sh -c 'echo $$ >/tmp/pid; i=0; while :; do i=$((i+1)); echo $i >/tmp/n; sleep 0.1; done' >/dev/null
	sleep 0.3
}
# The count goes on.
counts() {
	local a b
	a=$(sbx-exec -s "$S" -- cat /tmp/n)
	sleep 0.5
	b=$(sbx-exec -s "$S" -- cat /tmp/n)
	((b > a))
}
state() { dapi GET "/api/sandbox/$(jq -r .ref.id "$S")" | jq -r .state; }

@test "daytona: a linux-vm sandbox: sbx-pause suspends it (Daytona's pause); its processes go on after resume" {
	sbx-create -b daytona -i vm -s "$S" >/dev/null
	assert_equal "$(dapi GET "/api/sandbox/$(jq -r .ref.id "$S")" | jq -r .sandboxClass)" linux-vm
	counter
	counts
	run sbx-pause -s "$S"
	assert_success
	jq_true '.status == "paused"' <<<"$output"
	assert_equal "$(state)" paused
	assert_equal "$(jq -r .status "$S")" paused
	run sbx-exec -s "$S" -- true
	assert_failure 125
	run sbx-pause --resume -s "$S"
	assert_success
	assert_equal "$(state)" started
	counts
	run sbx-exec -s "$S" -- sh -c 'kill -0 $(cat /tmp/pid) && echo alive'
	assert_output alive
}

@test "daytona: a linux-vm sandbox: -m stop ends its processes and keeps its files" {
	sbx-create -b daytona -i vm -s "$S" >/dev/null
	counter
	counts
	sbx-exec -s "$S" -- sh -c 'echo kept >/tmp/kept'
	run sbx-pause -m stop -s "$S"
	assert_success
	jq_true '.status == "stopped"' <<<"$output"
	assert_equal "$(state)" stopped
	sbx-pause --resume -s "$S" >/dev/null
	run sbx-exec -s "$S" -- sh -c 'cat /tmp/kept; kill -0 $(cat /tmp/pid) 2>/dev/null && echo alive || echo gone'
	assert_output "$(printf 'kept\ngone')"
}

@test "daytona: a container sandbox stops by default; --mode suspend is exit 2 and leaves it running" {
	sbx-create -b daytona -s "$S" >/dev/null
	run --separate-stderr sbx-pause -m suspend -s "$S"
	assert_failure 2
	assert_equal "$stderr" "sbx-pause: backend 'daytona' cannot suspend a sandbox (--mode suspend)"
	assert_equal "$(state)" started
	run sbx-pause -s "$S"
	assert_success
	jq_true '.status == "stopped"' <<<"$output"
	assert_equal "$(state)" stopped
}
