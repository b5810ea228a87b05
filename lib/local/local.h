/* local.h - internals of the local backend, shared by its files only */
#ifndef SBX_LOCAL_H
#define SBX_LOCAL_H

#include <stdint.h>
#include <sys/types.h>

#include "../msg.h"
#include "../internal.h"

/* Sandbox root uid/gid of a sandbox created by root: a per-sandbox range
 * of 65536 ids starting far above any real user's. */
#define SBX_UID_BASE 1000000000u
#define SBX_UID_RANGE 65536u
#define SBX_UID_SLOTS 30000u

#define SBX_ID_LEN 12

/* --- the agent's messages (msg.c frames them) ------------------------- */

enum {
	SBX_MSG_EXEC = 1, /* client -> agent: run a command */
	SBX_MSG_INFO,     /* client -> agent: report activity */
	SBX_MSG_SIGNAL,   /* client -> agent: signal the command */
	SBX_MSG_STARTED,  /* agent -> client: running (pty master attached) */
	SBX_MSG_EXIT,     /* agent -> client: wait status */
	SBX_MSG_ERROR,    /* agent -> client: could not start */
	SBX_MSG_INFOREP,  /* agent -> client: activity */
	SBX_MSG_RESUMED,  /* client -> agent: thawed after u64 ms frozen */
	SBX_MSG_DIRTY,    /* client -> agent: what changed since a token */
	SBX_MSG_DIRTYREP, /* agent -> client: token, all?, directories */
	SBX_MSG_SHELL,    /* client -> agent: a shell session call (JSON) */
	SBX_MSG_SHELLREP, /* agent -> client: its answer (JSON) */
	SBX_MSG_ADOPT,    /* client -> agent: taken from local.warm's pool */
};

/* What SBX_MSG_DIRTYREP says of a directory (relative to the workdir). */
enum {
	SBX_DIRTY_FLAT = 1, /* files in it changed: list it */
	SBX_DIRTY_TREE = 2, /* made or moved in: list all below it */
	SBX_DIRTY_GONE = 4, /* removed or moved away: nothing below is left */
};

enum {
	SBX_EXEC_TTY = 1,
	SBX_EXEC_STDIN = 2,  /* an fd for stdin is attached */
	SBX_EXEC_CGROUP = 4, /* cgroup.procs and cgroup.kill fds attached */
	SBX_EXEC_USER = 8,   /* the user to run as follows the env */
};

/* --- watch.c: the agent's record of changed directories (inotify) ----- */

/* Watch workdir, from the first SBX_MSG_DIRTY on (every answer is "list
 * it all" when it cannot). */
void sbx_watch_start(const char *workdir);
/* The inotify fd to poll, or -1 while not watching. */
int sbx_watch_fd(void);
/* Take in the events that are waiting. */
void sbx_watch_read(void);
/* Answer SBX_MSG_DIRTY (strings: the token of the last complete listing,
 * the directory to be listed). */
void sbx_watch_reply(int sock, struct sbx_msg *m);

/* --- sessions.c: the shell sessions an agent keeps (sbx-shell) ---------- */

#define SBX_SESS_MAX 64
struct pollfd;
/* Their shells start in workdir with env, prep run in each before it
 * execs; activity, when not NULL, is called on each call answered. */
void sbx_sess_setup(const char *workdir, char **env, int (*prep)(void),
    void (*activity)(void));
/* A SBX_MSG_SHELL on sock (which it takes). */
void sbx_sess_call(int sock, struct sbx_msg *m);
/* The fds to poll: at most 2 * SBX_SESS_MAX. */
size_t sbx_sess_pollfds(struct pollfd *p);
/* Take in what the shells wrote; answer the calls that are due. */
void sbx_sess_pump(void);
/* 1 when pid was a session's shell. */
int sbx_sess_reaped(pid_t pid);
/* Milliseconds until a call's answer is due, -1 for none. */
long long sbx_sess_next(long long now);
/* A call waits, or a command runs. */
int sbx_sess_busy(void);
/* Frozen for ms: the calls' deadlines move with it. */
void sbx_sess_resumed(long long ms);

/* --- paths.c: where sandboxes live --------------------------------------- */

const char *sbx_local_root(void);
/* A new random sandbox id: SBX_ID_LEN hex digits and a NUL. */
void sbx_local_new_id(char *id);
/* Drop root/.names/name if it still names id (name NULL: nothing). */
/* Remove a killed sandbox's directory dir: renamed into ROOT/.trash at
 * once, removed there by a process of its own that the caller does not
 * wait for (sbx-gc removes what one killed left: sbx_local_sweep), after
 * sbx_local_reap; -1 (errno) when it could not be renamed there. */
int sbx_local_trash(const char *dir, const char *id);
/* The end of sandbox id whose directory (or what is left of it) is dir,
 * killed by cgroup.kill and not waited for: wait for its processes to
 * end (its mounts go with the last), remove its cgroups, wait for its
 * disk's loop device to let go; -1 (err) when a process would not die
 * or a cgroup stays. */
int sbx_local_reap(const char *dir, const char *id, json_t *meta,
    struct sbx_err *err);
/* What sandbox id, whose directory (or what is left of it) is dir, holds
 * on the host: its processes and cgroups (sbx_local_reap), then in the
 * store its uid slot and its name, where they still name it; -1 when
 * its processes or cgroups stay (the slot and name stay taken then). */
int sbx_local_release_of(const char *dir, const char *id);
/* A store's lock, DIR/.lock, held until the fd is closed: shared while a
 * sandbox or a snapshot comes to stand on what is in DIR (snapshots,
 * volumes) until its meta.json says so, exclusive while rm looks for
 * users and removes. -1 when DIR is not there (nothing in it to
 * remove) or the lock cannot be had: go on without. */
int sbx_local_lock(const char *dir, int exclusive);
/* sbx_local_lock on the volumes' directory, made when missing. */
int sbx_local_volumes_lock(int exclusive);
void sbx_local_release_name(const char *root, const char *name,
    const char *id);
int sbx_local_valid_id(const char *id);
/* When the directory dir was made, in epoch seconds, for a sandbox's
 * that has no meta.json yet: its birth time (what a process the create
 * left writes there does not move it), or its mtime when that is older
 * (set back by hand) or the filesystem keeps no birth time; -1 when it
 * cannot be read. */
long long sbx_local_dir_born(const char *dir);
/* The sandbox directory for an id or a name; NULL when there is none. */
char *sbx_local_find(const char *id_or_name, char **id_out);
/* The same in another store of sandbox directories (the qemu backend's:
 * it shares the local one's ids and names). */
char *sbx_local_find_in(const char *root, const char *id_or_name,
    char **id_out);
/* fn with info(id) of each sandbox in root, by id. */
int sbx_local_list_in(const char *root, json_t *(*info)(const char *id),
    int (*fn)(json_t *info, void *arg), void *arg, struct sbx_err *err);
/* A listing's first fields, from a sandbox's meta: backend, id, name,
 * status, image, workdir, its times, timeout and labels. */
json_t *sbx_local_info_head(const char *backend, const char *id,
    const json_t *meta, const char *status, long long created,
    long long active);
/* dir/meta.json, or NULL. */
json_t *sbx_local_meta(const char *dir);
/* root/.names/name -> id, or SBX_EX_FAIL when it names a sandbox that is
 * there. */
int sbx_local_claim_name(const char *root, const char *name, const char *id,
    struct sbx_err *err);
/* The directory a ref names of a sandbox not in this store but in the
 * one of another SBX_LOCAL_DIR (its meta.json there), or NULL. */
const char *sbx_local_other_dir(const json_t *ref);
/* The init's pid of a sandbox's meta while it runs, else 0. */
pid_t sbx_local_live(json_t *meta);
/* A sandbox made ahead for local.warm's pool (warm.c), warm its key. */
int sbx_local_make_warm(const struct sbx_spec *spec, const char *warm,
    json_t **ref, struct sbx_err *err);
/* warm.c: the backend's warm_take and warm_fill (struct sbx_backend_ops). */
int sbx_local_warm_take(const struct sbx_spec *spec, json_t **ref,
    struct sbx_err *err);
void sbx_local_warm_fill(const struct sbx_spec *spec);
/* sbx-gc: the pools' files of sandboxes gone, and pools left empty,
 * removed. */
void sbx_local_warm_sweep(void);
/* Connect to the agent's socket in dir; -1 with errno. */
int sbx_local_connect(const char *dir);
/* The same for another socket of dir's (a qemu sandbox's qmp.sock). */
int sbx_local_connect_to(const char *dir, const char *name);

/* A paused sandbox's directory holds this file: "suspend MS" or "stop MS"
 * (MS: CLOCK_MONOTONIC milliseconds when it was paused). */
#define SBX_PAUSED_FILE "paused"
/* A small file of dir's (< 256 bytes), or NULL. */
char *sbx_local_read_small(const char *dir, const char *file);
/* How the sandbox in dir is paused (SBX_PAUSED_FILE: 's' suspended, 't'
 * stopped, 0 not) and since when (sbx_mono_ms); mark and unmark it
 * (local and qemu alike). */
int sbx_local_paused(const char *dir, long long *when);
int sbx_local_mark_paused(const char *dir, const char *how,
    struct sbx_err *err);
void sbx_local_unmark_paused(const char *dir);

/* --- disk.c: the quota on what a sandbox writes (i20-disk) ----------- */

#define SBX_DISK_IMAGE "disk.img" /* DIR/disk.img, its ext4 image */
#define SBX_DISK_MOUNT "disk"     /* DIR/disk, where the sandbox mounts it */

/* The sandbox in dir's disk of size bytes (DIR/disk.img: a stopped
 * sandbox's, else a new one) on a loop device, mounted nowhere yet, made
 * by a helper process meanwhile: start returns the socket that finish
 * takes (-1 with err), finish the mount's fd (for move_mount), with the
 * overlay's upper and work on it owned by uid and gid, or -1 with err;
 * dev (devn bytes) the loop device's name ("loop7"). */
int sbx_local_disk_start(const char *dir, uint64_t size, pid_t *pid,
    struct sbx_err *err);
int sbx_local_disk_finish(int sock, pid_t pid, uid_t uid, gid_t gid,
    char *dev, size_t devn, struct sbx_err *err);
/* Whether a new disk of *size bytes fits in what the store (root, or
 * its nearest existing parent) has free: an asked one (!dflt) larger
 * than that is SBX_EX_USAGE; a default one is cut to what is free less a
 * margin (sbx_note says so), or refused, SBX_EX_FAIL and ENOSPC, where
 * not even SBX_DISK_MIN fits. */
int sbx_local_disk_fit(const char *root, uint64_t *size, int dflt,
    struct sbx_err *err);
/* Wait up to ms until no loop device holds DIR/disk.img (its sandbox's
 * end releases it): 0, or -1 when one still does. dev: the device its
 * sandbox was given (meta.json's "loop"), the only one looked at; NULL:
 * every loop device is. */
int sbx_local_disk_wait(const char *dir, const char *dev, int ms);
/* The disk of the sandbox in dir mounted nowhere (a live sandbox's own
 * filesystem again, through its loop device), for its upper to be read:
 * the mount's fd; -2 when it has no disk; -1 with err. */
int sbx_local_disk_open(const char *dir, struct sbx_err *err);
/* Copy what in is made of (its data; its holes stay holes): 0, or -1
 * with errno. */
int sbx_local_copy_sparse(int in, int out);

/* --- snapshot.c ---------------------------------------------------------- */

/* The backend's snapshot operation (struct sbx_backend_ops). */
json_t *sbx_local_snapshot(const json_t *ref, const char *name,
    struct sbx_err *err);
/* A snapshot's tree (by id), or NULL when it is gone. */
char *sbx_snap_tree(const char *sid);
/* What a store of snapshots is, in root (the local store's, or another
 * backend's own): ROOT/snp-HEX/meta.json, ROOT/.names/NAME -> snp-HEX.
 * An id of one: snp- and a sandbox id. */
int sbx_snap_valid_id(const char *s);
/* What a killed sbx-snapshot (or rm) left in the snapshot store at root:
 * a snapshot's directory with no meta.json, removed while no take is at
 * work (tried, never waited for); the next take and sbx-gc call it. */
void sbx_snap_clean_stale(const char *root);
/* The directory of snapshot id_or_name in root (its id in *id_out, to
 * free), NULL when there is none. */
char *sbx_snap_find_in(const char *root, const char *id_or_name,
    char **id_out);
/* The meta.json of snapshot directory dir, or NULL with err (SBX_EX_DATA,
 * naming id_or_name). */
json_t *sbx_snap_meta_in(const char *dir, const char *id_or_name,
    struct sbx_err *err);
/* fn for the meta.json of each snapshot in root, until it returns
 * non-zero (returned); one being taken or removed (no meta.json) is
 * passed over. */
int sbx_snap_list_in(const char *root, int (*fn)(json_t *meta, void *arg),
    void *arg, struct sbx_err *err);
/* root/.names/name -> sid; SBX_EX_FAIL when it names a snapshot that is
 * there (a name left by one that is gone is taken over). */
int sbx_snap_claim_name_in(const char *root, const char *name,
    const char *sid, struct sbx_err *err);
/* Add the entries of dir (those valid says are of it) whose meta.json's
 * layers hold id to b, comma-separated. */
void sbx_snap_users_in(const char *dir, int (*valid)(const char *),
    const char *id, struct sbx_buf *b);
/* A new snapshot's meta (sbx-snapshot(1)'s OUTPUT) as far as every
 * backend's says the same: ids, when, the image, workdir, labels and
 * limits of the sandbox whose meta is sm, the names of its -e (sm's
 * env_key). The caller adds size, files, memory, pause_ms, layers. */
json_t *sbx_snap_meta_new(const char *backend, const char *sid,
    const char *id, const char *name, const json_t *sm, const char *env_key);

/* --- cgroup.c ------------------------------------------------------------ */

struct sbx_cgroups {
	char *paths[8]; /* one directory per hierarchy we use */
	int n;
	char *unified;  /* the cgroup v2 directory, or NULL */
	char *memory, *pids, *freezer, *cpuacct; /* borrowed from paths */
};

/* Create the sandbox's cgroups and apply the limits; a default one
 * (spec->limits_default) with no cgroup to hold it is zeroed in spec,
 * with a note. */
int sbx_cg_create(struct sbx_cgroups *cg, const char *id,
    struct sbx_spec *spec, struct sbx_err *err);
/* Find the existing cgroups of a sandbox. */
void sbx_cg_find(struct sbx_cgroups *cg, const char *id);
/* For a process that joins cg by itself (sbx_cg_join): the file of each
 * hierarchy it writes "0" to, opened into fds (cg->n of them, at most 8;
 * -1 with err). "tasks" on v1: moving the writing thread, current, takes
 * none of the global lock a move by pid takes, whose release waits for
 * an RCU grace period (5 to 15 ms here; Linux 6.0 on); cgroup.procs on
 * v2 (*v2: its index, or -1), which takes that lock: a process made by
 * clone3(CLONE_INTO_CGROUP) is there already and skips it. Opened by
 * whoever may (root), written by whoever joins. */
int sbx_cg_join_open(const struct sbx_cgroups *cg, int *fds, int *v2,
    struct sbx_err *err);
/* Write "0" to each of the n fds but fds[skip] (-1: none) and close them
 * all; -1 (errno) if a write failed. Only system calls (a clone's child
 * calls it), and only by a single-threaded process: v1 moves the thread
 * that writes. */
int sbx_cg_join(int *fds, int n, int skip);
/* Kill everything in it and wait (up to ms) for it to empty. */
int sbx_cg_kill(const struct sbx_cgroups *cg, int ms);
/* v2: send every process in it SIGKILL (cgroup.kill: none of them runs
 * again) without waiting for their end; -1 where that cannot be done
 * (no v2 cgroup, or a kernel before 5.14): sbx_cg_kill then. */
int sbx_cg_kill_start(const struct sbx_cgroups *cg);
int sbx_cg_remove(const struct sbx_cgroups *cg);
/* sbx-gc: the cgroups named for which mine() is 1, empty (no process
 * in them or below) and made more than SBX_CG_SWEEP_AGE seconds before
 * the epoch second before, removed; how many. A sandbox's cgroup is
 * empty only once it ended (its init, or QEMU, is in it): such are
 * what a kill whose store was removed under its remover left, or a
 * store's whose sandboxes were never killed. */
#define SBX_CG_SWEEP_AGE 600
int sbx_cg_sweep(int (*mine)(const char *name), long long before);
/* Freeze (on) or thaw the whole sandbox and wait (up to ms) for it. */
int sbx_cg_freeze(const struct sbx_cgroups *cg, int on, int ms);
long long sbx_cg_read_ll(const char *dir, const char *file);
void sbx_cg_release(struct sbx_cgroups *cg);
/* A per-exec child of the unified cgroup, for kill on timeout. */
char *sbx_cg_exec_new(const struct sbx_cgroups *cg, int *procs_fd,
    int *kill_fd);
void sbx_cg_exec_free(char *path, int killed);

/* --- ns.c: the namespaces, the uid range, the rootfs -------------------- */

/* At most so many volumes in a sandbox (their mounts' fds go in one
 * message with the image's and the disk's). */
#define SBX_LOCAL_VOLUMES_MAX (SBX_MSG_FDS - 2)

struct sbx_local_setup {
	const char *dir;    /* the sandbox directory */
	const char *id;
	const char *hostname;
	const char *image;  /* NULL: host */
	const char *workdir;
	int rootless;
	int accounts;       /* host image: DIR/passwd and DIR/group */
	uid_t uid_base;     /* sandbox root on the host */
	gid_t gid_base;
	int init_fd;        /* the sbx-init binary */
	int config_fd;      /* the agent's configuration */
	int listen_fd;
	int status_fd;
	int log_fd;
	int image_fd;       /* an idmapped mount of the image, or -1 */
	int disk_fd;        /* the disk's mount (disk.c), or -1: none */
	/* A sandbox from a snapshot: its layers, top first (idmapped
	 * mounts; rootless, their trees' paths). */
	int nsnap;
	int snap_fd[SBX_SNAP_DEPTH];
	const char *snap_path[SBX_SNAP_DEPTH];
	uint64_t shm;       /* /dev/shm's size; 0: tmpfs's own (half the
	                     * host's memory) */
	/* Volumes: where each goes, its directory on the host, and its
	 * idmapped mount (-1: bound by path, rootless). */
	int nvols;
	const char *vol_dst[SBX_LOCAL_VOLUMES_MAX];
	char *vol_src[SBX_LOCAL_VOLUMES_MAX];
	int vol_fd[SBX_LOCAL_VOLUMES_MAX];
	/* Its cgroups, which it joins first thing (sbx_cg_join), but the
	 * v2 one (cg_fd[cg_v2]) when clone3 put it there (cg_placed). */
	int ncg, cg_v2, cg_placed;
	int cg_fd[8];
};

/* Build the rootfs and pivot into it; called in the child, as sandbox
 * root in the new namespaces. Returns -1 with a message in err. */
int sbx_local_mount_rootfs(const struct sbx_local_setup *s,
    struct sbx_err *err);

/* --- net.c: network allow (sbx-netd) ------------------------------------ */

/* What makes clients that do not read /etc/ssl/certs trust the sandbox's
 * CA (header injection): given to every command of a sandbox that has
 * one (at create: local.c; added live: exec.c). */
#define SBX_LOCAL_CA_ENV 3
extern const char *const sbx_local_ca_env[SBX_LOCAL_CA_ENV];

/* The rest of net.c, which the docker backend uses too, is in
 * internal.h. */
/* Whether the sandbox in dir has sbx-netd: network allow, or published
 * ports (then, with deny, only they come in and nothing goes out). */
int sbx_local_net_wanted(const char *dir, const struct sbx_spec *spec);
/* sbx-net's operations (struct sbx_backend_ops's net_rules, net_log). */
json_t *sbx_local_net_rules(const json_t *ref, const json_t *set,
    struct sbx_err *err);
int sbx_local_net_log(const json_t *ref, int follow, struct sbx_err *err);
/* sbx-port's operation (struct sbx_backend_ops's ports). */
json_t *sbx_local_ports(const json_t *ref, unsigned port, unsigned host_port,
    struct sbx_err *err);
/* A connection into the sandbox through its sbx-netd (struct sbx_files's
 * connect): the ref's directory, no other state, so threads may call it. */
int sbx_local_port_connect(const json_t *ref, unsigned port,
    struct sbx_err *err);

/* --- volume.c: named volumes (sbx-volume, --volume) ------------------ */

/* The directory a volume's sandboxes see (ROOT/volumes/NAME/data),
 * allocated; with create made when missing, else SBX_EX_NOSANDBOX. */
char *sbx_local_volume_path(const char *name, int create,
    struct sbx_err *err);
/* struct sbx_backend_ops's volume. */
int sbx_local_volume(const char *op, const char *name,
    int (*fn)(json_t *vol, void *arg), void *arg, struct sbx_err *err);

/* --- user.c: the image's User ---------------------------------------- */

#define SBX_LOCAL_NGROUPS 32

/* Who the sandbox's commands run as (set 0: sandbox root, as ever). */
struct sbx_local_user {
	int set;
	uint32_t uid, gid;
	uint32_t ngroups;
	uint32_t groups[SBX_LOCAL_NGROUPS]; /* supplementary */
	char home[256];                      /* its passwd entry's, or "/" */
};

/* spec (name, uid, name:group, uid:gid, ...) as docker reads an image's
 * User, names through rootfd's etc/passwd and etc/group (resolved inside
 * it); an unknown name is SBX_EX_USAGE. */
int sbx_local_user_resolve(int rootfd, const char *spec,
    struct sbx_local_user *u, struct sbx_err *err);
/* The same inside the sandbox (sbx-init, for sbx-exec -u: "/"; a qemu
 * VM's agent: its disk's root): through its own /etc/passwd and
 * /etc/group. */
int sbx_local_user_lookup(const char *root, const char *spec,
    struct sbx_local_user *u, struct sbx_err *err);
/* The host image's account for commands that are not root's, as E2B's
 * sandboxes have it: user, uid and gid 1000, home /home/user. Its
 * passwd and group, the host's with it added (unless the host has a
 * user of that name), go to DIR/passwd and DIR/group, which the
 * sandbox sees read-only as /etc/passwd and /etc/group. */
#define SBX_LOCAL_USER_NAME "user"
#define SBX_LOCAL_USER_ID 1000
int sbx_local_host_accounts(const char *dir, struct sbx_err *err);

/* --- seccomp.c and harden ------------------------------------------------ */

/* Become u (when set), then drop every capability, lock securebits,
 * no_new_privs, the seccomp denylist. For a command about to exec: raw
 * system calls only (it runs in the agent's memory). */
int sbx_local_harden(const struct sbx_local_user *u);
/* Empty this process's capability bounding set and clear its ambient
 * one, for good: done once by the agent, whose commands' hardening then
 * skips it (its children inherit both). Its own capabilities stay. */
int sbx_local_drop_bounding(void);
/* Only its seccomp filter (sbx-image's RUN steps). */
int sbx_local_seccomp(void);
/* The filter on this process itself, once: done by the agent at its
 * start, it is inherited by every command, whose hardening then skips
 * it (its install cost 0.12 ms of each exec: the kernel checks the
 * filter against every system call to cache its verdicts). -1 when it
 * cannot: each command then installs its own. */
int sbx_local_seccomp_once(void);

#endif
