#!/usr/bin/env bats
# The qemu backend's pause, resume and stats (lib/qemu/vm.c, keeper.c,
# qmp.c): a suspend is QMP's stop (memory and processes kept, QEMU idle),
# a stop powers the VM off and keeps its disk, a resume continues or boots
# again; what a VM uses, from its QEMU's and its keeper's /proc. Under TCG
# a boot takes ~4 s: two VMs serve most tests. What every backend does is
# in conformance/sbx-pause.bats (make check-qemu).
load lib/helper
load lib/registry
load lib/qemu

setup_file() {
	sbx_qemu_setup_file || return 1
	sbx_registry_start || return 1
	local r=$BATS_FILE_TMPDIR/root
	sbx_busybox_root "$r" || return 1
	sbx_registry_push_image t/bb v1 '{"Env":["PATH=/usr/bin:/bin"]}' "$r" >/dev/null || return 1
	sbx-image pull -q "$SBX_TEST_REGISTRY/t/bb:v1" >/dev/null || return 1
	# One VM to suspend, one to stop.
	sbx-create -b qemu --image "$SBX_TEST_REGISTRY/t/bb:v1" --memory 200M \
	    --name sus -s "$BATS_FILE_TMPDIR/sus.json" >/dev/null &&
		sbx-create -b qemu --image "$SBX_TEST_REGISTRY/t/bb:v1" \
		    --memory 160M --name stp -s "$BATS_FILE_TMPDIR/stp.json" >/dev/null
}

teardown_file() {
	sbx-ls -b qemu -j 2>/dev/null | sbx-kill -q >/dev/null 2>&1 || true
	sbx_registry_stop
	sbx_teardown_file
}

setup() {
	sbx_setup
	A=$BATS_FILE_TMPDIR/sus.json
	B=$BATS_FILE_TMPDIR/stp.json
}

teardown() {
	if [ -n "${BG:-}" ]; then
		kill -KILL "$BG" 2>/dev/null || true
		wait "$BG" 2>/dev/null || true
	fi
}

# The sandbox directory of state file $1.
vmdir() { jq -r .ref.dir "$1"; }
# The keeper's and QEMU's pids of state file $1: "KPID QPID".
pids() {
	local kp qp
	read -r kp _ qp _ <"$(vmdir "$1")/keeper.pid"
	echo "$kp $qp"
}
qpid() { pids "$1" | cut -d' ' -f2; }
# utime + stime of process $1, in clock ticks.
cpu_ticks() {
	local s
	s=$(cat "/proc/$1/stat") || return 1
	s=${s##*) }
	awk '{print $12 + $13}' <<<"$s"
}
# sbx-ls's line of the sandbox of state file $1.
ls_of() { ls_line "$(sid "$1")"; }
# What the counter of the suspend VM has written last.
counter() { sbx-exec -s "$A" -- cat /tmp/c; }

@test "qemu: sbx-pause suspends the VM: paused, its QEMU uses no CPU; a second pause changes nothing; resume goes on with its processes" {
	# A loop left running, its pid in /tmp/pid (/proc/self is the
	# subshell's for the shell's own read).
	sbx-exec -s "$A" -- sh -c '{ read -r p _ </proc/self/stat; echo $p >/tmp/pid; i=0; while :; do i=$((i+1)); echo $i >/tmp/c; sleep 0.1; done; } >/dev/null 2>&1 &'
	sleep 0.5
	run --separate-stderr sbx-exec -s "$A" -- sh -c 'p=$(cat /tmp/pid); test -d /proc/$p && echo $p'
	assert_success
	before=$output
	[ -n "$before" ]
	qp=$(qpid "$A")
	run --separate-stderr sbx-pause -s "$A"
	assert_success
	assert_equal "$stderr" ""
	jq_true '.status == "paused" and .backend == "qemu"' <<<"$output"
	run ls_of "$A"
	jq_true '.status == "paused"' <<<"$output"
	jq_true '.status == "paused" and .segments[0][1] != null' <"$A"
	# Stopped vCPUs: QEMU's CPU time stands still.
	a=$(cpu_ticks "$qp")
	sleep 1
	b=$(cpu_ticks "$qp")
	assert_equal "$b" "$a"
	# Pausing again: nothing to do, the same VM.
	run --separate-stderr sbx-pause -s "$A"
	assert_success
	jq_true '.status == "paused"' <<<"$output"
	assert_equal "$(qpid "$A")" "$qp"
	alive "$qp"
	run sbx-pause -r -s "$A"
	assert_success
	jq_true '.status == "running"' <<<"$output"
	run ls_of "$A"
	jq_true '.status == "running"' <<<"$output"
	# The loop that ran before the pause: the same process, counting on.
	run --separate-stderr sbx-exec -s "$A" -- sh -c 'p=$(cat /tmp/pid); test -d /proc/$p && echo $p'
	assert_success
	assert_equal "$output" "$before"
	# Its pace is TCG's on a loaded host: it grows, within 30 s.
	c1=$(counter)
	for ((i = 0; i < 60; i++)); do
		c2=$(counter)
		((c2 > c1)) && break
		sleep 0.5
	done
	((c2 > c1))
	# Resuming a running one: nothing to do.
	run sbx-pause -r -s "$A"
	assert_success
	assert_equal "$(qpid "$A")" "$qp"
}

@test "qemu: sbx-exec on a suspended VM fails at once with 125, as on local; --resume resumes it" {
	sbx-pause -s "$A" >/dev/null
	SECONDS=0
	run --separate-stderr timeout 20 sbx-exec -s "$A" -- echo hi
	assert_failure 125
	assert_output ""
	assert_equal "$stderr" "sbx-exec: sandbox '$(sid "$A")' is paused (sbx-exec --resume, or sbx-pause --resume)"
	((SECONDS < 5))
	run --separate-stderr sbx-exec -R -s "$A" -- echo hi
	assert_success
	assert_output hi
	jq_true '.status == "running"' <"$A"
}

@test "qemu: the time suspended does not count toward an sbx-exec's -T, as on local" {
	# 2 s of the guest's time (some more under TCG on a loaded host)
	# within -T 8, with 9 s suspended between: killed at 8 s if they
	# counted.
	sbx-exec -T 8 -s "$A" -- sh -c 'sleep 2; echo done' >"$BATS_TEST_TMPDIR/o" 2>&1 &
	BG=$!
	sleep 1
	sbx-pause -s "$A" >/dev/null
	sleep 9
	sbx-pause -r -s "$A" >/dev/null
	rc=0
	wait "$BG" || rc=$?
	BG=
	assert_equal "$rc" 0
	assert_equal "$(cat "$BATS_TEST_TMPDIR/o")" done
	# Not suspended, it still ends at its deadline.
	run --separate-stderr sbx-exec -T 1 -s "$A" -- sleep 5
	assert_failure 124
}

@test "qemu: sbx-stats and sbx-ls: QEMU's and the keeper's memory and CPU, the VM's size, its disk's blocks; null where it cannot tell" {
	run --separate-stderr sbx-stats -j -i 0.2 -s "$A"
	assert_success
	assert_equal "${#lines[@]}" 1
	jq_true --arg id "$(sid "$A")" '.backend == "qemu" and .id == $id and
	    .status == "running" and .memory_bytes > 52428800 and
	    .memory_limit == 209715200 and .cpus == 1 and
	    (.cpu_s | type == "number") and .cpu_s > 0 and
	    (.cpu_pct | type == "number") and
	    (.disk_bytes | type == "number") and .disk_bytes > 0 and
	    .pids == null and .net_rx_bytes == null and .disk_limit == null' <<<"$output"
	# The disk's blocks: more once the guest wrote 8 MB and synced.
	d1=$(jq .disk_bytes <<<"$output")
	sbx-exec -s "$A" -- sh -c 'head -c 8000000 /dev/urandom >/root/blob; sync'
	run --separate-stderr sbx-stats -j -i 0.2 -s "$A"
	jq_true --argjson d "$d1" '.disk_bytes >= $d + 7000000' <<<"$output"
	run ls_of "$A"
	jq_true '(.memory_bytes | type == "number") and .memory_bytes > 52428800 and
	    (.cpu_s | type == "number") and .cpu_s > 0 and .processes == null' <<<"$output"
	# Suspended: the same reading, paused.
	sbx-pause -s "$A" >/dev/null
	run --separate-stderr sbx-stats -j -i 0.2 -s "$A"
	assert_success
	jq_true '.status == "paused" and .memory_bytes > 52428800' <<<"$output"
	sbx-pause -r -s "$A" >/dev/null
}

@test "qemu: sbx-ls tells when a VM was last active (an exec's start or end) and how long it has been idle; sbx-gc --idle-for uses it" {
	run ls_of "$A"
	jq_true '(.idle | type == "number") and (.last_activity_epoch | type == "number")' <<<"$output"
	was=$(jq .last_activity_epoch <<<"$output")
	sleep 1.1
	sbx-exec -s "$A" -- true
	run ls_of "$A"
	jq_true --argjson was "$was" '.last_activity_epoch > $was and .idle <= 1' <<<"$output"
	# Not idle for an hour: kept.
	run --separate-stderr sbx-gc -b qemu --idle-for 1h --grace 0
	assert_success
	assert_output ''
	[ "$(jq -r .status <<<"$(ls_of "$A")")" = running ]
}

@test "qemu: sbx-pause -m stop ends the VM, keeps its disk; exec says stopped; resume boots it again: files kept, processes gone" {
	sbx-exec -s "$B" -- sh -c 'echo kept >/root/f; sleep 1000 >/dev/null 2>&1 &'
	# A command still running: the stop ends it too.
	sbx-exec -s "$B" -- sleep 999 >/dev/null 2>&1 &
	BG=$!
	sleep 1
	read -r kp qp <<<"$(pids "$B")"
	dir=$(vmdir "$B")
	SECONDS=0
	run --separate-stderr sbx-pause -m stop -s "$B"
	assert_success
	# Powered off, not killed after the deadline.
	assert_equal "$stderr" ""
	((SECONDS < 30))
	jq_true '.status == "stopped"' <<<"$output"
	dead "$kp"
	dead "$qp"
	rc=0
	wait "$BG" || rc=$?
	BG=
	assert_equal "$rc" 125
	[ -f "$dir/disk.qcow2" ]
	[ ! -e "$dir/sock" ]
	run ls_of "$B"
	jq_true '.status == "stopped" and .memory_bytes == null and .cpu_s == null' <<<"$output"
	jq_true '.status == "stopped"' <"$B"
	run --separate-stderr sbx-exec -s "$B" -- true
	assert_failure 125
	assert_equal "$stderr" "sbx-exec: sandbox '$(sid "$B")' is stopped (sbx-exec --resume, or sbx-pause --resume)"
	run --separate-stderr sbx-stats -j -s "$B"
	assert_failure 3
	assert_output ""
	# Stopped is not dead: sbx-gc leaves it.
	run --separate-stderr sbx-gc -b qemu --grace 0
	assert_success
	assert_output ""
	[ -f "$dir/disk.qcow2" ]
	# Stopping again: nothing to do.
	run --separate-stderr sbx-pause -m stop -s "$B"
	assert_success
	jq_true '.status == "stopped"' <<<"$output"
	run --separate-stderr sbx-pause -r -s "$B"
	assert_success
	jq_true '.status == "running"' <<<"$output"
	read -r kp2 qp2 <<<"$(pids "$B")"
	[ "$qp2" != "$qp" ]
	alive "$kp2"
	alive "$qp2"
	run ls_of "$B"
	jq_true '.status == "running"' <<<"$output"
	run --separate-stderr sbx-exec -s "$B" -- sh -c 'cat /root/f; ps -o args | grep -c "^sleep 1000"; true'
	assert_success
	assert_equal "${lines[0]}" kept
	assert_equal "${lines[1]}" 0
	# Its size is what it was made with.
	run --separate-stderr sbx-stats -j -s "$B"
	jq_true '.memory_limit == 167772160 and .status == "running"' <<<"$output"
}

@test "qemu: a resume killed while its VM boots leaves the sandbox stopped, its disk kept; the next resume boots it" {
	sbx-pause -m stop -s "$B" >/dev/null
	dir=$(vmdir "$B")
	old=$(cat "$dir/keeper.pid")
	sbx-pause -r -s "$B" >/dev/null 2>&1 &
	pid=$!
	for ((i = 0; i < 300; i++)); do
		[ "$(cat "$dir/keeper.pid")" != "$old" ] && break
		sleep 0.02
	done
	[ "$(cat "$dir/keeper.pid")" != "$old" ]
	read -r kp qp <<<"$(pids "$B")"
	kill -9 "$pid"
	wait "$pid" || true
	# Its keeper sees its starter gone and ends the VM, not the sandbox.
	for ((i = 0; i < 100; i++)); do
		dead "$kp" && break
		sleep 0.05
	done
	dead "$kp"
	dead "$qp"
	[ -f "$dir/disk.qcow2" ]
	run ls_of "$B"
	jq_true '.status == "stopped"' <<<"$output"
	run --separate-stderr sbx-pause -r -s "$B"
	assert_success
	run --separate-stderr sbx-exec -s "$B" -- cat /root/f
	assert_success
	assert_output kept
}

@test "qemu: the idle timeout does not run while the VM is suspended" {
	sbx-create -b qemu --image "$SBX_TEST_REGISTRY/t/bb:v1" --timeout 3 \
	    -s "$BATS_TEST_TMPDIR/t.json" >/dev/null
	T=$BATS_TEST_TMPDIR/t.json
	sbx-pause -s "$T" >/dev/null
	sleep 5
	run ls_of "$T"
	jq_true '.status == "paused"' <<<"$output"
	sbx-pause -r -s "$T" >/dev/null
	run sbx-exec -s "$T" -- echo alive
	assert_success
	assert_output alive
	# It still ends when idle for its timeout after the resume.
	wait_status "$(sid "$T")" expired
	sbx-kill -s "$T" >/dev/null
}

@test "qemu: sbx-kill of a suspended and of a stopped sandbox leaves nothing" {
	sbx-pause -s "$A" >/dev/null
	sbx-pause -m stop -s "$B" >/dev/null
	read -r kp qp <<<"$(pids "$A")"
	run --separate-stderr sbx-kill -s "$A"
	assert_success
	jq_true '.status == "killed"' <<<"$output"
	run --separate-stderr sbx-kill -s "$B"
	assert_success
	jq_true '.status == "killed"' <<<"$output"
	dead "$kp"
	dead "$qp"
	assert_equal "$(find "$SBX_QEMU_DIR" -mindepth 1 ! -path "$SBX_QEMU_DIR/.names*")" ""
	assert_equal "$(sbx-ls -b qemu -j)" ""
}
