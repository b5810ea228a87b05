#!/usr/bin/env bats
# The qemu backend (lib/qemu): a sandbox is a microVM under QEMU with a
# kernel of its own (Debian's, scripts/qemu-guest) and sbx-init as its
# PID 1, its root an ext4 disk made of an image, spoken to through its
# keeper over a virtio port. Under TCG here (this machine's KVM cannot run
# a stock guest): a boot takes ~10 s, so one VM serves most tests.
load lib/helper
load lib/registry
load lib/qemu

setup_file() {
	sbx_qemu_setup_file || return 1
	sbx_registry_start || return 1
	local r=$BATS_FILE_TMPDIR/root
	sbx_busybox_root "$r" || return 1
	echo "from the image" >"$r/etc/marker"
	sbx_registry_push_image t/bb v1 '{"Env":["PATH=/usr/bin:/bin","FROM_IMAGE=yes"],"WorkingDir":"/srv/app"}' "$r" >/dev/null || return 1
	sbx-image pull -q "$SBX_TEST_REGISTRY/t/bb:v1" >/dev/null || return 1
	# The VM most tests share.
	sbx-create -b qemu --image "$SBX_TEST_REGISTRY/t/bb:v1" --memory 200M \
	    --name shared -s "$BATS_FILE_TMPDIR/vm.json" >/dev/null
}

teardown_file() {
	sbx-ls -b qemu -j 2>/dev/null | sbx-kill -q >/dev/null 2>&1 || true
	sbx_registry_stop
	sbx_teardown_file
}

setup() {
	sbx_setup
	S=$BATS_FILE_TMPDIR/vm.json
}

# The listing of the shared VM (shared) or of the others (other).
vm() {
	if [ "$1" = shared ]; then
		sbx-ls -b qemu -j | jq -c 'select(.name == "shared")'
	else
		sbx-ls -b qemu -j | jq -c 'select(.name != "shared")'
	fi
}

# Nothing of a sandbox is left in the backend's store.
store_empty_but_shared() {
	local n
	n=$(find "$SBX_QEMU_DIR" -mindepth 1 -maxdepth 1 ! -name .names | wc -l)
	assert_equal "$n" 1
}

@test "qemu: a VM with a kernel of its own, its name its hostname; its root is the image's (cached as one disk by digest), its processes are its own" {
	run --separate-stderr sbx-exec -s "$S" -- sh -c 'uname -r; cat /etc/marker; tr "\0" " " </proc/1/cmdline; echo; ls /proc | grep -c "^[0-9]"'
	assert_success
	assert_equal "${lines[0]}" "$(cat "$SBX_QEMU_GUEST/kernel")"
	[ "${lines[0]}" != "$(uname -r)" ]
	assert_equal "${lines[1]}" "from the image"
	assert_equal "${lines[2]}" "/init "
	# its hostname its name (sbx-create --name)
	run --separate-stderr sbx-exec -s "$S" -- hostname
	assert_output shared
	# A handful of processes (the kernel's threads and ours), none of
	# the host's: not this test's shell.
	run sbx-exec -s "$S" -- sh -c "test -e /proc/$$ && echo host-visible; test -e $BATS_TEST_TMPDIR && echo host-files; true"
	assert_success
	assert_output ""
	# The image's disk, by its manifest's digest; the sandbox's writes in
	# a disk of its own over it.
	dig=$(sbx-image ls | jq -r 'select(.image | endswith("t/bb:v1")) | .digest')
	[ -f "$SBX_QEMU_GUEST/disks/${dig#sha256:}.ext4" ]
	dir=$(vm shared | jq -r .dir)
	[ -f "$dir/disk.qcow2" ]
	run --separate-stderr qemu-img info -U --output=json "$dir/disk.qcow2"
	jq_true --arg b "$SBX_QEMU_GUEST/disks/${dig#sha256:}.ext4" '."backing-filename" == $b' <<<"$output"
}

@test "qemu: exec: stdout and stderr apart, exit codes, stdin, -w, -e, the image's env and workdir" {
	run --separate-stderr sbx-exec -s "$S" -- sh -c 'echo out; echo err >&2; exit 3'
	assert_failure 3
	assert_equal "$output" "out"
	assert_equal "$stderr" "err"
	run --separate-stderr sbx-exec -s "$S" -- sh -c 'pwd; echo "$FROM_IMAGE $LANG"'
	assert_success
	assert_equal "${lines[0]}" "/srv/app"
	assert_equal "${lines[1]}" "yes C.UTF-8"
	run --separate-stderr sbx-exec -s "$S" -w /tmp -e A=b -- sh -c 'pwd; echo $A'
	assert_success
	assert_equal "$output" "$(printf '/tmp\nb')"
	# stdin, to its end, bytes intact: 3 MB one way and back.
	head -c 3000000 /dev/urandom >"$BATS_TEST_TMPDIR/in"
	sbx-exec -i -s "$S" -- cat <"$BATS_TEST_TMPDIR/in" >"$BATS_TEST_TMPDIR/out"
	cmp "$BATS_TEST_TMPDIR/in" "$BATS_TEST_TMPDIR/out"
	run sbx-exec -s "$S" -- sh -c 'kill -TERM $$'
	assert_failure 143
}

@test "qemu: sbx-exec -u runs the command as that user (the disk's /etc/passwd and group); one it does not know is 125 and runs nothing" {
	run --separate-stderr sbx-exec -s "$S" -u 1000:1001 -- sh -c 'id -u; id -G; echo "$HOME"; touch /tmp/by-u; stat -c %u:%g /tmp/by-u; rm /tmp/by-u'
	assert_success
	assert_output $'1000\n1001\n/\n1000:1001'
	run --separate-stderr sbx-exec -s "$S" -u root -e HOME=/srv -- sh -c 'id -u; echo "$HOME"'
	assert_success
	assert_output $'0\n/srv'
	run --separate-stderr sbx-exec -s "$S" -u no-such-user -- touch /tmp/ran-u
	assert_failure 125
	assert_output ''
	[ "${#stderr_lines[@]}" = 1 ]
	[[ $stderr == "sbx-exec: "*"no-such-user"* ]]
	run --separate-stderr sbx-exec -s "$S" -u root:no-such-group -- touch /tmp/ran-u
	assert_failure 125
	assert_equal "$stderr" "sbx-exec: no group 'no-such-group' in the sandbox's /etc/group"
	run sbx-exec -s "$S" -- test -e /tmp/ran-u
	assert_failure 1
}

@test "qemu: the image's User runs its commands, -u root overrides it; create's -e over the image's Env, exec's -e over both, and -e's values written nowhere; a relative qemu.guest and qemu.binary" {
	local r=$BATS_TEST_TMPDIR/root3 s=$BATS_TEST_TMPDIR/u.json
	sbx_busybox_root "$r"
	sbx_registry_push_image t/bb user '{"Env":["PATH=/usr/bin:/bin","FROM=image","KEEP=image"],"User":"1000:1001"}' "$r" >/dev/null
	sbx-image pull -q "$SBX_TEST_REGISTRY/t/bb:user" >/dev/null
	SBX_TEST_SECRET=s3cr3t-$RANDOM-qemu
	export SBX_TEST_SECRET
	# Its guest and QEMU named relative to the directory sbx-create
	# runs in: what QEMU, started in the sandbox's directory, is given
	# is absolute.
	mkdir -p elsewhere/bin
	ln -s "$SBX_QEMU_GUEST" elsewhere/g
	ln -s "$(command -v qemu-system-x86_64)" elsewhere/bin/qemu
	(cd elsewhere && SBX_QEMU_GUEST=g SBX_QEMU_BINARY=bin/qemu \
	    sbx-create -b qemu --image "$SBX_TEST_REGISTRY/t/bb:user" --memory 128M \
	    -e FROM=create -e SBX_TEST_SECRET -s "$s" >/dev/null)
	run --separate-stderr sbx-exec -s "$s" -- sh -c 'id -u; id -g'
	assert_success
	assert_output $'1000\n1001'
	run --separate-stderr sbx-exec -s "$s" -u root -- id -u
	assert_output 0
	run --separate-stderr sbx-exec -s "$s" -- sh -c 'echo "$FROM $KEEP $SBX_TEST_SECRET"'
	assert_output "create image $SBX_TEST_SECRET"
	run --separate-stderr sbx-exec -s "$s" -e FROM=exec -- sh -c 'echo "$FROM"'
	assert_output exec
	run grep -rl "$SBX_TEST_SECRET" "$s" "$SBX_QEMU_DIR"
	assert_failure 1
	sbx-kill -q -s "$s"
}

@test "qemu: -t: the command's stdio a pty of the caller's window size, its exit status" {
	local p
	mkfifo term-in
	sleep 60 >term-in 3>&- &
	p=$!
	run bash -c "SHELL=/bin/bash script -qec 'stty rows 30 cols 100; sbx-exec -t -s $S -- sh -c \"stty size; test -t 0 && test -t 1 && test -t 2 && echo all-tty; exit 4\"; echo rc=\$?' /dev/null <term-in | tr -d '\r'"
	kill "$p"
	wait "$p" || true
	assert_success
	assert_line "30 100"
	assert_line all-tty
	assert_line rc=4
}

@test "qemu: sbx-sync push and pull, sbx-cp in and out: tar in the VM over its port, bytes and modes intact" {
	mkdir -p w/sub
	head -c 2000000 /dev/urandom >w/blob
	printf '#!/bin/sh\necho run\n' >w/sub/tool
	chmod 755 w/sub/tool
	ln -s sub/tool w/link
	touch -d '2021-03-04 05:06:07.123456789' w/sub/tool
	touch -h -d '2020-01-02 03:04:05.987654321' w/link
	# Into its workdir, the image's /srv/app.
	(cd w && sbx-sync push -s "$S" . >/dev/null)
	# The image's tar (busybox's) keeps whole seconds; the agent sets
	# the nanoseconds after it: an untouched tree has nothing to say.
	assert_equal "$(sbx-exec -s "$S" -e TZ=UTC0 -- stat -c %y sub/tool)" \
	    "$(TZ=UTC0 stat -c %y w/sub/tool)"
	assert_equal "$(sbx-exec -s "$S" -e TZ=UTC0 -- stat -c %y link)" \
	    '2020-01-02 03:04:05.987654321 +0000'
	run --separate-stderr sh -c "cd w && sbx-sync status -s \"\$1\" ." sh "$S"
	assert_success
	assert_output ''
	run --separate-stderr sbx-exec -s "$S" -- sh -c 'sha256sum blob; ./link; readlink link'
	assert_success
	assert_equal "${lines[0]}" "$(cd w && sha256sum blob)"
	assert_equal "${lines[1]}" run
	assert_equal "${lines[2]}" sub/tool
	sbx-exec -s "$S" -- sh -c 'echo new >made; echo more >>sub/tool'
	(cd w && sbx-sync pull -s "$S" . >/dev/null)
	assert_equal "$(cat w/made)" new
	assert_equal "$(tail -1 w/sub/tool)" more
	[ -x w/sub/tool ]
	sbx-cp -s "$S" w/blob :/root/copied
	sbx-cp -s "$S" :/root/copied back
	cmp w/blob back
}

@test "qemu: a command that cannot start is 127 or 126 as env(1) says it; a missing workdir with -w is 125" {
	run -127 --separate-stderr sbx-exec -s "$S" -- /no/such
	assert_equal "$stderr" "sbx-exec: '/no/such': No such file or directory"
	run -126 --separate-stderr sbx-exec -s "$S" -- /etc/marker
	assert_equal "$stderr" "sbx-exec: '/etc/marker': Permission denied"
	run --separate-stderr sbx-exec -s "$S" -w /no/dir -- true
	assert_failure 125
	assert_equal "$stderr" "sbx-exec: cannot start 'true': workdir '/no/dir': No such file or directory"
}

@test "qemu: -T ends the command and all it started (what left its session too), not the VM; what an exec leaves running stays" {
	sbx-exec -s "$S" -- sh -c 'sleep 299 >/dev/null 2>&1 &'
	run --separate-stderr sbx-exec -T 1 -s "$S" -- sh -c 'setsid sleep 301 >/dev/null 2>&1 & sleep 302 >/dev/null 2>&1 & sleep 303'
	assert_failure 124
	run --separate-stderr sbx-exec -s "$S" -- sh -c 'ps -o args | grep -c "^sleep 30[123]"; ps -o args | grep -c "^sleep 299"; pkill -f "sleep 299"; true'
	assert_success
	assert_equal "${lines[0]}" 0
	assert_equal "${lines[1]}" 1
}

@test "qemu: an idle guest's timers keep time: a sleep 0.2 ends in well under a second, and so do 3 execs" {
	# shift=auto's -icount served them at its once-a-second adjustment:
	# ~2 s, ~3 s.
	t0=$(date +%s%N)
	run --separate-stderr sbx-exec -s "$S" -- sleep 0.2
	t1=$(date +%s%N)
	assert_success
	for i in 1 2 3; do
		sbx-exec -s "$S" -- true
	done
	t2=$(date +%s%N)
	echo "sleep 0.2: $(((t1 - t0) / 1000000)) ms; 3 execs: $(((t2 - t1) / 1000000)) ms"
	(((t1 - t0) / 1000000 >= 200 && (t1 - t0) / 1000000 < 900))
	(((t2 - t1) / 1000000 < 900))
}

@test "qemu: the VM's size is its limit, and what sbx-cost prices; no network device but lo" {
	run --separate-stderr sbx-exec -s "$S" -- sh -c 'grep MemTotal /proc/meminfo; ls /sys/class/net; grep -c ^processor /proc/cpuinfo'
	assert_success
	kb=$(awk '{print $2}' <<<"${lines[0]}")
	# 200M, less what the kernel keeps.
	((kb > 100000 && kb <= 204800))
	assert_equal "${lines[1]}" "lo"
	assert_equal "${lines[2]}" "1"
	run vm shared
	jq_true '.status == "running" and .accel == "tcg" and .limits.memory == 209715200 and .image == "'"$SBX_TEST_REGISTRY"'/t/bb:v1"' <<<"$output"
	# one vCPU under TCG whatever --cpus said, and the VM's memory
	jq_true '.resources == {"vcpus": 1, "memory_mib": 200}' <"$S"
	# QEMU in a cgroup of its own (as root): the VM's memory and 256 MiB
	# of QEMU's own at most, the CPUs sbx's default limit gives
	local id qp d lim=() cpu=()
	id=$(jq -r .ref.id "$S")
	read -r _ _ qp _ <"$(jq -r .ref.dir "$S")/keeper.pid"
	grep -q ":/sbx/qemu-$id\$" "/proc/$qp/cgroup"
	for d in $(find /sys/fs/cgroup -maxdepth 4 -type d -path "*/sbx/qemu-$id"); do
		[ -f "$d/memory.max" ] && lim+=("$(cat "$d/memory.max")")
		[ -f "$d/memory.limit_in_bytes" ] && lim+=("$(cat "$d/memory.limit_in_bytes")")
		[ -f "$d/cpu.max" ] && cpu+=("$(cat "$d/cpu.max")")
		[ -f "$d/cpu.cfs_quota_us" ] && cpu+=("$(cat "$d/cpu.cfs_quota_us")")
	done
	assert_equal "${lim[*]}" "$(((200 + 256) << 20))"
	[[ ${cpu[*]} == 200000* ]]
}

@test "qemu: under TCG the guest keeps only what a sandbox uses (no tracefs files, memory cgroup, Spectre mitigations, AppArmor, loaded modules' files, fault-around), its balloon trims what the boot freed, and again after activity, its pages of zeros punched out; QEMU's memory in small pages, its translated code in 16 MiB" {
	# What the kernel's command line leaves out, seen in the guest.
	run --separate-stderr sbx-exec -s "$S" -- sh -c '
	    awk "\$1 == \"memory\" { print \$4 }" /proc/cgroups
	    cut -d" " -f1 /sys/devices/system/cpu/vulnerabilities/spectre_v2
	    mkdir -p /tmp/t /tmp/s
	    mount -t tracefs none /tmp/t && ls -A /tmp/t/events | wc -l; umount /tmp/t
	    mount -t securityfs none /tmp/s && cat /tmp/s/lsm && echo && umount /tmp/s
	    ls -A /proc/1/root/sbx/mod | wc -l
	    mount -t debugfs none /tmp/t && cat /tmp/t/fault_around_bytes; umount /tmp/t'
	assert_success
	# the memory controller off, no retpolines
	assert_equal "${lines[0]}" 0
	assert_equal "${lines[1]}" "Vulnerable;"
	# no tracefs files (its events' took 9 MiB), landlock and yama of
	# the LSMs (lockdown and capability are always there), the
	# initramfs's modules removed once loaded
	assert_equal "${lines[2]}" 0
	assert_equal "${lines[3]}" "lockdown,capability,landlock,yama"
	assert_equal "${lines[4]}" 0
	# a page fault maps its page alone, not the 64 KiB around it
	assert_equal "${lines[5]}" 4096
	# Once idle after its boot (half a second), the VM's balloon took 32
	# MiB of the guest's free memory, an eighth of a VM of 200M (6400
	# pages), which QEMU discarded, and gave them back; so again each
	# time it is idle 3 s after activity (an earlier test's exec too).
	local i qp n
	balloon() {
		run --separate-stderr sbx-exec -s "$S" -- awk '$1 ~ /^balloon_(in|de)flate$/ { printf "%s ", $2 }' /proc/vmstat
		assert_success
		[[ $output =~ ^([0-9]+)\ ([0-9]+)\ $ ]] || return 1
		n=${BASH_REMATCH[1]}
		[ "$n" = "${BASH_REMATCH[2]}" ] && [ "$n" -gt 0 ] && [ $((n % 6400)) = 0 ]
	}
	local ok=0 was
	for i in $(seq 30); do
		if balloon; then ok=1; break; fi
		sleep 1
	done
	[ "$ok" = 1 ]
	# That read was activity: a trim comes 3 s after it.
	was=$n ok=0
	for i in 1 2 3 4 5; do
		sleep 4
		if balloon && [ "$n" -gt "$was" ]; then ok=1; break; fi
	done
	[ "$ok" = 1 ]
	# The guest's memory is a memfd of the keeper's, which QEMU maps
	# shared; after a trim the keeper punched out its pages of zeros
	# (the kernel's .bss, ~18 MiB of a VM's RSS): few are left.
	local kp fd z
	read -r kp _ _ _ <"$(jq -r .ref.dir "$S")/keeper.pid"
	fd=$(find "/proc/$kp/fd" -lname '/memfd:sbx-ram*' | head -n 1)
	[ -n "$fd" ]
	zeros() {
		python3 - "$1" <<-'PY'
		import os, sys
		fd = os.open(sys.argv[1], os.O_RDONLY)
		size, off, n, z = os.fstat(fd).st_size, 0, 0, bytes(4096)
		while off < size:
		    try:
		        off = os.lseek(fd, off, os.SEEK_DATA)
		    except OSError:
		        break
		    end = os.lseek(fd, off, os.SEEK_HOLE)
		    while off < end:
		        n += os.pread(fd, 4096, off) == z
		        off += 4096
		print(n)
		PY
	}
	for i in $(seq 10); do
		z=$(zeros "$fd")
		[ "$z" -lt 1024 ] && break
		sleep 1
	done
	[ "$z" -lt 1024 ]
	read -r _ _ qp _ <"$(jq -r .ref.dir "$S")/keeper.pid"
	grep -Eq '^THP_enabled:[[:space:]]+0$' "/proc/$qp/status"
	tr '\0' '\n' <"/proc/$qp/cmdline" | grep -qx 'tcg,tb-size=16'
}

@test "qemu: commands run side by side, one a port (four); a fifth waits for a port, then runs" {
	local i fds=() pids=() o=$BATS_TEST_TMPDIR
	# Four commands that hold their port until their stdin ends.
	for i in 1 2 3 4; do
		mkfifo "$o/f$i"
		# (without the fifos' ends opened before: each holds its own)
		(
			for fd in "${fds[@]}"; do
				eval "exec $fd>&-"
			done
			exec sbx-exec -i -s "$S" -- sh -c 'echo up; cat >/dev/null; echo end' <"$o/f$i" >"$o/o$i" 2>&1
		) &
		pids+=($!)
		exec {fd}>"$o/f$i"
		fds+=("$fd")
	done
	for i in 1 2 3 4; do
		for ((n = 0; n < 300; n++)); do
			[ -s "$o/o$i" ] && break
			sleep 0.1
		done
		assert_equal "$(cat "$o/o$i")" up
	done
	# A fifth: no port is free, it waits (in the keeper's backlog).
	(
		for fd in "${fds[@]}"; do
			eval "exec $fd>&-"
		done
		exec sbx-exec -s "$S" -- echo fifth >"$o/o5" 2>&1
	) &
	pids+=($!)
	sleep 1
	assert_equal "$(cat "$o/o5")" ""
	# One ends: its port is the fifth's.
	exec {fds[0]}>&-
	for ((n = 0; n < 300; n++)); do
		[ -s "$o/o5" ] && break
		sleep 0.1
	done
	assert_equal "$(cat "$o/o5")" fifth
	assert_equal "$(cat "$o/o1")" $'up\nend'
	for i in 1 2 3; do
		exec {fds[i]}>&-
	done
	for i in "${!pids[@]}"; do
		wait "${pids[i]}"
	done
	for i in 2 3 4; do
		assert_equal "$(cat "$o/o$i")" $'up\nend'
	done
}

@test "qemu: a command's client killed mid-run: the command ends, the next exec runs" {
	sbx-exec -s "$S" -- sh -c 'echo started; exec sleep 60' >"$BATS_TEST_TMPDIR/o" &
	pid=$!
	for ((i = 0; i < 200; i++)); do
		grep -q started "$BATS_TEST_TMPDIR/o" && break
		sleep 0.05
	done
	kill -9 "$pid"
	wait "$pid" || true
	run --separate-stderr sbx-exec -s "$S" -- sh -c 'ps | grep -c "[s]leep 60"; true'
	assert_success
	assert_output "0"
}

@test "qemu: bad input: no image, a memory too small, bad qemu.accel, no QEMU, no guest kernel; nothing is left" {
	run --separate-stderr sbx-create -b qemu -s -
	assert_failure 2
	assert_equal "$stderr" "sbx-create: the qemu backend needs --image: an image of the store (sbx-image pull) or a directory"
	run --separate-stderr sbx-create -b qemu --image "$BATS_FILE_TMPDIR/root" --memory 32M -s -
	assert_failure 2
	assert_equal "$stderr" "sbx-create: a qemu sandbox needs --memory of at least 64M"
	SBX_QEMU_ACCEL=hvf run --separate-stderr sbx-create -b qemu --image "$BATS_FILE_TMPDIR/root" -s -
	assert_failure 2
	assert_equal "$stderr" "sbx-create: invalid qemu.accel 'hvf' (want tcg or kvm)"
	SBX_QEMU_BINARY=qemu-none run --separate-stderr sbx-create -b qemu --image "$BATS_FILE_TMPDIR/root" -s -
	assert_failure 1
	assert_equal "$stderr" "sbx-create: QEMU is not installed (no 'qemu-none'; scripts/install-deps installs it)"
	SBX_QEMU_GUEST=$BATS_TEST_TMPDIR/g run --separate-stderr sbx-create -b qemu --image "$BATS_FILE_TMPDIR/root" -s -
	assert_failure 1
	assert_equal "$stderr" "sbx-create: no guest kernel in '$BATS_TEST_TMPDIR/g' (scripts/qemu-guest -d '$BATS_TEST_TMPDIR/g' makes one)"
	run --separate-stderr sbx-create -b qemu --image "$BATS_TEST_TMPDIR/none" -s -
	assert_failure 2
	store_empty_but_shared
}

@test "qemu: a guest that does not answer in its start timeout: exit 1, its console's last lines, nothing left; the image's disk is kept and used again" {
	dig=$(sbx-image ls | jq -r 'select(.image | endswith("t/bb:v1")) | .digest')
	disk=$SBX_QEMU_GUEST/disks/${dig#sha256:}.ext4
	ino=$(stat -c %i "$disk")
	SBX_QEMU_START_TIMEOUT=1 run --separate-stderr sbx-create -b qemu --image "$SBX_TEST_REGISTRY/t/bb:v1" -s -
	assert_failure 1
	# What the console said last, or that it said nothing.
	[[ $stderr == "sbx-create: the VM did not start: its guest did not answer in 1 s; its console "* ]]
	store_empty_but_shared
	[ -z "$(pgrep -f "$SBX_QEMU_DIR/" || true)" ]
	assert_equal "$(stat -c %i "$disk")" "$ino"
}

@test "qemu: sbx-image rm and prune drop the disks of images gone, not one a sandbox stands on, and what a killed create left" {
	local g=$BATS_TEST_TMPDIR/g r=$BATS_TEST_TMPDIR/root2 v2 hex id=0123456789ab zeros
	# A guest directory of this test's own: its disks are only these.
	mkdir -p "$g/disks"
	ln -s "$SBX_QEMU_GUEST"/{vmlinux,initrd.img,kernel} "$g/"
	sbx_busybox_root "$r"
	echo v2 >"$r/etc/marker"
	sbx_registry_push_image t/bb v2 '{"Env":["PATH=/usr/bin:/bin"]}' "$r" >/dev/null
	sbx-image pull -q "$SBX_TEST_REGISTRY/t/bb:v2" >/dev/null
	v2=$(sbx-image ls | jq -r 'select(.image | endswith("t/bb:v2")) | .digest')
	hex=${v2#sha256:}
	[ ${#hex} = 64 ]
	# Its disk, made by a create whose guest never answers.
	SBX_QEMU_GUEST=$g SBX_QEMU_START_TIMEOUT=1 run sbx-create -b qemu --image "$SBX_TEST_REGISTRY/t/bb:v2" -s -
	assert_failure 1
	[ -f "$g/disks/$hex.ext4" ]
	# A dead sandbox stands on it (its keeper gone: sbx-gc's to remove);
	# a killed create left a half-made disk, a live one is making one.
	mkdir "$SBX_QEMU_DIR/$id"
	printf '{"id":"%s","image_digest":"%s"}\n' "$id" "$v2" >"$SBX_QEMU_DIR/$id/meta.json"
	zeros=$(printf '0%.0s' {1..64})
	: >"$g/disks/$zeros.ext4.999999999.tmp"
	: >"$g/disks/$zeros.ext4.$$.tmp"
	SBX_QEMU_GUEST=$g run --separate-stderr sbx-image rm "$SBX_TEST_REGISTRY/t/bb:v2"
	assert_success
	[ -f "$g/disks/$hex.ext4" ]
	[ ! -e "$g/disks/$zeros.ext4.999999999.tmp" ]
	[ -e "$g/disks/$zeros.ext4.$$.tmp" ]
	run sbx-kill -q -b qemu "$id"
	assert_success
	SBX_QEMU_GUEST=$g run --separate-stderr sbx-image prune
	assert_success
	jq_true '.disks == 1' <<<"$output"
	[ ! -e "$g/disks/$hex.ext4" ]
	[ -e "$g/disks/$zeros.ext4.$$.tmp" ]
	store_empty_but_shared
}

@test "qemu: kill -9 of sbx-create while it makes the disk: a dead sandbox, which sbx-gc removes" {
	# A mkfs.ext4 that stays until the test ends it (by its pid).
	mkdir "$BATS_TEST_TMPDIR/bin"
	printf '#!/bin/sh\necho $$ >%s/mkfs.pid\nexec sleep 60\n' "$BATS_TEST_TMPDIR" >"$BATS_TEST_TMPDIR/bin/mkfs.ext4"
	chmod +x "$BATS_TEST_TMPDIR/bin/mkfs.ext4"
	PATH=$BATS_TEST_TMPDIR/bin:$PATH sbx-create -b qemu --image "$BATS_FILE_TMPDIR/root" -s - >/dev/null 2>&1 &
	pid=$!
	for ((i = 0; i < 200; i++)); do
		[ -s "$BATS_TEST_TMPDIR/mkfs.pid" ] && break
		sleep 0.05
	done
	run vm other
	jq_true '.creating == true' <<<"$output"
	# Being created: sbx-gc leaves it.
	run --separate-stderr sbx-gc -b qemu --grace 0
	assert_success
	assert_output ""
	kill -9 "$pid"
	wait "$pid" || true
	kill "$(cat "$BATS_TEST_TMPDIR/mkfs.pid")"
	run vm other
	jq_true '.status == "dead" and .creating == null' <<<"$output"
	run --separate-stderr sbx-gc -b qemu --grace 0
	assert_success
	jq_true '.reason == "dead" and .action == "killed"' <<<"$output"
	store_empty_but_shared
}

@test "qemu: sbx-gc removes QEMU's empty cgroups made over 10 minutes ago (a store removed under its VMs), not a young one, nor another's" {
	[ "$(id -u)" = 0 ] || skip "QEMU's cgroups are root's"
	local b bases=() old=qemu-0123456789ab young=qemu-ba9876543210 odd=qemu-notasandbox
	mapfile -t bases < <(find /sys/fs/cgroup -mindepth 1 -maxdepth 2 -type d -name sbx)
	[ "${#bases[@]}" -gt 0 ]
	for b in "${bases[@]}"; do
		mkdir "$b/$old" "$b/$young" "$b/$odd"
		touch -d '11 minutes ago' "$b/$old" "$b/$odd"
	done
	run --separate-stderr sbx-gc -b qemu -g 0
	for b in "${bases[@]}"; do
		[ ! -e "$b/$old" ] || r="$b/$old left"
		[ -e "$b/$young" ] || r="$b/$young removed"
		[ -e "$b/$odd" ] || r="$b/$odd removed"
		rmdir "$b/$old" "$b/$young" "$b/$odd" 2>/dev/null || true
	done
	assert_success
	[ -z "${r:-}" ] || fail "$r"
	# the shared VM lives on
	run --separate-stderr sbx-exec -s "$S" -- echo alive
	assert_output alive
}

@test "qemu: kill -9 of sbx-create mid-boot leaves nothing; a keeper killed leaves a dead sandbox that sbx-gc removes" {
	sbx-create -b qemu --image "$BATS_FILE_TMPDIR/root" -s "$BATS_TEST_TMPDIR/x.json" >/dev/null 2>&1 &
	pid=$!
	for ((i = 0; i < 300; i++)); do
		kf=$(find "$SBX_QEMU_DIR" -name keeper.pid ! -path '*/'"$(jq -r .ref.id "$S")"'/*')
		[ -n "$kf" ] && break
		sleep 0.05
	done
	[ -n "$kf" ]
	new=$(basename "$(dirname "$kf")")
	# As root QEMU has a cgroup (made before the keeper starts).
	if [ "$(id -u)" = 0 ]; then
		[ -n "$(find /sys/fs/cgroup -maxdepth 4 -type d -path "*/sbx/qemu-$new")" ]
	fi
	kill -9 "$pid"
	wait "$pid" || true
	for ((i = 0; i < 100; i++)); do
		[ "$(find "$SBX_QEMU_DIR" -mindepth 1 -maxdepth 1 ! -name .names | wc -l)" = 1 ] && break
		sleep 0.05
	done
	store_empty_but_shared
	# nor QEMU's cgroup: the keeper that removed the sandbox removed it
	[ -z "$(find /sys/fs/cgroup -maxdepth 4 -type d -path "*/sbx/qemu-$new")" ]
	# The shared VM's keeper, killed: QEMU ends with it.
	dir=$(vm shared | jq -r .dir)
	read -r kp _ qp _ <"$dir/keeper.pid"
	# It holds none of sbx-create's fds: not the state file's lock,
	# which would keep sbx-kill -s waiting for ever.
	run ls -l "/proc/$kp/fd"
	refute_output --partial .lock
	refute_output --partial pipe:
	kill -9 "$kp"
	for ((i = 0; i < 100; i++)); do
		[ "$(ps -o stat= -p "$qp" 2>/dev/null | cut -c1)" = Z ] || ! kill -0 "$qp" 2>/dev/null && break
		sleep 0.05
	done
	run vm shared
	jq_true '.status == "dead"' <<<"$output"
	run --separate-stderr sbx-exec -s "$S" -- true
	assert_failure 125
	assert_equal "$stderr" "sbx-exec: no sandbox: '$(jq -r .ref.id "$S")' is dead"
	run --separate-stderr sbx-gc -b qemu --grace 0
	assert_success
	jq_true '.reason == "dead" and .action == "killed"' <<<"$output"
	[ -z "$(find "$SBX_QEMU_DIR" -mindepth 1 -maxdepth 1 ! -name .names)" ]
	# its QEMU's cgroup too
	[ -z "$(find /sys/fs/cgroup -maxdepth 4 -type d -path "*/sbx/qemu-$(jq -r .ref.id "$S")")" ]
	run --separate-stderr sbx-kill -b qemu "$(jq -r .ref.id "$S")"
	assert_failure 3
}
