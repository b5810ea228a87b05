/* client.c - the e2b backend's clients: the control plane's REST API
 * (the key, requests, errors, a sandbox's detail) and envd's Connect RPC */
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "e2b.h"

/* The key of this process, kept out of a server's message; set by
 * sbx_e2b_open. */
static char *the_key;

const char *
sbx_e2b_domain(void)
{
	const char *d = getenv("E2B_DOMAIN");

	return d && *d ? d : DEFAULT_DOMAIN;
}

void
sbx_e2b_close(struct eb *e)
{
	sbx_http_free(e->h);
	free(e->endpoint);
	if (e->key_hdr) {
		if (the_key == e->key_hdr + strlen("X-API-Key: "))
			the_key = NULL;
		explicit_bzero(e->key_hdr, strlen(e->key_hdr));
		free(e->key_hdr);
	}
	memset(e, 0, sizeof *e);
}

const char *
sbx_e2b_endpoint_config(void)
{
	const char *mine = getenv("SBX_E2B_ENDPOINT"), *env =
	    getenv("E2B_API_URL");

	/* E2B's own variable above our config file, as any variable. */
	if (mine && *mine)
		return mine;
	return env && *env ? env : sbx_config_get("e2b.endpoint", NULL);
}

int
sbx_e2b_answers(void)
{
	char *key;

	if (!sbx_e2b_endpoint_config())
		return 0;
	if (!(key = sbx_cred_get("E2B_API_KEY", "e2b", NULL)))
		return 0;
	explicit_bzero(key, strlen(key));
	free(key);
	return 1;
}

/* The API at endpoint: the ref's, else sbx_e2b_endpoint_config, else
 * E2B_DOMAIN's. */
int
sbx_e2b_open(struct eb *e, const char *endpoint, struct sbx_err *err)
{
	const char *env = sbx_e2b_endpoint_config();
	char *key;

	memset(e, 0, sizeof *e);
	if (!(key = sbx_cred_key("E2B_API_KEY", "e2b", "E2B", err)))
		return -1;
	e->key_hdr = sbx_xasprintf("X-API-Key: %s", key);
	explicit_bzero(key, strlen(key));
	free(key);
	the_key = e->key_hdr + strlen("X-API-Key: ");
	e->hdrs[0] = e->key_hdr;
	if (endpoint && *endpoint)
		e->endpoint = sbx_xstrdup(endpoint);
	else if (env && *env)
		e->endpoint = sbx_xstrdup(env);
	else
		e->endpoint = sbx_xasprintf("https://api.%s", sbx_e2b_domain());
	if (strncmp(e->endpoint, "http://", 7) &&
	    strncmp(e->endpoint, "https://", 8)) {
		sbx_err_set(err, SBX_EX_USAGE, "invalid endpoint '%s' (http:// "
		    "or https://)", e->endpoint);
		sbx_e2b_close(e);
		return -1;
	}
	if (!(e->h = sbx_http_new(e->endpoint, err))) {
		sbx_e2b_close(e);
		return -1;
	}
	return 0;
}

/* A request to the API; fmt gives the path. GET, DELETE and connect
 * are retried (429, 502, 503, 504, a reset): doing them twice is
 * harmless. */
int __attribute__((format(printf, 6, 7)))
sbx_e2b_req(struct eb *e, const char *method, json_t *body,
    struct sbx_http_resp *rs, struct sbx_err *err, const char *fmt, ...)
{
	struct sbx_http_req rq = {.method = method, .body = body, .in_fd = -1,
	    .out_fd = -1, .headers = e->hdrs};
	char *path;
	va_list ap;
	int rc;

	va_start(ap, fmt);
	path = sbx_xvasprintf(fmt, ap);
	va_end(ap);
	rq.path = path;
	rq.idempotent = !strcmp(method, "GET") || !strcmp(method, "DELETE") ||
	    (strlen(path) > 8 && !strcmp(path + strlen(path) - 8,
	    "/connect"));
	rc = sbx_http_do(e->h, &rq, rs, err);
	free(path);
	return rc;
}

/* Map a failed answer: 401 and 403 the key, 404 the sandbox. */
int
sbx_e2b_fail(const struct sbx_http_resp *rs, const char *what, const char *id,
    struct sbx_err *err)
{
	char why[256];

	if (rs->status == 401 || rs->status == 403)
		return sbx_err_set(err, SBX_EX_CRED, "the E2B API key was "
		    "rejected (status %ld)", rs->status);
	if (rs->status == 404 && id)
		return sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox '%s'",
		    id);
	sbx_http_reason(rs, the_key, why, sizeof why);
	return sbx_err_set(err, SBX_EX_FAIL, "%s: %s (status %ld)", what, why,
	    rs->status);
}

int
sbx_e2b_valid_id(const char *id)
{
	return id && *id && strlen(id) < 128 && strspn(id,
	    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
	    == strlen(id);
}

int
sbx_e2b_ref_id(const json_t *ref, const char **id, struct sbx_err *err)
{
	*id = sbx_json_str(ref, "id");
	if (!sbx_e2b_valid_id(*id))
		return sbx_err_set(err, SBX_EX_NOSANDBOX, "no sandbox '%s'",
		    *id ? *id : "?");
	return 0;
}

/* The listing entry of a SandboxDetail or ListedSandbox, shaped as the
 * other backends'. */
json_t *
sbx_e2b_info_of(const json_t *s, const char *endpoint)
{
	json_t *meta = json_object_get(s, "metadata"), *mine = json_object();
	json_t *o = json_object(), *v;
	const char *k, *st = sbx_json_str(s, "state"), *t;
	long long now = sbx_now(), created;
	long long mib = sbx_json_int(s, "memoryMB", 0);

	json_object_foreach(meta, k, v)
		if (strncmp(k, LABEL_PREFIX, strlen(LABEL_PREFIX)))
			json_object_set(mine, k, v);
	t = sbx_json_str(meta, CREATED);
	created = t && *t ? strtoll(t, NULL, 10) : 0;
	if (created <= 0)
		created = sbx_time_parse(sbx_json_str(s, "startedAt"));
	t = sbx_json_str(meta, "io.sbx.timeout");
	json_object_set_new(o, "backend", json_string("e2b"));
	json_object_set_new(o, "id", json_string(sbx_json_str(s,
	    "sandboxID")));
	json_object_set_new(o, "name", json_null());
	json_object_set_new(o, "status", json_string(st && !strcmp(st,
	    "paused") ? "paused" : "running"));
	json_object_set(o, "image", json_object_get(s, "templateID") ?
	    json_object_get(s, "templateID") : json_null());
	json_object_set(o, "workdir", json_is_string(json_object_get(meta,
	    WORKDIR)) ? json_object_get(meta, WORKDIR) : json_null());
	sbx_info_times(o, now, created, -1);
	json_object_set_new(o, "timeout", json_integer(t ? strtoll(t, NULL,
	    10) : 0));
	json_object_set_new(o, "labels", mine);
	json_object_set_new(o, "processes", json_null());
	/* The server's word: a size that is not one shows as unknown. */
	json_object_set_new(o, "memory_bytes", mib >= 0 && mib <= LLONG_MAX >>
	    20 ? json_integer(mib << 20) : json_null());
	json_object_set_new(o, "cpu_s", json_null());
	json_object_set_new(o, "dir", json_null());
	json_object_set_new(o, "cpus", json_integer(sbx_json_int(s,
	    "cpuCount", 0)));
	json_object_set_new(o, "expires_at", json_string(sbx_json_str(s,
	    "endAt") ? sbx_json_str(s, "endAt") : ""));
	json_object_set_new(o, "endpoint", json_string(endpoint));
	return o;
}

/* GET /sandboxes/ID: the detail of one of ours. */
int
sbx_e2b_get(struct eb *e, const char *id, json_t **out, struct sbx_err *err)
{
	struct sbx_http_resp rs;

	*out = NULL;
	if (sbx_e2b_req(e, "GET", NULL, &rs, err, "/sandboxes/%s", id) < 0)
		return -1;
	if (rs.status != 200 || !json_is_object(rs.json)) {
		sbx_e2b_fail(&rs, "cannot look at a sandbox", id, err);
		sbx_http_resp_release(&rs);
		return -1;
	}
	if (sbx_labels_ours(json_object_get(rs.json, "metadata"), id,
	    "sandbox", err) == 0)
		*out = json_incref(rs.json);
	sbx_http_resp_release(&rs);
	return *out ? 0 : -1;
}

/* The API of the ref's endpoint, and the detail of its sandbox, which
 * must be one of ours: never another's sandbox by a mistyped id. */
int
sbx_e2b_ref_open(struct eb *e, const json_t *ref, const char **id,
    json_t **s, struct sbx_err *err)
{
	if (sbx_e2b_ref_id(ref, id, err) < 0 ||
	    sbx_e2b_open(e, sbx_json_str(ref, "endpoint"), err) < 0)
		return -1;
	if (sbx_e2b_get(e, *id, s, err) < 0) {
		sbx_e2b_close(e);
		return -1;
	}
	return 0;
}

int
sbx_e2b_pages(struct eb *e, const char *path, const char *what,
    int (*fn)(json_t *one, void *arg), void *arg, struct sbx_err *err)
{
	struct sbx_http_resp rs;
	json_t *one;
	char next[1024], *tok = NULL, *nq;
	const char *nt;
	size_t i;
	int rc = 0;

	for (;;) {
		nq = tok ? sbx_http_escape(tok) : NULL;
		rc = sbx_e2b_req(e, "GET", NULL, &rs, err, "%s%s%s", path,
		    !nq ? "" : strchr(path, '?') ? "&nextToken=" :
		    "?nextToken=", nq ? nq : "");
		free(nq);
		free(tok);
		tok = NULL;
		if (rc < 0)
			break;
		if (rs.status != 200 || !json_is_array(rs.json)) {
			rc = sbx_e2b_fail(&rs, what, NULL, err);
			sbx_http_resp_release(&rs);
			break;
		}
		json_array_foreach(rs.json, i, one)
			if (!rc && fn(one, arg) < 0)
				rc = -1;
		nt = sbx_http_header(&rs, "X-Next-Token", next, sizeof next);
		if (nt && *nt && json_array_size(rs.json) && !rc)
			tok = sbx_xstrdup(nt);
		sbx_http_resp_release(&rs);
		if (!tok)
			break;
	}
	return rc;
}

/* --- envd: the sandbox's own API ------------------------------------- */

char *
sbx_e2b_b64(const void *p, size_t n)
{
	char *s = sbx_xmalloc(4 * ((n + 2) / 3) + 1);

	EVP_EncodeBlock((unsigned char *)s, (const unsigned char *)p, (int)n);
	return s;
}

void
sbx_e2b_envd_close(struct envd *v)
{
	size_t i;

	sbx_http_free(v->h);
	for (i = 0; i < sizeof v->hdr / sizeof v->hdr[0]; i++)
		if (v->hdr[i]) {
			explicit_bzero(v->hdr[i], strlen(v->hdr[i]));
			free(v->hdr[i]);
		}
	memset(v, 0, sizeof *v);
}

int
sbx_e2b_envd_open(struct envd *v, const json_t *ref, const char *id,
    const json_t *sb, struct sbx_err *err)
{
	const char *url = sbx_json_str(ref, "envd"), *tok;
	json_t *where = NULL;
	size_t n = 0, i;

	memset(v, 0, sizeof *v);
	if (!url) {
		/* A ref from --id: its endpoint, or the configured one. */
		const char *ep = sbx_json_str(ref, "endpoint"), *cfg =
		    sbx_e2b_endpoint_config();
		char *cloud = sbx_xasprintf("https://api.%s",
		    sbx_e2b_domain());

		where = json_object();
		sbx_e2b_envd_where(where, id, ep ? strcmp(ep, cloud) != 0 :
		    cfg != NULL, ep ? ep : cfg, sb);
		free(cloud);
		url = sbx_json_str(where, "envd");
		ref = where;
	}
	if (!(v->h = sbx_http_new(url, err))) {
		json_decref(where);
		return -1;
	}
	if ((tok = sbx_json_str(sb, "envdAccessToken")))
		v->hdr[n++] = sbx_xasprintf("X-Access-Token: %s", tok);
	if (json_is_true(json_object_get(ref, "envd_proxy"))) {
		v->hdr[n++] = sbx_xasprintf("E2b-Sandbox-Id: %s", id);
		v->hdr[n++] = sbx_xasprintf("E2b-Sandbox-Port: %d",
		    SBX_E2B_ENVD_PORT);
	}
	v->hdr[n++] = sbx_xstrdup(AS_ROOT);
	for (i = 0; i < n; i++)
		v->hdrs[i] = v->hdr[i];
	json_decref(where);
	return 0;
}

/* A unary Connect call to envd. */
int
sbx_e2b_envd_call(struct envd *v, const char *method, json_t *msg,
    struct sbx_err *err)
{
	struct sbx_http_req rq = {.method = "POST", .body = msg, .in_fd = -1,
	    .out_fd = -1, .headers = v->hdrs, .timeout_ms = 30000};
	struct sbx_http_resp rs;
	char *path = sbx_xasprintf("/process.Process/%s", method);
	int rc = 0;

	rq.path = path;
	if (sbx_http_do(v->h, &rq, &rs, err) < 0) {
		free(path);
		return -1;
	}
	if (rs.status != 200) {
		if (rs.status == 401 || rs.status == 403)
			rc = sbx_err_set(err, SBX_EX_CRED, "envd refused the "
			    "sandbox's access token (status %ld)", rs.status);
		else
			rc = sbx_e2b_fail(&rs, method, NULL, err);
	}
	sbx_http_resp_release(&rs);
	free(path);
	return rc;
}

/* Where envd is: at the API's own URL, named by headers, when the
 * endpoint was given (as sbxd wants) or E2B_SANDBOX_URL says; else at
 * the sandbox's host of the domain. */
void
sbx_e2b_envd_where(json_t *ref, const char *id, int explicit,
    const char *endpoint, const json_t *sb)
{
	const char *su = getenv("E2B_SANDBOX_URL"), *d;
	char *u;

	if (su && *su) {
		json_object_set_new(ref, "envd", json_string(su));
		json_object_set_new(ref, "envd_proxy", json_true());
	} else if (explicit) {
		json_object_set_new(ref, "envd", json_string(endpoint));
		json_object_set_new(ref, "envd_proxy", json_true());
	} else {
		d = sbx_json_str(sb, "domain");
		u = sbx_xasprintf("https://%d-%s.%s", SBX_E2B_ENVD_PORT, id,
		    d && *d ? d : sbx_e2b_domain());

		json_object_set_new(ref, "envd", json_string(u));
		free(u);
		json_object_set_new(ref, "envd_proxy", json_false());
	}
}

/* POST /sandboxes/ID/connect: resumes a paused sandbox, refreshes the
 * TTL of a running one; *sb (if asked) is its Sandbox, with the envd
 * access token, which is kept nowhere. */
int
sbx_e2b_connect(struct eb *e, const json_t *ref, const char *id, json_t **sb,
    struct sbx_err *err)
{
	struct sbx_http_resp rs;
	json_t *body;
	long long t = sbx_json_int(ref, "timeout", DEFAULT_TIMEOUT);
	int rc = 0;

	body = json_pack("{sI}", "timeout", (json_int_t)(t > 0 ? t :
	    DEFAULT_TIMEOUT));
	rc = sbx_e2b_req(e, "POST", body, &rs, err, "/sandboxes/%s/connect",
	    id);
	json_decref(body);
	if (rc < 0)
		return -1;
	if ((rs.status != 200 && rs.status != 201) || !json_is_object(rs.json))
		rc = sbx_e2b_fail(&rs, "cannot reach the sandbox", id, err);
	else if (sb)
		*sb = json_incref(rs.json);
	sbx_http_resp_release(&rs);
	return rc;
}
