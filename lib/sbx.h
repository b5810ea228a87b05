/* sbx.h - the public face of libsbx, sectioned by module */
#ifndef SBX_H
#define SBX_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <jansson.h>

#define SBX_VERSION "0.1.0"

/* Exit codes: the one table, repeated in DESIGN.md, sbx(7) and every man page. */
enum sbx_exit {
	SBX_EX_OK = 0,
	SBX_EX_FAIL = 1,     /* the operation failed */
	SBX_EX_USAGE = 2,    /* bad flag or value, unsupported by the backend */
	SBX_EX_NOSANDBOX = 3, /* no such sandbox */
	SBX_EX_BUDGET = 4,   /* budget reached */
	SBX_EX_CRED = 5,     /* credentials missing or rejected */
	SBX_EX_DATA = 6,     /* bad input data; nothing was written */
	/* sbx-exec's own codes, as env(1) and timeout(1) */
	SBX_EX_TIMEOUT = 124,
	SBX_EX_EXECFAIL = 125,
	SBX_EX_NOEXEC = 126,
	SBX_EX_NOTFOUND = 127,
};

/* --- err: the program name, diagnostics, library errors ---------------- */

/* A library error: a message and the exit code it suggests to a command. */
/* A message and the exit code it suggests to a command; with a hint of
 * what to do about it, which sbx_die_err prints on a line of its own. */
struct sbx_err {
	int code;
	char msg[512];
	char hint[256];
};

extern int sbx_quiet, sbx_verbose;

/* The program name and the sbx_x* allocators live in buf.c, which the
 * agent (sbx-init) links without the rest. */
void sbx_prog_set(char **argv);
const char *sbx_prog_get(void);
/* The argv sbx_prog_set saw, to run the tool again (another flavour). */
char **sbx_prog_argv(void);
/* What a command starts with, for a child about to exec it: every
 * signal's disposition the default and none blocked. An ignored signal
 * survives execve, and a script's `sbxd &` starts with SIGINT and SIGQUIT
 * ignored. System calls only (a CLONE_VM child may call it). */
void sbx_sig_default(void);
__attribute__((noreturn, format(printf, 2, 3))) void sbx_die(int code,
    const char *fmt, ...);
__attribute__((format(printf, 1, 2))) void sbx_warn(const char *fmt, ...);
__attribute__((format(printf, 1, 2))) void sbx_note(const char *fmt, ...);
/* Fill err; a trailing ':' in fmt appends strerror(errno). Returns -1. */
__attribute__((format(printf, 3, 4))) int sbx_err_set(struct sbx_err *err,
    int code, const char *fmt, ...);
/* The hint of the error just set (sbx_err_set clears it). */
__attribute__((format(printf, 2, 3))) void sbx_err_hint(struct sbx_err *err,
    const char *fmt, ...);
__attribute__((noreturn)) void sbx_die_err(const struct sbx_err *err);

void *sbx_xmalloc(size_t n);
void *sbx_xcalloc(size_t n, size_t m);
void *sbx_xrealloc(void *p, size_t n);
char *sbx_xstrdup(const char *s);
__attribute__((format(printf, 1, 2))) char *sbx_xasprintf(const char *fmt,
    ...);
__attribute__((format(printf, 1, 0))) char *sbx_xvasprintf(const char *fmt,
    va_list ap);

/* --- cli: usage, the common options, option values, stdout ------------ */

/* The usage text is the man page's SYNOPSIS. */
__attribute__((noreturn)) void sbx_usage(const char *text, int code);
__attribute__((noreturn, format(printf, 2, 3))) void sbx_usage_error(
    const char *text, const char *fmt, ...);
__attribute__((noreturn)) void sbx_version(void);
/* The options every tool has (-h -q -v -V): true when c was one. */
int sbx_opt_common(int c, const char *usage);

/* --help (-h prints the usage alone): the usage, a line for each long
 * option (sorted, with its short letter and its value's name as the usage
 * shows it), and an example. Options missing here take common texts. */
struct option;
struct sbx_help_opt {
	const char *name;       /* a long option */
	const char *arg;        /* its value's name; NULL: from the usage */
	const char *text;       /* one line */
};
struct sbx_help {
	const char *usage;
	const struct option *longopts;
	const struct sbx_help_opt *opts; /* ends with {NULL} */
	const char *example;    /* indented command lines */
	int section;            /* of the man page; 0: 1 */
};
/* The value of "help" in a tool's longopts: --help, not -h. */
#define SBX_OPT_HELP 0x1000
/* Before getopt_long, with the argv it parses: turns getopt's messages off
 * for sbx_opt_common's, which suggest the closest long option. */
void sbx_opt_init(const struct sbx_help *help, char **argv);
/* SBX_OPT_HELP prints the help and exits; '?' says why on stderr. */
int sbx_help_opt(int c);
/* A tool of commands (sbx-sync push ...) whose options may come before
 * the command too, as git's and docker's: the first argument that is not
 * an option nor an option's value is moved to argv[1]. */
void sbx_opt_cmd_first(int argc, char **argv, const char *shortopts,
    const struct option *longopts);

int sbx_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);
/* "512M", "1G", "4096", "2KiB": binary multiples. */
int sbx_parse_size(const char *s, uint64_t *out);
/* A decimal such as "0.5" or "2", into millis (500, 2000). */
int sbx_parse_milli(const char *s, uint64_t min, uint64_t max, uint64_t *out);
/* "90", "90s", "5m", "2h", "1d", "1h30m" (units largest first) into
 * seconds; a bare number is seconds. */
int sbx_parse_duration(const char *s, uint64_t *seconds);
/* A duration option's value (as sbx_parse_duration) between min and max
 * seconds; the error names the option and the limit passed:
 * "--timeout: 40d is over the maximum, 365d". */
int sbx_opt_duration(const char *opt, const char *s, uint64_t min,
    uint64_t max, uint64_t *out, struct sbx_err *err);
/* Seconds as the duration sbx_parse_duration reads back: "30d", "1h30m";
 * buf of SBX_DURATION_LEN bytes holds any. */
#define SBX_DURATION_LEN 96
char *sbx_fmt_duration(uint64_t secs, char *buf, size_t n);
/* The longest timeout a sandbox or a command may have: a year. */
#define SBX_TIMEOUT_MAX 31536000u
/* "key=value" with a key of [A-Za-z0-9_.-/] (1-63); adds to obj. */
int sbx_parse_label(const char *s, json_t *obj, struct sbx_err *err);
/* "NAME=VALUE" or "NAME" (taken from our environment) -> "NAME=VALUE". */
char *sbx_parse_env(const char *s, struct sbx_err *err);

/* Flush stdout; EPIPE is a quiet exit. Returns the status to exit with. */
int sbx_out_close(int rc);
/* Print a JSON object as one compact line on stdout. */
void sbx_out_json(json_t *obj);
/* A byte count of a table's cell: "512K", "1.5M", "2.0G"; "-" for what
 * is not an integer (null: unknown). */
void sbx_fmt_bytes(const json_t *v, char *buf, size_t n);

/* --- buf: one growable buffer with a size cap ------------------------- */

struct sbx_buf {
	char *data;
	size_t len, cap, limit; /* limit 0: none */
	int truncated;          /* something past limit was dropped */
};
#define SBX_BUF_INIT {0}
void sbx_buf_add(struct sbx_buf *b, const void *p, size_t n);
void sbx_buf_release(struct sbx_buf *b);
/* n bytes as lowercase hex digits, added to b. */
void sbx_hex_put(struct sbx_buf *b, const void *p, size_t n);
/* Hex digits (a line end after them allowed) as bytes, added to b; -1
 * on anything else. */
int sbx_hex_get(const char *p, size_t n, struct sbx_buf *b);
/* --- ws: WebSocket frames (RFC 6455), a server's side --------------- */

enum {
	SBX_WS_CONT = 0, SBX_WS_TEXT = 1, SBX_WS_BINARY = 2,
	SBX_WS_CLOSE = 8, SBX_WS_PING = 9, SBX_WS_PONG = 10,
};
/* Close codes. */
enum {
	SBX_WS_NORMAL = 1000, SBX_WS_PROTOCOL = 1002, SBX_WS_TOO_BIG = 1009,
	SBX_WS_ERROR = 1011,
};
/* What comes from a client: add its bytes to in (set max first: the
 * largest message taken). */
struct sbx_ws_reader {
	struct sbx_buf in;
	size_t max;
	struct sbx_buf msg;     /* a data message's fragments so far */
	int msg_op, msg_done;
	size_t used;            /* of in, by the frame last given */
	int failed;             /* the close code it broke the protocol with */
	int client;             /* ours is the client: frames come unmasked */
};
struct sbx_ws_msg {
	int op;                 /* TEXT or BINARY (whole), or a control's */
	const unsigned char *data; /* unmasked; valid until the next call */
	size_t len;
};
/* The next message or control frame: 1; 0 when more bytes are needed;
 * -1 when the client broke the protocol (r->failed: the close code). */
int sbx_ws_next(struct sbx_ws_reader *r, struct sbx_ws_msg *m);
void sbx_ws_reader_release(struct sbx_ws_reader *r);
/* The header of a final, unmasked frame of len bytes: its size (2-10). */
size_t sbx_ws_header(unsigned char h[10], int op, uint64_t len);
/* A client's final frame of n bytes, masked, added to b. */
void sbx_ws_frame_masked(struct sbx_buf *b, int op, const void *p, size_t n);

/* write(2) all of it, through EINTR and short writes; -1 with errno. */
/* Read exactly n bytes: -1 on an error or an end before them. */
int sbx_read_all(int fd, void *buf, size_t n);
int sbx_write_all(int fd, const void *buf, size_t n);
/* FNV-1a, 64 bits, continuing from h (start with sbx_fnv1a(0, NULL, 0)):
 * to tell whether two things are the same, never for security. */
uint64_t sbx_fnv1a(uint64_t h, const void *p, size_t n);
/* CLOCK_MONOTONIC in milliseconds: for durations and deadlines. */
long long sbx_mono_ms(void);
/* Sleep ms milliseconds (signals that interrupt it aside). */
void sbx_sleep_ms(long ms);

/* --- jsonx: small helpers over jansson -------------------------------- */

/* Load a file that must hold one JSON object. code SBX_EX_DATA when it
 * exists but is not valid, SBX_EX_NOSANDBOX when it does not exist. */
json_t *sbx_json_load_object(const char *path, struct sbx_err *err);
const char *sbx_json_str(const json_t *obj, const char *key);
long long sbx_json_int(const json_t *obj, const char *key, long long def);
/* A JSON string from bytes that may not be UTF-8 (bad bytes -> U+FFFD). */
json_t *sbx_json_bytes(const char *p, size_t n);
/* RFC 3339 UTC ("2026-12-02T11:35:34Z") into buf of at least 21 bytes. */
void sbx_time_fmt(long long epoch, char *buf, size_t n);
long long sbx_now(void);
/* mkdir -p: the missing parents (0755), then path itself with mode. */
int sbx_mkdirs(const char *path, int mode, struct sbx_err *err);
/* Write the whole of data to path atomically (temp, rename); durable
 * adds the fsyncs that make it survive a crash. */
int sbx_file_write_atomic(const char *path, const char *data, size_t n,
    int mode, int durable, struct sbx_err *err);

/* --- config: flags > SBX_* environment > config files > defaults ------ */

/* The value of key ("backend", "local.dir"), or def. */
const char *sbx_config_get(const char *key, const char *def);
/* The environment variable of a key ("local.dir": SBX_LOCAL_DIR);
 * -1 when it does not fit in n. */
int sbx_config_env(const char *key, char *env, size_t n);
/* A directory of sbx's own (malloc'd): config key's value when set, else
 * /var/lib/sbx/SUB for root, else $XDG_DATA_HOME/sbx/SUB (state:
 * $XDG_STATE_HOME), else ~/.local/share (~/.local/state)/sbx/SUB. */
char *sbx_config_dir(const char *key, const char *sub, int state);
/* path, absolute: a relative one is the current directory's (malloc'd). */
char *sbx_abs_path(const char *path);
/* The credentials directory (DESIGN.md 8), allocated:
 * $XDG_CONFIG_HOME/sbx/credentials, else ~/.config/sbx/credentials;
 * NULL when neither variable is set. */
char *sbx_config_cred_dir(void);
/* A credential (DESIGN.md 8): the environment variable env, else the
 * first line of $XDG_CONFIG_HOME/sbx/credentials/NAME (a warning unless
 * it is 0600); NULL when neither has one. *where (if asked; free it) is
 * the file's path, for the caller's message. */
char *sbx_cred_get(const char *env, const char *name, char **where);
/* An API key, sbx_cred_get's, trailing blanks no part of it; NULL with
 * SBX_EX_CRED "no WHAT API key (set ENV or write it to 'FILE')". */
char *sbx_cred_key(const char *env, const char *name, const char *what,
    struct sbx_err *err);

/* --- state: the state file (sbx-state(5)) ----------------------------- */

#define SBX_STATE_SCHEMA 1
#define SBX_STATE_DEFAULT ".sbx/state.json"

struct sbx_state {
	char *path;
	int lockfd;
	int lazy;     /* save without fsync: what it says can be lost */
	json_t *root; /* the whole object, unknown fields included */
};

/* Lock (exclusive) and load path; a missing file gives an empty object.
 * A malformed file fails with SBX_EX_DATA and is never written. */
int sbx_state_open(struct sbx_state *st, const char *path,
    struct sbx_err *err);
/* A state file's directory named .sbx (sbx-create's default): made, with
 * a .gitignore of "*" unless it has one, so that git never sees it. */
int sbx_state_dir_prepare(const char *path, struct sbx_err *err);
/* Read without a lock; missing: SBX_EX_NOSANDBOX. */
int sbx_state_read(struct sbx_state *st, const char *path,
    struct sbx_err *err);
/* Stamp updated_at and write atomically. */
int sbx_state_save(struct sbx_state *st, struct sbx_err *err);
/* Write path (the state's, or a file of its such as its baseline)
 * atomically, mode 0600, under st's lock: the lock file says meanwhile
 * that a temp file may be left, for the next sbx_state_open to remove. */
int sbx_state_write(struct sbx_state *st, const char *path,
    const char *data, size_t n, int durable, struct sbx_err *err);
void sbx_state_release(struct sbx_state *st);
/* Remove the temp files a killed writer of path left (path.tmpXXXXXX,
 * path.baseline.tmpXXXXXX), when no one holds its lock; -1 when someone
 * does. sbx_state_open does the same under its lock, when a writer's mark
 * in the lock file says there may be some (sbx_state_write). */
int sbx_state_tidy(const char *path);
/* A new state object for a sandbox just created from spec. */
struct sbx_spec;
json_t *sbx_state_new_root(json_t *ref, const struct sbx_spec *spec);
/* Set status, closing (or opening) the running segment. */
void sbx_state_set_status(json_t *root, const char *status);

/* --- ref: how a tool finds its sandbox (DESIGN.md 5) ------------------- */

struct sbx_target {
	const char *id;         /* --id */
	const char *state_path; /* --state */
	const char *backend;    /* --backend */
};

/* The ref from --id, --state, $SBX_STATE, ./.sbx/state.json, in that
 * order. *state_path_out names the state file used (or NULL). */
json_t *sbx_ref_resolve(const struct sbx_target *t, const char **state_out,
    struct sbx_err *err);
/* A state file's ref against an explicit --backend: SBX_EX_USAGE when
 * they differ (want NULL: no --backend, anything goes). */
int sbx_ref_check_backend(const json_t *ref, const char *want,
    const char *path, struct sbx_err *err);
/* True when --id, --state or $SBX_STATE name a sandbox. */
int sbx_ref_explicit(const struct sbx_target *t);
/* The listing entries of backend's sandboxes, each to fn; backend NULL:
 * of every backend this flavour runs whose answers op says yes (local,
 * docker when an engine answers at docker.host, e2b with a key and an
 * endpoint). -1 with err when the backend named fails; with NULL, a
 * backend that fails is warned about, the rest are listed, and the worst
 * exit code of those is returned (0: none failed). */
int sbx_ref_list(const char *backend, int (*fn)(json_t *info, void *arg),
    void *arg, struct sbx_err *err);
/* The ref of the sandbox what names. With backend (--backend):
 * {"backend","id": what}, as that backend names its sandboxes (local: an
 * id or name; docker: an id, a prefix or a name; e2b: an id). NULL: in
 * any backend sbx_ref_list walks, {"backend","id"} with its full id and
 * the "endpoint" of a remote one; what is an id, a name, or a prefix of
 * at least SBX_REF_PREFIX_MIN characters of an id; an exact id wins over
 * a name, a name over a prefix. Two matches of the same kind: NULL with
 * SBX_EX_USAGE naming both. None: {"backend": the default, "id": what},
 * for the backend to say it is gone. The caller picks the flavour first
 * (sbx_flavour_pick_target): backends it lacks are not asked. */
#define SBX_REF_PREFIX_MIN 4
json_t *sbx_ref_find(const char *backend, const char *what,
    struct sbx_err *err);
/* Whether the last sbx_ref_find saw the sandbox (a backend's info or
 * listing had it): it existed, and its caller need not ask again. */
int sbx_ref_found(void);

/* --- target: what a command acts on (ids, stdin, a state file) -------- */

/* Each id from the operands, or one per stdin line (a bare id or a JSON
 * object with "id") when there are none and stdin is not a terminal. */
typedef int (*sbx_id_fn)(const char *id, void *arg);
int sbx_each_stdin_id(sbx_id_fn fn, void *arg, int *count);
/* True while fn runs for a stdin line that is a JSON object (a ref, a
 * line of sbx-ls): a sandbox that existed, where a bare id may be a typo. */
int sbx_target_from_ref(void);
/* Meanwhile, the line's "backend", or NULL: sbx_ref_find asks that
 * backend alone (a pipe of N lines from sbx-ls lists no backend N
 * times). */
const char *sbx_target_line_backend(void);
/* Whether stdin is a pipe, socket or file that may hold ids. */
int sbx_stdin_has_ids(void);
/* What a batch command (sbx-kill, sbx-pause) acts on: --id and the ids
 * given, else one per stdin line when it is piped, else one state file
 * (--state, $SBX_STATE, ./.sbx/state.json). The worst status of the
 * calls, or -1 with err when nothing names a sandbox. */
int sbx_each_target(const struct sbx_target *t, char *const *ids, int nids,
    sbx_id_fn on_id, int (*on_state)(const char *path, void *arg), void *arg,
    struct sbx_err *err);
/* The options that name a target (-b backend, -I id, -s state), for a
 * command's getopt loop: true when c was one, with arg put in t. */
int sbx_target_opt(int c, const char *arg, struct sbx_target *t);
/* sbx_state_open for a command that acts on the state's sandbox: a state
 * file that is missing or empty fails with SBX_EX_NOSANDBOX (an empty one
 * is removed), one of another backend than backend (NULL: any) with
 * SBX_EX_USAGE; st is released on failure. */
int sbx_target_state_open(struct sbx_state *st, const char *path,
    const char *backend, struct sbx_err *err);
/* The end of a command's work on such a state: with a status (NULL: none),
 * that status set and the state saved (-1 with err when it could not be);
 * st released either way. */
int sbx_target_state_close(struct sbx_state *st, const char *status,
    struct sbx_err *err);
/* Whether a listing entry's "labels" hold every key and value of want. */
int sbx_target_labels_match(const json_t *info, const json_t *want);

/* --- ignore: gitignore patterns (.sbxignore, --include, --exclude) --- */

/* Patterns in gitignore(5) syntax, parsed once; the last match wins. */
struct sbx_ignore;
struct sbx_ignore *sbx_ignore_new(void);
void sbx_ignore_free(struct sbx_ignore *ig);
/* Add one line of gitignore syntax (a pattern, a comment, a blank line). */
void sbx_ignore_add(struct sbx_ignore *ig, const char *line);
/* Add the lines of a file; a missing file is not an error (returns 0).
 * -1 with err (SBX_EX_FAIL, "cannot read 'PATH': ...") on other errors,
 * and (SBX_EX_USAGE, adding nothing) when it is larger than 64 KiB. */
int sbx_ignore_load(struct sbx_ignore *ig, const char *path,
    struct sbx_err *err);
/* The verdict of the last pattern matching path itself: 1 ignored, 0
 * re-included by a ! pattern, -1 no pattern matched. path is relative to
 * the root ("src/a.c"); is_dir says whether it is a directory. Does not
 * look at parent directories. */
int sbx_ignore_match1(const struct sbx_ignore *ig, const char *path,
    int is_dir);
/* Full gitignore semantics: 1 when a parent directory of path is ignored
 * (a file under an excluded directory cannot be re-included), else when
 * the last matching pattern is a positive one; 0 otherwise. */
int sbx_ignore_match(const struct sbx_ignore *ig, const char *path,
    int is_dir);
/* Number of patterns held (0: nothing to match, callers skip the work). */
size_t sbx_ignore_count(const struct sbx_ignore *ig);
/* A digest of the lines added (to tell whether two sets are the same). */
uint64_t sbx_ignore_digest(const struct sbx_ignore *ig);

/* --- shell: a persistent shell session (sbx-shell) --------------------- */

/* bash (or sh) on a pty that lives between calls: a command is handed to
 * it on a pipe, its end and status told on another (a command's output
 * cannot fake it); output is kept between calls. The caller polls the
 * fds of sbx_shell_pollfds, calls sbx_shell_pump when one is ready,
 * reaps the shell's pid and says so with sbx_shell_reaped. */
struct sbx_shell;
struct pollfd;
#define SBX_SHELL_WAIT_DEFAULT 10000
#define SBX_SHELL_WAIT_MAX 30000
#define SBX_SHELL_LIMIT_DEFAULT (128u << 10)
#define SBX_SHELL_LIMIT_MAX (1u << 20)
/* shell: its path, NULL for /bin/bash, else /bin/sh; prep, when not
 * NULL, runs in the shell's process before it execs (-1: it ends). */
struct sbx_shell *sbx_shell_new(const char *shell, const char *workdir,
    char *const env[], int (*prep)(void), struct sbx_err *err);
void sbx_shell_free(struct sbx_shell *s);
pid_t sbx_shell_pid(const struct sbx_shell *s);
int sbx_shell_is_bash(const struct sbx_shell *s);
/* At most 2 entries. */
size_t sbx_shell_pollfds(const struct sbx_shell *s, struct pollfd *p);
void sbx_shell_pump(struct sbx_shell *s);
void sbx_shell_reaped(struct sbx_shell *s);
int sbx_shell_dead(const struct sbx_shell *s);
int sbx_shell_running(const struct sbx_shell *s);
/* The command ended or the shell did: a call waiting can answer. */
int sbx_shell_settled(const struct sbx_shell *s);
/* -1: one is running, or the shell has ended. */
int sbx_shell_command(struct sbx_shell *s, const char *cmd,
    struct sbx_err *err);
int sbx_shell_input(struct sbx_shell *s, const char *p, size_t n,
    struct sbx_err *err);
int sbx_shell_interrupt(struct sbx_shell *s, struct sbx_err *err);
/* What came since the last take (the first limit bytes), and a completed
 * command's status: taken once. */
struct sbx_shell_out {
	struct sbx_buf output; /* valid UTF-8, \r\n as \n (release it) */
	const char *status;    /* "running", "completed" or "reset" */
	int exit_code;         /* a completed command's, else -1 */
	int truncated;         /* output past limit was dropped */
};
void sbx_shell_take(struct sbx_shell *s, size_t limit,
    struct sbx_shell_out *o);
/* {"output","status","exit_code","truncated"}: marin's Bash result. */
json_t *sbx_shell_out_json(const struct sbx_shell_out *o);
/* A call to a session (the backend's shell op): op is "command" (data:
 * the command), "input" (data: bytes), "signal" (an interrupt), "read",
 * "close" or "list"; wait_ms as long as a command may take before the
 * answer says "running". */
struct sbx_shell_req {
	const char *session, *op;
	const char *data;
	size_t len;
	unsigned wait_ms;
	size_t limit;           /* 0: SBX_SHELL_LIMIT_DEFAULT */
};

/* --- ctxhash: a Docker build context named by its content ------------- */

/* remote-box's context hash: the regular files under root (os.walk's
 * view) that survive the always-excluded directories (.git, .venv,
 * node_modules, ..., and .sbx: by name, at any depth), .DS_Store and root's
 * .dockerignore (Docker's root-anchored patterns), sorted; a SHA-256 of
 * each one's path, a NUL and the SHA-256 of its content, then the
 * Dockerfile's bytes: the first 8 hex digits. */
struct sbx_ctx {
	char *root;
	char *dockerfile;     /* as opened */
	char *dockerfile_rel; /* its path below root; NULL: elsewhere */
	char **files;         /* relative to root, sorted: the context */
	size_t n;
	char hash[9];
};
/* dockerfile NULL: root/Dockerfile. SBX_EX_USAGE for a missing root or
 * Dockerfile. */
int sbx_ctx_load(struct sbx_ctx *c, const char *root, const char *dockerfile,
    struct sbx_err *err);
void sbx_ctx_release(struct sbx_ctx *c);
/* sbx-image build -b docker (lib/docker/build.c; weak: only sbx-image
 * links it). The image name's tag in the engine: 1 present, 0 missing. */
__attribute__((weak)) int sbx_docker_image_exists(const char *name,
    struct sbx_err *err);
/* Send the context (its files and the Dockerfile) to the engine's
 * /build, tagged name; the build's output to stderr unless quiet;
 * buildargs an object of strings or NULL. */
__attribute__((weak)) int sbx_docker_build(const struct sbx_ctx *c,
    const char *name, const json_t *buildargs, int quiet,
    struct sbx_err *err);

/* sbx-image build -b e2b (lib/e2b/template.c; weak: only sbx-image links
 * it): whether template name is there (1) or not (0); the Dockerfile of
 * c built as template name through E2B's template API, its output to
 * stderr unless quiet, *out {"template_id","build_id"}. */
__attribute__((weak)) int sbx_e2b_template_exists(const char *name,
    struct sbx_err *err);
__attribute__((weak)) int sbx_e2b_build(const struct sbx_ctx *c,
    const char *name, const json_t *buildargs, int quiet, json_t **out,
    struct sbx_err *err);
/* sbx-image pull -b docker (lib/docker/pull.c; weak, as the build):
 * the engine pulls ref, with the user's registry credentials; its
 * progress to stderr unless quiet; *out {"image","backend","id",
 * "digest"}. */
__attribute__((weak)) int sbx_docker_pull(const char *ref, int quiet,
    json_t **out, struct sbx_err *err);

/* --- cost: running time, rates and money (DESIGN.md 6) ---------------- */

/* Money is counted in integers: an amount in units of 0.0001, a rate in
 * units of 10^-12, so that 7200 s at 0.10 an hour is exactly 0.2000. */
#define SBX_COST_DECIMALS 4
#define SBX_RATE_DECIMALS 12
#define SBX_COST_MAX_WHOLE 1000000 /* the largest amount or rate */

struct sbx_rate {
	uint64_t per_hour;    /* 10^-12 an hour, unless per_second */
	int per_second;       /* vcpu_second and gib_second apply */
	uint64_t vcpu_second; /* 10^-12 a vCPU-second */
	uint64_t gib_second;  /* 10^-12 a GiB-second */
	uint64_t disk_gib_second; /* 10^-12 a GiB-second of disk */
	uint64_t vcpu_milli;  /* what they apply to */
	uint64_t memory_mib;
	uint64_t disk_gib;
	int per_cpu;          /* cpu_second applies to the CPU time used */
	uint64_t cpu_second;  /* 10^-12 a CPU-second */
	char source[256];     /* "flag", "config cost.local.per_hour", ... */
};

/* A decimal amount, digits with at most one '.' and no sign or exponent
 * ("5", "0.10"), with at most decimals digits after the point (trailing
 * zeros aside), in units of 10^-decimals. */
int sbx_cost_parse(const char *s, int decimals, uint64_t *out);
/* Units of 0.0001 as "0.2000"; buf of at least 32 bytes. */
void sbx_cost_fmt(uint64_t units, char *buf, size_t n);
/* The seconds a state's segments have run, an open one up to now.
 * SBX_EX_DATA when the segments are malformed. */
int sbx_cost_running(const json_t *root, long long now, uint64_t *seconds,
    struct sbx_err *err);
/* The rate for a backend, the first found: flag (--rate, or NULL), env
 * SBX_COST_PER_HOUR, cost.BACKEND.per_hour, cost.BACKEND.vcpu_second and
 * gib_second with the state's "resources", cost.BACKEND.cpu_second, the
 * backend's default. SBX_EX_USAGE when a value is malformed or there is
 * no rate. */
int sbx_cost_rate(const char *backend, const char *flag, const json_t *root,
    struct sbx_rate *r, struct sbx_err *err);
/* What seconds at the rate cost, in units of 0.0001, rounded half up;
 * for a per_cpu rate, seconds are the CPU time used, in milliseconds. */
int sbx_cost_estimate(const struct sbx_rate *r, uint64_t seconds,
    uint64_t *units, struct sbx_err *err);

/* --- backend: the contract every backend implements (DESIGN.md 4) ----- */

enum sbx_net { SBX_NET_DENY, SBX_NET_ALLOW };
enum sbx_compress { SBX_COMPRESS_NONE, SBX_COMPRESS_GZIP, SBX_COMPRESS_ZSTD };

struct sbx_spec {
	const char *image;    /* "host" or a directory */
	uint64_t memory;      /* bytes, 0: no limit */
	uint64_t cpus_milli;  /* 0: no limit */
	uint64_t pids;        /* 0: no limit */
	/* Which of memory, cpus_milli and pids (SBX_CAP_MEMORY, _CPUS,
	 * _PIDS) are defaults (sbx_limits_default), not asked for: a
	 * backend that cannot enforce one goes without it (a note says
	 * so), where an asked-for limit is refused. */
	unsigned limits_default;
	enum sbx_net network;
	uint64_t timeout;     /* idle seconds, 0: none */
	json_t *labels;       /* object of strings */
	char **env;           /* "K=V", NULL-terminated */
	const char *workdir;
	const char *name;
	const char *runtime;  /* an OCI runtime (docker); NULL: default */
	int pull;             /* fetch the image first (docker) */
	const char *endpoint; /* the server's URL (e2b); NULL: default */
	json_t *net_rules;    /* {"allow_out":[...],"deny_out":[...]} with
	                       * network allow (lib/net/net.h); NULL: none */
	/* Headers a proxy outside the sandbox adds to its requests:
	 * [{"host":H,"name":N,"value":V}] or "template":T in place of value
	 * (T may hold ${e2b.secrets.NAME}, resolved per request); NULL:
	 * none. Values live here and in the sandbox's secret file only. */
	json_t *net_inject;
	/* {"url":"socks5://[user@]host:port","password":P or null}: allowed
	 * TCP goes through it; NULL: straight out. */
	json_t *egress_proxy;
	/* [{"port":N,"host_port":M}] published on the host's loopback
	 * (M 0: a free port); NULL: none. */
	json_t *ports;
	/* --- disk (i20-disk) --- */
	/* A quota on what the sandbox writes, bytes (local: the size of its
	 * own ext4 image); 0: none. disk_default: it came from limits.disk,
	 * not --disk: dropped, never refused, where it cannot apply. */
	uint64_t disk;
	int disk_default;
	/* --- start --- */
	/* {"cmd","no_start","ready","ready_timeout","post_create"} as
	 * sbx-create was given them (sbx_start_run); NULL: none. */
	json_t *start;
	/* --- snapshots --- */
	/* The id of a snapshot whose files it starts with (sbx_snap_spec);
	 * NULL: none. */
	const char *from;
	/* --- volumes --- */
	/* [{"name","path"}]: named volumes mounted at absolute paths (a
	 * missing one is created, as docker does); NULL: none. */
	json_t *volumes;
};

/* A volume's name: [a-zA-Z0-9][a-zA-Z0-9_.-]{0,63}. */
int sbx_volume_valid_name(const char *name);
/* --volume NAME:/path into *vols (an array, made when NULL):
 * SBX_EX_USAGE for a bad name, a missing colon, a relative or unplain
 * path, or a path given twice. */
int sbx_volume_parse(const char *text, json_t **vols, struct sbx_err *err);

/* --disk: the smallest and largest quota (0 aside) any backend takes. */
#define SBX_DISK_MIN (16ull << 20)
#define SBX_DISK_MAX (8ull << 40)
/* limits.disk's default, and one inode per so many bytes of it. */
#define SBX_DISK_DEFAULT "10G"
#define SBX_DISK_INODE_RATIO 16384

struct sbx_exec_opts {
	const char *cwd;  /* NULL: the sandbox's workdir */
	char **env;       /* "K=V" added, NULL-terminated */
	int interactive;  /* forward stdin */
	int tty;          /* a pty inside */
	uint64_t timeout_ms;
	int capture;      /* buffer stdout/stderr instead of streaming; a
	                   * tool's own run, whose signals stay its caller's */
	size_t max_output;
	/* Called once, when the command has been handed to the sandbox (a
	 * pause after that cannot keep it from running); NULL: none. */
	void (*started)(void *arg);
	void *started_arg;
	/* Who runs it: "name", "uid", "name:group" or "uid:gid" as docker
	 * exec -u, names through the sandbox's own /etc/passwd and
	 * /etc/group; NULL: the sandbox's default (root, or its image's
	 * User). An unknown name is SBX_EX_USAGE and nothing runs. */
	const char *user;
};

struct sbx_exec_result {
	int exit_code;  /* as sbx-exec exits: status, 128+N, 124..127 */
	int signal;     /* the signal that killed it, or 0 */
	int timed_out;
	long long duration_ms;
	struct sbx_buf out, err; /* with capture */
	/* The bytes of each stream, as the command wrote them (a capture's
	 * cap aside); unknown when the backend handed the caller's fds to
	 * the command itself. */
	unsigned long long bytes_out, bytes_err;
	int bytes_unknown;
};

/* What a backend can do. A tool asked for something its backend lacks
 * refuses it before it acts (sbx_backend_need: SBX_EX_USAGE); nothing
 * falls back quietly. sbx-ls --backends prints them by name. */
enum {
	SBX_CAP_PTY = 1 << 0,        /* sbx-exec -t */
	SBX_CAP_STDIN = 1 << 1,      /* sbx-exec -i */
	SBX_CAP_NET_DENY = 1 << 2,   /* sbx-create --network deny */
	SBX_CAP_NET_ALLOW = 1 << 3,  /* sbx-create --network allow */
	SBX_CAP_MEMORY = 1 << 4,     /* sbx-create --memory */
	SBX_CAP_CPUS = 1 << 5,       /* sbx-create --cpus */
	SBX_CAP_PIDS = 1 << 6,       /* sbx-create --pids */
	SBX_CAP_TIMEOUT = 1 << 7,    /* sbx-create --timeout */
	SBX_CAP_RUNTIME = 1 << 8,    /* sbx-create --runtime */
	SBX_CAP_PULL = 1 << 9,       /* sbx-create --pull */
	SBX_CAP_SUSPEND = 1 << 10,   /* sbx-pause: memory and processes kept */
	SBX_CAP_STOP = 1 << 11,      /* sbx-pause -m stop: files kept */
	SBX_CAP_FILES = 1 << 12,     /* sbx-sync */
	SBX_CAP_IDLE = 1 << 13,      /* reports idle time: sbx-gc -i */
	SBX_CAP_ZSTD = 1 << 14,      /* sbx-sync push -z zstd */
	SBX_CAP_NAME = 1 << 15,      /* sbx-create --name */
	SBX_CAP_KEEP = 1 << 16,      /* sbx-kill -k; an ended sandbox stays
	                              * listed (expired, dead) until sbx-gc */
	SBX_CAP_NET_RULES = 1 << 17, /* --allow-out, --deny-out; sbx-net */
	SBX_CAP_PORTS = 1 << 18,     /* sbx-port: a sandbox's port from the
	                              * host, as a URL */
	SBX_CAP_PUBLISH = 1 << 19,   /* sbx-create --port, sbx-port PORT
	                              * publishing more on the host */
	SBX_CAP_DISK = 1 << 20,      /* sbx-create --disk (i20-disk) */
	SBX_CAP_SHELL = 1 << 21,     /* sbx-shell's sessions */
	SBX_CAP_SNAPSHOT = 1 << 22,  /* sbx-snapshot, sbx-fork, --from */
	SBX_CAP_VOLUMES = 1 << 23,   /* sbx-volume; sbx-create --volume */
	SBX_CAP_ARCHIVE = 1 << 24,   /* sbx-pause -m archive: stopped, its
	                              * files moved to cheaper storage */
	SBX_CAP_SNAP_EXPORT = 1 << 25, /* sbx-snapshot export */
};

/* What a backend does: its operations, in the flavour of the tools that
 * links it (the static one has local only). */
struct sbx_backend_ops {
	int (*create)(const struct sbx_spec *spec, json_t **ref,
	    struct sbx_err *err);
	/* Fails with SBX_EX_NOSANDBOX when the sandbox is gone. */
	int (*exec)(const json_t *ref, char *const argv[],
	    const struct sbx_exec_opts *o, struct sbx_exec_result *res,
	    struct sbx_err *err);
	/* Sets the ref's "id" to the sandbox's own when it named it. */
	int (*kill)(json_t *ref, int keep, struct sbx_err *err);
	/* The listing entry of one sandbox; SBX_EX_NOSANDBOX when gone. */
	json_t *(*info)(const json_t *ref, struct sbx_err *err);
	/* Pause: suspend, or with stop end the processes and keep the
	 * files (as its caps allow), with stop 2 then archive them (cheaper
	 * storage, a slower start); a no-op on a paused sandbox. resume: a
	 * no-op on a running one. Both set the ref's "id" to the sandbox's
	 * own. */
	int (*pause)(json_t *ref, int stop, struct sbx_err *err);
	int (*resume)(json_t *ref, struct sbx_err *err);
	/* What this one sandbox can do beyond its backend's caps
	 * (SBX_CAP_SUSPEND: a Daytona VM class keeps its processes through
	 * a pause), asked by sbx-pause; NULL when every sandbox of the
	 * backend is alike. 0 when it cannot tell. */
	unsigned (*sandbox_caps)(const json_t *ref, struct sbx_err *err);
	/* Calls fn with one info object per sandbox. */
	int (*list)(int (*fn)(json_t *info, void *arg), void *arg,
	    struct sbx_err *err);
	/* Its file operations (sbx-sync), or NULL. */
	const struct sbx_files *files;
	/* With SBX_CAP_NET_RULES (sbx-net): the egress rules as
	 * {"allow_out":[...],"deny_out":[...]}, replaced first by set when
	 * set is not NULL (a list it omits is cleared), applied to new
	 * connections at once. A set's "egress_proxy" ({"url","password"}
	 * as sbx_spec's, or null: none) replaces the proxy; without that
	 * key the proxy stays. A set's "inject" (an array as sbx_spec's
	 * net_inject; [] none) replaces the header injections, which a
	 * sandbox can have only when it had some at create (its CA); without
	 * that key they stay. The result has "egress_proxy" (the URL) when
	 * there is one. */
	json_t *(*net_rules)(const json_t *ref, const json_t *set,
	    struct sbx_err *err);
	/* The log of decisions, JSON lines, copied to stdout; follow: then
	 * what comes, until the sandbox ends. */
	int (*net_log)(const json_t *ref, int follow, struct sbx_err *err);
	/* With SBX_CAP_PORTS (sbx-port): port 0, the published ports as an
	 * array; else that port's {"port","host","host_port","url"},
	 * published first (on host_port, 0: a free one) when it is not.
	 * Without SBX_CAP_PUBLISH every port answers already: the object
	 * has no host_port, and host_port must be 0. */
	json_t *(*ports)(const json_t *ref, unsigned port, unsigned host_port,
	    struct sbx_err *err);
	/* Whether a look across every backend (sbx-ls without -b, an id
	 * without -b) asks this one: configured, and its server answering
	 * within a second or two; never an error. NULL: always. */
	int (*answers)(void);
	/* The sandbox's image's default start command (its Entrypoint and
	 * Cmd) as a JSON array, or NULL: none (err->code 0), or -1 with
	 * err. NULL op: no image has one. */
	json_t *(*image_cmd)(const json_t *ref, struct sbx_err *err);
	/* sbx-shell: a call to a session; *out the answer (an array of the
	 * sessions for "list"), set on an error too when the call reached
	 * the session ({"error","session","status"}). NULL: no sessions. */
	int (*shell)(const json_t *ref, const struct sbx_shell_req *rq,
	    json_t **out, struct sbx_err *err);
	/* sbx-stats: one reading of what a running or paused sandbox uses:
	 * {"backend","id","status","cpu_s" (CPU time used),"cpu_pct" (only
	 * where the backend measures it itself; 100 a CPU),"cpus",
	 * "memory_bytes","memory_limit","memory_cache" (the page cache in
	 * memory_bytes),"disk_bytes","disk_limit","pids","pids_limit",
	 * "net_rx_bytes","net_tx_bytes"}, each null where the backend cannot
	 * tell (a limit: where there is none). SBX_EX_NOSANDBOX when gone or
	 * ended. NULL: the backend cannot tell any. */
	json_t *(*stats)(const json_t *ref, struct sbx_err *err);
	/* With SBX_CAP_SNAPSHOT: a snapshot of the sandbox's files, named
	 * (or NULL), in the store; its meta (sbx-snapshot(1)'s OUTPUT). */
	json_t *(*snapshot)(const json_t *ref, const char *name,
	    struct sbx_err *err);
	/* A backend whose snapshots are not the local store's (e2b's are
	 * the API's): op "ls" (each {"snapshot","name","backend"...} to fn)
	 * or "rm" (id; missing: SBX_EX_NOSANDBOX), or "get" (id or name: its
	 * meta, as sbx_snap_get's, to fn; a backend that has no meta of its
	 * own answers 0 without calling fn). NULL: the store's
	 * (sbx_snap_list, sbx_snap_rm, sbx_snap_get). */
	int (*snapshots)(const char *op, const char *id,
	    int (*fn)(json_t *snap, void *arg), void *arg,
	    struct sbx_err *err);
	/* sbx-snapshot export of a snapshot not in the store, as
	 * sbx_snap_export writes one. NULL: the store's or none. */
	int (*snap_export)(const char *id_or_name, int fd,
	    struct sbx_err *err);
	/* With SBX_CAP_VOLUMES (sbx-volume): op "create" (name; an existing
	 * one is fine), "ls" (name NULL; each to fn) or "rm" (name; in use
	 * by a sandbox not gone: SBX_EX_FAIL naming them; missing:
	 * SBX_EX_NOSANDBOX). An entry is {"backend","name","created"...}. */
	int (*volume)(const char *op, const char *name,
	    int (*fn)(json_t *vol, void *arg), void *arg, struct sbx_err *err);
	/* What sbx-ls --backends says of it on this host beside its caps
	 * (qemu: {"accel"}), an object; NULL: nothing. */
	json_t *(*about)(void);
	/* sbx-gc: what sandboxes that went out of sbx's sight (docker rm)
	 * left on this host, made before the epoch second before, removed;
	 * how many. NULL: nothing is left. */
	int (*sweep)(long long before);
	/* sbx-create's pool of sandboxes made ahead (local.warm): one made
	 * for a spec like spec (its labels, env and timeout aside) taken
	 * and given those: 1 and *ref; 0: none to take. NULL: no pool. */
	int (*warm_take)(const struct sbx_spec *spec, json_t **ref,
	    struct sbx_err *err);
	/* After a create, the pool for spec made full again by a process
	 * of its own that outlives the caller (whose files it closes). */
	void (*warm_fill)(const struct sbx_spec *spec);
};

/* A row of the backend table (lib/backend.c): what a backend is, as
 * data, in both flavours; a tool asks it, never the backend's name. */
struct sbx_backend {
	const char *name;
	unsigned caps;                /* SBX_CAP_* */
	enum sbx_compress compress;   /* sbx-sync push without -z */
	int endpoint;                 /* takes a server's URL (--endpoint) */
	/* sbx-cost's rates when none is configured, or NULL: a CPU-second
	 * used (measured), or a vCPU- and a GiB-second of the sandbox's
	 * size; without any, sbx-cost needs a rate */
	const char *cpu_second_default;
	const char *vcpu_second_default, *gib_second_default;
	/* and a GiB-second of its disk, beside them (or NULL) */
	const char *disk_gib_second_default;
	/* Its sandboxes live in the local store (sbx_local_root), where
	 * sbx-gc's lock is: without a store there is nothing to collect. */
	int in_store;
	/* Sized by its template: --cpus and --memory ask for at least so
	 * much, and no default limit applies (sbx_limits_default). */
	int template_sized;
	/* NULL in the flavour that lacks it (sbx_flavour_pick runs the
	 * other one). */
	const struct sbx_backend_ops *ops;
};

/* In the message of a NOSANDBOX error for something that exists but is
 * not a sandbox of sbx (sbx-kill must not call it gone). */
#define SBX_NOT_OURS "is not an sbx "
/* The row of a backend this flavour can run: SBX_EX_USAGE for a name
 * in no row, SBX_EX_FAIL for one whose operations are in the other
 * flavour (its main forgot sbx_flavour_pick). */
const struct sbx_backend *sbx_backend_get(const char *name,
    struct sbx_err *err);
/* The row of a backend, in whichever flavour; NULL for none. */
const struct sbx_backend *sbx_backend_find(const char *name);
/* The table's row i, NULL past its end. */
const struct sbx_backend *sbx_backend_at(size_t i);
/* The names of the backends that take --endpoint, quoted ("'e2b'"),
 * in buf. */
const char *sbx_backend_endpoint_names(char *buf, size_t n);
/* The backend a ref names. */
const struct sbx_backend *sbx_backend_of(const json_t *ref,
    struct sbx_err *err);
const char *sbx_backend_default(void);
/* 0 when the backend has every capability in caps; else SBX_EX_USAGE
 * with err naming the first it lacks and the flag that asked for it. */
int sbx_backend_need(const struct sbx_backend *be, unsigned caps,
    struct sbx_err *err);
/* sbx_backend_need for what a spec asks of sbx-create. */
/* The spec as a JSON object (every field; env's values too). */
json_t *sbx_spec_json(const struct sbx_spec *s);
int sbx_backend_check_spec(const struct sbx_backend *be,
    const struct sbx_spec *spec, struct sbx_err *err);
/* What pause does without --mode: "suspend", "stop" or "none". */
const char *sbx_backend_pause_default(const struct sbx_backend *be);
/* {"backend","default","caps":{name:bool...}}, one for each backend
 * this flavour of the tools can run; fn's result ends the walk when
 * not 0. */
int sbx_backend_each(int (*fn)(json_t *o, void *arg), void *arg);

/* --- limits: memory, CPUs and processes by default -------------------- */

/* Built-in defaults (sbx-create(1)): E2B's smallest sandbox, and room
 * for a parallel build's processes and threads. */
#define SBX_LIMITS_MEMORY_DEFAULT "512M"
#define SBX_LIMITS_CPUS_DEFAULT "2"
#define SBX_LIMITS_PIDS_DEFAULT "1024"

/* One limit as -m, -c, -p and limits.memory, .cpus, .pids take it
 * (cap: SBX_CAP_MEMORY, _CPUS or _PIDS) into spec's field: a size of
 * at least 4M, CPUs from 0.001 to 4096, 2 to 4194304 processes; "0" is
 * none. -1 when malformed. */
int sbx_limits_parse(unsigned cap, const char *s, struct sbx_spec *spec);
/* The limits not in given (SBX_CAP_* bits) from the configuration
 * (limits.memory, limits.cpus, limits.pids; SBX_LIMITS_*), else the
 * built-in defaults, marked in spec->limits_default; those be cannot
 * enforce (caps, template_sized) are left out with a note.
 * SBX_EX_USAGE for a malformed value. */
int sbx_limits_default(const struct sbx_backend *be, struct sbx_spec *spec,
    unsigned given, struct sbx_err *err);
/* limits.disk (SBX_LIMITS_DISK), else SBX_DISK_DEFAULT, as spec's
 * disk, marked disk_default; 0 where be has no SBX_CAP_DISK.
 * SBX_EX_USAGE for a malformed value. */
int sbx_limits_disk(const struct sbx_backend *be, struct sbx_spec *spec,
    struct sbx_err *err);
/* /dev/shm's size within a memory limit (half of it); 0 for none. */
uint64_t sbx_limits_shm(uint64_t memory);
/* The "limits" object of a listing: {"memory","cpus","pids","shm"},
 * null where there is none. */
json_t *sbx_limits_json(uint64_t memory, uint64_t cpus_milli, uint64_t pids,
    uint64_t shm);

/* --- flavour: which build of a tool runs ------------------------------ */

/* Each tool is built twice: static, with the local backend alone, and
 * dynamic ("remote", with libcurl), with every backend. Each main names
 * the backend it is about to use, once, before it reads its input,
 * writes or prints: when this flavour lacks it, the other one runs in
 * our place with our argv (or we die naming the file that should have
 * been there). Elsewhere a no-op, and so for a name in no row. */
void sbx_flavour_pick(const char *backend);
/* The same for what a target may name: its --backend; ids without
 * --backend (operands, --id, stdin) may be of any backend: the flavour
 * with all (sbx_flavour_pick_all); else the default, and, when it names
 * no ids (nids: how many operands) and none come on stdin, the backend
 * of its state file's ref (unreadable: left to the tool). */
void sbx_flavour_pick_target(const struct sbx_target *t, int nids);
/* The same for the backend of a state file's ref. */
void sbx_flavour_pick_state(const char *path);
/* The flavour with every backend, when there is one (sbx-ls -B). */
void sbx_flavour_pick_all(void);
/* "<the directory of this binary>/rel", malloc'd: NULL when
 * /proc/self/exe cannot be read. */
char *sbx_sibling(const char *rel);

/* --- progress: files, bytes and rate on stderr (a terminal's) -------- */

void sbx_progress_start(int on);
/* What the transfer will be, when known: the line shows a percentage and
 * an ETA. */
void sbx_progress_total(uint64_t files, uint64_t bytes);
void sbx_progress_add(uint64_t files, uint64_t bytes);
void sbx_progress_end(void);

/* --- sync: push a project into a sandbox, pull changes back (DESIGN 7) - */

struct sbx_ignore;

struct sbx_sync_opts {
	json_t *ref;
	const char *state_path;  /* absolute; NULL: no baseline is kept */
	struct sbx_state *state; /* the state, opened (locked) on state_path */
	const char *statedir;    /* the state's directory, relative to the
				  * project (which is the current directory),
				  * or NULL when it lies outside */
	const char *statefile;   /* the state file, relative, when it lies in
				  * the project: it and its siblings (.lock,
				  * .baseline) never travel */
	const char *remote_dir;  /* NULL: the sandbox's workdir */
	struct sbx_ignore *include, *exclude, *sbxignore; /* or NULL */
	uint64_t max_size;       /* 0: no limit */
	int large_skip;
	enum sbx_compress z;
	int delete, dry_run, theirs, ours, progress;
	int full;                /* pull: list everything in the sandbox */
	int links_keep;          /* pull: write links that leave the project */
	int trust_config;        /* pull: write host-executed configuration */
	/* status and --dry-run: one call per path; why is NULL, or "config"
	 * or "link" for what the pull policy holds back */
	void (*plan)(const char *path, const char *action, const char *why,
	    uint64_t size, void *arg);
	void *arg;
};

struct sbx_sync_result {
	uint64_t files, bytes, deleted, conflicts;
	uint64_t held;   /* pull: links left out (links_keep unset) */
	int partial; /* pull: the sandbox listed only what changed */
};

/* Both work on the current directory, the project. */
int sbx_sync_push(const struct sbx_sync_opts *o, struct sbx_sync_result *r,
    struct sbx_err *err);
/* status_only: plan, print, change nothing (pull -n is the same). A pull
 * that leaves conflicts or holds links back fails with SBX_EX_FAIL after
 * doing the rest. */
int sbx_sync_pull(const struct sbx_sync_opts *o, int status_only,
    struct sbx_sync_result *r, struct sbx_err *err);

/* --- cp: files into, out of and between sandboxes (sbx-cp) ---------- */

struct sbx_cp_loc {
	json_t *ref;      /* the sandbox; NULL: this machine */
	const char *path; /* absolute in a sandbox; "-" on this machine: a
			   * tar stream on stdin (a source) or stdout */
};

/* Copy src to dst by cp -r's rules (into a directory that exists, else
 * to that name; "DIR/." for what is in DIR), modes kept, symlinks copied
 * as symlinks, as one tar stream through the backends' put_archive,
 * get_archive and scan. A missing source or destination directory:
 * SBX_EX_FAIL, as cp's. A reader of stdout that went away: -1 with
 * err->code SBX_EX_OK (a quiet end). A copy to this machine changes the
 * current directory. */
int sbx_cp(const struct sbx_cp_loc *src, const struct sbx_cp_loc *dst,
    struct sbx_err *err);

/* --- cmdlog: the record of what ran in a sandbox (sbx-logs(1)) ------ */

/* A command's id: hex digits. */
#define SBX_CMDLOG_ID_LEN 16
/* Where a detached command's output and status are, in the sandbox. */
#define SBX_CMDLOG_DIR "/tmp/.sbx/cmd"

/* The log of a sandbox, kept on the host: log.dir (root:
 * /var/lib/sbx/log; else $XDG_STATE_HOME/sbx/log or
 * ~/.local/state/sbx/log), BACKEND/ID.jsonl; malloc'd, NULL when the
 * names cannot name a file. */
char *sbx_cmdlog_path(const char *backend, const char *id);
int sbx_cmdlog_valid_cmd(const char *cid);
void sbx_cmdlog_new_id(char cid[SBX_CMDLOG_ID_LEN + 1]);
/* A command's line, not ended yet (sbx-logs(1) OUTPUT): env's names
 * only, never their values. */
json_t *sbx_cmdlog_line(long long start, const char *cid, char *const argv[],
    char *const env[], int detached);
/* Fill in line's end from a run's result (exec's, not detached). */
void sbx_cmdlog_ended(json_t *line, const struct sbx_exec_result *r);
/* Append line with one O_APPEND write (the directories made 0700). */
int sbx_cmdlog_append(const char *backend, const char *id,
    const json_t *line, struct sbx_err *err);
/* Remove a sandbox's log; one missing is removed. */
int sbx_cmdlog_remove(const char *backend, const char *id);
/* Remove the logs of backend's sandboxes not in keep (an object whose
 * keys are the ids there are) written before the epoch second before;
 * returns how many. */
int sbx_cmdlog_sweep(const char *backend, const json_t *keep,
    long long before);
/* Start argv in the sandbox, detached (its own directory under
 * SBX_CMDLOG_DIR), with o's cwd and env; returns once it runs. */
int sbx_cmdlog_detach(const struct sbx_backend *be, const json_t *ref,
    const char *cid, char *const argv[], const struct sbx_exec_opts *o,
    struct sbx_err *err);
/* Fill in the end of each detached command in lines (an array of the
 * log's lines) that has ended, from its status in the sandbox. */
int sbx_cmdlog_resolve(const struct sbx_backend *be, const json_t *ref,
    json_t *lines, struct sbx_err *err);
/* A detached command's output from byte *off to what there is now, to
 * stdout (or added to to, 1 MiB or so at most, when not NULL); *off
 * moved on, *ended set when the command had ended (all of it was
 * there). A reader of stdout gone: -1 with err->code 0. */
int sbx_cmdlog_output(const struct sbx_backend *be, const json_t *ref,
    const char *cid, uint64_t *off, int *ended, struct sbx_buf *to,
    struct sbx_err *err);

/* --- start: start, ready and post-create commands (sbx-create) ------ */

/* --ready-timeout's default, seconds. */
#define SBX_READY_TIMEOUT 60
/* What start (as sbx_spec's) starts: its "cmd" through sh -c, else the
 * image's (image_cmd) unless "no_start"; *argv NULL: nothing. */
int sbx_start_argv(const struct sbx_backend *be, const json_t *ref,
    const json_t *start, json_t **argv, struct sbx_err *err);
/* Start it, detached and logged (sbx-logs), then try "ready" every
 * 100 ms until it exits 0 (at most "ready_timeout" seconds), then with
 * first run "post_create" once (its output on stderr when it fails). */
int sbx_start_run(const struct sbx_backend *be, const json_t *ref,
    const json_t *start, int first, struct sbx_err *err);
/* An image config's Entrypoint then Cmd as one array; NULL: empty. */
json_t *sbx_start_image_argv(const json_t *config);
/* After a stop and a start: the start object (as sbx_spec's) run
 * again, not first (no post-create); NULL: none. SBX_EX_FAIL naming the
 * sandbox when it does not start. sbx_start_again: the same, kept as
 * JSON text js (a label's). */
int sbx_start_restart(const json_t *ref, const json_t *start,
    struct sbx_err *err);
int sbx_start_again(const json_t *ref, const char *js, struct sbx_err *err);

/* --- local: the native Linux backend --------------------------------- */

/* The local backend's store: the directory its sandboxes live in. */
const char *sbx_local_root(void);
/* Remove what the store's trash holds (killed sandboxes' directories
 * whose removal was left to a process that died); -1 when some is left. */
int sbx_local_sweep(void);
/* The agent's main(): PID 1 of a local sandbox (sbx-init). */
int sbx_local_init_main(int argc, char **argv);
/* sbx-init --shell-server PATH: the shell sessions of a sandbox of
 * another backend on a unix socket; --shell-call PATH: one call, its
 * SBX_MSG_SHELL frame on stdin, the answer's frame on stdout. Exit
 * statuses. */
int sbx_local_shell_serve(const char *path);
int sbx_local_shell_client(const char *path);

/* --- snapshots (lib/local/snapshot.c): the store's, ROOT/.snapshots ---- */

/* How many snapshots deep a sandbox may be made (its layers). */
#define SBX_SNAP_DEPTH 6

const char *sbx_snap_root(void);
/* A name: letters, digits, then '.', '_', '-' too; not snp-...; <= 63. */
int sbx_snap_valid_name(const char *name);
/* A snapshot's meta.json by id or name; SBX_EX_NOSANDBOX: none. */
json_t *sbx_snap_get(const char *id_or_name, struct sbx_err *err);
/* Calls fn with each snapshot's meta. */
int sbx_snap_list(int (*fn)(json_t *meta, void *arg), void *arg,
    struct sbx_err *err);
/* SBX_EX_NOSANDBOX: none; SBX_EX_FAIL naming the sandboxes (and the
 * snapshots of them) that use it as a layer. */
int sbx_snap_rm(const char *id_or_name, struct sbx_err *err);
/* Snapshot id (the store's) named name, taken from the one that had it
 * (its id in *was, to free; NULL: none had it), which keeps its files
 * and loses its name: E2B's reuse of a snapshot name (sbxd). */
int sbx_snap_take_name(const char *id, const char *name, char **was,
    struct sbx_err *err);
/* A sandbox from snap (borrowed by spec): its image and workdir unless
 * given, its labels under spec's (an object), its limits where given
 * (SBX_CAP_MEMORY, _CPUS, _PIDS, as sbx_limits_default takes them)
 * lacks them (added to given), its timeout where spec has none, its
 * runtime (docker's) where spec has none. */
void sbx_snap_spec(const json_t *snap, struct sbx_spec *spec,
    unsigned *given, int image_given, int workdir_given);
/* sbx-snapshot --memory, sbx-fork --memory: always -1, SBX_EX_USAGE with
 * the reason (a backend's snapshots keep files only; on local, CRIU
 * missing, or `criu check`'s error, or sbx not checkpointing processes)
 * (lib/local/criu.c). */
int sbx_memory_snapshot_refusal(const struct sbx_backend *be,
    struct sbx_err *err);
/* A snapshot's meta on backend be (its snapshots op "get", else the
 * store's); NULL with err->code 0 for one that has no meta of its own
 * (e2b: the API resolves the id at create). */
json_t *sbx_backend_snap_get(const struct sbx_backend *be,
    const char *id_or_name, struct sbx_err *err);
/* sbx-snapshot export: the snapshot as one tar on fd (lib/local/
 * snapport.c's header says what is in it). SBX_EX_USAGE for one stacked
 * on another. */
int sbx_snap_export(const char *id_or_name, int fd, struct sbx_err *err);
/* sbx-snapshot import: a sandbox on be made from an export read from fd,
 * as its meta (*meta) says where spec (an image, a workdir, labels, a
 * name) does not; then the paths the source deleted are deleted and its
 * files put over them; the ref in *ref. spec is what the sandbox was
 * made with after (its strings *meta's; its labels an object the caller
 * releases). Nothing is left on a failure. */
int sbx_snap_import(const struct sbx_backend *be, int fd,
    struct sbx_spec *spec, json_t **ref, json_t **meta,
    struct sbx_err *err);

#endif
