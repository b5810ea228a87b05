/* guest.h - sbx-init as PID 1 of a qemu sandbox's VM: what the host and
 * the guest's agent say over the virtio port named "sbx" (msg.c's frames,
 * without fds: none can cross a VM). */
#ifndef SBX_QEMU_GUEST_H
#define SBX_QEMU_GUEST_H

/* The port's name (QEMU's virtserialport name=), and how many ports at
 * most: the first is SBX_GUEST_PORT, the next ones SBX_GUEST_PORT.1 and
 * so on (the kernel's command line says how many: sbx.ports=N); each
 * runs one command at a time, side by side with the others'. */
#define SBX_GUEST_PORT "sbx"
#define SBX_GUEST_PORTS 4

/* What its PONG says ("proto"): the host starts no VM whose guest speaks
 * another (a guest made by an older sbx: scripts/qemu-guest again). */
#define SBX_GUEST_PROTO 4

enum {
	SBX_GUEST_PING = 1, /* host -> agent: are you there */
	SBX_GUEST_PONG,     /* agent -> host: JSON {"kernel","pid",
			     * "uptime_ms","ports" (how many it serves),
			     * "proto" (SBX_GUEST_PROTO)} */
	SBX_GUEST_POWEROFF, /* host -> agent: sync the disks, power off */
	SBX_GUEST_ERROR,    /* agent -> host: a frame it does not know */
	SBX_GUEST_EXEC,     /* host -> agent: u32 id, u32 flags
			     * (SBX_GUEST_X_*), the workdir ("": /), u32
			     * envc and the "K=V" strings, u32 argc and the
			     * argv strings: run it on the sandbox's disk, in
			     * a session of its own */
	SBX_GUEST_OUT,      /* agent -> host: u32 id, u32 fd (1, 2), the
			     * bytes the command wrote there */
	SBX_GUEST_EXIT,     /* agent -> host: u32 id, u32 wait status; when
			     * it did not start, u32 SBX_GUEST_START_* and
			     * u32 errno (Linux's numbers) */
	SBX_GUEST_IN,       /* host -> agent: u32 id, bytes for its stdin;
			     * none: its end */
	SBX_GUEST_SIGNAL,   /* host -> agent: u32 id, u32 signal for all
			     * the command started (its session) */
	SBX_GUEST_WINCH,    /* host -> agent: u32 id, u32 rows, u32 cols of
			     * its pty */
	SBX_GUEST_SETENV,   /* host -> agent: u32 n and "K=V" strings: the
			     * sandbox's -e (sbx-create's), kept in the
			     * guest's memory, never on a disk, and put where
			     * an EXEC's env has the entry "="; the agent
			     * answers with an empty SETENV once it has */
	SBX_GUEST_SYNC,     /* host -> agent: what the guest's file systems
			     * hold in memory written to the disk (sync(2));
			     * the agent answers with an empty SYNC once it
			     * is (before a snapshot: protocol 4) */
};

/* With network allow: the VM's address on QEMU's user-mode network
 * (-netdev user's defaults), its gateway and its resolver. */
#define SBX_GUEST_NET_ADDR "10.0.2.15"
#define SBX_GUEST_NET_GW "10.0.2.2"
#define SBX_GUEST_NET_DNS "10.0.2.3"

/* Where a command that did not start stopped. */
#define SBX_GUEST_START_ROOT 1u    /* its root or stdio */
#define SBX_GUEST_START_WORKDIR 2u /* its workdir */
#define SBX_GUEST_START_EXEC 3u    /* the exec: ENOENT, EACCES... */
#define SBX_GUEST_START_USER 4u    /* its user: unknown (the message after
				    * the errno), or not to become */

/* An EXEC's flags. */
#define SBX_GUEST_X_STDIN 1u /* IN frames are its stdin (else /dev/null) */
#define SBX_GUEST_X_MKDIR 2u /* the workdir is made when missing */
#define SBX_GUEST_X_TTY 4u   /* a pty is its stdio (u32 rows, u32 cols
			      * after the argv); its output is fd 1's */
#define SBX_GUEST_X_USER 8u  /* who runs it, a string after those (as
			      * docker exec -u: name, uid, name:group...),
			      * through the disk's /etc/passwd and group */

/* The guest's /init: mounts /proc, /sys and /dev, loads the modules
 * /sbx/modules names (one a line, in order, from /sbx/mod/NAME.ko),
 * mounts the sandbox's disk (/dev/vda, ext4) when it has one, brings lo
 * up and eth0 when the VM has a NIC (SBX_GUEST_NET_*), and serves
 * its ports until the host powers it off: a command at a time on each. */
int sbx_guest_main(void);
/* sbx-init --set-times (lib/qemu/times.c), in the VM's commands' root:
 * stdin is records "MTIME_NS PATH\0" (PATH relative to the cwd, no "."
 * or ".." in it), each file's mtime is set (a symlink's own), a file
 * gone is skipped; 0, else an exit code, said on stderr. */
int sbx_guest_set_times(void);

#endif
