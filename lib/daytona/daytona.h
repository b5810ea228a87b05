/* daytona.h - the daytona backend (sandboxes of Daytona's cloud, or of any
 * server that speaks its API, such as sbxd, through the control plane's
 * REST API and the sandbox's toolbox): what its files share */
#ifndef SBX_DAYTONA_DAYTONA_H
#define SBX_DAYTONA_DAYTONA_H

#include "../internal.h"

#define DT_DEFAULT_API "https://app.daytona.io/api"
/* The toolbox's output format follows the SDK version a client claims:
 * from 0.167.0 on, session logs are JSON with stdout and stderr apart,
 * and the followed stream keeps its markers. */
#define DT_SDK_VERSION "0.190.0"
#define DT_MARK_OUT "\x01\x01\x01"
#define DT_MARK_ERR "\x02\x02\x02"
#define DT_MANAGED SBX_MANAGED
#define DT_LABEL_PREFIX "io.sbx."
#define DT_WORKDIR "io.sbx.workdir"
#define DT_CREATED "io.sbx.created"  /* seconds since the epoch */
#define DT_OWNER "io.sbx.owner"      /* user@host */
#define DT_TIMEOUT "io.sbx.timeout"  /* --timeout, seconds */
#define DT_START "io.sbx.start"      /* --start..., as JSON: started again
				      * after a stop */
/* An orphan cannot live for ever: a stopped sandbox of sbx is deleted
 * this many minutes after it stopped, unless sbx-pause stopped it (then
 * it lives as long as Daytona keeps stopped ones). */
#define DT_AUTO_DELETE_MIN (7 * 24 * 60)
/* How long create, start and stop wait for the state they ask for. */
#define DT_WAIT_MS 120000

/* A client of the control plane. */
struct dt {
	struct sbx_http *h;
	char *endpoint;   /* the API's URL */
	char *auth;       /* "Authorization: Bearer ..." */
	const char *hdrs[3];
};

/* A client of one sandbox's toolbox ({toolboxProxyUrl}/{id}). */
struct dtb {
	struct sbx_http *h;
	char *base;       /* the URL the paths go after */
	char *auth;
	const char *hdrs[4];
};

/* client.c: the control plane's API and the toolbox's */
/* The endpoint configured: $SBX_DAYTONA_ENDPOINT, else $DAYTONA_API_URL,
 * else the config file's daytona.endpoint; NULL when none is. */
const char *sbx_dt_endpoint_config(void);
/* A key and an endpoint configured: sbx-ls without -b asks. */
int sbx_dt_answers(void);
/* The API at endpoint: the ref's, else sbx_dt_endpoint_config, else
 * Daytona's own. SBX_EX_CRED without a key. */
int sbx_dt_open(struct dt *d, const char *endpoint, struct sbx_err *err);
void sbx_dt_close(struct dt *d);
/* A request to the API; fmt gives the path. GET and DELETE are retried
 * (502, 503, 504, a reset); any request after a 429, once its
 * Retry-After-* has passed (sbx_http_do). */
__attribute__((format(printf, 6, 7))) int sbx_dt_req(struct dt *d,
    const char *method, json_t *body, struct sbx_http_resp *rs,
    struct sbx_err *err, const char *fmt, ...);
/* Map a failed answer to one line with the server's own message: 401
 * and 403 the key (SBX_EX_CRED), 404 the sandbox when id is given
 * (SBX_EX_NOSANDBOX), "no runners" and quotas said so, 429 beyond the
 * retries; what: the words before it. */
int sbx_dt_fail(const struct sbx_http_resp *rs, const char *what,
    const char *id, struct sbx_err *err);
int sbx_dt_valid_id(const char *id);
/* GET /sandbox/ID: one of ours (labelled), else SBX_EX_NOSANDBOX. */
int sbx_dt_get(struct dt *d, const char *id, json_t **out,
    struct sbx_err *err);
/* The ref's id checked, the API of its endpoint opened, its sandbox got
 * (the API is closed again on failure). */
int sbx_dt_ref_open(struct dt *d, const json_t *ref, const char **id,
    json_t **s, struct sbx_err *err);
/* Poll GET /sandbox/ID until its state is want (or, for "stopped", also
 * "archived" or "destroyed"), up to ms; a state of error or
 * build_failed fails with its errorReason. *s (if asked) the last. */
int sbx_dt_wait(struct dt *d, const char *id, const char *want, long long ms,
    json_t **s, struct sbx_err *err);
/* The listing entry of a Sandbox (or a list's item), shaped as the
 * other backends'. */
json_t *sbx_dt_info_of(const json_t *s, const char *endpoint);
/* sbx's status of a Daytona state: running, paused (a VM's pause),
 * stopped (stopped, archived and the ways there), or the state
 * itself. */
const char *sbx_dt_status(const char *state);
/* The toolbox of sandbox s (a Sandbox, for its toolboxProxyUrl and id),
 * with d's key. A sandbox that is not started: SBX_EX_NOSANDBOX-free
 * err with the state (the callers say paused, sbx_xs_paused). */
int sbx_dt_tb_open(struct dtb *t, const struct dt *d, const json_t *s,
    struct sbx_err *err);
void sbx_dt_tb_close(struct dtb *t);
/* A request to the toolbox; fmt gives the path after the sandbox's
 * base ("/process/session"). rq's method, body, data, fds and timeout
 * are the caller's; headers and path are set here. */
__attribute__((format(printf, 5, 6))) int sbx_dt_tb_do(struct dtb *t,
    struct sbx_http_req *rq, struct sbx_http_resp *rs, struct sbx_err *err,
    const char *fmt, ...);
/* The toolbox's failed answer: its message, one line. */
int sbx_dt_tb_fail(const struct sbx_http_resp *rs, const char *what,
    struct sbx_err *err);

/* exec.c: the backend's exec */
int sbx_dt_exec(const json_t *ref, char *const argv[],
    const struct sbx_exec_opts *o, struct sbx_exec_result *res,
    struct sbx_err *err);

/* files.c: sbx-sync's and sbx-cp's transfers */
extern const struct sbx_files sbx_daytona_files;

/* stats.c: sbx-stats (struct sbx_backend_ops's stats), from the
 * sandbox's cgroup */
json_t *sbx_dt_stats(const json_t *ref, struct sbx_err *err);
/* net.c: --allow-out and --deny-out as Daytona's allow-lists in a create
 * body (exit 2 for what they cannot say); sbx-net's rules. */
int sbx_dt_net_create(const struct sbx_spec *spec, json_t *body,
    struct sbx_err *err);
json_t *sbx_dt_net_rules(const json_t *ref, const json_t *set,
    struct sbx_err *err);

/* ports.c: sbx-port (struct sbx_backend_ops's ports) */
json_t *sbx_dt_ports(const json_t *ref, unsigned port, unsigned host_port,
    struct sbx_err *err);

/* lifecycle.c */
extern const struct sbx_backend_ops sbx_daytona_ops;

#endif
