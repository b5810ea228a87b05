/* internal.h - what the library's modules and backends share and the
 * tools never see: manifests and tar streams, the file operations of
 * the backends (sbx-sync's contract), libcurl, the E2B wire protocol,
 * and each backend's operations. cmd/ includes sbx.h alone. */
#ifndef SBX_INTERNAL_H
#define SBX_INTERNAL_H

#include "sbx.h"

/* --- err: a hook around each diagnostic (progress.c's line) ---------- */

/* fn(0) before a diagnostic is printed, fn(1) after one the program
 * goes on from; NULL for none. */
void sbx_diag_hook_set(void (*fn)(int after));

/* --- manifest: what a tree holds, and the baseline of a sync ---------- */

struct sbx_fentry {
	char *path;          /* relative, no leading "./" */
	char type;           /* 'f' regular file, 'l' symlink */
	int has_hash;
	uint32_t mode;       /* permission bits */
	uint64_t size;
	int64_t mtime;       /* nanoseconds since the epoch */
	int64_t hmtime;      /* baseline only: the host's mtime, 0: same */
	unsigned char hash[32]; /* SHA-256 of the content, with has_hash */
};

struct sbx_manifest {
	struct sbx_fentry *e;
	size_t n, cap;
	int sorted;
};

struct sbx_fentry *sbx_manifest_add(struct sbx_manifest *m, const char *path);
/* Room for n entries in all, so that adding them does not move any. */
void sbx_manifest_reserve(struct sbx_manifest *m, size_t n);
void sbx_manifest_sort(struct sbx_manifest *m);
/* Lookup in a sorted manifest; NULL when absent. */
struct sbx_fentry *sbx_manifest_find(const struct sbx_manifest *m,
    const char *path);
/* In a sorted list of directories whose modes are bits (as the dirs of
 * struct sbx_scan_delta): whether one above dir ("" the top), or with
 * self dir itself, has one of bits. */
int sbx_dirs_cover(const struct sbx_manifest *dirs, const char *dir,
    uint32_t bits, int self);
void sbx_manifest_release(struct sbx_manifest *m);
/* An entry from lstat(2) data; 0 when st is neither file nor symlink. */
int sbx_fentry_stat(struct sbx_fentry *e, const struct stat *st);
int sbx_sha256_fd(int fd, unsigned char out[32]);
/* Nanoseconds from seconds and nanoseconds (saturating), and back. */
int64_t sbx_ns(int64_t sec, long nsec);
struct timespec sbx_ts(int64_t ns);
/* Relative, without empty, "." or ".." parts, not too long. */
int sbx_path_valid(const char *path);
/* Absolute and plain: "/" then such a relative path (not "/" alone, no
 * trailing "/"). A workdir, a path of a snapshot's image. */
int sbx_path_plain(const char *path);
/* path without its trailing slashes ("/srv/app/" is "/srv/app"; "/"
 * stays), in place. */
void sbx_path_trim(char *path);
struct sbx_scan_opts;
/* Whether path, or a directory on its way, is to be left out. */
int sbx_scan_skipped(const struct sbx_scan_opts *o, const char *path);
/* rm -rf, never following a symlink or leaving the filesystem; a
 * directory it may not read is opened up (chmod u+rwx) and emptied. In
 * jsonx.c, beside sbx_mkdirs: the static tools link it without OpenSSL. */
int sbx_rmtree(const char *path);
/* Remove name in directory dfd, and all under it, never following a
 * symlink (image/unpack.c); 0 when it is not there. */
int sbx_rm_at(int dfd, const char *name);
/* A volume's users (an array of ids), ", "-separated, into buf. */
void sbx_volume_users_text(const json_t *ids, char *buf, size_t n);

/* --- jsonx: what the backends' lookups and listings share -------------- */

/* The label (docker's) or metadata key (E2B's) that marks what sbx made. */
#define SBX_MANAGED "io.sbx.managed"
/* 0 when labels mark one that sbx made (SBX_MANAGED is "1"); else -1,
 * and err (if not NULL) says that id is not an sbx what ("container",
 * "sandbox"). */
int sbx_labels_ours(const json_t *labels, const char *id, const char *what,
    struct sbx_err *err);

/* RFC 3339 ("2026-12-02T16:21:49.582Z") into seconds since the epoch,
 * taken as UTC, the fraction dropped; 0 when s is NULL or not one. */
long long sbx_time_parse(const char *s);
/* A listing entry's times, in the order of its fields: created_at and
 * its epoch, last_activity_at and its epoch (null for act < 0: not
 * known), age and idle (null with them), as of now. */
void sbx_info_times(json_t *o, long long now, long long created,
    long long act);

/* --- tar: streams of files, made and taken apart with libarchive ------ */

/* Write a tar of the entries (paths relative to the current directory)
 * to fd. An entry whose file changed since its stat was taken fails. */
int sbx_tar_write(int fd, const struct sbx_manifest *m,
    enum sbx_compress z, struct sbx_err *err);
/* Extract the tar stream on fd under the current directory, refusing
 * absolute names, "..", paths through symlinks, and special files. */
int sbx_tar_extract(int fd, struct sbx_err *err);
/* Take a stream from a sandbox apart into stage_fd, one file per member
 * named by the slot want() gives it (-1: not asked for, refused). Refused,
 * SBX_EX_DATA: absolute names, "..", paths through a symlink of the
 * stream, hard links, anything but files and symlinks. Nothing is written
 * outside stage_fd; got() gets each member's metadata. */
int sbx_tar_stage(int fd, int stage_fd,
    long (*want)(const char *name, void *arg),
    void (*got)(long slot, const struct sbx_fentry *e, void *arg), void *arg,
    struct sbx_err *err);

/* --- files: moving files in and out of a sandbox (DESIGN.md 4, 7) ----- */

/* A transfer running beside the caller (a process, for now). */
struct sbx_job {
	pid_t pid;
	int errfd; /* the job's error message, if it fails */
};

/* What a scan that knows what changed listed: only some directories;
 * below the others the files are as the last complete scan found them. */
struct sbx_scan_delta {
	char *token;  /* of this listing, for the next one; NULL: none kept */
	int partial;  /* only dirs were listed */
	/* Sorted; each path is a directory ("" the top) and its mode the
	 * SBX_SCAN_* bits: */
	struct sbx_manifest dirs;
};
#define SBX_SCAN_FLAT 1 /* its files were listed, not its subdirectories */
#define SBX_SCAN_TREE 2 /* all below it was listed */
#define SBX_SCAN_GONE 4 /* it is gone, and all below it */

struct sbx_scan_opts {
	const char *dir;     /* in the sandbox; NULL: its workdir */
	/* Leave path (and, for a directory, all below it) out. */
	int (*skip)(const char *path, int is_dir, void *arg);
	/* Called while the sandbox lists (for work that can overlap). */
	void (*meanwhile)(void *arg);
	void *arg;
	/* The token of the last complete listing: a backend that keeps
	 * track may list only what changed since, and says so in delta.
	 * NULL: list everything (delta still gets a token). */
	const char *since;
	struct sbx_scan_delta *delta; /* or NULL */
};

/* tar.c: the rest of a stream whose archive ended (tar's padding after
 * its end marker), read so that its writer ends without EPIPE. */
void sbx_tar_drain(int fd);

struct sbx_files {
	/* A writable fd: the tar stream to extract into dir. */
	int (*put_archive)(const json_t *ref, const char *dir, int *fd,
	    struct sbx_job *job, struct sbx_err *err);
	/* A readable fd: a tar of paths (relative to dir). */
	int (*get_archive)(const json_t *ref, const char *dir,
	    const struct sbx_manifest *paths, int *fd, struct sbx_job *job,
	    struct sbx_err *err);
	/* The regular files and symlinks under dir, sorted. */
	int (*scan)(const json_t *ref, const struct sbx_scan_opts *o,
	    struct sbx_manifest *out, struct sbx_err *err);
	/* A SHA-256 of each of these files' content, taken inside the
	 * sandbox (has_hash stays 0 for one that is gone). */
	int (*hash)(const json_t *ref, const char *dir, struct sbx_manifest *m,
	    struct sbx_err *err);
	/* Remove these files (never directories) under dir. */
	int (*remove)(const json_t *ref, const char *dir,
	    const struct sbx_manifest *paths, struct sbx_err *err);
	/* Fork a child inside the sandbox, as its root, at its "/": the
	 * child gets 0 (and job->errfd for its failure), the parent the
	 * pid and a job to wait for; -1 with err. The caller must be
	 * single-threaded. NULL: the backend cannot. */
	pid_t (*enter)(const json_t *ref, struct sbx_job *job,
	    struct sbx_err *err);
	/* A TCP connection to the sandbox's own 127.0.0.1:port, as an fd
	 * (thread-safe); -1 with err. NULL: the backend cannot. */
	int (*connect)(const json_t *ref, unsigned port, struct sbx_err *err);
	/* After a put_archive: the mtimes of m's entries (relative to dir)
	 * set to the nanosecond, where the sandbox's tar keeps whole
	 * seconds. NULL: put_archive keeps them. */
	int (*set_times)(const json_t *ref, const char *dir,
	    const struct sbx_manifest *m, struct sbx_err *err);
	/* put_archive takes an uncompressed tar alone (the sandbox's tar
	 * may not know gzip; the stream never leaves this machine). */
	int plain;
};

/* --- xfer: sbx-sync's tar streams through one file in the sandbox and
 * its own tar (lib/xfer.c), for backends that can move a whole file in
 * and out and exec --- */
struct sbx_xfer_ops {
	/* The sandbox reached, running (a paused one: SBX_EX_NOSANDBOX
	 * saying so); *x the transfer's own, closed also when this
	 * fails. */
	int (*open)(const json_t *ref, void **x, struct sbx_err *err);
	/* The body from in (streamed, of unknown length; -1: data) into the
	 * sandbox's file path. */
	int (*upload)(void *x, const char *path, int in, const void *data,
	    size_t len, struct sbx_err *err);
	/* The sandbox's file path streamed to out. */
	int (*download)(void *x, const char *path, int out,
	    struct sbx_err *err);
	/* The file goes (a missing one is no error). */
	void (*remove)(void *x, const char *path);
	void (*close)(void *x);
};
/* put_archive's and get_archive's children (sbx_job_transfer). */
int sbx_xfer_put(const struct sbx_xfer_ops *xo, const json_t *ref,
    const char *dir, int in, struct sbx_err *err);
int sbx_xfer_get(const struct sbx_xfer_ops *xo, const json_t *ref,
    const char *dir, const struct sbx_manifest *paths, int out,
    struct sbx_err *err);
/* A command that could not start in dir (SBX_EX_NOTFOUND or _EXECFAIL
 * in err) when one can start at /: dir is gone, and err says so.
 * Returns -1. */
int sbx_xfer_dir_gone(const json_t *ref, const char *dir,
    struct sbx_err *err);
/* sbx_portable_scan and _remove, a missing dir said so (the sbx_files
 * scan and remove of such a backend). */
int sbx_xfer_scan(const json_t *ref, const struct sbx_scan_opts *o,
    struct sbx_manifest *out, struct sbx_err *err);
int sbx_xfer_remove(const json_t *ref, const char *dir,
    const struct sbx_manifest *paths, struct sbx_err *err);

/* sbx_job_transfer's children for a backend whose exec takes stdin and
 * gives stdout whole (docker, qemu): tar in the sandbox unpacks in,
 * or packs paths out, of dir (NULL: its workdir). Their stdio is
 * rearranged: children only. */
int sbx_xfer_exec_put(const json_t *ref, const char *dir,
    const struct sbx_manifest *paths, int in, struct sbx_err *err);
int sbx_xfer_exec_get(const json_t *ref, const char *dir,
    const struct sbx_manifest *paths, int out, struct sbx_err *err);

/* The file operations of the ref's backend. */
const struct sbx_files *sbx_files_of(const json_t *ref, struct sbx_err *err);
/* Wait for a job; its error, if any, in err. */
int sbx_job_wait(struct sbx_job *job, struct sbx_err *err);
/* A guard: a process of ours that outlives us, to undo what we would
 * leave half-done should we die (^C, kill -9). In us: its pid, and *wfd
 * the pipe we tell it through (sbx_guard_end), or -1. In it: 0, once we
 * told it we are done (*done 1) or died (*done 0); it then undoes, or
 * not, and _exits. In a session of its own, deaf to ^C, TERM and HUP, in
 * /, holding nothing of ours. */
pid_t sbx_guard_start(int *wfd, int *done);
/* Tell guard pid, its pipe wfd, whether we are done, and wait for it. */
void sbx_guard_end(pid_t pid, int wfd, int done);
/* Fork a job with a pipe: the parent gets its end in *fd, the child (0)
 * its own in *child_end and the error pipe in job->errfd; the pipe goes
 * to the child when to_child. */
pid_t sbx_job_fork(int to_child, int *fd, int *child_end,
    struct sbx_job *job, struct sbx_err *err);
/* The job's failure: "CODE message" on its error pipe, then exit. */
void sbx_job_fail(int errfd, const struct sbx_err *err)
    __attribute__((noreturn));
/* A transfer as a job: child runs in it on its end of the pipe (the
 * tar it reads when to_child, for a put; else the tar of paths it
 * writes, for a get), and its failure goes up the error pipe. */
int sbx_job_transfer(int to_child, int (*child)(const json_t *ref,
    const char *dir, const struct sbx_manifest *paths, int fd,
    struct sbx_err *err), const json_t *ref, const char *dir,
    const struct sbx_manifest *paths, int *fd, struct sbx_job *job,
    struct sbx_err *err);
extern const struct sbx_files sbx_local_files;
extern const struct sbx_files sbx_qemu_files;
/* scan and remove through the backend's exec and a POSIX shell. */
int sbx_portable_scan(const json_t *ref, const struct sbx_scan_opts *o,
    struct sbx_manifest *out, struct sbx_err *err);
int sbx_portable_hash(const json_t *ref, const char *dir,
    struct sbx_manifest *m, struct sbx_err *err);
/* sha256sum's lines in out (changed) for m's entries [from, from + n):
 * each line goes to the entry of its name, in order; an entry without
 * a line (a file gone meanwhile) gets no hash. */
void sbx_portable_hashes(char *out, struct sbx_manifest *m, size_t from,
    size_t n);
int sbx_portable_remove(const json_t *ref, const char *dir,
    const struct sbx_manifest *paths, struct sbx_err *err);
/* One exec of argv in cwd (NULL: the workdir), as user (NULL: the
 * sandbox's), its stdin the bytes of in (NULL: none), its output captured
 * in r; its exit code (SBX_EX_NOTFOUND or _NOEXEC for a command the
 * sandbox lacks), or -1 with err. */
int sbx_exec_in(const struct sbx_backend *be, const json_t *ref,
    char *const argv[], const char *cwd, const char *user,
    const struct sbx_buf *in, uint64_t timeout_ms, struct sbx_exec_result *r,
    struct sbx_err *err);
/* Walk the tree under dfd (which it closes) as scan does: emit gets each
 * regular file and symlink. Walker part of parts takes its share of the
 * top directories (and, the first, the top's other entries). */
void sbx_walk(int dfd, const struct sbx_scan_opts *o, unsigned part,
    unsigned parts, void (*emit)(const struct sbx_fentry *e, void *arg),
    void *arg);
/* The same for the directory dfd at path prefix (relative, "" the top),
 * and only its own entries when flat. */
void sbx_walk_at(int dfd, const char *prefix, int flat,
    const struct sbx_scan_opts *o,
    void (*emit)(const struct sbx_fentry *e, void *arg), void *arg);

/* --- http: the libcurl wrapper (the remote flavour only) -------------- */

/* A client of one endpoint: "unix:///path/to.sock", "tcp://host:port",
 * "http://..." or "https://...". Requests reuse its connection. */
struct sbx_http;

struct sbx_http_req {
	const char *method;   /* "GET", "POST", "PUT", "DELETE", "HEAD" */
	const char *path;     /* "/v1.41/containers/json?all=1" */
	json_t *body;         /* sent as JSON, or NULL */
	const char *const *headers; /* "Name: value", NULL-terminated;
				     * never logged nor put in an error */
	int in_fd;            /* >= 0: the body, streamed from this fd */
	const char *in_type;  /* its Content-Type */
	int out_fd;           /* >= 0: a 2xx body goes here, not to body */
	long timeout_ms;      /* the whole request; 0: the client's */
	int idempotent;       /* may be retried on 502/503/504 and a
			       * connection reset; any request without a
			       * streamed body goes again after a 429, once
			       * its Retry-After(-NAME) has passed */
	int follow;           /* follow redirects (never https -> http;
			       * headers stay with the first host) */
	const void *data;     /* the body as it is, of in_type, or NULL */
	size_t data_len;
	/* A 2xx body goes here as it arrives (no timeout unless
	 * timeout_ms); a result other than 0 ends the transfer. */
	int (*on_body)(const char *p, size_t n, void *arg);
	void *on_body_arg;
	/* The body (in_fd or data) as the one file part of this name of
	 * a multipart/form-data body; NULL: the body as it is. */
	const char *form_field;
	long long in_size;    /* in_fd's length, sent as Content-Length
			       * (> 0); else the body goes chunked */	const int *stop;      /* when it turns nonzero (another thread),
			       * the transfer ends: looked at as data
			       * comes and at least once a second */
};

struct sbx_http_resp {
	long status;
	struct sbx_buf body;  /* capped; not for a 2xx with out_fd */
	json_t *json;         /* body, when it parsed as JSON */
	struct sbx_buf head;  /* the response's header lines, capped */
	int timed_out;        /* the request's timeout_ms ran out */
};

struct sbx_http *sbx_http_new(const char *endpoint, struct sbx_err *err);
void sbx_http_free(struct sbx_http *h);
const char *sbx_http_endpoint(const struct sbx_http *h);
/* A transport failure fails (SBX_EX_FAIL, naming the endpoint); any
 * status the server gave is a success for this call: look at it. */
int sbx_http_do(struct sbx_http *h, const struct sbx_http_req *rq,
    struct sbx_http_resp *rs, struct sbx_err *err);
void sbx_http_resp_release(struct sbx_http_resp *rs);
/* The value of a response header (case-insensitive name) into buf, or
 * NULL. */
const char *sbx_http_header(const struct sbx_http_resp *rs, const char *name,
    char *buf, size_t n);
/* A server's words for a failed request, on one line, into buf: the
 * message of a JSON error, else the body with
 * its markup and runs of space taken out (a gateway's HTML page), cut
 * short; secret (if not NULL) starred out wherever it shows. */
void sbx_http_reason(const struct sbx_http_resp *rs, const char *secret,
    char *buf, size_t n);
/* s percent-encoded for a URL's path or query (malloc'd). */
char *sbx_http_escape(const char *s);
/* Send a request and take the connection over (HTTP upgrade, Docker's
 * attach): *fd is the plain socket, *status the reply's status, and rest
 * what came after the reply's head. The fd lives until sbx_http_free;
 * plain transports only (unix:, tcp:, http:). */
int sbx_http_hijack(struct sbx_http *h, const struct sbx_http_req *rq,
    int *fd, long *status, struct sbx_buf *rest, struct sbx_err *err);
/* A GET asking to switch to proto (Upgrade: proto; rq->headers added),
 * on a connection of its own that stays ours: http:// or https:// (TLS
 * by libcurl). *status the reply's, head its head, rest what came after
 * it. Then read and write through *c until sbx_http_conn_free. */
struct sbx_http_conn;
int sbx_http_upgrade(struct sbx_http *h, const struct sbx_http_req *rq,
    const char *proto, struct sbx_http_conn **c, long *status,
    struct sbx_buf *head, struct sbx_buf *rest, struct sbx_err *err);
/* The socket, to poll: read until EAGAIN once it is readable (TLS keeps
 * what it decoded). */
int sbx_http_conn_fd(const struct sbx_http_conn *c);
/* Up to n bytes: > 0; 0 at the end; -1 with errno (EAGAIN: none yet). */
ssize_t sbx_http_conn_read(struct sbx_http_conn *c, void *p, size_t n);
/* All of it, waiting when the socket is full; -1 with errno. */
int sbx_http_conn_write(struct sbx_http_conn *c, const void *p, size_t n);
void sbx_http_conn_free(struct sbx_http_conn *c);

/* --- e2bproto: the E2B wire protocol (DESIGN.md 3), client and server -- */

#define SBX_E2B_FRAME_END 0x02 /* the flag of a stream's last envelope */
#define SBX_E2B_ENVD_PORT 49983
/* A Connect code ("not_found") and the HTTP status of its unary error;
 * 0 for a string that is not a code. */
int sbx_e2b_code_status(const char *code);
/* The code for an HTTP status that is not Connect's own (a proxy's 502),
 * as the SDKs map them; NULL for a success. */
const char *sbx_e2b_status_code(int status);
/* Append one envelope (flags, 32-bit big-endian length, payload). */
void sbx_e2b_frame(struct sbx_buf *b, int flags, const char *p, size_t n);
void sbx_e2b_frame_json(struct sbx_buf *b, int flags, const json_t *msg);
/* The first whole envelope of p[0..n): bytes it takes, 0 when it is not
 * all there yet, -1 when its payload would be over max. */
long sbx_e2b_unframe(const char *p, size_t n, size_t max, int *flags,
    const char **payload, size_t *len);
/* {"code":code,"message":msg}: Connect's error body. */
json_t *sbx_e2b_error(const char *code, const char *msg);
/* Standard or URL-safe base64, padded or not, decoded into out (its
 * contents replaced); -1 when it is not base64. */
int sbx_e2b_unb64(const char *s, struct sbx_buf *out);

/* --- netdir: a sandbox's network directory and its sbx-netd ------------ */
/* lib/local/net.c; the docker backend, whose containers' network sbx-netd
 * serves the same way, uses them too. DIR holds net.json, net.log,
 * netd.err and meta.json (pid, starttime: the sandbox's init; net_pid,
 * net_starttime: sbx-netd). */

/* A process's start time (clock ticks since boot), 0 if it is gone. */
unsigned long long sbx_local_starttime(pid_t pid);
/* The rules and resolvers of a spec with network allow, checked before
 * anything is made (SBX_EX_USAGE). */
int sbx_local_net_check(const struct sbx_spec *spec, struct sbx_err *err);
/* Write DIR/net.json and DIR/net.secret.json (unless a stopped sandbox
 * left them) and start sbx-netd for the sandbox whose init is pid; its
 * pid in *netd once it has set the network namespace up (and, with
 * header injection, put its CA in DIR/upper). image: "/" or the image's
 * directory, where the CA bundle comes from; NULL where there is none
 * (docker: sbx-netd only makes DIR/ca.crt, which the backend installs). */
int sbx_local_net_start(const char *dir, const char *id, const char *image,
    pid_t pid, const struct sbx_spec *spec, pid_t *netd,
    struct sbx_err *err);
/* The same in two steps, so that the sandbox's own start can go on
 * meanwhile: spawn returns the fd its readiness comes on (-1 with err);
 * ready reads it (and closes it). With pid 0, sbx-netd starts before
 * the sandbox exists (its exec, libraries and files read meanwhile) and
 * waits for its pid, which sbx_local_net_pid sends on *pidw (and closes
 * it); closed without one, sbx-netd ends and says so on the ready fd. */
int sbx_local_net_spawn(const char *dir, const char *id, const char *image,
    pid_t pid, int *pidw, const struct sbx_spec *spec, struct sbx_err *err);
void sbx_local_net_pid(int pidw, pid_t pid);
int sbx_local_net_ready(int ready, const char *dir, pid_t *netd,
    struct sbx_err *err);
/* Kill sbx-netd (pid and start time from meta.json) and wait for it. */
void sbx_local_net_stop(pid_t pid, unsigned long long starttime);
/* The same with a meta.json's net_pid and net_starttime. */
void sbx_local_net_stop_of(const json_t *meta);
/* sbx-net on DIR: the rules of DIR/net.json, replaced first by set (not
 * NULL), with SIGHUP to sbx-netd; and DIR/net.log, followed until the
 * init of DIR/meta.json ends. */
json_t *sbx_local_net_dir_rules(const char *dir, const json_t *set,
    struct sbx_err *err);
int sbx_local_net_dir_log(const char *dir, int follow, struct sbx_err *err);
/* sbx-port on DIR (the sandbox id, for messages): as struct
 * sbx_backend_ops's ports, through DIR/net.json and DIR/netd.sock. */
json_t *sbx_local_net_dir_ports(const char *dir, const char *id,
    unsigned port, unsigned host_port, struct sbx_err *err);

/* --- docker: the Docker Engine API backend (the remote flavour only) --- */

extern const struct sbx_backend_ops sbx_docker_ops;

/* --- e2b: E2B's API and envd, or an E2B-compatible server (remote) ---- */

extern const struct sbx_backend_ops sbx_e2b_ops;

/* --- daytona: Daytona's API and toolbox, or sbxd's (remote) ------------ */

extern const struct sbx_backend_ops sbx_daytona_ops;

/* --- local: the native Linux backend --------------------------------- */

extern const struct sbx_backend_ops sbx_local_ops;
extern const struct sbx_backend_ops sbx_qemu_ops;
/* The qemu backend's disks of images (qemu.guest/disks/HEX.ext4) whose
 * digest keep does not name and no qemu sandbox stands on, and those a
 * killed create left half-made, removed (sbx-image rm and prune): their
 * bytes added to *freed, their count to *n. */
int sbx_qemu_disks_prune(const json_t *keep, long long *freed, int *n,
    struct sbx_err *err);

/* --- shell sessions (sbx-shell) across backends -------------------------- */

struct sbx_msg;
/* A call as the agent's SBX_MSG_SHELL carries it. */
void sbx_shell_frame(struct sbx_buf *b, const struct sbx_shell_req *rq);
/* The agent's SBX_MSG_SHELLREP as the shell op's *out (and err). */
int sbx_shell_answer(struct sbx_msg *m, const char *op, json_t **out,
    struct sbx_err *err);
/* The shell op of a backend without our agent as PID 1 (shellremote.c;
 * weak, as libarchive is: only sbx-shell links it, and the other tools'
 * ops have none). */
__attribute__((weak)) int sbx_shell_remote(const json_t *ref,
    const struct sbx_shell_req *rq, json_t **out, struct sbx_err *err);
/* The variable in the environment of every process of an exec in a
 * container (the engine's exec, lib/docker/exec.c, and sbx-init's,
 * lib/local/init.c): a timeout, a signal or the caller's going reach them
 * all, those that left its session too. */
#define SBX_EXEC_TAG_VAR "SBX_EXEC_TAG"
/* An exec through sbx-init's socket in a sandbox of another backend
 * (docker), as on local but for a cgroup: sock connected already by
 * connect(dir), which reconnects it; id for messages; std_open the
 * sbx_xs std_open judged before sock was made. */
int sbx_agent_exec(const char *dir, const char *id, int sock,
    int (*connect)(const char *dir), int std_open, char *const argv[],
    const struct sbx_exec_opts *o, struct sbx_exec_result *res,
    struct sbx_err *err);
/* The static sbx-init binary of this installation, opened; -1 with err. */
int sbx_local_init_open(struct sbx_err *err);
/* Its path; NULL with err. */
char *sbx_local_init_path(struct sbx_err *err);

/* --- snapport: what a snapshot's export (lib/local/snapport.c) is made of,
 * shared with the backends whose snapshots are not the store's --- */
struct archive;
/* Not the sandbox's own (/proc, /sys, /dev, sbx's /tmp/.sbx). */
int sbx_snap_port_skipped(const char *rel);
/* The layers of a snapshot merged as an overlay merges them, top
 * first: the export's lists (deleted, opaque: "/path"s); paths seen (1:
 * not a directory, 2: a directory) in a layer above; whited out, or
 * directories made opaque, by a layer above (gone, or their content
 * gone, for the layers below), and so by this layer for the next. */
struct sbx_snap_merge {
	json_t *deleted, *opaque;
	json_t *seen, *wh, *op, *next_wh, *next_op;
};
void sbx_snap_merge_init(struct sbx_snap_merge *m);
void sbx_snap_merge_release(struct sbx_snap_merge *m);
/* Hidden from this layer by those above: rel or a directory above it
 * whited out, or a directory above it made opaque. */
int sbx_snap_merge_hidden(const struct sbx_snap_merge *m, const char *rel);
/* rel whited out (opaque 0) or made opaque by this layer: for the layers
 * below, and (pass 0) in the export's list. */
void sbx_snap_merge_mark(struct sbx_snap_merge *m, const char *rel,
    int opaque, int pass);
/* layer(arg, l, pass) for each of n layers, top (0) first, seen cleared
 * first. */
int sbx_snap_merge_walk(struct sbx_snap_merge *m, int n, int pass,
    int (*layer)(void *arg, int l, int pass), void *arg);
/* The export of meta's snapshot on fd: the layers walked (pass 0) for
 * the lists, then the head (sbx-snapshot.json: meta with "format", the
 * lists, owners "sandbox"; "files/"), then walked again (pass 1) with *w
 * the tar writer to emit the files to. */
int sbx_snap_merge_export(struct sbx_snap_merge *m, int n,
    int (*layer)(void *arg, int l, int pass), void *arg, int fd,
    const json_t *meta, struct archive **w, struct sbx_err *err);

/* snapdiff.c: the export on fd of snapshot sid of backend, which cannot
 * say what the snapshot changed: a sandbox of it and one of its base
 * image (record rec's "image") compared, file by file, through the
 * backend's operations (GNU find in the sandboxes); rec is the export's
 * meta. Weak, as it needs libarchive: the tools that export pull it in
 * (-u sbx_snap_export_diff). */
__attribute__((weak)) int sbx_snap_export_diff(const char *backend,
    const char *sid, const json_t *rec, int fd, struct sbx_err *err);

#endif
