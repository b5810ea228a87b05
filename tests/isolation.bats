#!/usr/bin/env bats
# Isolation: what a sandbox can see and do of the host, and what sbx-kill
# leaves behind (nothing).

load lib/helper

setup_file() { sbx_setup_file; }
teardown_file() { sbx_teardown_file; }
setup() {
	sbx_setup
	HOST_PIDS=()
	MARKERS=()
	EVIL=
}

# Everything a test started on the host, by pid; marker files it made.
teardown() {
	local p
	for p in "${HOST_PIDS[@]}"; do
		kill "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	[ "${#MARKERS[@]}" -eq 0 ] || rm -f "${MARKERS[@]}"
	[ -z "$EVIL" ] || rm -rf "$EVIL"
}

sdir() {
	jq -r .ref.dir "${1:-$BATS_TEST_TMPDIR/s.json}"
}

# Host pids of every process in a sandbox's cgroups.
sandbox_procs() {
	cat /sys/fs/cgroup/pids/sbx/"$1"/cgroup.procs \
	    /sys/fs/cgroup/unified/sbx/"$1"/cgroup.procs \
	    /sys/fs/cgroup/unified/sbx/"$1"/*/cgroup.procs 2>/dev/null | sort -un
}

# The host pid of the sandbox process whose command line is exactly "$2".
host_pid_of() {
	local p
	for p in $(sandbox_procs "$1"); do
		if [ "$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)" = "$2 " ]; then
			echo "$p"
			return 0
		fi
	done
	return 1
}

# The host's python3 (not a slow shim); inside, PATH finds /usr/bin/python3.
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

# A server on host loopback that greets and hangs up; sets PORT.
SERVER='import os, socket, sys
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(16)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(s.getsockname()[1]))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
while True:
    c, _ = s.accept()
    c.sendall(b"hello from host\n")
    c.close()'

CONNECT='import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=3)
sys.stdout.write(s.recv(100).decode())'

start_server() {
	local i
	"$PY" -c "$SERVER" "$BATS_TEST_TMPDIR/port" >/dev/null 2>&1 3>&- &
	HOST_PIDS+=("$!")
	for i in $(seq 100); do
		[ -s "$BATS_TEST_TMPDIR/port" ] && break
		sleep 0.05
	done
	PORT=$(cat "$BATS_TEST_TMPDIR/port")
	[ -n "$PORT" ]
}

# --- processes and /proc ----------------------------------------------------

@test "host processes are invisible inside: pid 1 is sbx-init, ps shows only the sandbox" {
	sleep 4711 3>&- &
	HOST_PIDS+=("$!")
	new_sandbox
	run sx ps -eo pid=,comm=,args=
	assert_success
	refute_output --partial "sleep 4711"
	[ "$(awk '$1 == 1 {print $2}' <<<"$output")" = sbx-init ]
	# sbx-init, and ps itself: nothing else
	[ "$(awk '{print $2}' <<<"$output" | sort | tr '\n' ' ')" = "ps sbx-init " ]
	run sx sh -c 'ls /proc | grep -E "^[0-9]+$" | while read -r p; do
	    tr "\0" " " </proc/$p/cmdline; echo; done'
	assert_success
	refute_output --partial "sleep 4711"
	assert_line --index 0 "sbx-init "
}

@test "/proc is the sandbox's own: its pid namespace, its pid 1" {
	new_sandbox
	run sx readlink /proc/self/ns/pid
	assert_success
	[ "$output" != "$(readlink /proc/self/ns/pid)" ]
	run sx cat /proc/1/comm
	assert_output sbx-init
	run sx sh -c 'grep " /proc " /proc/self/mountinfo'
	assert_success
	assert_output --regexp ' - proc proc '
}

@test "sensitive /proc entries are masked and /proc/sys is read-only" {
	new_sandbox
	local f
	for f in kcore keys timer_list kallsyms sysrq-trigger; do
		[ -e "/proc/$f" ] || continue
		run sx sh -c "wc -c < /proc/$f"
		# unreadable, or empty
		[ "$status" -ne 0 ] || [ "$output" = 0 ] || {
			echo "/proc/$f readable inside: $output bytes"
			return 1
		}
	done
	local before
	before=$(cat /proc/sys/kernel/hostname)
	run sx sh -c 'echo evil > /proc/sys/kernel/hostname'
	assert_failure
	assert_output --partial "Read-only file system"
	run sx sh -c 'echo 1 > /proc/sys/vm/drop_caches'
	assert_failure
	[ "$(cat /proc/sys/kernel/hostname)" = "$before" ]
}

@test "masked /proc directories are empty and read-only, with no filesystem of their own" {
	local d found=
	for d in acpi scsi; do [ -d "/proc/$d" ] && found="$found $d"; done
	[ -n "$found" ] || skip "no /proc/acpi or /proc/scsi on this kernel"
	new_sandbox
	for d in $found; do
		run sx sh -c "ls -A /proc/$d | wc -l; mkdir /proc/$d/x"
		assert_failure
		assert_line 0
		assert_output --partial "Read-only file system"
		# /dev's tmpfs's (its empty /dev/pts under devpts): a
		# superblock more a sandbox costs every memory cgroup of the
		# host a slot in its shrinker map.
		run sx stat -c %d "/proc/$d" /dev
		assert_success
		assert_equal "${lines[0]}" "${lines[1]}"
	done
}

@test "the host image's /dev and /dev/shm are directories of its skeleton's tmpfs, /dev read-only, not tmpfs of their own" {
	new_sandbox
	run sx sh -c 'grep " /dev " /proc/self/mountinfo'
	assert_success
	# mountinfo's 4th field: the mount's root in its filesystem.
	assert_equal "$(cut -d' ' -f4 <<<"$output")" /dev
	assert_output --regexp ' ro,nosuid,noexec[, ]'
	run sx sh -c 'grep " /dev/shm " /proc/self/mountinfo'
	assert_success
	assert_equal "$(cut -d' ' -f4 <<<"$output")" /dev/shm
	# Its mount's options as a tmpfs of its own had them.
	assert_equal "$(cut -d' ' -f6 <<<"$output")" rw,nosuid,nodev,relatime
	run sx sh -c 'echo x >/dev/shm/f && cat /dev/shm/f'
	assert_success
	assert_output x
	run sx sh -c ': >/dev/x'
	assert_failure
	assert_output --partial "Read-only file system"
	run sx sh -c 'echo ok >/dev/null && ls /dev/pts/ptmx /dev/shm >/dev/null && echo ok'
	assert_success
	assert_output ok
}

# --- files ------------------------------------------------------------------

@test "host files are unchanged after the sandbox writes everywhere it can" {
	# Its upper layer is on the host's disk only without a quota (tests/disk.bats
	# has the disk's).
	export SBX_LIMITS_DISK=0
	local m=sbx-iso-marker.$$.$BATS_TEST_NUMBER f
	for f in /etc/$m /usr/bin/$m /tmp/$m /root/$m; do
		echo original >"$f"
		MARKERS+=("$f")
	done
	host_listing() {
		find /etc /usr/bin /usr/sbin -maxdepth 1 \
		    -printf '%p %y %m %U %G %s %T@ %C@\n' | sort
		stat -c '%n %a %u %g' / /etc /usr /usr/bin /bin /tmp /root /var \
		    /home
		sha256sum /etc/passwd /etc/shadow /etc/hosts /etc/hostname \
		    "${MARKERS[@]}"
		stat -c '%n %a %u %g %s %Y %Z' "${MARKERS[@]}"
	}
	local before
	before=$(host_listing)
	new_sandbox
	run sx sh -c '
	    m=$1
	    for d in / /etc /usr /usr/bin /bin /sbin /lib /opt /tmp /root /var \
	        /home /workspace /run /dev /dev/shm /sys /proc/sys \
	        /proc/sys/kernel; do
	        p=${d%/}/sbx-probe
	        if (echo pwned > "$p") 2>/dev/null; then echo "wrote $p"; fi
	    done
	    for f in /etc/$m /usr/bin/$m /tmp/$m /root/$m; do
	        echo pwned >> "$f"; chmod 777 "$f"; chown 1:1 "$f"
	        touch -d @0 "$f"; mv "$f" "$f.moved"; rm -f "$f"
	        echo pwned > "$f"
	    done
	    touch /etc/passwd /etc/hostname; chmod 777 /etc/hostname
	    mkdir /etc/sbx-probe.d /usr/sbx-probe.d
	    ln -s /etc/passwd /usr/bin/sbx-probe-link
	    rm -f /etc/sbx-probe /usr/bin/sbx-probe
	    exit 0' sh "$m"
	assert_success
	# Exactly the private, writable places took the probe.
	assert_equal "$(grep '^wrote ' <<<"$output" | sort | tr '\n' ' ')" \
	    "wrote /dev/shm/sbx-probe wrote /home/sbx-probe wrote /root/sbx-probe wrote /run/sbx-probe wrote /sbx-probe wrote /tmp/sbx-probe wrote /var/sbx-probe wrote /workspace/sbx-probe " ]
	assert_equal "$(host_listing)" "$before"
	for f in / /etc /usr /usr/bin /tmp /root /var /home /run /dev/shm; do
		[ ! -e "${f%/}/sbx-probe" ]
	done
	[ ! -e /workspace/sbx-probe ]
	# What was written landed in the sandbox's upper layer (/dev/shm is
	# a tmpfs of its own).
	local up
	up=$(sdir)/upper
	for f in sbx-probe home/sbx-probe root/sbx-probe run/sbx-probe \
	    tmp/sbx-probe var/sbx-probe workspace/sbx-probe "tmp/$m" "root/$m"; do
		[ "$(cat "$up/$f")" = pwned ] || {
			echo "missing in upper: $f"
			return 1
		}
	done
	[ "$(cat "/tmp/$m")" = original ]
	[ "$(cat "/root/$m")" = original ]
}

@test "files created by sandbox root belong to the sandbox's uid range on the host, not root" {
	# Its upper layer is on the host's disk only without a quota (tests/disk.bats
	# has the disk's).
	export SBX_LIMITS_DISK=0
	new_sandbox
	run sx sh -c 'echo x > /workspace/f && mkdir /tmp/d && id -u'
	assert_success
	assert_output 0
	local base up
	base=$(jq -r .uid_base "$(sdir)/meta.json")
	[ "$base" -ge 1000000000 ]
	up=$(sdir)/upper
	[ "$(stat -c %u "$up/workspace/f")" = "$base" ]
	[ "$(stat -c %g "$up/workspace/f")" = "$base" ]
	[ "$(stat -c %u "$up/tmp/d")" = "$base" ]
	[ "$(stat -c %u "$up/workspace/f")" -ge 1000000000 ]
}

@test "/etc/shadow is unreadable inside" {
	new_sandbox
	run sx cat /etc/shadow
	assert_failure
	assert_output --partial "Permission denied"
	run sx sh -c 'head -c1 /etc/shadow >/dev/null'
	assert_failure
}

@test "the host image shows /usr read-only; /workspace /tmp /root /home /var /run are writable and start empty (/home: user's home)" {
	new_sandbox
	run sx touch /usr/x
	assert_failure
	assert_output --partial "Read-only file system"
	run sx touch /etc/x
	assert_failure
	run sx touch /bin/x
	assert_failure
	local d
	for d in /workspace /tmp /root /home /var /run; do
		run sx sh -c "ls -A $d"
		assert_success
		# The account user's home (sbx-exec -u user), empty.
		if [ "$d" = /home ]; then
			assert_output user
			run sx sh -c 'ls -A /home/user; stat -c "%u %g" /home/user'
			assert_output "1000 1000"
		else
			assert_output ""
		fi
		run sx sh -c "touch $d/x && rm $d/x"
		assert_success
	done
	run sx stat -c %a /tmp
	assert_output 1777
}

# --- privilege ----------------------------------------------------------------

@test "mount, remount and bind mounts fail" {
	new_sandbox
	run sx mount -t tmpfs none /tmp
	assert_failure
	run sx mount -o remount,rw /usr
	assert_failure
	run sx mount --bind /tmp /workspace
	assert_failure
	run sx mount -t proc proc /tmp
	assert_failure
	# and nothing changed: /usr is still read-only
	run sx touch /usr/x
	assert_failure
	assert_output --partial "Read-only file system"
}

@test "commands run with no capabilities, no new privileges and a seccomp filter" {
	new_sandbox
	run sx cat /proc/self/status
	assert_success
	assert_line --regexp '^CapEff:[[:space:]]+0000000000000000$'
	assert_line --regexp '^CapPrm:[[:space:]]+0000000000000000$'
	assert_line --regexp '^CapBnd:[[:space:]]+0000000000000000$'
	assert_line --regexp '^CapAmb:[[:space:]]+0000000000000000$'
	assert_line --regexp '^NoNewPrivs:[[:space:]]+1$'
	assert_line --regexp '^Seccomp:[[:space:]]+2$'
}

@test "the agent keeps to the seccomp filter too, and a command has it once, not twice" {
	new_sandbox
	# Installed once, by the agent at its start: every command inherits
	# it (and does not pay its install, a tenth of a millisecond).
	run sx cat /proc/1/status
	assert_success
	assert_line --regexp '^Seccomp:[[:space:]]+2$'
	assert_line --regexp '^Seccomp_filters:[[:space:]]+1$'
	run sx cat /proc/self/status
	assert_success
	assert_line --regexp '^Seccomp:[[:space:]]+2$'
	assert_line --regexp '^Seccomp_filters:[[:space:]]+1$'
	# A session's shell too (sbx-shell).
	run sbx-shell -s "$BATS_TEST_TMPDIR/s.json" 'grep Seccomp /proc/$$/status'
	assert_success
	# (its JSON's \t and \n)
	assert_output --partial 'Seccomp:\t2\nSeccomp_filters:\t1\n'
}

@test "mknod of char and block devices fails" {
	new_sandbox
	run sx mknod /tmp/null c 1 3
	assert_failure
	run sx mknod /tmp/disk b 8 0
	assert_failure
	run sx sh -c 'ls -A /tmp'
	assert_output ""
}

@test "setuid binaries give no privilege" {
	new_sandbox
	# A setuid copy owned by sandbox root: still no capabilities.
	run sx sh -c 'cp /usr/bin/cat /tmp/scat && chmod 4755 /tmp/scat &&
	    /tmp/scat /proc/self/status'
	assert_success
	assert_line --regexp '^CapEff:[[:space:]]+0000000000000000$'
	assert_line --regexp '^CapPrm:[[:space:]]+0000000000000000$'
	# The host's setuid su: no identity change.
	run sx su -s /bin/sh -c 'id -u' nobody
	assert_failure
	refute_output 65534
}

@test "nested user namespaces are denied: unshare -U and unshare -r fail" {
	new_sandbox
	run sx unshare -U true
	assert_failure
	run sx unshare -r true
	assert_failure
	run sx unshare -rm true
	assert_failure
}

# clone3 passes its flags in memory, out of the filter's sight: the
# filter refuses clone3 outright (ENOSYS, so libc falls back to clone,
# whose flags it checks). A raw clone3 asking for a user namespace.
CLONE3_NEWUSER='import ctypes, errno, os, struct
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
# flags, pidfd, child_tid, parent_tid, exit_signal (SIGCHLD), stack,
# stack_size, tls
args = ctypes.create_string_buffer(struct.pack("8Q", 0x10000000, 0, 0, 0,
    17, 0, 0, 0))
pid = libc.syscall(435, args, 64)
if pid == 0:
    os._exit(0)
if pid > 0:
    os.waitpid(pid, 0)
    print("created")
else:
    print(errno.errorcode[ctypes.get_errno()])'

@test "nested user namespaces are denied through clone3 too" {
	# On the host (root, no filter) the same call makes one: the check
	# below can fail.
	run "$PY" -c "$CLONE3_NEWUSER"
	assert_success
	assert_output created
	new_sandbox
	run sx python3 -c "$CLONE3_NEWUSER"
	assert_success
	assert_output ENOSYS
}

@test "the TIOCSTI ioctl is denied on the sandbox's terminal" {
	new_sandbox
	run sbx-exec -s s.json -t -- python3 -c '
import fcntl, os, termios
assert os.isatty(0)
try:
    fcntl.ioctl(0, termios.TIOCSTI, b"x")
    print("allowed")
except PermissionError:
    print("denied")
except OSError as e:
    print("error", e.errno)' </dev/null
	assert_success
	assert_output --partial denied
	refute_output --partial allowed
}

@test "keyctl, bpf, perf_event_open and io_uring_setup fail with EPERM" {
	[ "$(uname -m)" = x86_64 ] || skip "syscall numbers are for x86_64"
	new_sandbox
	run sx python3 -c '
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
for name, nr in (("keyctl", 250), ("add_key", 248), ("bpf", 321),
                 ("perf_event_open", 298), ("io_uring_setup", 425)):
    ctypes.set_errno(0)
    r = libc.syscall(nr, 0, 0, 0, 0, 0, 0)
    print(name, r, errno.errorcode.get(ctypes.get_errno(), "0"))'
	assert_success
	assert_line "keyctl -1 EPERM"
	assert_line "add_key -1 EPERM"
	assert_line "bpf -1 EPERM"
	assert_line "perf_event_open -1 EPERM"
	assert_line "io_uring_setup -1 EPERM"
}

# --- network and names --------------------------------------------------------

@test "network deny: only lo exists" {
	new_sandbox --network deny
	run sx ip -o link
	assert_success
	[ "${#lines[@]}" -eq 1 ]
	assert_output --regexp '^1: lo: '
	run sx ls /sys/class/net
	assert_success
	assert_output lo
}

@test "network deny: a server on host loopback is unreachable inside, reachable from the host" {
	start_server
	run "$PY" -c "$CONNECT" "$PORT"
	assert_success
	assert_output "hello from host"
	new_sandbox
	run sx python3 -c "$CONNECT" "$PORT"
	assert_failure
	refute_output --partial "hello from host"
}

@test "network allow: a server on host loopback is unreachable inside, as with deny" {
	start_server
	run "$PY" -c "$CONNECT" "$PORT"
	assert_output "hello from host"
	new_sandbox --network allow
	run sx python3 -c "$CONNECT" "$PORT"
	assert_failure
	refute_output --partial "hello from host"
}

@test "the hostname is the sandbox's id, or its --name; the host's is unchanged" {
	local host
	host=$(hostname)
	new_sandbox
	run sx hostname
	assert_output "$(sid)"
	sbx-create -s named.json --name iso-host-$$ >/dev/null
	run sbx-exec -s named.json -- hostname
	assert_output "iso-host-$$"
	run sbx-exec -s named.json -- cat /proc/sys/kernel/hostname
	assert_output "iso-host-$$"
	[ "$(hostname)" = "$host" ]
	sbx-kill -q -s named.json >/dev/null
}

# --- two sandboxes ------------------------------------------------------------

@test "two sandboxes cannot see each other's processes or files" {
	sbx-create -s a.json >/dev/null
	sbx-create -s b.json >/dev/null
	run sbx-exec -s a.json -- sh -c 'sleep 4712 >/dev/null 2>&1 &
	    echo a > /workspace/only-a; echo a > /tmp/only-a; echo a > /root/only-a'
	assert_success
	run sbx-exec -s a.json -- ps -eo args=
	assert_output --partial "sleep 4712"
	run sbx-exec -s b.json -- ps -eo args=
	assert_success
	refute_output --partial "sleep 4712"
	run sbx-exec -s b.json -- sh -c 'ls -A /workspace /tmp /root'
	assert_success
	refute_output --partial only-a
	run sbx-exec -s b.json -- sh -c 'cat /proc/*/cmdline 2>/dev/null | tr "\0" " "'
	refute_output --partial "sleep 4712"
	sbx-kill -q -s a.json >/dev/null
	sbx-kill -q -s b.json >/dev/null
}

# --- sbx-kill -----------------------------------------------------------------

@test "after sbx-kill no process, cgroup, mount or directory of the sandbox remains" {
	new_sandbox
	local id dir init sleeper p
	id=$(sid)
	dir=$(sdir)
	init=$(init_pid)
	run sx sh -c 'sleep 1001 >/dev/null 2>&1 &'
	assert_success
	sleeper=$(host_pid_of "$id" "sleep 1001")
	alive "$init"
	alive "$sleeper"
	[ -n "$(ls -d /sys/fs/cgroup/*/sbx/"$id" 2>/dev/null)" ]
	run sbx-kill -s s.json
	assert_success
	assert_output "{\"backend\":\"local\",\"id\":\"$id\",\"status\":\"killed\"}"
	[ ! -e "$dir" ]
	# Every process was sent SIGKILL; their end, the cgroups and the
	# directory are the kill's remover's, done when the trash is empty.
	trash_emptied
	dead "$init"
	dead "$sleeper"
	run ls -d /sys/fs/cgroup/*/sbx/"$id"
	assert_failure
	run grep -F "$id" /proc/self/mountinfo
	assert_failure
	for p in $(grep -lF "$dir" /proc/[0-9]*/mountinfo 2>/dev/null); do
		p=${p#/proc/}
		p=${p%/mountinfo}
		if alive "$p"; then
			echo "a mount of $id remains in process $p"
			return 1
		fi
	done
	[ ! -e "$dir" ]
	[ "$(jq -r .status s.json)" = killed ]
}

@test "sbx-kill --keep keeps the directory and kills everything" {
	# Its upper layer is on the host's disk only without a quota (tests/disk.bats
	# has the disk's).
	export SBX_LIMITS_DISK=0
	new_sandbox
	local id dir init sleeper
	id=$(sid)
	dir=$(sdir)
	init=$(init_pid)
	run sx sh -c 'echo kept > /workspace/f; sleep 1002 >/dev/null 2>&1 &'
	assert_success
	sleeper=$(host_pid_of "$id" "sleep 1002")
	alive "$sleeper"
	run sbx-kill --keep -s s.json
	assert_success
	dead "$init"
	dead "$sleeper"
	run ls -d /sys/fs/cgroup/*/sbx/"$id"
	assert_failure
	run grep -F "$id" /proc/self/mountinfo
	assert_failure
	[ -d "$dir" ]
	[ "$(cat "$dir/upper/workspace/f")" = kept ]
	grep -q '^killed ' "$dir/status"
	run sx true
	[ "$status" -eq 125 ]
	rm -rf "$dir"
}

# --- cgroups and /dev ---------------------------------------------------------

@test "the cgroup fs is not reachable or mountable inside" {
	new_sandbox
	run sx sh -c 'ls -A /sys/fs/cgroup 2>/dev/null'
	assert_output ""
	run sx mount -t cgroup2 none /tmp
	assert_failure
	run sx mount -t cgroup -o pids none /tmp
	assert_failure
	run sx sh -c 'echo 0 > /sys/fs/cgroup/cgroup.procs'
	assert_failure
	run sx cat /proc/self/cgroup
	assert_success
	refute_output --partial sbx
}

@test "/dev has only the listed device nodes" {
	new_sandbox
	run sx sh -c 'ls -A /dev | tr "\n" " "'
	assert_output "fd full null ptmx pts random shm stderr stdin stdout tty urandom zero "
	# d_type lies about bind-mounted nodes: stat each entry
	run sx sh -c 'find /dev ! -type l | while read -r f; do
	    if [ -c "$f" ] || [ -b "$f" ]; then echo "$f"; fi; done | sort | tr "\n" " "'
	assert_output "/dev/full /dev/null /dev/pts/ptmx /dev/random /dev/tty /dev/urandom /dev/zero "
	run sx sh -c 'find /dev ! -type l | while read -r f; do
	    [ -b "$f" ] && echo "$f"; done'
	assert_output ""
	run sx touch /dev/sda
	assert_failure
}

@test "a state file whose ref points at a directory not ours gets no stdio handed over" {
	new_sandbox
	id=$(jq -r .ref.id s.json)
	# Someone else's directory with a listening socket of their own,
	# named like ours; it records any connection.
	evil=$(mktemp -d /tmp/sbx-evil.XXXXXX)
	mkdir "$evil/$id"
	EVIL=$evil
	# Its stdio away from bats, and stopped by pid in teardown: a
	# listener left holding them would hang bats when a check fails.
	"$PY" -c 'import socket,sys,time
s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(5)
open(sys.argv[2],"w").close(); c,_=s.accept(); open(sys.argv[2],"w").write("connected")
time.sleep(30)' "$evil/$id/sock" "$BATS_TEST_TMPDIR/seen" >/dev/null 2>&1 3>&- &
	HOST_PIDS+=("$!")
	for _ in $(seq 50); do [ -e "$BATS_TEST_TMPDIR/seen" ] && break; sleep 0.1; done
	[ -e "$BATS_TEST_TMPDIR/seen" ]
	chown -R 65534:65534 "$evil"
	jq --arg d "$evil/$id" '.ref.dir = $d' s.json > t.json
	# With the store at hand the real sandbox is found by its id ...
	run sbx-exec -s t.json -- echo real
	assert_success
	assert_output real
	# ... and without it the stranger's directory is refused.
	SBX_LOCAL_DIR=$evil/none run --separate-stderr sbx-exec -s t.json -- echo x
	assert_failure 125
	assert [ -n "$stderr" ]
	[[ "$stderr" == *"no sandbox"* ]]
	run cat "$BATS_TEST_TMPDIR/seen"
	assert_success
	assert_output ''
}

@test "a command gets only fds 0, 1 and 2, whatever the caller had open" {
	new_sandbox
	# The caller holds fd 5 and 7 open; none of them may reach the sandbox.
	# No pipeline: its pipes would show for a moment. The glob's own
	# directory fd is closed by the time each name is tested.
	run sbx-exec -s s.json -- sh -c 'for f in /proc/$$/fd/*; do
		[ -e "$f" ] && printf "%s " "${f##*/}"; done; :' 5</etc/hostname 7>/dev/null
	assert_success
	assert_output "0 1 2 "
}

@test "the agent (pid 1) cannot be read or traced from inside" {
	new_sandbox
	run sbx-exec -s s.json -- cat /proc/1/comm
	assert_output sbx-init
	run sbx-exec -s s.json -- cat /proc/1/environ
	assert_failure
	run sbx-exec -s s.json -- sh -c 'head -c 1 /proc/1/mem'
	assert_failure
	run sbx-exec -s s.json -- python3 -c '
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
sys.exit(0 if libc.ptrace(16, 1, 0, 0) == -1 else 1)'
	assert_success
}
