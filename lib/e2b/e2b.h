/* e2b.h - the e2b backend (sandboxes of E2B's cloud, or of any server
 * that speaks its API, such as sbxd, through the REST API and envd's
 * Connect RPC): what its files share */
#ifndef SBX_E2B_E2B_H
#define SBX_E2B_E2B_H

#include "../internal.h"

#define DEFAULT_DOMAIN "e2b.app"
#define DEFAULT_TEMPLATE "base"
#define DEFAULT_TIMEOUT 300 /* seconds, as the SDKs send */
#define MANAGED SBX_MANAGED
#define LABEL_PREFIX "io.sbx."
#define WORKDIR "io.sbx.workdir"
#define CREATED "io.sbx.created"  /* seconds since the epoch */
#define OWNER "io.sbx.owner"      /* user@host */
/* envd's user for every call: root, as the other backends' commands
 * run (HOME=/root, and the workdir can be made anywhere). */
#define AS_ROOT "Authorization: Basic cm9vdDo=" /* base64("root:") */
#define FRAME_MAX (16u << 20) /* an envelope of a process's stream */
#define INPUT_CHUNK 65536     /* stdin, as the SDKs send it */

/* A client of the control plane. */
struct eb {
	struct sbx_http *h;
	char *endpoint;   /* the API's URL */
	char *key_hdr;    /* "X-API-Key: ..." */
	const char *hdrs[2];
};

/* What reaches a sandbox's envd. */
struct envd {
	struct sbx_http *h;
	char *hdr[5];     /* token, sandbox id and port when proxied, user */
	const char *hdrs[7];
};

/* client.c: the control plane's API and envd's */
/* E2B_DOMAIN, or E2B's own. */
const char *sbx_e2b_domain(void);
/* The endpoint configured: $SBX_E2B_ENDPOINT, else $E2B_API_URL, else
 * the config file's e2b.endpoint; NULL when none is (E2B_DOMAIN's). */
const char *sbx_e2b_endpoint_config(void);
/* A key and an endpoint configured: sbx-ls without -b asks. */
int sbx_e2b_answers(void);
/* The API at endpoint: the ref's, else sbx_e2b_endpoint_config, else
 * E2B_DOMAIN's. */
int sbx_e2b_open(struct eb *e, const char *endpoint, struct sbx_err *err);
void sbx_e2b_close(struct eb *e);
/* A request to the API; fmt gives the path. GET, DELETE and connect
 * are retried (429, 502, 503, 504, a reset): doing them twice is
 * harmless. */
__attribute__((format(printf, 6, 7))) int sbx_e2b_req(struct eb *e,
    const char *method, json_t *body, struct sbx_http_resp *rs,
    struct sbx_err *err, const char *fmt, ...);
/* GET path (a query of its own, or none) page after page, as E2B's
 * nextToken and X-Next-Token go: fn with each item of each page's array
 * (its result < 0 ends the walk); what: the error's words. */
int sbx_e2b_pages(struct eb *e, const char *path, const char *what,
    int (*fn)(json_t *one, void *arg), void *arg, struct sbx_err *err);
/* Map a failed answer: 401 and 403 the key, 404 the sandbox. */
int sbx_e2b_fail(const struct sbx_http_resp *rs, const char *what,
    const char *id, struct sbx_err *err);
int sbx_e2b_valid_id(const char *id);
/* The ref's sandbox id, checked. */
int sbx_e2b_ref_id(const json_t *ref, const char **id, struct sbx_err *err);
/* GET /sandboxes/ID: the detail of one of ours. */
int sbx_e2b_get(struct eb *e, const char *id, json_t **out,
    struct sbx_err *err);
/* sbx_e2b_open on the ref's endpoint, then sbx_e2b_get of its id (the
 * API is closed again on failure). */
int sbx_e2b_ref_open(struct eb *e, const json_t *ref, const char **id,
    json_t **s, struct sbx_err *err);
/* The listing entry of a SandboxDetail or ListedSandbox, shaped as the
 * other backends'. */
json_t *sbx_e2b_info_of(const json_t *s, const char *endpoint);
/* POST /sandboxes/ID/connect: resumes a paused sandbox, refreshes the
 * TTL of a running one; *sb (if asked) is its Sandbox, with the envd
 * access token, which is kept nowhere. */
int sbx_e2b_connect(struct eb *e, const json_t *ref, const char *id,
    json_t **sb, struct sbx_err *err);
/* Where envd is: at the API's own URL, named by headers, when the
 * endpoint was given (as sbxd wants) or E2B_SANDBOX_URL says; else at
 * the sandbox's host of the domain. */
void sbx_e2b_envd_where(json_t *ref, const char *id, int explicit,
    const char *endpoint, const json_t *sb);
/* A client of the sandbox's envd (sb: its detail or Sandbox, for the
 * access token). */
int sbx_e2b_envd_open(struct envd *v, const json_t *ref, const char *id,
    const json_t *sb, struct sbx_err *err);
void sbx_e2b_envd_close(struct envd *v);
/* A unary Connect call to envd. */
int sbx_e2b_envd_call(struct envd *v, const char *method, json_t *msg,
    struct sbx_err *err);
/* Base64 of n bytes (malloc'd). */
char *sbx_e2b_b64(const void *p, size_t n);

/* pty.c: sbx-exec -t */
/* The size of the caller's terminal, as a PTY message; 80x24 without
 * one. */
json_t *sbx_e2b_pty_size(void);
/* A Start message's pty, and the caller's TERM inside unless -e set
 * one. */
void sbx_e2b_pty_start_msg(json_t *msg);

/* exec.c: sbx-exec's transport */
int sbx_e2b_exec(const json_t *ref, char *const argv[],
    const struct sbx_exec_opts *o, struct sbx_exec_result *res,
    struct sbx_err *err);

/* net.c: the network rules */
/* E2B's network object for a spec's rules ({"allow_out","deny_out"}, or
 * NULL), egress proxy ({"url","password"}, or NULL) and header
 * injections (spec->net_inject, or NULL: E2B's "rules"), checked as E2B
 * checks it (no domain in denyOut; a domain in allowOut only with
 * denyOut 0.0.0.0/0): SBX_EX_USAGE before any call. */
json_t *sbx_e2b_net_body(const json_t *rules, const json_t *proxy,
    const json_t *inject, struct sbx_err *err);
/* json_decref, the egressProxy's password wiped first (in b or in its
 * "network"). */
void sbx_e2b_body_free(json_t *b);
/* sbx-net: GET's network, or PUT /sandboxes/ID/network. */
json_t *sbx_e2b_net_rules(const json_t *ref, const json_t *set,
    struct sbx_err *err);
/* sbx-port: {"port","host","url"} of the host <port>-<id>.<domain> that
 * E2B gives every port (the SDKs' getHost); nothing is published. */
json_t *sbx_e2b_ports(const json_t *ref, unsigned port, unsigned host_port,
    struct sbx_err *err);

/* stats.c: sbx-stats (struct sbx_backend_ops's stats) */
json_t *sbx_e2b_stats(const json_t *ref, struct sbx_err *err);
json_t *sbx_e2b_snapshot(const json_t *ref, const char *name,
    struct sbx_err *err);
int sbx_e2b_volume(const char *op, const char *name,
    int (*fn)(json_t *vol, void *arg), void *arg, struct sbx_err *err);
int sbx_e2b_snapshots(const char *op, const char *id,
    int (*fn)(json_t *snap, void *arg), void *arg, struct sbx_err *err);
/* What sbx-snapshot recorded of snapshot sid of endpoint when it took it
 * ({"image": its base template, "workdir", "labels", "limits"...}), or
 * NULL: none (taken outside sbx). */
json_t *sbx_e2b_snap_record(const char *sid, const char *endpoint);
/* The id of e's snapshot id_or_name into *sid (the caller frees it): 0,
 * or 1 when there is none; -1 with err. */
int sbx_e2b_snap_find(struct eb *e, const char *id_or_name, char **sid,
    struct sbx_err *err);
/* sbx-snapshot export (struct sbx_backend_ops's snap_export) through
 * snapexport.c, which only the tools that export link (libarchive). */
int sbx_e2b_snap_export_op(const char *id_or_name, int fd,
    struct sbx_err *err);
__attribute__((weak)) int sbx_e2b_snap_export(const char *id_or_name,
    int fd, struct sbx_err *err);

/* files.c: sbx-sync's transfers */
extern const struct sbx_files sbx_e2b_files;

#endif
