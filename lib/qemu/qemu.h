/* qemu.h - the qemu backend's host side, shared by its files only: a
 * sandbox is a microVM whose PID 1 is sbx-init (guest.c), its root an ext4
 * disk made from an image, spoken to over a virtio port (guest.h).
 *
 * A sandbox's directory (in sbx_qemu_root(), named by id as the local
 * backend's are) holds meta.json, disk.qcow2 (its writes, over the image's
 * disk), console.log (the guest's serial console), qmp.sock (QEMU's
 * monitor), and, while it lives, sock: the keeper's socket. The keeper is
 * a process of ours beside QEMU, its parent: it holds the connections of
 * the VM's ports (SBX_GUEST_PORTS) and hands each port to one client
 * (sbx-exec) at a time, ends a command whose client is gone, and ends the
 * VM at its idle timeout. keeper.pid says "PID STARTTIME" of it and of QEMU.
 *
 * With network allow, QEMU runs in a network namespace of its own (and a
 * user namespace, when not root) whose way out is sbx-netd's, as a local
 * sandbox's is: the VM's NIC is QEMU's user-mode network (-netdev user),
 * whose connections are QEMU's sockets in that namespace, so the rules,
 * the DNS and the log of lib/netd apply to them. The directory then holds
 * net.json, net.log and netd.pid too.
 *
 * A paused sandbox's directory holds SBX_PAUSED_FILE, as local's do:
 * "suspend MS" while its QEMU is stopped (QMP stop: its memory and
 * processes kept, no CPU used; the keeper's idle clock does not run), or
 * "stop MS" once its VM has ended (powered off: its disk kept), which a
 * resume boots again on the same disk. */
#ifndef SBX_QEMU_H
#define SBX_QEMU_H

#include <signal.h>
#include <stdint.h>
#include <sys/types.h>

#include "../local/local.h"
#include "guest.h"

/* Where the sandboxes' directories are (qemu.dir). */
const char *sbx_qemu_root(void);
/* Where the guest's kernel and initramfs are (qemu.guest, made by
 * scripts/qemu-guest), and the images' disks are kept. */
const char *sbx_qemu_guest_dir(void);

/* What the keeper starts: QEMU's argv but for the port's fd, which the
 * keeper adds. */
struct sbx_qemu_boot {
	const char *dir;
	char **argv;              /* QEMU and its arguments, NULL-ended */
	uint64_t timeout;         /* idle seconds before it ends, 0: never */
	long long start_ms;       /* how long the guest may take to answer */
	int resume;               /* a stopped sandbox's: its dir stays when
				   * the starter goes */
	int no_thp;               /* QEMU without transparent huge pages */
	uint64_t trim;            /* the VM's memory, which its balloon
				   * trims when idle after the boot and
				   * after later activity; 0: no balloon */
	const struct sbx_cgroups *cg; /* QEMU's (as root), or NULL */
	char **env;               /* --env's "K=V" for the guest, or NULL */
	/* Network allow: QEMU in a network namespace of its own, which
	 * sbx-netd (started by sbx_local_net_spawn with no pid yet: its
	 * fds) serves before QEMU runs; its pid and start time then in
	 * dir/netd.pid. */
	int net;
	int net_ready, net_pidw;
};

/* Starts the keeper (a process of its own, in a session of its own),
 * which starts QEMU and waits for the guest's agent: 0 once it answered,
 * else -1 with err (the console's last lines in it), and nothing runs.
 * Should we die before, the keeper ends the VM and removes b->dir. */
int sbx_qemu_keeper_start(const struct sbx_qemu_boot *b, struct sbx_err *err);

/* The keeper of dir and its QEMU, when alive (their pids, else 0). */
void sbx_qemu_pids(const char *dir, pid_t *keeper, pid_t *qemu);


/* How long the VM of dir has been suspended in all, in ms, a suspend
 * going on included. */
long long sbx_qemu_suspended_ms(const char *dir);

/* Sent to the keeper: end the VM as a stop does (its command killed,
 * the guest's disks synced, the guest powered off), then end. */
#define SBX_QEMU_SIG_STOP SIGUSR1

/* qmp.c: cmd (one without arguments: "stop", "cont") to the QEMU of
 * dir, its answer awaited: 0, or -1 with err. _call: with args (NULL:
 * none), its "return" in *ret (when not NULL). sbx_qemu_hmp: a line of
 * the human monitor's, what it printed (to free; "" for nothing), or
 * NULL with err. */
int sbx_qemu_qmp(const char *dir, const char *cmd, struct sbx_err *err);
/* ca.c: the CA sbx-netd made for the sandbox of ref and dir into its
 * VM's trust store (/etc/ssl/certs), as root: 0, or -1 with err. */
int sbx_qemu_ca_install(const json_t *ref, const char *dir,
    struct sbx_err *err);
int sbx_qemu_qmp_call(const char *dir, const char *cmd, const json_t *args,
    json_t **ret, struct sbx_err *err);
char *sbx_qemu_hmp(const char *dir, const char *line, struct sbx_err *err);

/* The ext4 disk of an image's root filesystem (rootfs), kept in the guest
 * directory by digest (NULL: a directory's, made anew in dir), and the
 * sandbox's own over it, dir/disk.qcow2. */
int sbx_qemu_disk(const char *rootfs, const char *digest, const char *dir,
    struct sbx_err *err);

/* argv (a tool: qemu-img, mkfs.ext4) run to its end: 0, or -1 with its
 * stderr's last line in err. */
int sbx_qemu_run_tool(char *const argv[], struct sbx_err *err);

/* snapshot.c: the backend's snapshots (its ops snapshot and snapshots;
 * none exported: no SBX_CAP_SNAP_EXPORT), in sbx_qemu_snap_root(): a snapshot's meta (NULL with
 * err: SBX_EX_NOSANDBOX for none) and its directory (*dir, to free,
 * when dir is not NULL), and the disk of a sandbox --from it: dir's
 * disk.qcow2 over the one in snapdir. */
const char *sbx_qemu_snap_root(void);
json_t *sbx_qemu_snap_get(const char *id_or_name, char **dir,
    struct sbx_err *err);
int sbx_qemu_snap_disk(const char *snapdir, const char *dir,
    struct sbx_err *err);
json_t *sbx_qemu_snapshot(const json_t *ref, const char *name,
    struct sbx_err *err);
int sbx_qemu_snapshots(const char *op, const char *id,
    int (*fn)(json_t *snap, void *arg), void *arg, struct sbx_err *err);
/* sbx-snapshot export (snap_export): through lib/snapdiff.c, a VM of
 * the snapshot and one of its image, compared. */
int sbx_qemu_snap_export(const char *id_or_name, int fd,
    struct sbx_err *err);

/* The last lines of dir/console.log, for an error ("" when none). */
void sbx_qemu_console_tail(const char *dir, char *buf, size_t n);

/* frames.c: a frame (msg.c's layout) added to q; each whole frame of in
 * to fn and taken out of it, until fn says -1 (then -1), or -1 for a
 * frame longer than SBX_MSG_MAX. */
void sbx_qemu_frame_put(struct sbx_buf *q, uint32_t type, const void *p,
    size_t n);
int sbx_qemu_frames_take(struct sbx_buf *in, int (*fn)(void *arg,
    uint32_t type, const char *p, size_t n), void *arg);

int sbx_qemu_exec(const json_t *ref, char *const argv[],
    const struct sbx_exec_opts *o, struct sbx_exec_result *res,
    struct sbx_err *err);

#endif
