/* sbxd.h - the inside of sbxd: its sandboxes, processes and requests */
#ifndef SBXD_H
#define SBXD_H

#include <pthread.h>
#include <microhttpd.h>

#include "../internal.h"
#include "../sbxd.h"

#define SBXD_ID_LEN 20
#define SBXD_CLIENT_ID "6532622b"
/* What the SDKs gate features on (must be semver): 0.5.7 has octet-stream uploads,
 * 0.6.x file metadata and watch entries. */
#define SBXD_ENVD_VERSION "0.6.4"

struct sbxd_proc;
struct sbxd_new;

/* An API key: its SHA-256, and its token bucket of creates. */
struct sbxd_key {
	unsigned char sha[32];
	double tokens;
	long long t;           /* the bucket's last fill (mono ms) */
};

/* wake.c: a stream's wait for something to send, off MHD's threads.
 * Zeroed is ready; fields are wake.c's. */
struct sbxd_wait {
	struct MHD_Connection *c;
	int fd;
	long long until;
	int armed, kicked;
	size_t slot;
	unsigned long round;
	struct sbxd_wait *next;
};

/* A sandbox sbxd made. Its fields are under sbxd.mu; ref and id never
 * change. Held by refs: the table's one, and each request's. */
struct sbxd_box {
	char id[SBXD_ID_LEN + 1];
	char token[48];        /* the envd access token ("" : not secure) */
	/* allowPublicTraffic false: what a user port's request must carry
	 * in e2b-traffic-access-token ("": public) */
	char traffic[48];
	json_t *ref;           /* the backend's ref */
	char *template;
	char *workdir;         /* its template's WORKDIR: a process's cwd
				* by default, or NULL */
	json_t *metadata;      /* object of strings */
	json_t *volumes;       /* its volumeMounts [{"name","path"}], or NULL */
	json_t *envs;          /* object of strings: every process's */
	long long started_ms, end_ms;
	int paused, auto_pause, internet;
	/* autoPauseMemory false: auto_pause stops it (files only). */
	int pause_files_only;
	/* Being killed: the streams of its processes break once it is
	 * gone (proc.c). */
	int dying;
	/* Made with network.rules: its network helper has a CA the
	 * sandbox trusts, so a PUT may change the rules. */
	int ca;
	/* Whether its passwd has E2B's default user, "user" (proc.c
	 * asks once): 0 not asked yet, 1 yes, -1 no (its processes run
	 * as root). */
	int has_user;
	/* E2B's network of GET, never a password: {"allowOut","denyOut"},
	 * "egressProxy" {"address","username"} when there is one, and
	 * "maskRequestHost" (port.c puts it in the Host of the requests
	 * for the sandbox's ports). */
	json_t *network;
	/* The log's entries as its listings first saw them ({"CMD:N": ms});
	 * log_listed once one was: a line that comes later is of then. */
	json_t *log_seen;
	int log_listed;
	/* GET .../metrics: the CPU time at the last reading, and when
	 * (sbxd_now_ms; 0: none yet) */
	double metric_cpu_s;
	long long metric_ms;
	int gone;              /* killed: out of the table */
	int busy;              /* a pause, resume or kill is under way */
	/* What Daytona's API gave it (daytona.c): {"name","user",
	 * "autoStopInterval",...}, or NULL (made through E2B's).
	 * Replaced whole under mu, never changed in place. */
	json_t *daytona;
	/* Stopped: when it is killed (Daytona's auto-delete; 0: never). */
	long long delete_ms;
	/* Its own size (a Daytona create's or snapshot's): vCPUs, memory
	 * and disk in MiB; 0: sbxd's (sbxd.limits). */
	json_int_t cpus, mem_mb, disk_mb;
	int refs;
	unsigned next_pid;
	struct sbxd_proc *procs;
	struct sbxd_box *next;
};

struct sbxd {
	struct sbx_sbxd_opts o;
	const struct sbx_backend *be;
	char *store;
	pthread_mutex_t mu;
	pthread_cond_t cv;     /* an event, an exit, a box's change */
	struct sbxd_box *boxes;
	unsigned nboxes;
	struct sbxd_key *keys;
	size_t nkeys;
	int stopping;
	unsigned active;       /* requests being answered */
	unsigned long long reqs;
	char **tmpl;           /* NAME, IMAGE, NAME, IMAGE, ... NULL */
	/* Every sandbox's memory, cpus_milli, pids and limits_default
	 * (sbx_limits_default), disk and disk_default (sbx_limits_disk):
	 * E2B's create body cannot ask for any. */
	struct sbx_spec limits;
};

extern struct sbxd sbxd;

/* One request. */
struct sbxd_req {
	struct MHD_Connection *c;
	const char *method;
	char *path;            /* without the query */
	char rid[17];
	long long t0;
	int status;
	int key;               /* the API key's index, -1: none */
	struct sbx_buf body;   /* a JSON body, up to max_body */
	int too_big;
	struct sbxd_box *box;  /* envd: the sandbox it is for (a ref) */
	long port;             /* and the port it names */
	const struct sbxd_route *route;
	/* A route that takes its body as it comes (uploads). */
	void *up;
	void (*up_free)(struct sbxd_req *r);
};

struct sbxd_route {
	const char *method;
	const char *path;      /* "/sandboxes/X": X (a star) one segment */
	int envd;
	/* Called when the body is all there; queues the response. */
	enum MHD_Result (*fn)(struct sbxd_req *r);
	/* Optional: called for each piece of the body instead of
	 * buffering it; -1 stops taking it (fn still answers). */
	int (*data)(struct sbxd_req *r, const char *p, size_t n);
};

/* server.c: answers */
enum MHD_Result sbxd_reply(struct sbxd_req *r, int status, const char *type,
    const void *p, size_t n);
enum MHD_Result sbxd_reply_json(struct sbxd_req *r, int status, json_t *j);
/* E2B's error body {"code":status,"message":...} */
__attribute__((format(printf, 3, 4))) enum MHD_Result sbxd_reply_err(
    struct sbxd_req *r, int status, const char *fmt, ...);
/* Connect's unary error {"code":"not_found","message":...} */
__attribute__((format(printf, 3, 4))) enum MHD_Result sbxd_reply_connect(
    struct sbxd_req *r, const char *code, const char *fmt, ...);
enum MHD_Result sbxd_reply_empty(struct sbxd_req *r, int status);
/* A Connect server stream (200), its frames from rd; fr frees cls, also
 * when the response cannot be made. */
enum MHD_Result sbxd_reply_stream(struct sbxd_req *r, size_t block,
    MHD_ContentReaderCallback rd, void *cls,
    MHD_ContentReaderFreeCallback fr);
const char *sbxd_header(struct sbxd_req *r, const char *name);
/* The user an RPC names (Authorization: Basic base64("name:")), or NULL
 * for the template's default one. */
char *sbxd_rpc_user(struct sbxd_req *r);
const char *sbxd_query(struct sbxd_req *r, const char *name);
/* The body as a JSON object; NULL after answering 400. */
json_t *sbxd_body_json(struct sbxd_req *r, enum MHD_Result *ret);
/* The segment i (0 the first) of the path, malloc'd, or NULL. */
char *sbxd_path_seg(const struct sbxd_req *r, int i);
void sbxd_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* wake.c. From a content reader with nothing to send: suspend c until
 * fd (-1: none) is readable, until (mono ms, 0: none) comes, sbxd_wake
 * or sbxd stops; 0 then (the reader returns 0), or 1 when woken since
 * the last wait or stopping (look again). */
int sbxd_wait(struct sbxd_wait *w, struct MHD_Connection *c, int fd,
    long long until);
void sbxd_wake(struct sbxd_wait *w);
/* From a response's free callback. */
void sbxd_wait_cancel(struct sbxd_wait *w);
int sbxd_wake_start(struct sbx_err *err);
void sbxd_wake_all(void);      /* sbxd is stopping */
void sbxd_wake_end(void);      /* no connection is suspended */

/* box.c: the table, the store, the clock */
long long sbxd_now_ms(void);
void sbxd_random_id(char *out, size_t n); /* n chars of [a-z0-9] */
/* Find a live box by id and take a ref on it (mu not held); NULL. */
struct sbxd_box *sbxd_box_get(const char *id);
void sbxd_box_put(struct sbxd_box *b);
void sbxd_box_put_locked(struct sbxd_box *b); /* mu held */
/* Save a box's record (mu held or not: it copies under mu). */
int sbxd_box_save(struct sbxd_box *b);
/* The record of a create under way; after a failed or unfinished one,
 * reap kills what it left (sandboxes labelled sbxd=ID) and the record. */
int sbxd_box_creating(const char *id, struct sbx_err *err);
void sbxd_box_reap(const char *id);
void sbxd_box_unlink(struct sbxd_box *b); /* out of the table and store */
int sbxd_box_add(struct sbxd_box *b);
int sbxd_store_adopt(struct sbx_err *err);
/* Kill (or pause, with auto_pause) what has run out of time. */
void *sbxd_reaper(void *arg);
/* The box's env for a process: HOME=/home/user, its envs, then the
 * request's (a later one wins). */
char **sbxd_box_env(struct sbxd_box *b, const json_t *more);
void sbxd_env_free(char **env);

/* spawn.c: every child of sbxd is forked by one single-threaded
 * process, the spawner, started before any thread. A child is sbxd's
 * by its pidfd (signals) and status fd (its wait status). */
struct sbxd_child {
	pid_t pid;      /* -1: none */
	int pidfd;
	int statfd;
	int done;
	int status;     /* as waitpid(2) gives it, once done */
};
#define SBXD_CHILD_NONE {-1, -1, -1, 0, 0}
int sbxd_spawner_start(struct sbx_err *err);
/* Fork a child that runs kind's function (sbxd_*_child below) with args
 * and its own copies of fds; the caller keeps its fds. */
int sbxd_spawn(const char *kind, const json_t *args, const int *fds,
    int nfds, struct sbxd_child *c, struct sbx_err *err);
int sbxd_child_kill(struct sbxd_child *c, int sig);
/* 1 when it ended (c->status), 0 not within timeout_ms (-1: wait), -1
 * when the spawner went away. */
int sbxd_child_wait(struct sbxd_child *c, int timeout_ms);
/* Wait for it if it was started, and let go of its fds. */
void sbxd_child_release(struct sbxd_child *c);
/* What the spawner's children run; they never return. */
void sbxd_proc_child(json_t *args, int *fds, int nfds)
    __attribute__((noreturn));
void sbxd_worker_child(json_t *args, int *fds, int nfds)
    __attribute__((noreturn));
void sbxd_inbox_child(json_t *args, int *fds, int nfds)
    __attribute__((noreturn));
void sbxd_build_child(json_t *args, int *fds, int nfds)
    __attribute__((noreturn));

/* worker.c: the backend's lifecycle calls, each in a child of its own */
int sbxd_be_create(const struct sbx_spec *spec, json_t **ref,
    struct sbx_err *err);
/* The same from the spec as JSON (sbx_spec_json's) */
int sbxd_be_create_json(json_t *spec, json_t **ref, struct sbx_err *err);
/* warm.c: sandboxes made ahead (--warm). take: 1 and the id (idn bytes)
 * and ref of one made as spec asks (labels aside), else 0, and the pool
 * makes spec's from now on. */
int sbxd_warm_take(const struct sbx_spec *spec, char *id, size_t idn,
    json_t **ref);
int sbxd_warm_start(struct sbx_err *err);
void sbxd_warm_end(void);     /* its thread ends, its sandboxes go */
int sbxd_be_kill(json_t *ref, struct sbx_err *err);
int sbxd_be_pause(json_t *ref, struct sbx_err *err);
int sbxd_be_resume(json_t *ref, struct sbx_err *err);
/* A pause that ends the processes and keeps the files (E2B's pause with
 * "memory": false); the resume is a cold start. */
int sbxd_be_stop(json_t *ref, struct sbx_err *err);
/* The backend's stats (sbx-stats' reading), or NULL. */
json_t *sbxd_be_stats(json_t *ref, struct sbx_err *err);
/* The backend's info (sbx-ls's line: its status), or NULL. */
json_t *sbxd_be_info(json_t *ref, struct sbx_err *err);
/* The backend's volumes: op "create", "ls" or "rm" (sbx-volume's),
 * the entries it gave as an array. */
json_t *sbxd_be_volume(const char *op, const char *name, struct sbx_err *err);
/* A snapshot of the sandbox's files, named or not: its meta. */
json_t *sbxd_be_snapshot(json_t *ref, const char *name, struct sbx_err *err);
/* The detached commands of lines (a sandbox's log's), their ends and
 * their output ("output") read in the sandbox, or NULL. */
json_t *sbxd_be_output(json_t *ref, const json_t *lines,
    struct sbx_err *err);
/* The backend's net_rules (set: NULL to read): the rules, or NULL. */
json_t *sbxd_be_net_rules(json_t *ref, const json_t *set,
    struct sbx_err *err);

/* files.c: a helper inside a box's sandbox, where every path of its
 * files is resolved. Requests are {"op":"stat"|"list"|"mkdir"|"move"|
 * "remove"|"open"|"create"|"commit"|"abort"|"watch"|"user", "user":NAME,
 * "path":P, ...}; an answer is a JSON object, {"error":CODE (Connect's),
 * "message":..., "errno":N} when it failed, and may carry an fd. */
#define SBXD_META_XATTR "user.e2b."

struct sbxd_inbox {
	struct sbxd_child ch;
	int sock;
};

int sbxd_inbox_start(struct sbxd_box *b, struct sbxd_inbox *ib,
    struct sbx_err *err);
/* Takes q; never NULL (a failure is an "unavailable" answer). */
json_t *sbxd_inbox_call(struct sbxd_inbox *ib, json_t *q, int *fd);
void sbxd_inbox_end(struct sbxd_inbox *ib, int kill_it);
/* One request in a helper of its own. */
json_t *sbxd_inbox_do(struct sbxd_box *b, json_t *q, int *fd);
int sbxd_msg_send(int sock, const json_t *j, int fd);
json_t *sbxd_msg_recv(int sock, int *fd);
/* The same with up to 8 fds. */
int sbxd_msg_sendv(int sock, const json_t *j, const int *fds, int nfds);
json_t *sbxd_msg_recvv(int sock, int *fds, int *nfds, int max);

/* proc.c: sbxd's side of a Connect server stream (Process's Start and
 * Connect, Filesystem's WatchDir): the frames not yet read, the end of
 * stream, the keepalive and the deadline (mono ms, 0: none). */
struct sbxd_stream {
	struct sbx_buf out;
	size_t off;
	int last;             /* the end of stream is in out */
	long long keepalive_ms, next_ping, deadline;
	struct MHD_Connection *c;
	struct sbxd_wait w;
};
/* The keepalive and the deadline the request's headers ask for; a
 * deadline already set stays. */
void sbxd_stream_start(struct sbxd_stream *s, struct sbxd_req *r);
/* The end of stream, with an error when code is not NULL. */
void sbxd_stream_end(struct sbxd_stream *s, const char *code,
    const char *msg);
/* Up to max bytes of the frames not yet read, into buf; 0 (and out
 * emptied) when all are read. */
size_t sbxd_stream_take(struct sbxd_stream *s, char *buf, size_t max);
/* proc.c: the one envelope of a streaming request; NULL after
 * answering. */
json_t *sbxd_stream_request(struct sbxd_req *r, enum MHD_Result *ret);
/* The JSON object of a unary request ({} when empty); NULL after
 * answering invalid_argument. */
json_t *sbxd_unary_request(struct sbxd_req *r, enum MHD_Result *ret);

/* control.c, secrets.c, proc.c, fs.c: the routes */
extern const struct sbxd_route sbxd_control_routes[];
extern const struct sbxd_route sbxd_secret_routes[];
extern const struct sbxd_route sbxd_proc_routes[];
extern const struct sbxd_route sbxd_fs_routes[];
extern const struct sbxd_route sbxd_tpl_routes[];
/* volume.c: E2B's volume content API, /volumecontent/ID/... */
extern const struct sbxd_route sbxd_volc_routes[];
/* The backend's volume named id ({"name","path",...}), or NULL (err
 * set when the volumes could not be listed). */
json_t *sbxd_vol_find(const char *id, struct sbx_err *err);
/* Volume v's token (64 hex digits and a NUL into out). */
int sbxd_vol_token(const json_t *v, char out[65]);

/* daytona.c, daytona-toolbox.c: Daytona's API (/api) and toolbox
 * (/toolbox/ID/...). The route of a request whose path is theirs (auth
 * and the sandbox checked), else NULL after answering. */
int sbxd_dt_path(const char *path);
const struct sbxd_route *sbxd_dt_dispatch(struct sbxd_req *r,
    enum MHD_Result *ret);
extern const struct sbxd_route sbxd_dt_api_routes[];
extern const struct sbxd_route sbxd_dt_tb_routes[];
/* Daytona's error bodies: the API's (NestJS) and the toolbox's. */
__attribute__((format(printf, 3, 4))) enum MHD_Result sbxd_dt_api_err(
    struct sbxd_req *r, int status, const char *fmt, ...);
__attribute__((format(printf, 4, 5))) enum MHD_Result sbxd_dt_tb_err(
    struct sbxd_req *r, int status, const char *code, const char *fmt, ...);
/* The user a box's commands and files are Daytona's (malloc'd). */
char *sbxd_dt_user(struct sbxd_box *b);
/* It stopped (mu held): its auto-delete clock starts. */
void sbxd_dt_stopped(struct sbxd_box *b);
/* A toolbox call is activity: the auto-stop clock starts again. */
void sbxd_dt_touch(struct sbxd_box *b);
/* Where a box's commands start (malloc'd). */
char *sbxd_dt_work_dir(struct sbxd_box *b);
/* Start argv in the box as its Daytona user, with that one's HOME; fds:
 * stdin, stdout, stderr, the result's pipe and the go pipe (proc.c). */
int sbxd_dt_spawn(struct sbxd_box *b, const char *const *argv,
    const char *cwd, const json_t *envs, uint64_t timeout_ms, int tty,
    const int fds[5], struct sbxd_child *ch, struct sbx_err *err);
/* The body as a JSON object; NULL after answering 400 (the toolbox's). */
json_t *sbxd_dt_tb_body(struct sbxd_req *r, enum MHD_Result *ret);
/* n bytes as a JSON string, those that are not UTF-8 as '?'. */
json_t *sbxd_dt_text(const char *p, size_t n);
/* wsock.c: a request upgraded to a WebSocket. */
struct sbxd_ws {
	int fd;                /* the socket, libmicrohttpd's */
	struct MHD_UpgradeResponseHandle *urh;
	struct sbx_ws_reader rd;
	int closed;            /* our close frame is sent */
	int peer_closed, broken;
};
int sbxd_ws_asked(struct sbxd_req *r);
/* Answer 101 (with the protocol want when the client offers it, else
 * the first it offers) and run fn(w, cls) on a thread of its own once
 * upgraded (the socket is closed when it returns); fr(cls) when it never
 * runs. */
enum MHD_Result sbxd_ws_upgrade(struct sbxd_req *r, const char *want,
    void (*fn)(struct sbxd_ws *, void *), void (*fr)(void *), void *cls);
/* A request header's comma-separated list has token. */
int sbxd_ws_has_token(const char *list, const char *token);
int sbxd_ws_send(struct sbxd_ws *w, int op, const void *p, size_t n);
int sbxd_ws_close(struct sbxd_ws *w, int code, const char *reason);
/* A data message within timeout_ms: 1; 0 none; -1 the socket is done
 * with (closed by either side, broken, or sbxd stopping: 1001 sent).
 * Pings are answered, a close echoed. */
int sbxd_ws_read(struct sbxd_ws *w, int timeout_ms, struct sbx_ws_msg *m);
/* What sbxd_proc_child writes on its fd 3: proc.c's struct result. */
struct sbxd_proc_result {
	int rc, exit_code, signal, timed_out, code;
	char msg[512];
};
/* daytona-session.c: the toolbox's sessions (/process/session) */
extern const struct sbxd_route sbxd_dt_sess_routes[];
void sbxd_dt_sess_end_all(struct sbxd_box *b);
/* daytona-snap.c: /api/snapshots, and sandboxes built from buildInfo
 * (pending until their build is done). */
extern const struct sbxd_route sbxd_dt_snap_routes[];
/* The DTO of the pending sandbox id (proxy: its toolboxProxyUrl), or
 * NULL; every pending one that matches name (a prefix; NULL: all). */
json_t *sbxd_dt_pending(const char *id, const char *proxy);
json_t *sbxd_dt_pending_all(const char *name, const char *proxy);
int sbxd_dt_pending_name(const char *name);
/* A template record's Daytona state ("active", "building",
 * "build_failed"...) and, failed, its reason. */
const char *sbxd_dt_snap_state(const json_t *rec, const char **reason);
/* POST /api/sandbox with buildInfo, j its body (checked but for
 * buildInfo and the size). */
enum MHD_Result sbxd_dt_create_built(struct sbxd_req *r, json_t *j);
/* DELETE of a pending one: 1 answered, 0 none is id. */
int sbxd_dt_pending_delete(struct sbxd_req *r, const char *id,
    enum MHD_Result *ret);
/* daytona.c: the size a body asks (GiB, at most Daytona's per-sandbox
 * maximum) into o; -1 after answering 400. Where the toolbox is (this
 * server as the client reached it; malloc'd). */
int sbxd_dt_size(struct sbxd_req *r, const json_t *j, struct sbxd_new *o,
    enum MHD_Result *ret);
char *sbxd_dt_proxy_url(struct sbxd_req *r);
/* A time as Daytona's ("2026-12-06T08:50:51.932Z"); a's items in an
 * array (malloc'd) sorted by cmp. */
void sbxd_dt_time(long long ms, char *buf, size_t n);
json_t **sbxd_dt_sorted(json_t *a, int (*cmp)(const void *, const void *));
/* daytona.c: a new box as Daytona's create body j asks (r NULL: off a
 * request, key its API key), with o; 0, else the status and emsg. */
int sbxd_dt_new(struct sbxd_req *r, int key, json_t *j,
    const struct sbxd_new *o, struct sbxd_box **bp, char *emsg, size_t en);
/* daytona-pty.c: the toolbox's PTYs (/process/pty) */
extern const struct sbxd_route sbxd_dt_pty_routes[];
void sbxd_dt_pty_end_all(struct sbxd_box *b);
/* server.c: the request's API key, and a route's path pattern. */
int sbxd_key_ok(struct sbxd_req *r);
int sbxd_path_match(const char *pat, const char *path);
/* control.c: E2B's create (v2) for Daytona's, and a sandbox's size:
 * vCPUs, memory and disk (0: no quota) in MiB (b NULL: sbxd's, mu
 * held). What Daytona's create adds: the id (NULL: a new one) and the
 * size (0: the template's, else sbxd's). */
struct sbxd_new {
	const char *id;
	json_int_t cpus, mem_mb, disk_mb;
};
int sbxd_e2b_new_box(struct sbxd_req *r, json_t *j, const struct sbxd_new *o,
    json_t **out, char *emsg, size_t en);
void sbxd_box_size(const struct sbxd_box *b, json_int_t *cpus,
    json_int_t *mem_mb, json_int_t *disk_mb);
/* control.c: take a box for a change of state (-1: one is under way,
 * or it is being killed), and give it back; kill a taken box (its
 * processes end, its sandbox goes, it leaves the table): -1 with err. */
int sbxd_box_take(struct sbxd_box *b);
/* E2B's network update j (PUT /sandboxes/ID/network's body) applied to
 * b, taken: 0, or the HTTP status to answer, with msg (control.c). */
int sbxd_net_put(struct sbxd_box *b, const json_t *j, char *msg, size_t n);
void sbxd_box_give(struct sbxd_box *b);
int sbxd_box_kill(struct sbxd_box *b, struct sbx_err *err);
/* An object of strings, or none. */
int sbxd_strmap_ok(const json_t *o);

/* template.c: E2B's template builds (sbx-image build on the local
 * backend). Its store under sbxd's, once the store is known. */
int sbxd_tpl_init(struct sbx_err *err);
/* A built template's image, its id, and its start and ready commands
 * (each malloc'd or NULL); NULL when t is none that is built. */
char *sbxd_tpl_image(const char *t, char **id, char **start, char **ready);
/* The id of the built template whose ID, name or name:tag is t
 * (malloc'd), or NULL. */
char *sbxd_tpl_id(const char *t);
/* Daytona's snapshots are templates (daytona-snap.c). A build of
 * Dockerfile df (no context) as the new template name, its record's
 * "daytona" dt ({"cpu","mem","disk",...}); reuse: a template of that
 * name already there is the one (its id), else 409. The HTTP status
 * to answer (200, else msg), and *id the template's (malloc'd). */
int sbxd_tpl_dt_build(const char *name, const char *df, const json_t *dt,
    int reuse, char **id, char *msg, size_t n);
/* Every template ({ID: record}, a copy), or the one t names ([ID,
 * record], or NULL). */
json_t *sbxd_tpl_dt_all(void);
json_t *sbxd_tpl_dt_find(const char *t);
/* Remove template t and its images no other one names: 0, -1 none. */
int sbxd_tpl_remove(const char *t);
/* fs.c: a signed /files URL that names no sandbox (the SDK's one URL
 * for every sandbox): the id of the sandbox whose envd token signed
 * it, into id; -1 if none did. */
int sbxd_fs_signed_box(struct sbxd_req *r, char *id, size_t n);
/* A PUT of an upload link with a good signature (no API key needed). */
int sbxd_tpl_upload_ok(struct sbxd_req *r);
/* port.c: a request for a port of the sandbox other than envd's. */
extern const struct sbxd_route sbxd_port_route;
enum MHD_Result sbxd_port_proxy(struct sbxd_req *r);
/* proc.c: who a process of the user name runs as (*as: the exec's
 * user, NULL for the sandbox's root) and its home, as envd's; -1 with
 * the files helper's error in *fail. */
int sbxd_proc_user(struct sbxd_box *b, const char *name, char **as,
    char **home, json_t **fail);
/* End a box's processes and watchers (it is being killed). */
void sbxd_proc_end_all(struct sbxd_box *b);
void sbxd_fs_end_all(struct sbxd_box *b);

#endif
