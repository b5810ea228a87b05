/* sbx.h - the public face of libsbx, sectioned by module */
#ifndef SBX_H
#define SBX_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

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

/* --- cli: program name, diagnostics, parsing helpers ------------------- */

/* A library error: a message and the exit code it suggests to a command. */
struct sbx_err {
	int code;
	char msg[512];
};

extern int sbx_quiet, sbx_verbose;

void sbx_prog_set(char **argv);
const char *sbx_prog_get(void);
__attribute__((noreturn, format(printf, 2, 3))) void sbx_die(int code,
    const char *fmt, ...);
__attribute__((format(printf, 1, 2))) void sbx_warn(const char *fmt, ...);
__attribute__((format(printf, 1, 2))) void sbx_note(const char *fmt, ...);
/* Fill err; a trailing ':' in fmt appends strerror(errno). Returns -1. */
__attribute__((format(printf, 3, 4))) int sbx_err_set(struct sbx_err *err,
    int code, const char *fmt, ...);
__attribute__((noreturn)) void sbx_die_err(const struct sbx_err *err);

/* The usage text is the man page's SYNOPSIS. */
__attribute__((noreturn)) void sbx_usage(const char *text, int code);
__attribute__((noreturn, format(printf, 2, 3))) void sbx_usage_error(
    const char *text, const char *fmt, ...);
__attribute__((noreturn)) void sbx_version(void);
/* The options every tool has (-h -q -v -V): true when c was one. */
int sbx_opt_common(int c, const char *usage);

int sbx_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);
/* "512M", "1G", "4096", "2KiB": binary multiples. */
int sbx_parse_size(const char *s, uint64_t *out);
/* A decimal such as "0.5" or "2", into millis (500, 2000). */
int sbx_parse_milli(const char *s, uint64_t min, uint64_t max, uint64_t *out);
/* "key=value" with a key of [A-Za-z0-9_.-/] (1-63); adds to obj. */
int sbx_parse_label(const char *s, json_t *obj, struct sbx_err *err);
/* "NAME=VALUE" or "NAME" (taken from our environment) -> "NAME=VALUE". */
char *sbx_parse_env(const char *s, struct sbx_err *err);

/* Flush stdout; EPIPE is a quiet exit. Returns the status to exit with. */
int sbx_out_close(int rc);
/* Print a JSON object as one compact line on stdout. */
void sbx_out_json(json_t *obj);

/* Each id from the operands, or one per stdin line (a bare id or a JSON
 * object with "id") when there are none and stdin is not a terminal. */
typedef int (*sbx_id_fn)(const char *id, void *arg);
int sbx_each_stdin_id(sbx_id_fn fn, void *arg, int *count);

void *sbx_xmalloc(size_t n);
void *sbx_xcalloc(size_t n, size_t m);
void *sbx_xrealloc(void *p, size_t n);
char *sbx_xstrdup(const char *s);
__attribute__((format(printf, 1, 2))) char *sbx_xasprintf(const char *fmt,
    ...);

/* --- buf: one growable buffer with a size cap ------------------------- */

struct sbx_buf {
	char *data;
	size_t len, cap, limit; /* limit 0: none */
	int truncated;          /* something past limit was dropped */
};
#define SBX_BUF_INIT {0}
void sbx_buf_add(struct sbx_buf *b, const void *p, size_t n);
void sbx_buf_release(struct sbx_buf *b);

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

/* --- state: the state file (sbx-state(5)) ----------------------------- */

#define SBX_STATE_SCHEMA 1
#define SBX_STATE_DEFAULT ".sbx/state.json"

struct sbx_state {
	char *path;
	int lockfd;
	json_t *root; /* the whole object, unknown fields included */
};

/* Lock (exclusive) and load path; a missing file gives an empty object.
 * A malformed file fails with SBX_EX_DATA and is never written. */
int sbx_state_open(struct sbx_state *st, const char *path,
    struct sbx_err *err);
/* Read without a lock; missing: SBX_EX_NOSANDBOX. */
int sbx_state_read(struct sbx_state *st, const char *path,
    struct sbx_err *err);
/* Stamp updated_at and write atomically. */
int sbx_state_save(struct sbx_state *st, struct sbx_err *err);
void sbx_state_release(struct sbx_state *st);
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
/* True when --id, --state or $SBX_STATE name a sandbox. */
int sbx_ref_explicit(const struct sbx_target *t);

/* --- backend: the contract every backend implements (DESIGN.md 4) ----- */

enum sbx_net { SBX_NET_DENY, SBX_NET_ALLOW };

struct sbx_spec {
	const char *image;    /* "host" or a directory */
	uint64_t memory;      /* bytes, 0: no limit */
	uint64_t cpus_milli;  /* 0: no limit */
	uint64_t pids;        /* 0: no limit */
	enum sbx_net network;
	uint64_t timeout;     /* idle seconds, 0: none */
	json_t *labels;       /* object of strings */
	char **env;           /* "K=V", NULL-terminated */
	const char *workdir;
	const char *name;
};

struct sbx_exec_opts {
	const char *cwd;  /* NULL: the sandbox's workdir */
	char **env;       /* "K=V" added, NULL-terminated */
	int interactive;  /* forward stdin */
	int tty;          /* a pty inside */
	uint64_t timeout_ms;
	int capture;      /* buffer stdout/stderr instead of streaming */
	size_t max_output;
};

struct sbx_exec_result {
	int exit_code;  /* as sbx-exec exits: status, 128+N, 124..127 */
	int signal;     /* the signal that killed it, or 0 */
	int timed_out;
	long long duration_ms;
	struct sbx_buf out, err; /* with capture */
};

struct sbx_backend {
	const char *name;
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
	/* Calls fn with one info object per sandbox. */
	int (*list)(int (*fn)(json_t *info, void *arg), void *arg,
	    struct sbx_err *err);
};

const struct sbx_backend *sbx_backend_get(const char *name,
    struct sbx_err *err);
/* The backend a ref names. */
const struct sbx_backend *sbx_backend_of(const json_t *ref,
    struct sbx_err *err);
const char *sbx_backend_default(void);

/* --- local: the native Linux backend --------------------------------- */

extern const struct sbx_backend sbx_local_backend;
/* The agent's main(): PID 1 of a local sandbox (sbx-init). */
int sbx_local_init_main(int argc, char **argv);

#endif
