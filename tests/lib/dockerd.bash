# dockerd.bash - a private Docker engine for the tests: its own dockerd and
# containerd, state, socket, cgroups and bridge, all named after one
# directory /tmp/sbx-dockerd.XXXXXX, so that an engine the user runs is never
# touched.  In a bats file:
#
#   load lib/helper
#   load lib/dockerd
#   setup_file()    { sbx_dockerd_start && sbx_docker_image; }
#   teardown_file() { sbx_dockerd_stop; }
#
# sbx_dockerd_start exports DOCKER_HOST (unix://DIR/docker.sock),
# SBX_TEST_DOCKERD_DIR (DIR), SBX_TEST_DOCKERD_PID (dockerd's pid) and
# SBX_TEST_DOCKERD_BRIDGE; sbx_docker_image makes $SBX_TEST_IMAGE.  Needs
# root, and docker.io, runsc, busybox-static, curl (scripts/install-deps).
# An engine left behind by a killed run: sbx_dockerd_stop /tmp/sbx-dockerd.X
#
# How it stays private:
# - dockerd runs in a mount namespace of its own with a tmpfs on /run: the
#   paths that dockerd, containerd and the shims hard-code there
#   (/run/containerd, /run/docker/plugins) are private, a system containerd
#   is never found, so dockerd supervises its own, and the overlay and netns
#   mounts never show on the host.  (So a mount made on the host after the
#   start, or anything under the host's /run, cannot be bind-mounted into a
#   container.)
# - Containers' cgroups go under sbx-dockerd-XXXXXX (cgroup-parent), not
#   /docker.
# - The default bridge is one made here, sbxdXXXXXX, with a /24 of its own
#   in 10.213.0.0/16; dockerd is told not to touch iptables, IP forwarding
#   or masquerading.  A container on it ("bridge", the backend's --network
#   allow) reaches the host at the bridge address and nothing further (no
#   NAT); NetworkMode "none" has a loopback only.
# - Runtime "runsc" is gVisor with --platform=ptrace (no KVM here) and
#   --network=host: gVisor passes its sockets to the kernel inside the
#   container's own network namespace, the one Docker made.  Its own network
#   stack (--network=sandbox) cannot start on this kernel: runsc 20221219
#   takes any namespace where /proc/sys/net/core/rmem_default exists for the
#   host's, and on this kernel (6.18) every namespace has it.

SBX_TEST_IMAGE=sbx-test-busybox:latest

# True when process $1 exists and is not a zombie.
_sbx_dockerd_alive() {
	local st
	read -r st 2>/dev/null <"/proc/$1/stat" || return 1
	st=${st##*) }
	[ "${st%% *}" != Z ] && [ "${st%% *}" != X ]
}

# True when process $2 is the dockerd of directory $1 (and not a process
# that got its pid since).
_sbx_dockerd_is_ours() {
	_sbx_dockerd_alive "$2" &&
		grep -qF "$1/daemon.json" "/proc/$2/cmdline" 2>/dev/null
}

# A subnet for the bridge, 10.213.N (/24): the first from N = pid % 250
# that no route of the host covers or falls in (a default route aside, of
# any type in any table: a test's "unreachable default table T" too).
_sbx_dockerd_subnet() {
	local n i
	n=$(($$ % 250 + 1))
	for ((i = 0; i < 250; i++)); do
		if ! {
			ip -4 route show table all root "10.213.$n.0/24"
			ip -4 route show table all match "10.213.$n.0/24"
		} | grep -Eqv '^([a-z]+ )?default( |$)'; then
			echo "10.213.$n"
			return 0
		fi
		n=$((n % 250 + 1))
	done
	echo "no free 10.213.N.0/24 for a bridge" >&2
	return 1
}

# Start a private dockerd; returns once its API answers (or fails, with the
# tail of its log, after 30 s).
sbx_dockerd_start() {
	local dir sock br net pid end
	command -v dockerd >/dev/null || {
		echo "dockerd is not installed (scripts/install-deps)" >&2
		return 1
	}
	dir=$(mktemp -d /tmp/sbx-dockerd.XXXXXX) || return 1
	sock=$dir/docker.sock
	br=sbxd${dir##*.}
	if ! net=$(_sbx_dockerd_subnet) ||
	    ! ip link add name "$br" type bridge; then
		rm -rf "$dir"
		return 1
	fi
	echo "$br" >"$dir/bridge"
	# SBX_TEST_DOCKERD_RUNSC=no: an engine that has never heard of gVisor.
	local runsc=
	[ "${SBX_TEST_DOCKERD_RUNSC:-}" = no ] || runsc='
	    "runsc": {
	      "path": "'"$(command -v runsc || echo /usr/bin/runsc)"'",
	      "runtimeArgs": ["--platform=ptrace", "--network=host"]
	    }
	  '
	if ! ip addr add "$net.1/24" dev "$br" ||
	    ! ip link set "$br" up; then
		sbx_dockerd_stop "$dir"
		return 1
	fi
	cat >"$dir/daemon.json" <<-JSON
	{
	  "bridge": "$br",
	  "iptables": false,
	  "ip6tables": false,
	  "ip-forward": false,
	  "ip-masq": false,
	  "userland-proxy": false,
	  "cgroup-parent": "sbx-dockerd-${dir##*.}",
	  "exec-opts": ["native.cgroupdriver=cgroupfs"],
	  "storage-driver": "${SBX_TEST_DOCKERD_STORAGE:-overlay2}",
	  "shutdown-timeout": 5,
	  "deprecated-key-path": "$dir/key.json",
	  "log-driver": "json-file",
	  "runtimes": {${runsc}}
	}
	JSON
	# 3>&-: bats waits for whatever holds its fd 3 open. dockerd starts
	# with every signal at its default, as a service manager starts it:
	# a container's commands inherit what the engine had ignored (env
	# --default-signal; 32 and 33, which libc will not set, through the
	# kernel's rt_sigaction, x86_64's number 13).
	local dfl='import ctypes, os, sys
if os.uname().machine == "x86_64":
    dfl = (ctypes.c_ulong * 4)(0, 0, 0, 0)
    for s in (32, 33):
        ctypes.CDLL(None).syscall(13, s, dfl, None, 8)
os.execvp(sys.argv[1], sys.argv[1:])'
	unshare --mount --propagation private -- \
	    sh -c 'mount -t tmpfs -o mode=755 sbx-dockerd /run && exec "$@"' sh \
	    python3 -c "$dfl" env --default-signal \
	    dockerd --config-file "$dir/daemon.json" \
	    --host "unix://$sock" \
	    --data-root "$dir/data" --exec-root "$dir/exec" \
	    --pidfile "$dir/dockerd.pid" \
	    </dev/null >"$dir/dockerd.log" 2>&1 3>&- &
	pid=$!
	echo "$pid" >"$dir/pid"
	export SBX_TEST_DOCKERD_DIR=$dir SBX_TEST_DOCKERD_PID=$pid
	export SBX_TEST_DOCKERD_BRIDGE=$br DOCKER_HOST=unix://$sock
	end=$((SECONDS + 30))
	while ((SECONDS < end)); do
		if [ "$(curl -s -m 2 --unix-socket "$sock" http://d/_ping)" = OK ]
		then
			readlink "/proc/$pid/ns/mnt" >"$dir/mntns"
			if [ "$(cat "$dir/mntns")" != "$(readlink /proc/self/ns/mnt)" ]
			then
				return 0
			fi
			echo "private dockerd is not in a mount namespace of its own" >&2
			break
		fi
		_sbx_dockerd_alive "$pid" || break
		sleep 0.1
	done
	echo "private dockerd (pid $pid) did not answer on $sock:" >&2
	tail -n 30 "$dir/dockerd.log" >&2
	sbx_dockerd_stop
	return 1
}

# Pids in the cgroups of the engine's containers, $1 (its cgroup parent):
# one hierarchy is enough, each holds every process.
_sbx_dockerd_cgroup_pids() {
	local d
	for d in /sys/fs/cgroup/pids/"$1" /sys/fs/cgroup/unified/"$1" \
	    /sys/fs/cgroup/"$1"; do
		[ -d "$d" ] || continue
		find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null || true
		break
	done
	return 0
}

# Pids of what is left of the engine in $1: processes in its mount
# namespace (containerd, shims), in its cgroups (containers, gVisor's
# sandbox and gofer), and their descendants.  Few forks: they are slow.
_sbx_dockerd_pids() {
	local dir=$1 ns cg p f line
	local -A mine=() kids=()
	read -r ns 2>/dev/null <"$dir/mntns" || ns=
	cg=sbx-dockerd-${dir##*.}
	# Never the namespace of the host (or of these tests).
	if [ -n "$ns" ] && [ "$ns" != "$(readlink /proc/self/ns/mnt)" ]; then
		# -lname takes a pattern: [ and ] match as ?.
		ns=${ns//[][]/?}
		while read -r f; do
			p=${f#/proc/}
			mine[${p%%/*}]=1
		done < <(find /proc/[0-9]*/ns/mnt -maxdepth 0 -lname "$ns" \
		    2>/dev/null)
	fi
	for p in $(_sbx_dockerd_cgroup_pids "$cg"); do mine[$p]=1; done
	# dockerd itself, for an engine that never answered (no mntns yet).
	read -r p 2>/dev/null <"$dir/pid" || p=
	if [ -n "$p" ] && _sbx_dockerd_is_ours "$dir" "$p"; then
		mine[$p]=1
	fi
	unset "mine[$$]" "mine[$BASHPID]"
	# Descendants: children lists from /proc/*/stat, then a walk.
	for f in /proc/[0-9]*/stat; do
		read -r line 2>/dev/null <"$f" || continue
		p=${f#/proc/}
		p=${p%/stat}
		line=${line##*) }
		line=${line#* }
		kids[${line%% *}]+=" $p"
	done
	local todo=("${!mine[@]}")
	while ((${#todo[@]})); do
		p=${todo[-1]}
		unset 'todo[-1]'
		for f in ${kids[$p]:-}; do
			[ -n "${mine[$f]:-}" ] && continue
			mine[$f]=1
			todo+=("$f")
		done
	done
	((${#mine[@]})) && printf '%s\n' "${!mine[@]}"
	return 0
}

# Stop the engine started by sbx_dockerd_start (or the one whose directory
# is $1) and remove every trace of it: processes, cgroups, mounts, bridge,
# directory.  Safe under bats' set -e; fails, saying why, if a trace stays.
sbx_dockerd_stop() {
	local dir=${1:-${SBX_TEST_DOCKERD_DIR:-}} pid i pids='' left='' m br cg
	local rc=0
	[ -n "$dir" ] && [ -d "$dir" ] || return 0
	case $dir in /tmp/sbx-dockerd.*) ;; *)
		echo "not a private dockerd directory: $dir" >&2
		return 1 ;;
	esac
	cg=sbx-dockerd-${dir##*.}
	read -r pid 2>/dev/null <"$dir/pid" || pid=
	if [ -n "$pid" ] && _sbx_dockerd_is_ours "$dir" "$pid"; then
		# The rest of the engine, found while dockerd still holds its
		# namespace: containerd and shims may outlive it.
		pids=$(_sbx_dockerd_pids "$dir")
		# Containers die at once: dockerd would give each 10 s.
		# shellcheck disable=SC2046
		kill -KILL $(_sbx_dockerd_cgroup_pids "$cg") 2>/dev/null || true
		kill -TERM "$pid" 2>/dev/null || true
		for ((i = 0; i < 150; i++)); do
			_sbx_dockerd_alive "$pid" || break
			sleep 0.1
		done
		if _sbx_dockerd_alive "$pid"; then
			echo "dockerd $pid ignored SIGTERM for 15 s; killing it" >&2
			kill -KILL "$pid" 2>/dev/null || true
		fi
	fi
	# Reap it if it is our child (a no-op otherwise).
	[ -z "$pid" ] || wait "$pid" 2>/dev/null || true
	[ -n "$pids" ] || pids=$(_sbx_dockerd_pids "$dir")
	for ((i = 0; i < 50; i++)); do
		left=$( { echo "$pids"; _sbx_dockerd_pids "$dir"; } |
		    sort -u | while read -r p; do
			if [ -n "$p" ] && _sbx_dockerd_alive "$p"; then echo "$p"; fi
		done)
		[ -z "$left" ] && break
		# shellcheck disable=SC2086
		kill -KILL $left 2>/dev/null || true
		sleep 0.1
	done
	if [ -n "$left" ]; then
		echo "private dockerd: still alive after SIGKILL:" "$left" >&2
		rc=1
	fi
	# Mounts under $dir on the host (there are none while dockerd keeps
	# them in its namespace), deepest first.
	while read -r m; do
		umount "$m" 2>/dev/null || umount -l "$m" || rc=1
	done < <(awk -v d="$dir/" 'index($5, d) == 1 { print $5 }' \
	    /proc/self/mountinfo | sort -r)
	# A killed container's cgroup empties once its zombie is reaped, by
	# the host's init, a moment later.
	for ((i = 0; i < 100; i++)); do
		left=
		for m in /sys/fs/cgroup/*/"$cg" /sys/fs/cgroup/"$cg"; do
			[ -d "$m" ] || continue
			find "$m" -depth -type d -exec rmdir {} + 2>/dev/null ||
				left+=" $m"
		done
		[ -z "$left" ] && break
		sleep 0.1
	done
	if [ -n "$left" ]; then
		echo "private dockerd: cgroups left:$left" >&2
		rc=1
	fi
	read -r br 2>/dev/null <"$dir/bridge" || br=
	if [ -n "$br" ] && [ -e "/sys/class/net/$br" ]; then
		ip link delete "$br" || rc=1
	fi
	rm -rf "$dir" || rc=1
	if [ "$dir" = "${SBX_TEST_DOCKERD_DIR:-}" ]; then
		unset SBX_TEST_DOCKERD_DIR SBX_TEST_DOCKERD_PID
		unset SBX_TEST_DOCKERD_BRIDGE DOCKER_HOST
	fi
	return "$rc"
}

# Make $SBX_TEST_IMAGE in the private engine unless it has it: Debian's
# static busybox with all its applets in /usr/bin (/bin, /sbin and /usr/sbin
# lead there), root in /etc/passwd and /etc/group, /tmp, /root and an empty
# /workspace.
sbx_docker_image() {
	local root rc
	[ -n "${SBX_TEST_DOCKERD_DIR:-}" ] || {
		echo "sbx_docker_image: no private dockerd (sbx_dockerd_start)" >&2
		return 1
	}
	if docker image inspect "$SBX_TEST_IMAGE" >/dev/null 2>&1; then
		return 0
	fi
	root=$SBX_TEST_DOCKERD_DIR/image-root
	mkdir -p "$root"/{usr/bin,etc,root,tmp,workspace,proc,sys,dev} &&
		chmod 1777 "$root/tmp" && chmod 700 "$root/root" &&
		ln -s usr/bin "$root/bin" && ln -s usr/bin "$root/sbin" &&
		ln -s bin "$root/usr/sbin" &&
		# One process for all 270 links (they point at /usr/bin/busybox).
		/bin/busybox --install -s "$root/usr/bin" &&
		rm -f "$root/usr/bin/busybox" &&
		cp /bin/busybox "$root/usr/bin/busybox" || return 1
	printf '%s\n' 'root:x:0:0:root:/root:/bin/sh' \
	    'nobody:x:65534:65534:nobody:/nonexistent:/bin/false' \
	    >"$root/etc/passwd"
	printf '%s\n' 'root:x:0:' 'nogroup:x:65534:' >"$root/etc/group"
	rc=0
	tar -C "$root" --numeric-owner --owner=0 --group=0 -cf - . |
		docker import \
		    --change 'ENV PATH=/usr/sbin:/usr/bin:/sbin:/bin' \
		    --change 'CMD ["/bin/sh"]' \
		    - "$SBX_TEST_IMAGE" >/dev/null || rc=1
	rm -rf "$root"
	return "$rc"
}
