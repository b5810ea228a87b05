#!/usr/bin/env bats
# The qemu backend's guest (scripts/qemu-guest): Debian's kernel and an
# initramfs whose /init is sbx-init, booted under TCG in QEMU's microvm
# (this machine's KVM cannot run a stock guest). sbx-init mounts, loads the
# virtio modules and answers on the virtio port named "sbx" with msg.c's
# frames (lib/qemu/guest.h); tests/lib/guest-client.py is the host's side.
#
# The kernel package is downloaded from Debian's archive once, as the SDKs
# are from npm (lib/qemu.bash); the guest is built anew for the file from
# this build's sbx-init.
load lib/helper
load lib/registry
load lib/qemu

setup_file() {
	sbx_setup_file
	command -v qemu-system-x86_64 >/dev/null ||
		{ echo "qemu-system-x86_64 is not installed (scripts/install-deps)" >&2; return 1; }
	sbx_qemu_guest "$BATS_FILE_TMPDIR/guest" || return 1
	GUEST=$SBX_QEMU_GUEST
	export GUEST
}

teardown_file() {
	sbx_teardown_file
}

setup() {
	sbx_setup
	QPID=
}

teardown() {
	[ -z "$QPID" ] || kill "$QPID" 2>/dev/null || true
}

# boot [QEMU ARGS]: QEMU on the guest (its kernel uncompressed, booted by
# its PVH entry, as the backend does) in the background (QPID), its port's
# socket at $SOCK, its console in $CONSOLE; it ends when the guest powers
# off.
# -icount: the guest's clock counts its instructions. Without it, on a
# loaded host, the kernel's early timer calibration hung in 2 boots of 6
# to 5 of 8 ("tsc: Marking TSC unstable"; tsc=, lpj= and other CPU models
# did not help); with it, 16 of 16 came up (~9 s, not ~5.5). At a fixed
# rate, as the backend's: shift=auto served an idle guest's timers only
# at its once-a-second adjustment.
boot() {
	SOCK=$BATS_TEST_TMPDIR/port.sock
	CONSOLE=$BATS_TEST_TMPDIR/console
	qemu-system-x86_64 -M microvm,pit=on,pic=on,rtc=on -accel tcg \
	    -icount shift=2 \
	    -cpu max -m 256 -smp 1 -nodefaults -no-user-config -nographic \
	    -no-reboot -serial "file:$CONSOLE" -monitor none \
	    -kernel "$GUEST/vmlinux" -initrd "$GUEST/initrd.img" \
	    -append 'console=ttyS0 quiet panic=-1' \
	    -device virtio-serial-device \
	    -chardev "socket,id=sbx,path=$SOCK,server=on,wait=off" \
	    -device virtserialport,chardev=sbx,name=sbx "$@" </dev/null &
	QPID=$!
}

# Wait (bounded) for QEMU to end; its exit status in QRC.
qemu_ends() {
	local i
	for ((i = 0; i < 600; i++)); do
		if ! kill -0 "$QPID" 2>/dev/null; then
			QRC=0
			wait "$QPID" || QRC=$?
			QPID=
			return 0
		fi
		sleep 0.1
	done
	return 1
}

@test "qemu-guest: sbx-init is PID 1 of a VM with a kernel of its own, answers on the port named sbx, and powers it off" {
	boot
	run "$BATS_TEST_DIRNAME/../tests/lib/guest-client.py" "$SOCK" ping 77 ping poweroff
	if ((status != 0)); then
		echo "console:"; tail -20 "$CONSOLE"
	fi
	assert_success
	assert_equal "${#lines[@]}" 3
	pong=$(jq -r 'select(.type == 2) | .data' <<<"${lines[0]}")
	jq_true --arg k "$(cat "$GUEST/kernel")" '.kernel == $k and .pid == 1 and .uptime_ms > 0 and .ports == 1 and .proto == 4' <<<"$pong"
	# Not this host's kernel: the VM's own.
	[ "$(jq -r .kernel <<<"$pong")" != "$(uname -r)" ]
	jq_true '.type == 4 and .data == "unknown frame"' <<<"${lines[1]}"
	jq_true '.type == 2' <<<"${lines[2]}"
	qemu_ends
	assert_equal "$QRC" 0
	run cat "$CONSOLE"
	refute_output --partial 'cannot load module'
	refute_output --partial 'Kernel panic'
}

@test "qemu-guest: a disk of an ext4 image is the commands' root; their stdout, stderr and exit status come apart" {
	local r=$BATS_TEST_TMPDIR/root
	sbx_busybox_root "$r"
	echo "on the disk" >"$r/marker"
	mkfs.ext4 -q -F -d "$r" "$BATS_TEST_TMPDIR/disk.img" 64M >/dev/null
	boot -drive "file=$BATS_TEST_TMPDIR/disk.img,if=none,format=raw,id=disk" \
	    -device virtio-blk-device,drive=disk
	run "$BATS_TEST_DIRNAME/lib/guest-client.py" "$SOCK" \
	    'exec:["cat","/marker"]' \
	    'exec:["sh","-c","echo out; echo err >&2; exit 3"]' \
	    'exec:["/no/such"]' \
	    'exec:["sh","-c","uname -r; tr \\\\0 \\  </proc/1/cmdline"]' \
	    'exec:["sh","-c","sleep 0.2 & exit 0"]' \
	    'exec:["sh","-c","sleep 1; grep -l \") Z \" /proc/[0-9]*/stat; true"]' poweroff
	if ((status != 0)); then
		echo "console:"; tail -20 "$CONSOLE"
	fi
	assert_success
	assert_equal "${#lines[@]}" 6
	jq_true '.out == "on the disk\n" and .err == "" and .status == 0' <<<"${lines[0]}"
	jq_true '.out == "out\n" and .err == "err\n" and .status == 768' <<<"${lines[1]}"
	# Not started: why (the exec, ENOENT) beside its 127.
	jq_true '.out == "" and .err == "" and .status == 32512 and .start == [3, 2]' <<<"${lines[2]}"
	# Its own kernel, and /proc: PID 1 is sbx-init, the initramfs's.
	jq_true --arg k "$(cat "$GUEST/kernel")" '.out == "\($k)\n/init "' <<<"${lines[3]}"
	# What a command left running is reaped by PID 1 once it ends: no
	# zombie.
	jq_true '.status == 0' <<<"${lines[4]}"
	jq_true '.out == "" and .status == 0' <<<"${lines[5]}"
	qemu_ends
	assert_equal "$QRC" 0
	run cat "$CONSOLE"
	refute_output --partial 'cannot mount its disk'
}

@test "qemu-guest: bad options are exit 2; a missing sbx-init is exit 1; nothing is written" {
	run --separate-stderr "$BATS_TEST_DIRNAME/../scripts/qemu-guest" --bogus
	assert_failure 2
	assert_equal "${stderr_lines[0]}" "qemu-guest: unknown option: --bogus"
	run --separate-stderr "$BATS_TEST_DIRNAME/../scripts/qemu-guest" -d "$BATS_TEST_TMPDIR/g" -i "$BATS_TEST_TMPDIR/none"
	assert_failure 1
	assert_equal "$stderr" "qemu-guest: no sbx-init at $BATS_TEST_TMPDIR/none (make)"
	[ ! -e "$BATS_TEST_TMPDIR/g" ]
}
